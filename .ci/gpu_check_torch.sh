#!/usr/bin/env bash
# gpu_check_torch.sh BUILD DEST — make gpu-check's torch part: installs ./python against BUILD's libringo into DEST
# (pip --target, nothing fetched) and runs backend "ringo" on CUDA tensors (python/tests/test_torch_cuda.py: every
# collective and dtype with N = 2 under torchrun, then DDP against gloo and FSDP) with the machine's python3 and
# its torch. Exit 0 when both tests passed, 2 when torch sees no GPU, 1 otherwise. Run by .ci/gpu_check.sh.
set -u -o pipefail
cd "$(dirname "$0")/.."
build=$1 dest=$2
py=${PYTHON:-python3}
tests=("test_torch_cuda.py::test_every_collective_every_dtype_on_cuda[2]"
  "test_torch_cuda.py::test_ddp_on_cuda_matches_gloo_and_fsdp_matches_ddp")

# What the package and the tests need and pip --no-deps --no-index will not fetch.
for m in torch numpy pytest setuptools; do
  if ! "$py" -c "import $m" 2>/dev/null; then
    echo "gpu_check_torch: $py cannot import $m"
    exit 1
  fi
done
"$py" -c 'import sys, torch; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s)"); sys.exit(0 if torch.cuda.is_available() else 2)' || exit
rm -rf "$dest"
if ! RINGO_LIB="$build/lib/libringo.so" "$py" -m pip install -q --no-build-isolation --no-deps --no-index --target "$dest" ./python; then
  echo "gpu_check_torch: pip install ./python against $build/lib/libringo.so failed"
  exit 1
fi
log=$(mktemp)
(cd python/tests && PYTHONPATH="$dest${PYTHONPATH:+:$PYTHONPATH}" "$py" -m pytest -q -rs -p no:cacheprovider "${tests[@]}" 2>&1) |
  tee "$log"
rc=${PIPESTATUS[0]}
line=$(grep -E '[0-9]+ (passed|failed|skipped|error)' "$log" | tail -n 1)
rm -f "$log"
# Both must have run: on a GPU machine a skipped test checked nothing.
[ "$rc" -eq 0 ] && [[ $line == "${#tests[@]} passed"* ]] && [[ $line != *skipped* ]] && exit 0
echo "gpu_check_torch: expected ${#tests[@]} passed and none skipped, got: ${line:-no pytest summary} (pytest exit $rc)"
exit 1
