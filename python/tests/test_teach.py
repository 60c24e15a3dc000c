# test_teach.py — ringo.trace() read back from ringo-trace is a correct ring all-reduce (every
# chunk summed once over all ranks, then copied), and ringo.model() gives what ringo-model prints.
# Run: pytest python/tests/test_teach.py (needs make tools).
import re
import subprocess

import pytest

import ringo
from ringo.teach import tool


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_trace_is_the_seed_ring(n):
    t = ringo.trace(n, count=10 * n + 1)
    assert len(t.steps) == 2 * (n - 1) and len(t.schedule) == n
    assert all(len(row) == 2 * n - 1 for row in t.schedule)  # 2N-2 sends fused into 2N-1 steps
    assert [s.phase for s in t.steps] == ["reduce-scatter"] * (n - 1) + ["all-gather"] * (n - 1)
    assert t.start == [[[r] for _ in range(n)] for r in range(n)]
    for s in t.steps:
        for m in s.messages:
            assert m.dst == (m.src + 1) % n  # only to the next rank
        if s.phase == "reduce-scatter":
            # The seed's rule: at step s rank r sends chunk (r - s) mod N.
            assert sorted((m.src, m.chunk) for m in s.messages) == [(r, (r - s.index) % n) for r in range(n)]
    after_rs = t.steps[n - 2].holds
    for r in range(n):
        # After reduce-scatter rank r owns chunk (r + 1) mod N, summed over every rank.
        assert sorted(after_rs[r][(r + 1) % n]) == list(range(n))
        assert t.owner((r + 1) % n) == r
    assert all(sorted(c) == list(range(n)) for row in t.steps[-1].holds for c in row)
    assert sum(hi - lo for lo, hi in t.chunks) == 10 * n + 1
    # Each rank sends 2(N-1) chunks: 2(N-1)/N of the vector, within one element per chunk.
    for sent in t.sent_elements:
        assert abs(sent - 2 * (n - 1) * (10 * n + 1) / n) <= 2 * (n - 1)


@pytest.mark.parametrize("n, count", [(1, None), (33, None), (2.5, None), (True, None), (4, -1), (4, 3.7),
                                      (4, 2**63)])
def test_trace_rejects_what_the_tool_rejects_or_would_cut(n, count):
    with pytest.raises(ValueError, match=r"ringo\.trace: (n|count) must be a whole number"):
        ringo.trace(n, count)


@pytest.mark.parametrize("kwargs", [{"bytes": -5}, {"params": -1e6}, {"bytes": float("nan")}, {"bytes": 1e6, "bw": 0},
                                    {"bytes": 1e6, "bw": -1}, {"bytes": 1e6, "latency": -1},
                                    {"bytes": 1e6, "bw": float("inf")}, {"bytes": 1e6, "nranks": 2.5},
                                    {"bytes": 1e6, "nranks": 0}, {"params": 10, "dtype": ["x"]},
                                    # Beyond ringo-model's limits, where Python gave inf or an OverflowError:
                                    {"params": 1e308, "dtype": "float64"}, {"bytes": 1e6, "nranks": 10**400},
                                    {"bytes": 1e6, "bw": 1e-300}, {"bytes": 1e6, "latency": 1e308},
                                    {"bytes": 0.5}, {"params": 0.1, "dtype": "int8"}, {"bytes": 1e6, "latency": 1e-12}])
def test_model_rejects_what_ringo_model_rejects(kwargs):
    with pytest.raises(ValueError, match="ringo.model"):
        ringo.model(**kwargs)


def _printed(text, key):
    """The last number on ringo-model's line `key ... = <number> <unit>`, in SI units."""
    line = next(l for l in text.splitlines() if l.strip().startswith(key))
    num, unit = re.findall(r"([0-9.]+) ?(ms|us|s|GB|MB|)\b", line.split(";")[0])[-1]
    return float(num) * {"ms": 1e-3, "us": 1e-6, "s": 1, "GB": 1e9, "MB": 1e6, "": 1}[unit]


@pytest.mark.parametrize("n", [2, 8, 64])
def test_model_matches_ringo_model(n):
    out = subprocess.run([tool("ringo-model"), "--params", "1e9", "--dtype", "float32", "--nranks", str(n),
                          "--bw", "200GB/s", "--latency", "5us"], capture_output=True, text=True, check=True).stdout
    m = ringo.model(params=1e9, dtype="float32", nranks=n, bw=200e9, latency=5e-6)
    assert m.factor == pytest.approx(2 * (n - 1) / n)
    assert m.factor == pytest.approx(_printed(out, "factor"), rel=1e-3)
    assert m.sent_per_rank == pytest.approx(_printed(out, "sent/rank"), rel=1e-2)
    assert m.bandwidth_time == pytest.approx(_printed(out, "time"), rel=1e-2)
    assert m.latency_time == pytest.approx(_printed(out, "latency"), rel=1e-2)
    assert m.total_time == pytest.approx(_printed(out, "total"), rel=1e-2)
    assert m.crossover_bytes == pytest.approx(_printed(out, "buckets"), rel=1e-2)
    if n == 8:  # the seed's worked example: 7 GB sent per rank, 35 ms at 200 GB/s
        assert m.sent_per_rank == 7e9 and m.bandwidth_time == pytest.approx(0.035)
