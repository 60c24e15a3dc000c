# ringo.torch — importing it registers the torch.distributed backend "ringo" (CPU and CUDA tensors), so
# init_process_group("ringo") works under torchrun with env:// and nothing else changed.
# Tested by python/tests/test_torch_*.py (torchrun, N = 2 and 4).
import torch.distributed as dist

from .pg import ProcessGroupRingo, fast_path

__all__ = ["ProcessGroupRingo", "fast_path"]


def _create(store, rank, size, timeout):
    # Every member of the group calls this with the group's prefixed store; ringoCommInitRank
    # blocks until all have joined (bounded by RINGO_TIMEOUT).
    return ProcessGroupRingo(store, rank, size, timeout)


if "ringo" not in dist.Backend.backend_list:
    dist.Backend.register_backend("ringo", _create, devices=["cpu", "cuda"])
    # torch 2.12+ attaches its generic flight recorder to a new group unless the group reports no
    # devices (how it recognises a Python group, which it cannot record: the recorder's C++ side
    # reads a group name only a C++ backend holds) or its backend is listed here. A ringo group
    # reports its devices (ProcessGroupRingo._device_types), so it is listed.
    _skip = getattr(dist.distributed_c10d, "_FR_SELF_RECORDING_BACKENDS", None)
    if isinstance(_skip, set):
        _skip.add("ringo")
