# test_bench.py — python -m ringo.bench runs end to end on a small range (N = 2, 4-8 KiB, a tiny
# DDP model) and prints its table with a ratio and the C comparison (wall and CPU) for every size;
# bad arguments are refused before any rank starts.
# Run: pytest python/tests/test_bench.py (needs torch and make tools).
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")


def test_bench_prints_every_row():
    out = subprocess.run([sys.executable, "-m", "ringo.bench", "-N", "2", "-b", "4K", "-e", "8K", "-r", "1",
                          "--ddp-params", "256K", "--ddp-steps", "2"], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = re.findall(r"^\s+(\d+)\s+\d+\s+float\s+sum \|.*\|\s+([0-9.]+) \|\s+([0-9.]+)\s+(-?[0-9.]+)\s+(-?[0-9.]+)$", out.stdout, re.M)
    assert [int(r[0]) for r in rows] == [4096, 8192], out.stdout
    assert all(float(r[1]) > 0 and float(r[2]) > 0 for r in rows), out.stdout
    assert re.search(r"DDP step, [0-9.]+ M parameters.*gloo/ringo [0-9.]+", out.stdout), out.stdout


# Arguments it would cut, loop on or crash with are refused before any rank starts (-b 0 looped
# forever doubling zero, -r 0 took the median of nothing, 2.5 ran 2 bytes).
@pytest.mark.parametrize("argv, says", [
    (["-b", "0"], "-b/--minbytes: '0'"), (["-b", "2.5"], "'2.5'"), (["-e", "nan"], "'nan'"),
    (["-b", "6"], "multiples of 4"), (["-b", "8K", "-e", "4K"], "larger than -e"), (["-r", "0"], "-r/--reps"),
    (["--ddp-steps", "0"], "--ddp-steps"), (["-N", "2,x"], "-N/--nranks"), (["--ddp-params", "-1"], "--ddp-params"),
])
def test_bench_refuses_arguments_it_would_cut_or_loop_on(argv, says):
    out = subprocess.run([sys.executable, "-m", "ringo.bench", *argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "ringo.bench: error:" in out.stderr and says in out.stderr, out.stderr
