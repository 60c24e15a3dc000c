# abort.py — torchrun worker: an all-reduce, then torch's _abort_process_group, which brackets the abort
# with the group's batch calls; it must return (not wait for a worker already stopped). Prints "aborted ok".
# Run: python -m torch.distributed.run --standalone --nproc-per-node 2 abort.py (test_torch.py).
import lines  # noqa: F401 - first: one write per printed line
import torch
import torch.distributed as dist

import ringo.torch  # noqa: F401 - registers "ringo"

dist.init_process_group("ringo")
me = dist.get_rank()
t = torch.ones(3)
dist.all_reduce(t)
dist.distributed_c10d._abort_process_group()
print(f"abort rank {me}: aborted ok, {t.tolist()}", flush=True)
