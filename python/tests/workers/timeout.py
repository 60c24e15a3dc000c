# timeout.py — worker of test_torch.py: init_process_group("ringo", timeout=argv[1] seconds), rank 1 comes to
# a barrier argv[2] seconds late; rank 0 prints how its barrier ended and when ("BARRIER ok|failed after S").
import lines  # noqa: F401 - first: one write per printed line
import sys
import time
from datetime import timedelta

import torch.distributed as dist

import ringo.torch  # noqa: F401 - registers "ringo"

dist.init_process_group("ringo", timeout=timedelta(seconds=float(sys.argv[1])))
me = dist.get_rank()
if me == 1:
    time.sleep(float(sys.argv[2]))
t0 = time.monotonic()
try:
    dist.barrier()
    print(f"BARRIER rank {me} ok after {time.monotonic() - t0:.2f}", flush=True)
except Exception as e:  # noqa: BLE001 - what the user sees
    print(f"BARRIER rank {me} failed after {time.monotonic() - t0:.2f}: {e}", flush=True)
