# parallelism.py — torchrun worker: the torch APIs that trainers build on collectives, each run on backend
# "ringo" and on a gloo group with the same inputs, the results compared bit for bit: functional
# collectives (what torch.compile and DTensor emit), DTensor redistribution, tensor parallelism of an MLP
# (forward and backward), FSDP1 for a few steps, object collectives, and new_subgroups.
# Prints "parallelism rank R: K checks, F failed"; exits 1 on any failure.
# Run: python -m torch.distributed.run --standalone --nproc-per-node 2 parallelism.py (test_torch.py).
import lines  # noqa: F401 - first: one write per printed line
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import ringo.torch  # noqa: F401 - registers "ringo"
from checks import expect, report


def same(a, b):
    """Equal tensors (or nested lists and tuples of them, or plain objects): bit for bit at N = 2, where
    a sum of two is the same in any order; above, floating-point sums to 1e-5, as gloo adds in another."""
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        if not (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape):
            return False
        if dist.get_world_size() > 2 and a.is_floating_point():
            return torch.allclose(a, b, rtol=1e-5, atol=1e-5)
        return torch.equal(a, b)
    return a == b


def both(fn):
    """fn(group) on the ringo world group and on a gloo group of the same ranks."""
    return fn(dist.group.WORLD), fn(GLOO)


def compare(what, fn):
    ours, theirs = both(fn)
    bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if not same(a, b)]
    if bad:
        ours, theirs = ours[bad[0]], theirs[bad[0]]
    expect(f"{what}: result {bad[0] if bad else 'count'} differs from gloo's: ringo {ours} gloo {theirs}",
           not bad and len(ours) == len(theirs))


def data(me, *shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(1000 + me)
    return (torch.randn(*shape, generator=g) * 8).to(dtype)


def functional(me, n):
    x = data(me, 12, 6)

    def run(group):
        out = [funcol.all_reduce(x, "sum", group), funcol.all_reduce(x, "max", group),
               funcol.all_gather_tensor(x, 0, group), funcol.all_gather_tensor(x, 1, group),
               funcol.reduce_scatter_tensor(x, "sum", 0, group), funcol.reduce_scatter_tensor(x, "avg", 1, group),
               funcol.all_to_all_single(x, None, None, group), funcol.broadcast(x, n - 1, group)]
        # Uneven: rank r sends r + 2 rows to every rank, so each receives r + 2 rows from rank r.
        out.append(funcol.all_to_all_single(data(me, (me + 2) * n, 3), [r + 2 for r in range(n)], [me + 2] * n,
                                            group))
        out += funcol.all_reduce_coalesced([x, x[:3]], "sum", group)
        out += funcol.all_gather_into_tensor_coalesced([x, x[1:]], group)
        return [funcol.wait_tensor(t).clone() for t in out]

    compare("functional collectives", run)


def dtensors(me, n):
    full = data(0, 8 * n, 6)  # the same on every rank

    def run(group):
        mesh = DeviceMesh.from_group(group, "cpu")
        shard0 = distribute_tensor(full, mesh, [Shard(0)])
        out = [shard0.to_local().clone(), shard0.full_tensor(),
               shard0.redistribute(mesh, [Shard(1)]).to_local(),
               shard0.redistribute(mesh, [Replicate()]).to_local()]
        partial = distribute_tensor(full, mesh, [Replicate()]).redistribute(mesh, [Replicate()])
        mine = torch.distributed.tensor.DTensor.from_local(data(me, 8, 6), mesh, [Partial()])
        out += [mine.redistribute(mesh, [Replicate()]).to_local(), mine.redistribute(mesh, [Shard(0)]).to_local(),
                partial.to_local()]
        return out

    compare("DTensor redistribute", run)


def tensor_parallel(me, n):
    def run(group):
        mesh = DeviceMesh.from_group(group, "cpu")
        torch.manual_seed(0)
        mlp = torch.nn.Sequential(torch.nn.Linear(16, 32 * n), torch.nn.ReLU(), torch.nn.Linear(32 * n, 16))
        mlp = parallelize_module(mlp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        x = data(0, 4, 16)
        y = mlp(x)
        y.square().sum().backward()
        return [y.detach()] + [p.grad.to_local().clone() for p in mlp.parameters()]

    compare("tensor parallel MLP forward and gradients", run)


def fsdp1(me, n):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    def run(group):
        torch.manual_seed(0)
        model = FSDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8)),
                     process_group=group, use_orig_params=True, device_id=torch.device("cpu"))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        losses = []
        for step in range(4):
            opt.zero_grad()
            loss = model(data(me * 10 + step, 16, 32)).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        with FSDP.summon_full_params(model):
            return losses + [p.detach().clone() for p in model.parameters()]

    compare("FSDP1 losses and parameters", run)


def objects(me, n):
    def run(group):
        out = []
        items = [{"rank": me, "words": ["ring"] * (me + 1)}, None, (me, 2.5)]
        dist.broadcast_object_list(items, src=n - 1, group=group)
        out.append(items)
        gathered = [None] * n
        dist.all_gather_object(gathered, {"me": me, "t": torch.arange(me + 2)}, group=group)
        out.append([(g["me"], g["t"]) for g in gathered])
        got = [None]
        dist.scatter_object_list(got, [f"to {r}" for r in range(n)] if me == 0 else None, src=0, group=group)
        out.append(got)
        at_root = [None] * n if me == 0 else None
        dist.gather_object(("from", me), at_root, dst=0, group=group)
        out.append(at_root)
        return out

    compare("object collectives", run)


def subgroups(me, n):
    sub, all_subs = dist.new_subgroups(group_size=1)
    t = data(me, 5)
    dist.all_reduce(t, group=sub)  # a group of one: the identity
    expect("new_subgroups of one rank", same(t, data(me, 5)) and len(all_subs) == n)
    evens = dist.new_group([r for r in range(n) if r % 2 == 0])
    if me % 2 == 0:
        t = data(me, 5)
        dist.all_reduce(t, group=evens)
        expect("new_group of the even ranks", same(t, sum(data(r, 5) for r in range(0, n, 2))))


def main():
    global GLOO
    dist.init_process_group("ringo")
    me, n = dist.get_rank(), dist.get_world_size()
    GLOO = dist.new_group(backend="gloo")
    for part in (functional, dtensors, tensor_parallel, fsdp1, objects, subgroups):
        try:
            part(me, n)
        except Exception as e:  # noqa: BLE001 - one part's failure is reported, the others still run
            expect(f"{part.__name__} raised {type(e).__name__}: {e}", False)
    dist.destroy_process_group()
    sys.exit(report("parallelism", me))


if __name__ == "__main__":
    main()
