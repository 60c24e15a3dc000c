# ddp_fsdp.py — torchrun worker: one model trained 50 steps under DistributedDataParallel with
# backend "ringo" and again with "gloo" (a gloo group of the same ranks, same process); losses
# must agree to 1e-4 relative and the ringo-trained parameters be bit-identical across ranks.
# Then DDP's comm hooks (fp16 compression, PowerSGD, whose callbacks issue and wait for collectives)
# and Join over uneven inputs, each against gloo; then (2 ranks) fully_shard for a few steps must
# match the DDP run. Exits 1 on any mismatch.
# device "cuda": model and data on the rank's GPU (LOCAL_RANK modulo the GPUs seen).
# Run: python -m torch.distributed.run --standalone --nproc-per-node 2 ddp_fsdp.py [steps] [fsdp_steps] [device]
import lines  # noqa: F401 - first: one write per printed line
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import ringo.torch  # noqa: F401 - registers "ringo"

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 50
FSDP_STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
DEVICE = sys.argv[3] if len(sys.argv) > 3 else "cpu"


def make_model(dev):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 4)).to(dev)


def batches(rank, steps, dev):
    g = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(16, 32, generator=g).to(dev), torch.randn(16, 4, generator=g).to(dev)) for _ in range(steps)]


def train(model, data):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def rel(a, b):
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))


def hooks_and_join(me, gloo, data, dev):
    """DDP with each comm hook, and under Join with rank r stopping after 4 + r steps, on ringo and on
    gloo: the losses must agree."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    from torch.distributed.algorithms.join import Join

    def powersgd(group):
        return powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=2, start_powerSGD_iter=2)
    setups = {"fp16 hook": lambda group: (None, default_hooks.fp16_compress_hook),
              "PowerSGD hook": lambda group: (powersgd(group), powerSGD_hook.powerSGD_hook)}
    failures = []
    for name, setup in setups.items():
        losses = []
        for group in (None, gloo):
            # One bucket: a hook's callbacks issue collectives from another thread than autograd's, and
            # with several buckets in flight the two threads' calls could interleave differently on
            # each rank (with any backend but nccl, whose callbacks run on the caller's thread).
            model = DDP(make_model(dev), process_group=group)
            model.register_comm_hook(*setup(group))
            losses.append(train(model, data[:10]))
        if rel(*losses) > 1e-4:
            failures.append(f"DDP with the {name}: ringo vs gloo differ by {rel(*losses):.2e} relative")
    losses = []
    for group in (None, gloo):
        model = DDP(make_model(dev), process_group=group, bucket_cap_mb=0.01)
        with Join([model]):
            losses.append(train(model, data[:4 + me]))
    if rel(*losses) > 1e-4:
        failures.append(f"DDP under Join: ringo vs gloo differ by {rel(*losses):.2e} relative")
    print(f"hooks rank {me}: fp16, PowerSGD and Join checked, {len(failures)} failed", flush=True)
    return failures


def main():
    dev = torch.device("cpu")
    if DEVICE == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        dev = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("ringo")
    me, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")  # gloo all-reduces and broadcasts CUDA tensors too
    data = batches(me, STEPS, dev)
    failures = []
    # A tiny bucket cap gives several buckets, so all-reduces overlap the backward pass.
    ringo_model = DDP(make_model(dev), bucket_cap_mb=0.01)
    ringo_losses = train(ringo_model, data)
    gloo_losses = train(DDP(make_model(dev), process_group=gloo, bucket_cap_mb=0.01), data)
    worst = rel(ringo_losses, gloo_losses)
    if worst > 1e-4:
        failures.append(f"DDP losses ringo vs gloo differ by {worst:.2e} relative")
    flat = torch.cat([p.detach().reshape(-1) for p in ringo_model.parameters()]).cpu()
    every = [torch.empty_like(flat) for _ in range(n)]
    dist.all_gather(every, flat, group=gloo)  # compared through gloo: not through the backend under test
    if not all(torch.equal(every[0], e) for e in every):
        failures.append("DDP parameters trained over ringo differ between ranks")
    print(f"ddp rank {me}: {STEPS} steps on {dev.type}, loss {ringo_losses[0]:.6f} -> {ringo_losses[-1]:.6f}, "
          f"ringo vs gloo max rel {worst:.2e}", flush=True)
    failures += hooks_and_join(me, gloo, data, dev)
    if FSDP_STEPS and n == 2:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh(dev.type, (n,))
        model = make_model(dev)
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        before = dist.group.WORLD.ringo_comm.stats()["collectives"]
        fsdp_losses = train(model, data[:FSDP_STEPS])
        ran = dist.group.WORLD.ringo_comm.stats()["collectives"] - before
        if ran < FSDP_STEPS * 2:  # its all-gathers and reduce-scatters went through ringo
            failures.append(f"FSDP ran only {ran} ringo collectives in {FSDP_STEPS} steps")
        worst = rel(fsdp_losses, ringo_losses[:FSDP_STEPS])
        if worst > 1e-4:
            failures.append(f"FSDP losses differ from DDP's by {worst:.2e} relative: {fsdp_losses} vs "
                            f"{ringo_losses[:FSDP_STEPS]}")
        print(f"fsdp rank {me}: {FSDP_STEPS} steps, {ran} ringo collectives, vs DDP max rel {worst:.2e}", flush=True)
    dist.destroy_process_group()
    for f in failures:
        print(f"  rank {me} FAIL {f}", flush=True)
    print(f"ddp_fsdp rank {me}: {len(failures)} failed", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
