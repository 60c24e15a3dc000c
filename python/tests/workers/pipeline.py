# pipeline.py — torchrun worker: torch.distributed.pipelining's 1F1B schedule over two stages, once on
# backend "ringo" and once on a gloo group, same model and data; the last stage prints both runs'
# losses, which must be bit-identical. Microbatch activations of 1 MiB exceed ringo's link FIFOs, so the
# schedule's batched sends and receives complete only if they progress together.
# Run: python -m torch.distributed.run --standalone --nproc-per-node 2 pipeline.py (test_torch.py).
import lines  # noqa: F401 - first: one write per printed line
import sys

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

import ringo.torch  # noqa: F401 - registers "ringo"

WIDTH, ROWS, MICRO, STEPS = 1024, 1024, 4, 3  # a microbatch: 256 x 1024 float32 = 1 MiB


def train(group, me, n):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(WIDTH, WIDTH) for _ in range(2 * n)]
    mine = torch.nn.Sequential(*layers[2 * me:2 * me + 2])
    stage = PipelineStage(mine, me, n, torch.device("cpu"), group=group)
    schedule = Schedule1F1B(stage, n_microbatches=MICRO, loss_fn=torch.nn.MSELoss(reduction="sum"))
    opt = torch.optim.SGD(mine.parameters(), lr=1e-4)
    x, y = torch.randn(ROWS, WIDTH), torch.randn(ROWS, WIDTH)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        if me == 0:
            schedule.step(x)
        elif me == n - 1:
            out = []
            schedule.step(target=y, losses=out)
            losses.append(sum(loss.item() for loss in out))
        else:
            schedule.step()
        opt.step()
    return losses


def main():
    dist.init_process_group("ringo")
    me, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    ours, theirs = train(dist.group.WORLD, me, n), train(gloo, me, n)
    failed = int(ours != theirs)
    if me == n - 1:
        print(f"pipeline 1F1B losses ringo {ours} gloo {theirs}", flush=True)
    print(f"pipeline rank {me}: {STEPS} steps, {failed} failed", flush=True)
    dist.destroy_process_group()
    sys.exit(failed)


if __name__ == "__main__":
    main()
