# monitored.py — dist.monitored_barrier for backend "ringo": a barrier through the group's store that
# names the ranks that did not reach it in time, as gloo's does (a debugging aid for a hung job).
# Tested by python/tests/workers/trainer_tools.py through test_torch.py.
from datetime import timedelta
import time

import torch.distributed as dist

from .. import _lib
from ..comm import Error

_StoreTimeout = getattr(dist, "DistStoreError", RuntimeError)


def monitored_barrier(store, rank, size, seq, timeout, wait_all_ranks):
    """Rank 0 waits for every other rank's arrival under the seq-th barrier's keys, then releases
    them. A rank still missing after timeout (a timedelta) fails rank 0 with its number (every
    missing one with wait_all_ranks), and the others when no release comes."""
    key = f"ringo/monitored_barrier/{seq}"
    ms = int(timeout.total_seconds() * 1000)
    if rank != 0:
        store.set(f"{key}/arrived/{rank}", b"1")
        try:
            store.wait([f"{key}/released"], timeout)
        except _StoreTimeout:
            raise Error(_lib.TIMEOUT, f"ringo backend: rank {rank} reached monitored_barrier #{seq}, but rank 0 did "
                        f"not release it within {ms} ms; rank 0's error names the ranks that did not arrive") from None
        return
    deadline = time.monotonic() + timeout.total_seconds()
    missing = []
    for r in range(1, size):
        left = timedelta(seconds=max(deadline - time.monotonic(), 0.001))
        try:
            store.wait([f"{key}/arrived/{r}"], left)
        except _StoreTimeout:
            missing.append(r)
            if not wait_all_ranks:
                break
    if missing:
        ranks = ", ".join(map(str, missing))
        raise Error(_lib.TIMEOUT, f"ringo backend: rank{'s' if len(missing) > 1 else ''} {ranks} did not reach "
                    f"monitored_barrier #{seq} within {ms} ms")
    store.set(f"{key}/released", b"1")
    for r in range(1, size):
        store.delete_key(f"{key}/arrived/{r}")
