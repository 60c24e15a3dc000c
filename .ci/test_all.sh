#!/usr/bin/env bash
# test_all.sh — what `make test` runs after the normal build: the normal suites (the binaries given),
# then test-asan, test-tsan, test-valgrind and fuzz unless QUICK=1 or SANITIZE is set; ends with ONE
# line "N passed, M failed, K skipped" over all of them. Called by the Makefile's test target.
set -u
cd "$(dirname "$0")/.."
tally=$(mktemp)
trap 'rm -f "$tally"' EXIT
export RINGO_TALLY=$tally
MAKE=${MAKE:-make}
timing=()
total_start=$SECONDS

# Runs one stage; a stage that fails without counting a failed test (it did not build, say)
# counts as one failure, so nothing can fail silently.
stage() {
  local name=$1 start=$SECONDS lines before_failed
  shift
  lines=$(wc -l < "$tally")
  echo "=== stage: $name"
  RINGO_STAGE=$name "$@"
  local rc=$?
  before_failed=$(tail -n +"$((lines + 1))" "$tally" | awk '{f += $2} END {print f + 0}')
  if [ "$rc" -ne 0 ] && [ "$before_failed" -eq 0 ]; then
    echo "test_all: stage '$name' failed (exit status $rc) without reporting a failed test; counting it as one failure"
    echo "0 1 0" >> "$tally"
  fi
  timing+=("$(printf '%-30s %4d s' "$name" $((SECONDS - start)))")
}

stage "normal suites" .ci/run_tests.sh "$@"
if [ -n "${QUICK:-}" ] && [ "${QUICK}" != 0 ]; then
  echo "test_all: QUICK=$QUICK: sanitizers, valgrind and fuzzers skipped (CI runs them)"
elif [ -n "${SANITIZE:-}" ]; then
  echo "test_all: SANITIZE=$SANITIZE build: only its suites run"
else
  stage "address,undefined sanitizers" "$MAKE" --no-print-directory test-asan
  stage "thread sanitizer" "$MAKE" --no-print-directory test-tsan
  stage "valgrind" "$MAKE" --no-print-directory test-valgrind
  stage "fuzzers" "$MAKE" --no-print-directory fuzz
fi

echo "=== time per stage (builds included; the normal build ran before these)"
printf '  %s\n' "${timing[@]}"
echo "  total after the normal build      $((SECONDS - total_start)) s"
read -r passed failed skipped < <(awk '{p += $1; f += $2; s += $3} END {print p + 0, f + 0, s + 0}' "$tally")
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" -eq 0 ]
