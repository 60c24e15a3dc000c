#!/usr/bin/env bash
# run_tests.sh — runs each GoogleTest binary given, then prints one line totalled over all of them:
# "N passed, M failed, K skipped". Exits non-zero on any failure (a crashed binary counts as one).
# Binaries under a test/mpi/ folder run under mpirun with RINGO_MPI_NP ranks (default 8); only
# their rank 0 prints GoogleTest's summary, with every rank's failures folded in.
set -u
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "${RINGO_MPI_NP:-8}")
passed=0; failed=0; skipped=0
for bin in "$@"; do
  echo "=== $bin"
  log=$(mktemp)
  launch=()
  case "$bin" in */mpi/*) launch=("${MPIRUN[@]}") ;; esac
  timeout 900 "${launch[@]}" "$bin" --gtest_color=no 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*listed below.*/\1/p' "$log" | tail -n1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*listed below.*/\1/p' "$log" | tail -n1)
  p=${p:-0}; f=${f:-0}; s=${s:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "run_tests: $bin exited with status $rc without reporting a failed test; counting it as one failure"
    f=1
  fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  rm -f "$log"
done
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" -eq 0 ]
