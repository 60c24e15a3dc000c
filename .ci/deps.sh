#!/usr/bin/env bash
# deps.sh — installs what the targets need on Debian 12, only what is missing: `.ci/deps.sh` for
# make, make bench and make test; `.ci/deps.sh check` adds make check's (clang, libFuzzer).
# The one place packages are installed; run by the Makefile's deps and deps-check targets.
# `.ci/deps.sh make`: make alone, for a bare machine that has no make to run the targets with yet.
set -euo pipefail
need=()
command -v make >/dev/null || need+=(make)
if [ "${1:-}" != make ]; then
  command -v cc >/dev/null || need+=(gcc)
  command -v c++ >/dev/null || need+=(g++)
  [ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
  # Open MPI: the MPI transport, its tests under mpirun, and the benchmark's --compare mpi.
  command -v mpirun >/dev/null || need+=(openmpi-bin)
  command -v mpicc >/dev/null || need+=(libopenmpi-dev)
  # Gloo (Debian's libgloo-dev): the benchmark's --compare gloo.
  [ -f /usr/include/gloo/allreduce.h ] || need+=(libgloo-dev)
  # make test: its short valgrind run, and the installed tree built with pkg-config and CMake.
  command -v valgrind >/dev/null || need+=(valgrind)
  command -v pkg-config >/dev/null || need+=(pkg-config)
  command -v python3 >/dev/null || need+=(python3-minimal) # .ci/check_layers.py
  # Python's headers: `pip install ./python` builds ringo.torch's C fast path with them.
  python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    2>/dev/null || need+=(python3-dev)
  command -v nm >/dev/null || need+=(binutils)
  command -v cmake >/dev/null || need+=(cmake)
fi
if [ "${1:-}" = check ]; then
  # make check's libFuzzer harnesses: clang and its fuzzer/sanitizer runtimes (a separate package
  # from clang on Debian 12).
  { command -v clang && command -v clang++; } >/dev/null || need+=(clang)
  compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-$(uname -m).a" >/dev/null || need+=(libclang-rt-14-dev)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
