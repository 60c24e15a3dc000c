# test_comm.py — ringo.Comm on NumPy arrays: every collective, every dtype, in and out of place,
# against NumPy's own reduction; errors as ringo.Error; the byte counters' 2(N-1)/N law.
# Run: pytest python/tests/test_comm.py (needs libringo.so: make lib).
import numpy as np
import pytest

import ringo
from ranks import run_ranks

DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16"]
OPS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def _data(dtype, rank, count):
    """Small integers (exact in every dtype, products too) as rank's input; bfloat16 as the upper
    half of float32's bits, the way ringo stores it."""
    vals = (np.arange(count) % 3 + rank + 1).astype(np.float32)
    if dtype == "bfloat16":
        return (vals.view(np.uint32) >> 16).astype(np.uint16)
    return vals.astype(dtype)


def _as_float(a, dtype):
    if dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float64)


def _expected(dtype, n, count, op):
    stack = np.stack([_as_float(_data(dtype, r, count), dtype) for r in range(n)])
    return OPS[op](stack, axis=0)


def _every_collective(comm, count):
    """Runs every collective on every dtype; returns the mismatches it found and the checks made."""
    n, me = comm.size, comm.rank
    bad, checks = [], 0

    def expect(name, got, want, dtype):
        nonlocal checks
        checks += 1
        if not np.array_equal(_as_float(got, dtype), want):
            bad.append(f"{name} {dtype}: got {_as_float(got, dtype)[:6]} want {want[:6]}")

    for dt in DTYPES:
        kw = {"dtype": "bfloat16"} if dt == "bfloat16" else {}
        for op in OPS:
            want = _expected(dt, n, count, op)
            x = _data(dt, me, count)
            expect(f"all_reduce in place {op}", comm.all_reduce(x, op=op, **kw), want, dt)
            y = np.empty_like(x)
            comm.all_reduce(_data(dt, me, count), y, op=op, **kw)
            expect(f"all_reduce out of place {op}", y, want, dt)
        want = _expected(dt, n, count * n, "sum")
        k = count
        full = _data(dt, me, count * n)
        out = np.empty(k, dtype=full.dtype)
        expect("reduce_scatter out of place", comm.reduce_scatter(full, out, **kw), want[me * k:(me + 1) * k], dt)
        expect("reduce_scatter in place", comm.reduce_scatter(full.copy(), **kw), want[me * k:(me + 1) * k], dt)
        every = np.concatenate([_as_float(_data(dt, r, count), dt) for r in range(n)])
        expect("all_gather out of place", comm.all_gather(_data(dt, me, count), **kw), every, dt)
        buf = np.zeros(count * n, dtype=full.dtype)
        buf[me * count:(me + 1) * count] = _data(dt, me, count)
        comm.all_gather(buf[me * count:(me + 1) * count], buf, **kw)
        expect("all_gather in place", buf, every, dt)
        root = n - 1
        b = _data(dt, me, count)
        expect("broadcast in place", comm.broadcast(b, root=root, **kw), _as_float(_data(dt, root, count), dt), dt)
        r = np.zeros_like(b)
        comm.broadcast(_data(dt, me, count), r, root=0, **kw)
        expect("broadcast out of place", r, _as_float(_data(dt, 0, count), dt), dt)
        x = _data(dt, me, count)
        comm.reduce(x, op="max", root=0, **kw)
        if me == 0:
            expect("reduce in place", x, _expected(dt, n, count, "max"), dt)
    return bad, checks


@pytest.mark.parametrize("n", [2, 3])
def test_every_collective_every_dtype(n):
    for bad, checks in run_ranks(_every_collective, n, 13):
        assert checks > 100
        assert not bad, "\n".join(bad)


def _ring_exchange(comm):
    n, me = comm.size, comm.rank
    out = np.empty(4, np.int64)
    if me % 2 == 0:
        comm.send(np.full(4, me, np.int64), (me + 1) % n)
        comm.recv(out, (me - 1) % n)
    else:
        comm.recv(out, (me - 1) % n)
        comm.send(np.full(4, me, np.int64), (me + 1) % n)
    # Inside a group every rank may send first: it all progresses at the group's end.
    ex = np.empty(3, np.float32)
    with ringo.group():
        comm.send(np.full(3, me, np.float32), (me + 1) % n)
        comm.recv(ex, (me - 1) % n)
    return out.tolist(), ex.tolist()


def test_send_recv_and_group():
    n = 4
    for me, (out, ex) in enumerate(run_ranks(_ring_exchange, n)):
        assert out == [(me - 1) % n] * 4
        assert ex == [float((me - 1) % n)] * 3


def _stats_and_errors(comm, count):
    before = comm.stats()
    comm.all_reduce(np.ones(count, np.float32))
    after = comm.stats()
    errors = []
    for call in (lambda: comm.broadcast(np.ones(4, np.float32), root=comm.size),
                 lambda: comm.all_reduce(np.ones(4, np.complex64)),
                 lambda: comm.all_reduce(np.ones((4, 4), np.float32)[:, 0]),
                 lambda: comm.all_reduce(np.ones(4, np.float32), op="xor")):
        try:
            call()
            errors.append(None)
        except ringo.Error as e:
            errors.append((e.code, e.name, e.message))
    return after["bytes_sent"] - before["bytes_sent"], after["collectives"] - before["collectives"], errors


def test_stats_follow_the_ring_law_and_errors_carry_ringo_message(monkeypatch):
    # The ring itself (a small all-reduce on one host would otherwise take the one-shot path);
    # spawned ranks inherit the variable.
    monkeypatch.setenv("RINGO_ALGO", "ring")
    n, count = 4, 1024
    for sent, colls, errors in run_ranks(_stats_and_errors, n, count):
        assert sent == 2 * (n - 1) * count * 4 // n  # 2(N-1)/N of D, exact when N divides the count
        assert colls == 1
        code, name, message = errors[0]  # from the library: root out of range
        assert code == 4 and name == "invalid argument" and "root" in message
        assert all(e is not None and e[0] == 4 for e in errors[1:]), errors


def test_bad_unique_id_is_a_ringo_error():
    with pytest.raises(ringo.Error) as e:
        ringo.Comm(2, b"short", 0)
    assert e.value.code == 4 and "128 bytes" in str(e.value)


def test_version():
    assert ringo.version() >= (0, 1, 0)
