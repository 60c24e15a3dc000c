# bench.py — `python -m ringo.bench`: torch.distributed all-reduce with backend "ringo" against
# "gloo" on the same ranks, interleaved A B C A B C with ringo's own C call on the same communicator
# (float32 sum, 4 KiB to 256 MiB, N = 2 and 4), in nccl-tests' columns with the busbw ratio and the
# torch-side overhead over the C time; then a DDP step-time comparison. Smoke-tested by
# python/tests/test_bench.py.
import argparse
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time


_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _bytes(s):
    """A count as nccl-tests writes sizes: a number with an optional K/M/G (powers of 1024) and an
    optional B or iB (4K, 64MiB, 1e3, 2.5K). ValueError unless it is a whole, finite number."""
    t = s.strip().upper()
    t = t[:-2] if t.endswith("IB") else t[:-1] if t.endswith("B") else t
    mult = _UNITS.get(t[-1:], 1)
    v = float(t[:-1] if t[-1:] in _UNITS else t) * mult  # ValueError on anything else
    if not math.isfinite(v) or v != int(v) or v < 0:
        raise ValueError(f"{s!r} is not a whole number of bytes")
    return int(v)


def _checked(convert, what, lo, hi):
    """An argparse type: convert(s) within [lo, hi], else a clear error (exit 2), never a cut value."""
    def parse(s):
        try:
            v = convert(s)
        except ValueError:
            v = None
        if v is None or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{s!r}: {what} from {lo} to {hi}")
        return v
    return parse


def _rank_counts(s):
    """An argparse type: comma-separated rank counts, each a whole number from 1 to 256."""
    try:
        counts = [int(x) for x in s.split(",")]  # ValueError for "2.5", "" or "a"
    except ValueError:
        counts = []
    if not counts or not all(1 <= n <= 256 for n in counts):
        raise argparse.ArgumentTypeError(f"{s!r}: rank counts, comma-separated, each a whole number from 1 to 256")
    return counts


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m ringo.bench", description="torch.distributed all-reduce: backend ringo against gloo, then DDP step time")
    size = _checked(_bytes, "a size in bytes, a whole number of float32 elements", 4, 1 << 40)
    p.add_argument("-N", "--nranks", default=[2, 4], type=_rank_counts,
                   help="rank counts to run, comma-separated (default 2,4)")
    p.add_argument("-b", "--minbytes", default="4K", type=size, help="smallest all-reduce (default 4K)")
    p.add_argument("-e", "--maxbytes", default="256M", type=size, help="largest all-reduce (default 256M)")
    p.add_argument("-r", "--reps", type=_checked(int, "A B rounds", 1, 1000), default=5,
                   help="A B rounds per size (default 5; the median is shown)")
    p.add_argument("--ddp-params", default="20M", type=_checked(_bytes, "parameters", 0, 1 << 34),
                   help="parameters of the DDP model (default 20M; 0: no DDP run)")
    p.add_argument("--ddp-steps", type=_checked(int, "timed DDP steps", 1, 10000), default=10,
                   help="timed DDP steps per backend (default 10)")
    p.add_argument("-J", "--json", help="also write every figure as JSON to this file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.minbytes % 4 or args.maxbytes % 4:
        p.error(f"-b {args.minbytes} and -e {args.maxbytes} must be whole float32 elements (multiples of 4 bytes)")
    if args.minbytes > args.maxbytes:
        p.error(f"-b {args.minbytes} bytes is larger than -e {args.maxbytes} bytes")
    return args


# --- one rank ----------------------------------------------------------------------------------------
def _iters(seconds, dist):
    """Timed iterations of one round from one call's time in the warm-up: about 50 ms of calls, at
    least 3 and at most 5000, the same on every rank (the slowest rank's estimate)."""
    import torch
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return max(3, min(5000, int(0.05 / max(t.item(), 1e-7))))


def _timed(loop, iters):
    """Wall time and this process's CPU time (all its threads) per call of `loop`'s calls. Where ranks
    outnumber the cores the wall time carries every rank sharing a core; the CPU time is one rank's."""
    w0, c0 = time.perf_counter(), time.process_time()
    loop(iters)
    return (time.perf_counter() - w0) / iters, (time.process_time() - c0) / iters


def _time_allreduce(dist, torch, t, group, iters):
    dist.barrier(group=group)

    def loop(k):
        for _ in range(k):
            dist.all_reduce(t, group=group)
    return _timed(loop, iters)


def _time_c(dist, comm, t, gloo, iters):
    """The same all-reduce as ringoAllReduce straight through ctypes on the group's communicator:
    the C time the torch-side overhead is measured against, in this process and round."""
    from . import _lib
    p, n, dt, op = t.data_ptr(), t.numel(), _lib.DTYPES["float32"], _lib.OPS["sum"]
    call = comm.all_reduce_ptr
    dist.barrier(group=gloo)

    def loop(k):
        for _ in range(k):
            call(p, p, n, dt, op)
    return _timed(loop, iters)


def _slowest(values, dist):
    """Each value's maximum over the ranks (the rank whose torch side cost the most)."""
    import torch
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def _sweep(dist, torch, args, gloo, comm):
    n = dist.get_world_size()
    rows, size = [], args.minbytes
    while size <= args.maxbytes:
        t = torch.zeros(size // 4)
        # Warm-up (links, buffers, first touch of the pages), which also sizes each one's rounds.
        # ringo's round and its C round side by side, so that their difference (the torch side's
        # cost) is taken within one state of the machine; then gloo's.
        runs = {"ringo": lambda k: _time_allreduce(dist, torch, t, None, k),
                "c": lambda k: _time_c(dist, comm, t, gloo, k),
                "gloo": lambda k: _time_allreduce(dist, torch, t, gloo, k)}
        iters = {k: _iters(min(run(3)[0] for _ in range(2)), dist) for k, run in runs.items()}
        times, cpu = {k: [] for k in runs}, {k: [] for k in runs}
        for _ in range(args.reps):  # A B C A B C: load changes hit all alike
            for k, run in runs.items():
                wall, used = run(iters[k])
                times[k].append(wall)
                cpu[k].append(used)
        extra = [r - c for r, c in zip(times["ringo"], times["c"])]
        extra_cpu = _slowest([r - c for r, c in zip(cpu["ringo"], cpu["c"])], dist)
        rows.append({"size": size, "count": size // 4, "iters": iters, "torch_extra_us": statistics.median(extra) * 1e6,
                     "torch_extra_cpu_us": statistics.median(extra_cpu) * 1e6,
                     **{k + "_us": statistics.median(v) * 1e6 for k, v in times.items()}})
        size *= 2
    return rows


def _mlp(torch, params):
    """A stack of square Linear layers of width 2048 with about `params` parameters."""
    width = 2048
    layers = max(1, round(params / (width * width + width)))
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods), width


def _ddp(dist, torch, args, gloo):
    from torch.nn.parallel import DistributedDataParallel as DDP
    params = args.ddp_params
    model_r, width = _mlp(torch, params)
    model_g, _ = _mlp(torch, params)
    nparams = sum(p.numel() for p in model_r.parameters())
    runs = {"ringo": DDP(model_r), "gloo": DDP(model_g, process_group=gloo)}
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-4) for k, m in runs.items()}
    x = torch.randn(8, width)
    steps = {"ringo": [], "gloo": []}

    def step(name):
        dist.barrier(group=gloo)
        t0 = time.perf_counter()
        opts[name].zero_grad()
        runs[name](x).square().mean().backward()
        opts[name].step()
        return time.perf_counter() - t0
    for i in range(2 + args.ddp_steps):  # two warm-up steps each, then A B A B
        for name in ("ringo", "gloo"):
            dt = step(name)
            if i >= 2:
                steps[name].append(dt)
    return {"params": nparams, "steps": args.ddp_steps, **{k + "_ms": statistics.median(v) * 1e3 for k, v in steps.items()}}


def _worker(args):
    import torch
    import torch.distributed as dist
    import ringo.torch  # noqa: F401 - registers "ringo"
    dist.init_process_group("ringo")
    gloo = dist.new_group(backend="gloo")
    comm = dist.distributed_c10d._get_default_group().ringo_comm  # the group is a ProcessGroupRingo
    out = {"nranks": dist.get_world_size(), "rows": _sweep(dist, torch, args, gloo, comm)}
    if args.ddp_params > 0:
        out["ddp"] = _ddp(dist, torch, args, gloo)
    if dist.get_rank() == 0:
        pathlib.Path(args.worker).write_text(json.dumps(out))
    dist.destroy_process_group()


# --- the launcher ------------------------------------------------------------------------------------
def _launch(n, args, argv):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result = f.name
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        env.setdefault("OMP_NUM_THREADS", "1")
        procs.append(subprocess.Popen([sys.executable, "-m", "ringo.bench", *argv, "--worker", result], env=env))
    rcs = [p.wait() for p in procs]
    if any(rcs):
        raise SystemExit(f"ringo.bench: N = {n}: ranks exited with {rcs}")
    data = json.loads(pathlib.Path(result).read_text())
    os.unlink(result)
    return data


def _print(data):
    n = data["nranks"]
    bus = 2 * (n - 1) / n
    print(f"# N = {n}: torch.distributed.all_reduce, float32 sum, in place; ringo then gloo, A B A B, medians")
    print(f"# {'size':>10} {'count':>10} {'type':>7} {'redop':>5} | {'ringo us':>10} {'algbw':>7} {'busbw':>7} | "
          f"{'gloo us':>10} {'algbw':>7} {'busbw':>7} | {'ratio':>6} | {'C us':>9} {'torch+':>8} {'cpu+':>7}")
    for r in data["rows"]:
        alg_r, alg_g = r["size"] / r["ringo_us"] / 1e3, r["size"] / r["gloo_us"] / 1e3
        c = r["c_us"]
        cs = f"{c:9.2f} {r['torch_extra_us']:8.2f} {r['torch_extra_cpu_us']:7.2f}"
        print(f"  {r['size']:>10} {r['count']:>10} {'float':>7} {'sum':>5} | {r['ringo_us']:10.2f} {alg_r:7.3f} "
              f"{alg_r * bus:7.3f} | {r['gloo_us']:10.2f} {alg_g:7.3f} {alg_g * bus:7.3f} | "
              f"{r['gloo_us'] / r['ringo_us']:6.2f} | {cs}")
    d = data.get("ddp")
    if d:
        print(f"# DDP step, {d['params'] / 1e6:.1f} M parameters, batch 8, median of {d['steps']}: ringo "
              f"{d['ringo_ms']:.1f} ms, gloo {d['gloo_ms']:.1f} ms, gloo/ringo {d['gloo_ms'] / d['ringo_ms']:.2f}")
    print("#  ratio = ringo busbw / gloo busbw; C us = ringoAllReduce through ctypes on the same communicator, in the "
          "same rounds; torch+ = the median over rounds of ringo's time minus the C time of the round after it; cpu+ = the "
          "same in CPU time of one rank's process, the costliest rank (where ranks outnumber the cores, torch+ carries "
          "every rank that shares a core and cpu+ one rank's own cost)")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = _parse(argv)
    if args.worker:
        return _worker(args)
    print(f"# ringo.bench on {os.uname().nodename}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    results = []
    for n in args.nranks:
        data = _launch(n, args, argv)
        _print(data)
        results.append(data)
        sys.stdout.flush()
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
