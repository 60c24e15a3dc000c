# test_torch_cuda.py — backend "ringo" on CUDA tensors. On a GPU (all ranks share the GPUs there are):
# every collective and dtype plus stream order under torchrun, and DDP against gloo with FSDP after it.
# Without one: the checks that keep device pointers off the host path. Run: pytest test_torch_cuda.py
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from launch import free_port, torchrun  # noqa: E402
from ringo import Error, _lib  # noqa: E402
from ringo.torch.cuda_calls import CudaCalls  # noqa: E402
from ringo.torch.tensors import call_device  # noqa: E402
from ringo.torch.worker import Worker  # noqa: E402

on_gpu = pytest.mark.skipif(not (torch.cuda.is_available() and _lib.HAS_CUDA),
                            reason="needs a GPU torch can see and a libringo built with CUDA (make gpu-check)")


def _report(proc):
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"


def test_the_backend_is_registered_for_cpu_and_cuda():
    assert dist.Backend.backend_capability["ringo"] == ["cpu", "cuda"]


def test_one_call_keeps_to_one_device():
    cpu, meta = torch.ones(2), torch.ones(2, device="meta")
    assert call_device([cpu, torch.zeros(3)]) == torch.device("cpu")
    assert call_device([]) is None
    with pytest.raises(Error, match="share a device"):
        call_device([cpu, meta])


def test_other_devices_are_refused_by_name(group):
    with pytest.raises(Error, match="is on meta; this backend serves CPU and CUDA tensors"):
        dist.all_reduce(torch.ones(2, device="meta"))


def test_init_with_a_device_id_then_new_group():
    # torch asks the group for its backend of that device and whether it can split; ringo's group is its
    # own backend and does not split, so the new group gets a communicator of its own.
    device = "torch.device('cuda', 0)" if torch.cuda.is_available() else "torch.device('cpu', 0)"
    code = ("import torch, torch.distributed as dist, ringo.torch\n"
            f"store = dist.TCPStore('127.0.0.1', {free_port()}, 1, True)\n"
            f"dist.init_process_group('ringo', store=store, rank=0, world_size=1, device_id={device})\n"
            "t = torch.ones(3)\n"
            "dist.all_reduce(t, group=dist.new_group([0]))\n"
            "print('device_id ok', t.tolist(), type(dist.group.WORLD).__name__)\n"
            "dist.destroy_process_group()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if "device_id parameter must be an accelerator" in proc.stderr:  # torch before 2.12, no GPU here
        pytest.skip(f"torch {torch.__version__} takes no CPU device_id, and no GPU is seen here")
    assert "device_id ok [1.0, 1.0, 1.0] ProcessGroupRingo" in proc.stdout, _report(proc)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a communicator made where no GPU is seen")
def test_a_communicator_without_a_device_never_gets_device_pointers(group):
    # Here the communicator has no CUDA device (-1): a CUDA tensor must be refused before any
    # pointer of it reaches ringo, which would take it for host memory.
    assert group.ringo_comm.device == -1
    assert group._device_types == [torch.device("cpu")]  # what torch is told the group serves
    worker = Worker("test-cuda-calls")
    try:
        calls = CudaCalls(group.ringo_comm, worker)
        with pytest.raises(Error, match="has no CUDA device .*RINGO_CUDA=0"):
            calls.submit(lambda s: pytest.fail("enqueued"), [], [], torch.device("cuda", 0))
    finally:
        worker.stop()


@on_gpu
@pytest.mark.parametrize("n", [2, 4])
def test_every_collective_every_dtype_on_cuda(n):
    proc = torchrun("collectives.py", n, "cuda")
    assert proc.returncode == 0, _report(proc)
    counts = re.findall(r"ringo collectives rank (\d+): (\d+) checks, (\d+) failed, .* on cuda", proc.stdout)
    assert sorted(int(r) for r, _, _ in counts) == list(range(n)), _report(proc)
    assert all(int(c) > 150 and int(f) == 0 for _, c, f in counts), _report(proc)


@on_gpu
def test_ddp_on_cuda_matches_gloo_and_fsdp_matches_ddp():
    proc = torchrun("ddp_fsdp.py", 2, 20, 3, "cuda")
    assert proc.returncode == 0, _report(proc)
    assert len(re.findall(r"ddp rank \d: 20 steps on cuda", proc.stdout)) == 2, _report(proc)
    assert len(re.findall(r"fsdp rank \d: 3 steps", proc.stdout)) == 2, _report(proc)
    assert len(re.findall(r"ddp_fsdp rank \d: 0 failed", proc.stdout)) == 2, _report(proc)
