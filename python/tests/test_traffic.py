# test_traffic.py — bench/peers/traffic.sh on ringo alone: at N = 2 above the last-level cache, each rank
# reads its input once and writes its output once per all-reduce (2.0 D of memory traffic), the figure
# docs/peers.md compares with oneCCL's. Run: pytest python/tests/test_traffic.py.
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
@pytest.mark.skipif(not (ROOT / "build" / "lib" / "libringo.so").exists(), reason="needs make (build/lib/libringo.so)")
def test_ringo_moves_input_and_output_once_at_n2():
    # A 4 MiB LL and 16 MiB of data: the same regime as 64 MiB on the VM's 32 MiB L3, four times quicker.
    env = dict(os.environ, TRAFFIC_LL="4194304,16,64", BUILD="build")
    out = subprocess.run(["bench/peers/traffic.sh", "--np", "2", "-b", "16M", "--configs", "ringo"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("  ringo")]
    assert [r[1] for r in rows] == ["0", "1"], out.stdout
    for r in rows:
        ll_read, ll_write, ll_total, l1 = map(float, r[2:6])
        assert 0.95 <= ll_read <= 1.10 and 0.95 <= ll_write <= 1.10, out.stdout  # input once, output once
        assert 1.95 <= ll_total <= 2.15, out.stdout
        assert l1 >= ll_total, out.stdout  # every line that reaches memory missed the L1 first
