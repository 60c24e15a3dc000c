#!/usr/bin/env bash
# run_tests.sh — runs each GoogleTest binary given, then prints one line totalled over all of them:
# "N passed, M failed, K skipped". Exits non-zero on any failure (a crashed binary counts as one).
# Binaries under a test/mpi/ folder run under mpirun with RINGO_MPI_NP ranks (default 8); only
# their rank 0 prints GoogleTest's summary, with every rank's failures folded in.
#
# An argument BIN@FILTER runs BIN with --gtest_filter=FILTER; an argument VAR=VALUE sets that
# environment variable for the binaries after it (OMPI_MCA_btl=tcp,self: MPI over TCP, as between
# hosts). RINGO_TEST_LAUNCH (a command prefix,
# e.g. "valgrind --error-exitcode=1") wraps every non-MPI binary. RINGO_TEST_TIMEOUT bounds each
# binary (default 900 s). With RINGO_TALLY=FILE the counts are appended to FILE as "P F S" and the
# closing line names RINGO_STAGE instead, so .ci/test_all.sh can print the one total for many stages;
# with RINGO_FAILED_LIST=FILE each failed test's name is appended there as "stage: binary: test".
set -u
ci_dir=$(cd "$(dirname "$0")" && pwd)
# Sanitizer run-time defaults (a caller's own settings win); harmless for other builds. Every
# finding fails its test: UBSan halts instead of going on, LSan checks for leaks at exit (Open
# MPI's own suppressed), TSan may follow the harness's fork of a process with a root thread.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:protect_shadow_gap=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ci_dir/lsan.supp:print_suppressions=0}
export TSAN_OPTIONS=${TSAN_OPTIONS:-die_after_fork=0:halt_on_error=1:second_deadlock_stack=1}
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "${RINGO_MPI_NP:-8}")
read -r -a LAUNCH <<< "${RINGO_TEST_LAUNCH:-}"
passed=0; failed=0; skipped=0
for arg in "$@"; do
  case "$arg" in
    *=*) export "${arg?}"; echo "=== from here on: $arg"; continue ;;
  esac
  bin=${arg%%@*}
  args=(--gtest_color=no)
  [ "$bin" != "$arg" ] && args+=("--gtest_filter=${arg#*@}")
  echo "=== $bin ${args[*]:1}"
  log=$(mktemp)
  launch=("${LAUNCH[@]}")
  asan=$ASAN_OPTIONS
  # Open MPI unloads its components at MPI_Finalize, so LSan's fast unwinder leaves their
  # allocations without a module to match in lsan.supp; the slow one walks into libmpi.
  case "$bin" in */mpi/*) launch=("${MPIRUN[@]}"); asan="$asan:fast_unwind_on_malloc=0" ;; esac
  start=$SECONDS
  ASAN_OPTIONS=$asan timeout "${RINGO_TEST_TIMEOUT:-900}" "${launch[@]}" "$bin" "${args[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*listed below.*/\1/p' "$log" | tail -n1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*listed below.*/\1/p' "$log" | tail -n1)
  p=${p:-0}; f=${f:-0}; s=${s:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    # A sanitizer that finds an error after the last test (a leak at exit, say) lands here too.
    echo "run_tests: $bin exited with status $rc without reporting a failed test; counting it as one failure"
    f=1
    [ -n "${RINGO_FAILED_LIST:-}" ] && echo "${RINGO_STAGE:-tests}: ${bin##*/}: exit status $rc" >> "$RINGO_FAILED_LIST"
  fi
  # The failed tests by name, for the list .ci/test_all.sh prints just above its closing line.
  if [ -n "${RINGO_FAILED_LIST:-}" ]; then
    sed -n 's/^\[  FAILED  \] \([A-Za-z_][^ ]*\).*/\1/p' "$log" | sort -u |
      sed "s|^|${RINGO_STAGE:-tests}: ${bin##*/}: |" >> "$RINGO_FAILED_LIST"
  fi
  echo "=== $bin: $((SECONDS - start)) s, $p passed, $f failed, $s skipped"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  rm -f "$log"
done
if [ -n "${RINGO_TALLY:-}" ]; then
  echo "$passed $failed $skipped" >> "$RINGO_TALLY"
  echo "--- ${RINGO_STAGE:-tests}: passed $passed, failed $failed, skipped $skipped"
else
  echo "${passed} passed, ${failed} failed, ${skipped} skipped"
fi
[ "$failed" -eq 0 ]
