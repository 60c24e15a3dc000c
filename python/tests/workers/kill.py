# kill.py — worker for test_torch_kill.py: DDP training over backend "ringo" in which the last
# rank exits abruptly at step KILL_STEP; the others must end with ringo's error (printed as
# "RINGO-ERROR: ...", exit code 7), not hang. Both sides print when (KILLED-AT, RINGO-ERROR-AT). Env: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
import lines  # noqa: F401 - first: one write per printed line
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import ringo.torch  # noqa: F401 - registers "ringo"

KILL_STEP = 5


def main():
    dist.init_process_group("ringo")
    me, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 64)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    try:
        for step in range(1000):
            if me == n - 1 and step == KILL_STEP:
                print(f"KILLED-AT: {time.time()}", flush=True)
                os._exit(3)  # no clean-up at all, as a crash or an OOM kill would leave it
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
            time.sleep(0.01)
    except Exception as e:  # noqa: BLE001 - what the user would see is the point
        print(f"RINGO-ERROR-AT: {time.time()}", flush=True)
        print(f"RINGO-ERROR: {e}", flush=True)
        os._exit(7)  # skip interpreter shutdown: the dead peer's group cannot be torn down politely
    print(f"rank {me}: trained 1000 steps without noticing the dead rank", flush=True)
    sys.exit(1)


if __name__ == "__main__":
    main()
