#!/usr/bin/env bash
# run.sh — the installed tree, as a C or C++ user meets it: `make install PREFIX=<tmp>`, then the
# README's example (test/install/example.c) built with pkg-config and with a 5-line CMakeLists.txt
# using find_package(ringo), each against both libraries, and run; then the README's own C program.
# Run by `make test`: test/install/run.sh [BUILD]
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
MAKE=${MAKE:-make}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
passed=0; failed=0

# case NAME COMMAND...: one test, reported in GoogleTest's words so the stage's totals and its
# slowest tests are read like every other suite's.
case_() {
  local name=$1 start log rc
  shift
  start=$(date +%s%N)
  log=$work/$name.log
  echo "[ RUN      ] install.$name"
  "$@" > "$log" 2>&1
  rc=$?
  local ms=$((($(date +%s%N) - start) / 1000000))
  if [ "$rc" -eq 0 ]; then
    sed -n 's/^example: /  example: /p' "$log"
    passed=$((passed + 1)); echo "[       OK ] install.$name ($ms ms)"
  else
    tail -n 30 "$log"
    failed=$((failed + 1)); echo "[  FAILED  ] install.$name ($ms ms)"
  fi
}

installed() {
  "$MAKE" -C "$repo" --no-print-directory BUILD="$build" install PREFIX="$prefix" || return 1
  local f
  for f in include/ringo.h include/ringo_ddp.h lib/libringo.so lib/libringo.so.0 lib/libringo.a \
           lib/pkgconfig/ringo.pc lib/cmake/ringo/ringoConfig.cmake \
           lib/cmake/ringo/ringoConfigVersion.cmake lib/ringo-nccl/libnccl.so.2 include/ringo/nccl/nccl.h; do
    [ -e "$prefix/$f" ] || { echo "missing from the installed tree: $f"; return 1; }
  done
}

with_pkg_config() {  # with_pkg_config shared|static
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  local out=$work/example-pc-$1
  if [ "$1" = shared ]; then
    # shellcheck disable=SC2046  # pkg-config's words are meant to split
    cc "$repo/test/install/example.c" $(pkg-config --cflags --libs ringo) -o "$out" || return 1
  else
    # libringo.a by name (the .so beside it would win over -lringo), then what it needs.
    # shellcheck disable=SC2046
    cc "$repo/test/install/example.c" $(pkg-config --cflags ringo) "$prefix/lib/libringo.a" \
      $(pkg-config --static --libs ringo) -o "$out" || return 1
  fi
  LD_LIBRARY_PATH=$prefix/lib "$out"
}

with_cmake() {  # with_cmake ringo|ringo_static: the imported target linked
  local src=$work/cmake-src-$1
  mkdir -p "$src"
  cp "$repo/test/install/example.c" "$src/"
  cat > "$src/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.13)
project(ringo_example C)
find_package(ringo 0.1 REQUIRED)
add_executable(example example.c)
target_link_libraries(example ringo::$1)
EOF
  cmake -S "$src" -B "$src/build" -DCMAKE_PREFIX_PATH="$prefix" || return 1
  cmake --build "$src/build" || return 1
  # No LD_LIBRARY_PATH: CMake's build tree rpath finds the installed libringo.so.0.
  "$src/build/example"
}

readme_program() {  # the README's "Using it from C" program as a user copies it, built and run
  local src=$work/allreduce.c out=$work/allreduce
  awk '/^## Using it from C/{on=1} on&&/^```c$/{grab=1; next} grab&&/^```$/{exit} grab' "$repo/README.md" > "$src"
  grep -q ringoAllReduce "$src" || { echo "no C program under the README's 'Using it from C'"; return 1; }
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  # shellcheck disable=SC2046  # pkg-config's words are meant to split
  cc "$src" -o "$out" $(pkg-config --cflags --libs ringo) || return 1
  LD_LIBRARY_PATH=$prefix/lib "$out" > "$work/allreduce.out" || return 1
  cat "$work/allreduce.out"
  # What the README says every rank prints.
  [ "$(grep -c 'grad\[0\] = 6, sent 6291456 bytes' "$work/allreduce.out")" -eq 4 ] && echo "example: the README's program, 4 ranks as documented"
}

echo "=== test/install/run.sh: make install PREFIX=$prefix"
case_ make_install installed
if [ "$failed" -eq 0 ]; then
  case_ pkg_config_shared with_pkg_config shared
  case_ pkg_config_static with_pkg_config static
  case_ cmake_find_package with_cmake ringo
  case_ cmake_find_package_static with_cmake ringo_static
  case_ readme_program readme_program
fi
if [ -n "${RINGO_TALLY:-}" ]; then
  echo "$passed $failed 0" >> "$RINGO_TALLY"
  echo "--- ${RINGO_STAGE:-installed tree}: passed $passed, failed $failed, skipped 0"
else
  echo "${passed} passed, ${failed} failed, 0 skipped"
fi
[ "$failed" -eq 0 ]
