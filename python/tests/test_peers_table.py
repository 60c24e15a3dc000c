# test_peers_table.py — bench/peers/peers_table.py (make bench-peers' table) on made-up rows: the best
# configuration per size by the median over passes, a configuration with wrong elements left out, and
# the targets line (1.2x from 4 KiB, parity below), a peer whose busbw printed as 0. Run: pytest
# python/tests/test_peers_table.py.
import pathlib
import subprocess
import sys

TABLE = pathlib.Path(__file__).resolve().parents[2] / "bench" / "peers" / "peers_table.py"


def row(p, lib, cfg, n, size, busbw, wrong=0):
    return f"{p}\t0.50/0.40/0.30\t{lib}\t{cfg}\t{n}\t{size}\t1.0\t{busbw}\t{wrong}\t20\n"


def test_targets_line_names_each_short_size(tmp_path):
    rows = tmp_path / "rows.tsv"
    with open(rows, "w") as f:
        for p in (1, 2, 3):
            # 1 KiB: ringo 1.05x (parity is the target there); 4 KiB: 1.1x, short of 1.2; 64 KiB: 1.3x.
            f.write(row(p, "ringo", "default", 2, 1024, 1.05))
            f.write(row(p, "ringo", "default", 2, 4096, 2.2))
            f.write(row(p, "ringo", "default", 2, 65536, 13.0))
            f.write(row(p, "impi", "adjust-1", 2, 1024, 1.0))
            f.write(row(p, "impi", "adjust-1", 2, 4096, 2.0))
            f.write(row(p, "impi", "adjust-1", 2, 65536, 10.0))
            # The best peer by its median, not by its best pass: 11 once, 9 twice -> median 9.
            f.write(row(p, "ccl", "ring", 2, 65536, 11.0 if p == 1 else 9.0))
            # Fast but wrong: never the best.
            f.write(row(p, "ompi", "tuned-1", 2, 4096, 50.0, wrong=3))
    out = subprocess.run([sys.executable, str(TABLE), str(rows)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "- N = 2: met at 2 of 3 sizes; short at: 4K (1.10)" in out.stdout, out.stdout
    assert "| 2 | 1.05 | 1.10 | 1.30 |" in out.stdout, out.stdout
    assert "left out: ompi:tuned-1 at N = 2 returned wrong elements" in out.stdout, out.stdout
    best = (tmp_path / "best.tsv").read_text().splitlines()
    assert best[-1].split("\t")[4] == "impi:adjust-1", best


def test_peer_with_zero_busbw_is_beyond_a_ratio(tmp_path):
    # MPICH's slowest configurations at N = 8 print busbw 0.0000: the table goes on (it divided by zero).
    rows = tmp_path / "rows.tsv"
    with open(rows, "w") as f:
        for p in (1, 2):
            f.write(row(p, "ringo", "default", 8, 256, 0.02))
            f.write(row(p, "impi", "adjust-1", 8, 256, 0.01))
            f.write(row(p, "mpich", "default", 8, 256, 0.0))
    out = subprocess.run([sys.executable, str(TABLE), str(rows)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "| 8 | MPICH | inf |" in out.stdout, out.stdout
    assert "| 8 | Intel MPI | 2.00 |" in out.stdout, out.stdout
