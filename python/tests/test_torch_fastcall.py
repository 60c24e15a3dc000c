# test_torch_fastcall.py — ringo.torch._fastcall, dist.all_reduce's blocking call in C, in one
# process on a one-rank group: which calls it serves, which it hands to Python, and its errors.
# Run: pytest python/tests/test_torch_fastcall.py (needs torch and the built extension).
import ctypes

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import ringo  # noqa: E402
from launch import free_port  # noqa: E402
from ringo import _lib  # noqa: E402
from ringo.torch import pg as pgmod  # noqa: E402

CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                        ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def test_the_extension_is_built():
    # `pip install ./python` builds it where Python's headers are (Debian: python3-dev, which
    # .ci/deps.sh installs); without it ringo.torch still works, a few microseconds slower per call.
    assert pgmod.fast_path(), "ringo.torch._fastcall is missing: install Python's headers and reinstall ./python"


@pytest.fixture(scope="module")
def group():
    if not pgmod.fast_path():
        pytest.skip("ringo.torch._fastcall is not built")
    store = dist.TCPStore("127.0.0.1", free_port(), 1, True)
    dist.init_process_group("ringo", store=store, rank=0, world_size=1)
    yield dist.distributed_c10d._get_default_group()
    dist.destroy_process_group()


class Recorder:
    """A stand-in for both sides of the C object: the ringo function it calls (through ctypes)
    and the Python method it hands the other calls to."""

    def __init__(self, rc=0):
        self.rc, self.calls, self.handed = rc, [], []
        self.fn = CALL(self._call)

    def _call(self, send, recv, count, dt, op, comm, stream):
        self.calls.append((send, recv, count, dt, op, comm))
        return self.rc

    def general(self, tensors, opts=None):
        self.handed.append(tensors)
        return pgmod.done_work(tensors)


@pytest.fixture
def recorder(group):
    rec = Recorder()
    real = group.__dict__["allreduce"]
    group.allreduce = pgmod._fastcall.AllReduce(
        ctypes.cast(rec.fn, ctypes.c_void_p).value, rec.general, pgmod._DIST_ALL_REDUCE, group.ringo_comm,
        group._worker, pgmod.DTYPE_CODES, pgmod.PLAIN_OP_CODES, pgmod._raise_all_reduce_error)
    yield rec
    group.allreduce = real


def test_a_group_uses_it_and_it_reduces(group):
    assert isinstance(group.__dict__["allreduce"], pgmod._fastcall.AllReduce)
    t = torch.arange(6, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # one rank: the input, through ringoAllReduce
    assert t.tolist() == [0, 1, 2, 3, 4, 5]
    assert group.ringo_comm.stats()["collectives"] > 0


def test_blocking_dist_all_reduce_calls_ringo_with_the_tensor(recorder, group):
    t = torch.zeros(10, dtype=torch.int32)
    assert dist.all_reduce(t, op=dist.ReduceOp.MIN) is None
    h = group.ringo_comm._h.value
    assert recorder.calls == [(t.data_ptr(), t.data_ptr(), 10, _lib.DTYPES["int32"], _lib.OPS["min"], h)]
    assert recorder.handed == []
    e = torch.zeros(0)
    dist.all_reduce(e)  # empty: a null pointer and a count of 0, as the Python path passes
    assert recorder.calls[-1][:3] == (None, None, 0)


@pytest.mark.parametrize("case", ["async", "strided", "bool", "premul", "other caller", "queued", "running"])
def test_every_other_call_goes_to_python(recorder, group, case):
    t = torch.ones(8)
    if case == "async":
        dist.all_reduce(t, async_op=True)
    elif case == "strided":
        dist.all_reduce(torch.ones(4, 4)[:, 0])
    elif case == "bool":
        dist.all_reduce(torch.ones(3, dtype=torch.bool))
    elif case == "premul":
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
    elif case == "other caller":  # only dist.all_reduce reads a None result as "done"
        opts = dist.AllreduceOptions()
        opts.asyncOp = False
        group.allreduce([t], opts)
    elif case in ("queued", "running"):
        w = group._worker
        if case == "queued":
            w._pending += 1
        else:
            assert w._running.acquire(False)
        try:
            dist.all_reduce(t)
        finally:
            if case == "queued":
                w._pending -= 1
            else:
                w._running.release()
    assert recorder.calls == [] and len(recorder.handed) == 1
    assert group._worker._running.acquire(False)  # and nothing is left held
    group._worker._running.release()


def test_a_failure_raises_ringos_error_from_dist_all_reduce(recorder, group):
    recorder.rc = _lib.INVALID_USAGE
    with pytest.raises(ringo.Error) as err:
        dist.all_reduce(torch.ones(4))
    assert err.value.code == _lib.INVALID_USAGE and err.value.call == "ringoAllReduce"
    recorder.rc = 0
    assert group._worker._running.acquire(False)  # released on the failure too
    group._worker._running.release()
