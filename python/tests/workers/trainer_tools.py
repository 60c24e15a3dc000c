# trainer_tools.py — torchrun worker (N = 3): what trainers call on a group besides collectives.
# Distributed checkpoint: dcp.save, dcp.async_save (which asks the group for a CPU backend) and
# dcp.load into a fresh model. monitored_barrier (torch 2.12+): passes when all arrive, names the
# missing rank to rank 0, and tells a rank that arrived that rank 0 did not release it.
# Prints "tools rank R: K checks, F failed"; exits 1 on any failure. Argument: a scratch folder.
# Run: python -m torch.distributed.run --standalone --nproc-per-node 3 trainer_tools.py DIR (test_torch.py).
import lines  # noqa: F401 - first: one write per printed line
from datetime import timedelta
import re
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

import ringo.torch  # noqa: F401 - registers "ringo"
from checks import expect, report


def checkpoint(me, folder):
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16)
    state = {"model": model.state_dict()}
    dcp.save(state, checkpoint_id=f"{folder}/sync")
    dcp.async_save(state, checkpoint_id=f"{folder}/async").result()
    for kind in ("sync", "async"):
        fresh = {"model": torch.nn.Linear(16, 16).state_dict()}
        dcp.load(fresh, checkpoint_id=f"{folder}/{kind}")
        expect(f"dcp {kind} round trip", all(torch.equal(fresh["model"][k], v) for k, v in state["model"].items()))


def monitored(me):
    try:
        dist.monitored_barrier(timeout=timedelta(seconds=30))
    except ValueError as e:  # torch before 2.12 lets gloo groups alone call it
        print(f"tools rank {me}: monitored_barrier refused by torch {torch.__version__}: {e}", flush=True)
        return
    expect("monitored_barrier, everyone there", True)
    if me != 2:  # rank 2 stays away from the second one
        try:
            dist.monitored_barrier(timeout=timedelta(seconds=2))
            expect("monitored_barrier without rank 2 passed", False)
        except RuntimeError as e:
            want = (r"rank 2 did not reach monitored_barrier #2 within 2000 ms" if me == 0 else
                    r"rank 1 reached monitored_barrier #2, but rank 0 did not release it")
            expect(f"monitored_barrier error on rank {me}: {e}", re.search(want, str(e)) is not None)
    print(f"tools rank {me}: monitored_barrier checked", flush=True)


def main():
    dist.init_process_group("ringo")
    me = dist.get_rank()
    checkpoint(me, sys.argv[1])
    monitored(me)
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(report("tools", me))


if __name__ == "__main__":
    main()
