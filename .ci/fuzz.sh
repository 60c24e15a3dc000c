#!/usr/bin/env bash
# fuzz.sh — runs each libFuzzer binary given for FUZZ_TIME s (default 20) on FUZZ_DIR/corpus/NAME;
# each counts as one test, failed on a finding (kept in FUZZ_DIR/artifacts/NAME/: rerun BINARY FILE).
# Totals like .ci/run_tests.sh (RINGO_TALLY included). Run by `make fuzz` and `make check`.
set -u
time_s=${FUZZ_TIME:-20}
dir=${FUZZ_DIR:-build-fuzz}
passed=0; failed=0
for bin in "$@"; do
  name=$(basename "$bin")
  corpus="$dir/corpus/$name"
  artifacts="$dir/artifacts/$name/"
  mkdir -p "$corpus" "$artifacts"
  log=$(mktemp)
  start=$(date +%s%N)
  echo "=== $bin: ${time_s} s"
  # -timeout: one input running 60 s is a hang (fuzz_root's own bounds, each for a stalled CI
  # machine, add up to about 26 s, so its own message comes first); the outer timeout catches a
  # fuzzer that wedges.
  timeout $((time_s + 120)) "$bin" -max_total_time="$time_s" -timeout=60 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" > "$log" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -E '^#[0-9]+' "$log" | tail -n1 | grep -o 'cov: [0-9]*' || true)
    echo "  $name: ${runs:-?} inputs, ${cov:-cov: ?}, corpus $(ls "$corpus" | wc -l) files"
    echo "[       OK ] $name ($ms ms)"
  else
    failed=$((failed + 1))
    tail -n 80 "$log"
    echo "[  FAILED  ] $name (exit status $rc); reproducer(s): $(ls "$artifacts" | sed "s|^|$artifacts|" | tr '\n' ' ')"
  fi
  rm -f "$log"
done
if [ -n "${RINGO_TALLY:-}" ]; then
  echo "$passed $failed 0" >> "$RINGO_TALLY"
  echo "--- ${RINGO_STAGE:-fuzzers}: passed $passed, failed $failed, skipped 0"
else
  echo "${passed} passed, ${failed} failed, 0 skipped"
fi
[ "$failed" -eq 0 ]
