#!/usr/bin/env bash
# test_all.sh — the stages of `make test` (MODE test) and `make check` (MODE check), run after the
# normal build: .ci/test_all.sh MODE BINARY... (the normal suites, as .ci/run_tests.sh takes them).
# Each stage prints its time and its five slowest tests; ONE closing line totals every stage.
#
#   test:  the normal suites, the installed tree (test/install/run.sh), one short valgrind run
#   check: test's stages, then ASan+UBSan, TSan, valgrind, the fuzzers, and every suite another
#          part of the project adds: .ci/python_tests.sh when it exists (Python, PyTorch), run as
#          a stage whose last line is "N passed, M failed, K skipped" like this script's own
# QUICK=1: the normal suites only. A SANITIZE= build: its suites only.
set -u
cd "$(dirname "$0")/.."
mode=$1
shift
tally=$(mktemp)
stage_log=$(mktemp)
failed_list=$(mktemp)
trap 'rm -f "$tally" "$stage_log" "$failed_list"' EXIT
export RINGO_TALLY=$tally RINGO_FAILED_LIST=$failed_list
MAKE=${MAKE:-make}
timing=()
total_start=$SECONDS

# The five slowest tests of a stage's log, from GoogleTest's "[       OK ] Name (N ms)" lines (the
# fuzzers and the installed-tree test print theirs alike), each with the binary it ran in.
slowest() {
  awk '/^=== / { bin = $2; sub(".*/", "", bin) }
       match($0, /^\[       OK \] .* \([0-9]+ ms\)$/) {
         line = substr($0, 14); ms = line; sub(/.* \(/, "", ms); sub(/ ms\)$/, "", ms)
         sub(/ \([0-9]+ ms\)$/, "", line); printf "%d %s%s\n", ms, (bin == "" ? "" : bin ": "), line }' "$1" |
    sort -rn | head -n 5 | awk '{ ms = $1; $1 = ""; printf "    %7.1f s%s\n", ms / 1000, $0 }'
}

# stage NAME COMMAND...: runs one stage; a stage that fails without counting a failed test (it did
# not build, say) counts as one failure, so nothing can fail silently.
stage() {
  local name=$1 start=$SECONDS lines before_failed
  shift
  lines=$(wc -l < "$tally")
  echo "=== stage: $name"
  RINGO_STAGE=$name "$@" 2>&1 | tee "$stage_log"
  local rc=${PIPESTATUS[0]}
  before_failed=$(tail -n +"$((lines + 1))" "$tally" | awk '{f += $2} END {print f + 0}')
  if [ "$rc" -ne 0 ] && [ "$before_failed" -eq 0 ]; then
    echo "test_all: stage '$name' failed (exit status $rc) without reporting a failed test; counting it as one failure"
    echo "0 1 0" >> "$tally"
    echo "$name: exit status $rc" >> "$failed_list"
  fi
  local took=$((SECONDS - start))
  echo "=== stage $name: $took s; slowest tests:"
  slowest "$stage_log"
  timing+=("$(printf '%-34s %4d s' "$name" "$took")")
}

# external COMMAND...: a stage that counts its own tests (a script another part of the project owns,
# the chaos test). Its last line matching "N passed, M failed, K skipped" is its count (none: one
# failure).
external() {
  local own_log counts
  own_log=$(mktemp)
  RINGO_TALLY="" "$@" 2>&1 | tee "$own_log"
  local rc=${PIPESTATUS[0]}
  counts=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped.*/\1 \2 \3/p' "$own_log" | tail -n1)
  rm -f "$own_log"
  if [ -n "$counts" ]; then
    echo "$counts" >> "$tally"
  elif [ "$rc" -eq 0 ]; then
    echo "test_all: $* printed no closing 'N passed, M failed, K skipped' line; counting one failure"
    echo "0 1 0" >> "$tally"
  fi
  return "$rc"
}

stage "normal suites" .ci/run_tests.sh "$@"
# The layering rules of DESIGN.md on the tree and on the build's objects (.ci/check_layers.py).
[ -z "${SANITIZE:-}" ] && stage "layers" python3 .ci/check_layers.py "${BUILD:-build}"
if [ -n "${QUICK:-}" ] && [ "${QUICK}" != 0 ]; then
  echo "test_all: QUICK=$QUICK: the normal suites only"
elif [ -n "${SANITIZE:-}" ]; then
  echo "test_all: SANITIZE=$SANITIZE build: only its suites run"
else
  stage "installed tree" test/install/run.sh "${BUILD:-build}"
  stage "valgrind (short)" "$MAKE" --no-print-directory test-valgrind-short
  if [ "$mode" = check ]; then
    stage "address,undefined sanitizers" "$MAKE" --no-print-directory test-asan
    stage "thread sanitizer" "$MAKE" --no-print-directory test-tsan
    stage "valgrind" "$MAKE" --no-print-directory test-valgrind
    stage "fuzzers" "$MAKE" --no-print-directory fuzz
    # Ranks SIGKILLed or SIGSTOPped at random instants (test/chaos/ringo_chaos.c; prints its seed).
    stage "chaos" external "$MAKE" --no-print-directory chaos
    # The hook for the suites other parts of the project add (Python bindings, PyTorch backend):
    # their own script, whose closing line this stage counts.
    if [ -e .ci/python_tests.sh ]; then
      stage "python" external bash .ci/python_tests.sh
    else
      echo "test_all: no .ci/python_tests.sh: no Python stage"
    fi
  fi
fi

echo "=== time per stage ($mode; builds included; the normal build ran before these)"
printf '  %s\n' "${timing[@]}"
echo "  total after the normal build        $((SECONDS - total_start)) s"
# What failed, by name, where the last lines of a long log show it (CI keeps only its tail).
if [ -s "$failed_list" ]; then
  echo "=== failed:"
  sed 's/^/  /' "$failed_list"
fi
read -r passed failed skipped < <(awk '{p += $1; f += $2; s += $3} END {print p + 0, f + 0, s + 0}' "$tally")
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" -eq 0 ]
