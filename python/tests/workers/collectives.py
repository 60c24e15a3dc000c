# collectives.py — torchrun worker: every collective of the "ringo" backend on every dtype torch
# and ringo share, in and out of place, against a reference computed locally from every rank's
# (known) input. Prints "ringo collectives: K checks, F failed" and exits 1 on any failure. With the
# argument "cuda" every tensor is on the rank's GPU (LOCAL_RANK modulo the GPUs seen), plus stream checks.
# Run: python -m torch.distributed.run --standalone --nproc-per-node 4 collectives.py [cuda] (test_torch*.py).
import lines  # noqa: F401 - first: one write per printed line
import os
import sys
import warnings

import torch
import torch.distributed as dist

import ringo.torch  # noqa: F401 - registers "ringo"
from ringo.torch import pg as ringo_pg

DTYPES = [torch.int8, torch.uint8, torch.int32, torch.uint32, torch.int64, torch.uint64,
          torch.float16, torch.float32, torch.float64, torch.bfloat16]
R = dist.ReduceOp
checks, failures = 0, []


def data(rank, count, dtype, small=False):
    """Rank's input: small integers, exact in every dtype (values 1..2 when products must fit int8)."""
    base = torch.arange(count) % 2 + 1 if small else torch.arange(count) % 3 + rank + 1
    if small:
        base = torch.where((torch.arange(count) + rank) % 2 == 0, base, torch.ones_like(base))
    return base.to(torch.float64).to(dtype)


def expect(what, got, want):
    global checks
    checks += 1
    g, w = got.to(torch.float64), want.to(torch.float64)
    if g.shape != w.shape or not torch.equal(g, w):
        failures.append(f"{what}: got {g.flatten()[:6].tolist()} want {w.flatten()[:6].tolist()}")


def reference(n, count, dtype, op, small=False, factor=None):
    stack = torch.stack([data(r, count, dtype, small).to(torch.float64) for r in range(n)])
    if factor is not None:
        stack = stack * factor
    out = {"sum": stack.sum(0), "prod": stack.prod(0), "min": stack.min(0).values, "max": stack.max(0).values,
           "avg": stack.mean(0)}[op]
    return out.to(dtype)


def reductions(me, n, dtype, group=None):
    count = 11
    ops = [("sum", R.SUM, False), ("prod", R.PRODUCT, True), ("min", R.MIN, False), ("max", R.MAX, False)]
    if dtype.is_floating_point:
        ops += [("avg", R.AVG, False)]
    for name, op, small in ops:
        t = data(me, count, dtype, small)
        dist.all_reduce(t, op=op, group=group)
        expect(f"all_reduce {name} {dtype}", t, reference(n, count, dtype, name, small))
    if dtype.is_floating_point:
        t = data(me, count, dtype)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0), group=group)
        expect(f"all_reduce premul_sum {dtype}", t, reference(n, count, dtype, "sum", factor=2.0))
    # A strided view is reduced in place too (through a contiguous copy).
    m = torch.stack([data(me, count, dtype), torch.zeros(count, dtype=dtype)], 1)
    dist.all_reduce(m[:, 0], group=group)
    expect(f"all_reduce strided {dtype}", m[:, 0], reference(n, count, dtype, "sum"))
    ts = [data(me, 5, dtype), data(me, 7, dtype)]
    dist.all_reduce_coalesced(ts, group=group)
    expect(f"all_reduce_coalesced {dtype}", torch.cat(ts), torch.cat([reference(n, 5, dtype, "sum"),
                                                                      reference(n, 7, dtype, "sum")]))
    t = data(me, count, dtype)
    dist.reduce(t, dst=dist.get_global_rank(group, n - 1) if group else n - 1, op=R.MAX, group=group)
    if me == n - 1:
        expect(f"reduce max {dtype}", t, reference(n, count, dtype, "max"))
    # reduce-scatter: out of place, in place (the output a view of the input), and as lists.
    k = 3
    full = reference(n, k * n, dtype, "sum")
    out = torch.empty(k, dtype=dtype)
    dist.reduce_scatter_tensor(out, data(me, k * n, dtype), group=group)
    expect(f"reduce_scatter_tensor {dtype}", out, full[me * k:(me + 1) * k])
    inp = data(me, k * n, dtype)
    dist.reduce_scatter_tensor(inp[me * k:(me + 1) * k], inp, group=group)
    expect(f"reduce_scatter_tensor in place {dtype}", inp[me * k:(me + 1) * k], full[me * k:(me + 1) * k])
    out = torch.empty(k, dtype=dtype)
    dist.reduce_scatter(out, list(data(me, k * n, dtype).chunk(n)), group=group)
    expect(f"reduce_scatter list {dtype}", out, full[me * k:(me + 1) * k])


def movement(me, n, dtype, group=None):
    count = 6
    every = torch.cat([data(r, count, dtype) for r in range(n)])
    out = torch.empty(count * n, dtype=dtype)
    dist.all_gather_into_tensor(out, data(me, count, dtype), group=group)
    expect(f"all_gather_into_tensor {dtype}", out, every)
    buf = torch.zeros(count * n, dtype=dtype)
    buf[me * count:(me + 1) * count] = data(me, count, dtype)
    dist.all_gather_into_tensor(buf, buf[me * count:(me + 1) * count], group=group)
    expect(f"all_gather_into_tensor in place {dtype}", buf, every)
    outs = [torch.empty(count, dtype=dtype) for _ in range(n)]
    dist.all_gather(outs, data(me, count, dtype), group=group)
    expect(f"all_gather list {dtype}", torch.cat(outs), every)
    for root in (0, n - 1):
        t = data(me, count, dtype)
        dist.broadcast(t, src=dist.get_global_rank(group, root) if group else root, group=group)
        expect(f"broadcast root {root} {dtype}", t, data(root, count, dtype))


def overlapping(me, n):
    """Outputs that share memory with the input without being the in-place layout (the front of the
    buffer, in place on rank 0 only): served through a copy of the input, as gloo serves them."""
    k = 5
    inp = data(me, n * k, torch.float32)
    out = inp[:k]
    dist.reduce_scatter_tensor(out, inp)
    expect("reduce_scatter_tensor into the input's front", out,
           reference(n, n * k, torch.float32, "sum")[me * k:(me + 1) * k])
    buf = torch.zeros(n * k)
    buf[:k] = data(me, k, torch.float32)
    dist.all_gather_into_tensor(buf, buf[:k])
    expect("all_gather_into_tensor from the output's front", buf,
           torch.cat([data(r, k, torch.float32) for r in range(n)]))


def unbatched_ring(me, n):
    """isend/irecv without batch_isend_irecv (as torch before 2.12 issues even that batch on our group):
    ring exchanges of messages larger than the links' FIFOs, sends first or receives first on every
    rank, waited on in any order or polled, complete; then a collective right behind an unwaited pair."""
    nxt, prv = (me + 1) % n, (me - 1) % n
    for order in ("send first", "recv first", "recv waited first", "polled"):
        big, got = torch.full((1 << 20,), float(me)), torch.empty(1 << 20)
        if order == "send first":
            works = [dist.isend(big, nxt), dist.irecv(got, prv)]
        else:
            works = [dist.irecv(got, prv), dist.isend(big, nxt)]
        if order == "polled":
            while not all(w.is_completed() for w in works):
                pass
        for w in works if order == "send first" else reversed(works):
            w.wait()
        expect(f"isend/irecv 4 MiB ring, {order}", got, torch.full((1 << 20,), float(prv)))
    got = torch.empty(3)
    recv = dist.irecv(got, prv)
    dist.isend(torch.full((3,), float(me)), nxt)
    t = torch.ones(5)
    dist.all_reduce(t)
    expect("all_reduce behind an unwaited isend/irecv", t, torch.full((5,), float(n)))
    expect("irecv's future after the all_reduce", recv.get_future().wait()[0], torch.full((3,), float(prv)))


def point_to_point(me, n):
    for dtype in (torch.float32, torch.int64, torch.bool):
        nxt, prv = (me + 1) % n, (me - 1) % n
        got = torch.empty(9, dtype=dtype)
        mine = (torch.arange(9) + me) % 2 == 0 if dtype == torch.bool else data(me, 9, dtype)
        if me % 2 == 0:
            dist.send(mine, nxt)
            dist.recv(got, prv)
        else:
            dist.recv(got, prv)
            dist.send(mine, nxt)
        want = (torch.arange(9) + prv) % 2 == 0 if dtype == torch.bool else data(prv, 9, dtype)
        expect(f"send/recv {dtype}", got, want)
    # batch_isend_irecv: one batch progresses as a whole, so a ring exchange of messages larger than the
    # links' FIFOs completes; a strided receive is written back.
    nxt, prv = (me + 1) % n, (me - 1) % n
    big, got_big, got_small = torch.full((1 << 20,), float(me)), torch.empty(1 << 20), torch.empty(12)[::2]
    ops = [dist.P2POp(dist.isend, big, nxt), dist.P2POp(dist.irecv, got_big, prv),
           dist.P2POp(dist.isend, torch.arange(6.0) + me, nxt), dist.P2POp(dist.irecv, got_small, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    expect("batch_isend_irecv 4 MiB ring", got_big, torch.full((1 << 20,), float(prv)))
    expect("batch_isend_irecv strided receive", got_small, torch.arange(6.0) + prv)
    unbatched_ring(me, n)
    # all_to_all_single, even pieces: rank r's piece p is 100 r + p.
    x = torch.tensor([100.0 * me + p for p in range(n) for _ in range(2)])
    y = torch.empty_like(x)
    dist.all_to_all_single(y, x)
    expect("all_to_all_single", y, torch.tensor([100.0 * p + me for p in range(n) for _ in range(2)]))
    # Uneven: rank r sends p + 1 rows to rank p, so it receives r + 1 rows from each.
    x = torch.cat([torch.full((p + 1, 2), 10 * me + p, dtype=torch.int32) for p in range(n)])
    y = torch.empty(((me + 1) * n, 2), dtype=torch.int32)
    dist.all_to_all_single(y, x, [me + 1] * n, [p + 1 for p in range(n)])
    expect("all_to_all_single uneven", y, torch.cat([torch.full((me + 1, 2), 10 * p + me, dtype=torch.int32)
                                                      for p in range(n)]))
    outs = [torch.empty(3) for _ in range(n)]
    dist.all_to_all(outs, [torch.full((3,), 10.0 * me + p) for p in range(n)])
    expect("all_to_all list", torch.cat(outs), torch.cat([torch.full((3,), 10.0 * p + me) for p in range(n)]))
    # gather and scatter to / from the last rank.
    root = n - 1
    g = [torch.empty(2) for _ in range(n)] if me == root else None
    dist.gather(torch.full((2,), float(me)), g, dst=root)
    if me == root:
        expect("gather", torch.cat(g), torch.cat([torch.full((2,), float(r)) for r in range(n)]))
    s = torch.empty(2)
    dist.scatter(s, [torch.full((2,), float(r)) for r in range(n)] if me == root else None, src=root)
    expect("scatter", s, torch.full((2,), float(me)))


def errors(me, n):
    """What ringo cannot do fails with an error naming it, before anything is sent."""
    global checks
    for call, says in ((lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool), op=R.AVG), "dtype torch.bool"),
                       (lambda: dist.all_reduce(torch.ones(2), op=R.BXOR), "is not supported"),
                       (lambda: dist.recv(torch.ones(3)), "any source")):
        checks += 1
        try:
            call()
            failures.append(f"no error where one was due ({says})")
        except Exception as e:  # noqa: BLE001 - the message is what is checked
            if "ringo" not in str(e) or says not in str(e):
                failures.append(f"error without ringo's reason: {e}")
    t = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64) * (me + 1)
    dist.all_reduce(t)
    expect("all_reduce complex64 sum", torch.view_as_real(t), torch.view_as_real(
        torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64) * (n * (n + 1) // 2)))


def bools(me, n):
    """Bools reduce as gloo's do: SUM and MAX any, PRODUCT and MIN all (an early-stop flag's reduction)."""
    mine = torch.tensor([me == 0, True, False, me % 2 == 1])
    any_, all_ = torch.tensor([True, True, False, n > 1]), torch.tensor([n == 1, True, False, False])
    for name, op, want in (("sum", R.SUM, any_), ("max", R.MAX, any_), ("prod", R.PRODUCT, all_), ("min", R.MIN, all_)):
        t = mine.clone()
        dist.all_reduce(t, op=op)
        expect(f"all_reduce {name} bool", t, want)
    t = mine.clone()
    dist.reduce(t, dst=n - 1, op=R.MAX)
    if me == n - 1:
        expect("reduce max bool", t, any_)
    out = torch.empty(1, dtype=torch.bool)
    dist.reduce_scatter_tensor(out, torch.tensor([me == 0] * n), op=R.SUM)
    expect("reduce_scatter_tensor sum bool", out, torch.tensor([True]))


def streams(me, n):
    """CUDA only: the calls follow the caller's current stream and make it wait for them."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.full((1 << 16,), float(me))
        t += 1  # queued on side just before the call: the all-reduce must see it
        dist.all_reduce(t)
        t *= 2  # queued after it: must see the sum
    torch.cuda.current_stream().wait_stream(side)
    expect("all_reduce on a side stream", t, torch.full((1 << 16,), 2.0 * (n * (n - 1) // 2 + n)))
    ts = [torch.full((1 << 18,), float(i + me)) for i in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    futs = [w.get_future() for w in works]
    for i, (w, f) in enumerate(zip(works, futs)):
        w.wait()
        expect(f"async all_reduce #{i} after wait()", ts[i] + 0, torch.full((1 << 18,), float(n * i + n * (n - 1) // 2)))
        expect(f"async all_reduce #{i} future", f.wait()[0], torch.full((1 << 18,), float(n * i + n * (n - 1) // 2)))
    works[-1].synchronize()
    expect("synchronize() then is_completed()", torch.tensor(float(works[-1].is_completed())), torch.tensor(1.0))


def main():
    warnings.filterwarnings("ignore", message=".*all_reduce_coalesced.*")
    cuda = sys.argv[1:] == ["cuda"]
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.set_default_device(torch.device("cuda", torch.cuda.current_device()))
    dist.init_process_group("ringo")
    me, n = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "ringo"
    # Where the extension is built, every blocking dist.all_reduce below goes through it.
    bound = dist.distributed_c10d._get_default_group().__dict__.get("allreduce")
    path = "C" if ringo_pg.fast_path() and isinstance(bound, ringo_pg._fastcall.AllReduce) else "Python"
    for dtype in DTYPES:
        reductions(me, n, dtype)
        movement(me, n, dtype)
    overlapping(me, n)
    point_to_point(me, n)
    errors(me, n)
    bools(me, n)
    if cuda:
        streams(me, n)
    work = dist.all_reduce(torch.ones(4), async_op=True)
    work.wait()
    expect("async all_reduce via Work", work.get_future().wait()[0], torch.full((4,), float(n)))
    # Queued (async) work then a blocking call: the blocking one must wait its turn behind them,
    # not run beside them on the caller's thread.
    ts = [torch.full((1 << 16,), float(i + me)) for i in range(6)]
    works = [dist.all_reduce(x, async_op=True) for x in ts[:5]]
    dist.all_reduce(ts[5])
    for w in works:
        w.wait()
    for i, x in enumerate(ts):
        expect(f"async then blocking all_reduce #{i}", x, torch.full((1 << 16,), float(n * i + n * (n - 1) // 2)))
    dist.barrier()
    # Subgroups: the even ranks and the odd ranks each get their own ringo communicator.
    groups = [dist.new_group(list(range(p, n, 2))) for p in (0, 1)]
    mine = groups[me % 2]
    gn, gr = dist.get_world_size(mine), dist.get_rank(mine)
    if gn > 1:
        for dtype in (torch.float32, torch.int64, torch.bfloat16):
            reductions(gr, gn, dtype, group=mine)
            movement(gr, gn, dtype, group=mine)
    dist.barrier()
    dist.destroy_process_group()
    print(f"ringo collectives rank {me}: {checks} checks, {len(failures)} failed, blocking all_reduce in {path}"
          f"{' on cuda' if cuda else ''}",
          flush=True)
    for f in failures[:20]:
        print(f"  rank {me} FAIL {f}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
