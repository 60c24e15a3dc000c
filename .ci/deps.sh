#!/usr/bin/env bash
# deps.sh — installs what `make test` / `make bench` need on Debian 12, only when it is missing.
# The one place packages are installed; run by the Makefile's deps target.
set -euo pipefail
need=()
command -v cc >/dev/null || need+=(gcc)
command -v c++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
# Open MPI: the MPI transport, its tests under mpirun, and the benchmark's --compare mpi.
command -v mpirun >/dev/null || need+=(openmpi-bin)
command -v mpicc >/dev/null || need+=(libopenmpi-dev)
# Gloo (Debian's libgloo-dev): the benchmark's --compare gloo.
[ -f /usr/include/gloo/allreduce.h ] || need+=(libgloo-dev)
# The reliability stages of `make test`: libFuzzer harnesses (clang and its fuzzer/sanitizer runtimes,
# a separate package from clang on Debian 12) and one valgrind run.
{ command -v clang && command -v clang++; } >/dev/null || need+=(clang)
compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-$(uname -m).a" >/dev/null || need+=(libclang-rt-14-dev)
command -v valgrind >/dev/null || need+=(valgrind)
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
