#!/usr/bin/env bash
# python_tests.sh — the Python stage of `make check`: the venv (python_deps.sh), libringo and the
# teaching tools, `pip install ./python` into the venv, then pytest over python/tests (NumPy
# bindings, teaching data, the torch backend under torchrun), and the torch suites once more under
# the older torch of python_deps.sh. Ends with one line
# "N passed, M failed, K skipped" and exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
summary() {
  if [ -n "${RINGO_TALLY:-}" ]; then echo "$1 $2 $3" >> "$RINGO_TALLY"; fi
  echo "$1 passed, $2 failed, $3 skipped"
  [ "$2" -eq 0 ]
  exit
}
if ! py=$(.ci/python_deps.sh | tail -n1); then
  echo "python_tests: the Python environment could not be made"
  summary 0 1 0
fi
# The same library the C suites test, and the two tools ringo.trace/ringo.model read.
if ! nice -n 10 "$MAKE" --no-print-directory -j2 lib build/bin/ringo-trace build/bin/ringo-model; then
  echo "python_tests: libringo did not build"
  summary 0 1 0
fi
# What a user runs; the build step finds the library just built (setup.py runs make, a no-op now).
if ! "$py" -m pip install -q --no-build-isolation ./python; then
  echo "python_tests: pip install ./python failed"
  summary 0 1 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
P=0 F=0 S=0
# One pytest run from the tests folder, so `import ringo` is the installed package, not python/ringo;
# its counts are added to the totals. $1: what goes first on PYTHONPATH; the rest: pytest's arguments.
suite() {
  local pypath=$1
  shift
  (cd python/tests && PYTHONPATH=$pypath RINGO_TIMEOUT=${RINGO_TIMEOUT:-30} timeout "${RINGO_PY_TEST_TIMEOUT:-600}" \
    "$py" -m pytest -q -rs -p no:cacheprovider "$@" 2>&1) | tee "$log"
  local rc=${PIPESTATUS[0]} line p f s e
  line=$(grep -E '[0-9]+ (passed|failed|skipped|error)' "$log" | tail -n1)
  count() { echo "$line" | grep -oE "[0-9]+ $1" | grep -oE '[0-9]+' || echo 0; }
  p=$(count passed); f=$(count failed); s=$(count skipped); e=$(count 'errors?')
  f=$((f + e))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "python_tests: pytest exited with status $rc without reporting a failed test; counting it as one failure"
    f=1
  fi
  P=$((P + p)) F=$((F + f)) S=$((S + s))
}
suite "" .
# The torch backend again under the oldest torch it is tested with, the GPU image's (gpu-check runs
# there): torch's bindings and batching differ between versions.
if site=$(.ci/python_deps.sh older-torch | tail -n1); then
  echo "python_tests: the torch suites again under $(basename "$site")"
  # shellcheck disable=SC2046 # one word per file
  suite "$site" $(cd python/tests && echo test_torch*.py) test_bench.py
else
  echo "python_tests: the older torch could not be installed"
  F=$((F + 1))
fi
summary "$P" "$F" "$S"
