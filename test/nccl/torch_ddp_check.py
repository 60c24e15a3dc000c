# torch_ddp_check.py — a small PyTorch DDP model trained for 20 steps under torchrun, checked against one
# process training the same model on the union batch: every step's loss must match to 1e-5. With backend "nccl"
# and ringo's libnccl.so.2 in torch's NCCL folder, all ranks may share GPU 0 (NVIDIA's NCCL refuses that).
# Run: torchrun --nproc-per-node 2 test/nccl/torch_ddp_check.py --backend nccl   (gloo on CPU checks the script).
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, PER_RANK, DIM, TOL = 20, 8, 16, 1e-5


def make_model(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(DIM, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).to(device)


def union_batch(step, world, device):
    """The step's whole batch; rank r trains on rows [r*PER_RANK, (r+1)*PER_RANK)."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(world * PER_RANK, DIM, generator=g)
    y = x.sum(dim=1, keepdim=True).sin()
    return x.to(device), y.to(device)


def train_ddp(rank, world, device, backend):
    model = make_model(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    losses = []
    for step in range(STEPS):
        x, y = union_batch(step, world, device)
        rows = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
        loss = torch.nn.functional.mse_loss(ddp(x[rows]), y[rows])
        opt.zero_grad()
        loss.backward()  # DDP averages the gradients over the ranks: the union batch's gradient
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)  # the union batch's loss, through the backend as well
        losses.append(mean.item() / world)
    return losses


def train_single(world, device):
    model = make_model(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(STEPS):
        x, y = union_batch(step, world, device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def loaded_nccl():
    with open("/proc/self/maps") as maps:
        paths = {os.path.realpath(line.split()[-1]) for line in maps if "libnccl" in line}
    return ", ".join(sorted(paths)) or "none"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="nccl")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", 0) if args.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)  # every rank on GPU 0
    dist.init_process_group(args.backend, rank=rank, world_size=world)
    ddp_losses = train_ddp(rank, world, device, args.backend)
    dist.barrier()
    dist.destroy_process_group()
    if rank != 0:
        return 0
    single = train_single(world, device)
    worst = max(abs(a - b) for a, b in zip(ddp_losses, single))
    print(f"torch {torch.__version__} backend {args.backend} world {world} device {device}")
    if device.type == "cuda":
        print(f"torch.cuda.nccl.version() {torch.cuda.nccl.version()} libnccl loaded: {loaded_nccl()}")
    for step in (0, STEPS // 2, STEPS - 1):
        print(f"step {step:2d}: ddp loss {ddp_losses[step]:.8f} single-process loss {single[step]:.8f}")
    ok = worst <= TOL
    print(f"ddp-check: {'PASS' if ok else 'FAIL'}: largest loss difference {worst:.3e} over {STEPS} steps (tolerance {TOL})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
