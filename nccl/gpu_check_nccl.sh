#!/usr/bin/env bash
# gpu_check_nccl.sh — the drop-in's checks with prebuilt clients on a GPU: PyTorch DDP under torchrun with backend
# "nccl" on ringo's libnccl.so.2 (2 ranks on GPU 0, losses against one process to 1e-5, test/nccl/torch_ddp_check.py),
# and nccl-tests' all_reduce_perf under 2 MPI processes (#wrong 0, busbw and its ratio to ringo-gpu-bench's).
# Usage: nccl/gpu_check_nccl.sh BUILD   with PYTHON (a python with torch) and NCCL_TESTS (nccl-tests' build folder,
# made with MPI=1); a part whose tool is missing is reported as skipped. Exit 0 only if every part that ran passed.
set -u -o pipefail

BUILD=$(cd "${1:-build}" && pwd) || { echo "gpu_check_nccl: no build folder ${1:-build}"; exit 2; }
RINGO_NCCL=$BUILD/lib/ringo-nccl
PYTHON=${PYTHON:-python3}
NCCL_TESTS=${NCCL_TESTS:-}
HERE=$(cd "$(dirname "$0")/.." && pwd)
SCRATCH=$(mktemp -d /tmp/ringo-nccl-gpu-XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
FAILS=0 SKIPS=0

# A site-packages of links to PYTHON's, with torch/ and torch/lib/ as real folders (libtorch_cuda's rpath
# $ORIGIN/../../nvidia/nccl/lib then resolves inside it) and nvidia/nccl/lib holding ringo's libraries: the
# wheel's own libnccl.so.2 is left untouched.
overlay() {
  local sp out=$SCRATCH/site-packages e
  sp=$("$PYTHON" -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))') || return 1
  mkdir -p "$out/torch/lib" "$out/nvidia/nccl/lib"
  for e in "$sp"/*; do case ${e##*/} in torch|nvidia) ;; *) ln -s "$e" "$out/";; esac; done
  for e in "$sp"/torch/*; do [ "${e##*/}" = lib ] || ln -s "$e" "$out/torch/"; done
  for e in "$sp"/torch/lib/*; do ln -s "$e" "$out/torch/lib/"; done
  for e in "$sp"/nvidia/*; do [ "${e##*/}" = nccl ] || ln -s "$e" "$out/nvidia/"; done
  ln -s "$RINGO_NCCL/libnccl.so.2" "$BUILD/lib/libringo.so.0" "$out/nvidia/nccl/lib/"
  echo "$out"
}

torch_ddp() {
  echo "=== torchrun --nproc-per-node 2, backend nccl, on $RINGO_NCCL/libnccl.so.2"
  if ! "$PYTHON" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    echo "gpu_check_nccl: skipped: $PYTHON has no torch with CUDA"; SKIPS=$((SKIPS + 1)); return
  fi
  local sp out
  sp=$(overlay) || { echo "gpu_check_nccl: problem: cannot build the overlay"; FAILS=$((FAILS + 1)); return; }
  out=$(PYTHONPATH=$sp RINGO_TIMEOUT=60 timeout 240 "$PYTHON" -m torch.distributed.run --nproc-per-node 2 \
        "$HERE/test/nccl/torch_ddp_check.py" --backend nccl 2>&1)
  local rc=$?
  echo "$out" | grep -v -e '^W[0-9]' -e '^\*\*\*'
  if [ $rc -ne 0 ] || ! grep -q 'ddp-check: PASS' <<<"$out" || ! grep -q "libnccl loaded: $RINGO_NCCL/libnccl.so.2" <<<"$out"; then
    echo "gpu_check_nccl: problem: the DDP check failed (exit $rc) or did not run on ringo's library"
    FAILS=$((FAILS + 1))
  fi
}

# nccl-tests' out-of-place busbw per size (column 8), its #wrong (columns 9 and 13); ringo-gpu-bench's busbw
# (column 7) per size for the ratio.
nccl_tests() {
  echo "=== nccl-tests all_reduce_perf -b 1M -e 1G -f 4 -g 1, 2 processes, on ringo"
  if [ -z "$NCCL_TESTS" ] || [ ! -x "$NCCL_TESTS/all_reduce_perf" ] || ! command -v mpirun >/dev/null; then
    echo "gpu_check_nccl: skipped: set NCCL_TESTS to nccl-tests' build folder (MPI=1), and have mpirun"
    SKIPS=$((SKIPS + 1)); return
  fi
  local nt rb
  nt=$(RINGO_TIMEOUT=60 timeout 240 mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH="$RINGO_NCCL" \
       -x RINGO_TIMEOUT "$NCCL_TESTS/all_reduce_perf" -b 1M -e 1G -f 4 -g 1 2>&1)
  local rc=$?
  echo "$nt"
  rb=$(timeout 240 "$BUILD/bin/ringo-gpu-bench" -N 2 -b 1M -e 1G -f 4 -d float32 2>&1)
  echo "$rb" | grep -v '^#'
  awk -v rc=$rc 'NR == FNR { if ($1 ~ /^[0-9]+$/ && NF >= 7) ringo[$1] = $7; next }
       $1 ~ /^[0-9]+$/ && NF >= 13 { rows++; wrong += $9 + $13
         printf "size %10d  busbw %8.2f GB/s  ringo-gpu-bench %8.2f GB/s  ratio %.3f\n", $1, $8, ringo[$1], ringo[$1] ? $8 / ringo[$1] : 0 }
       END { printf "nccl-tests: %d rows, #wrong %d\n", rows, wrong; exit (rc != 0 || rows == 0 || wrong != 0) }' \
      <(echo "$rb") <(echo "$nt") || { echo "gpu_check_nccl: problem: nccl-tests failed or found wrong elements"; FAILS=$((FAILS + 1)); }
}

torch_ddp
nccl_tests
echo "gpu_check_nccl: $FAILS failed, $SKIPS skipped"
exit $((FAILS > 0))
