# test_torch_cuda_calls.py — ringo.torch.cuda_calls without a GPU: CUDA and the future are recording fakes, so
# the order of what a call asks of them (streams, events, the ringo call, the allocator) is checked on any machine.
# Run: pytest python/tests/test_torch_cuda_calls.py (needs torch; no ranks). On a GPU: test_torch_cuda.py.
import threading

import pytest

torch = pytest.importorskip("torch")
from ringo import Error, _lib  # noqa: E402
from ringo.torch import cuda_calls  # noqa: E402
from ringo.torch.worker import Worker  # noqa: E402

DEV = torch.device("cuda", 0)


class FakeStream:
    def __init__(self, rt, name):
        self.rt, self.name, self.cuda_stream = rt, name, 0x1000 + len(rt.made)

    def wait_stream(self, other):
        self.rt.log.append(("wait_stream", self.name, other.name))

    def wait_event(self, event):
        self.rt.log.append(("wait_event", self.name, event.id))

    def synchronize(self):
        self.rt.log.append(("stream synchronize", self.name))


class FakeEvent:
    def __init__(self, rt):
        rt.events += 1
        self.rt, self.id = rt, rt.events

    def record(self, stream):
        self.rt.log.append(("record", self.id, stream.name))

    def query(self):
        return True

    def synchronize(self):
        self.rt.log.append(("synchronize", self.id))


class FakeCuda:
    """The part of torch.cuda cuda_calls uses, logging each request in order."""

    def __init__(self):
        self.log, self.events, self.made = [], 0, []
        self.current = FakeStream(self, "caller")

    def Stream(self, device):  # noqa: N802 - torch's name
        s = FakeStream(self, f"side{len(self.made)}")
        self.made.append(s)
        return s

    def Event(self):  # noqa: N802 - torch's name
        return FakeEvent(self)

    def current_stream(self, device=None):
        return self.current

    def stream(self, s):
        rt = self

        class Ctx:
            def __enter__(self):
                self.old, rt.current = rt.current, s

            def __exit__(self, *exc):
                rt.current = self.old

        return Ctx()


class FakeFuture:
    def __init__(self, rt):
        self.rt = rt

    def set_result(self, value):
        self.value = value
        self.rt.log.append(("future result", self.rt.current.name))

    def set_exception(self, error):
        self.error = error
        self.rt.log.append(("future error", self.rt.current.name))


class FakeTensor:
    def __init__(self, rt, name):
        self.rt, self.name = rt, name

    def record_stream(self, stream):
        self.rt.log.append(("record_stream", self.name, stream.name))


class FakeComm:
    def __init__(self, device=0, async_error=0):
        self.device, self.code = device, async_error
        self.handle = None

    def async_error(self):
        return self.code


@pytest.fixture
def rt(monkeypatch):
    fake = FakeCuda()
    monkeypatch.setattr(cuda_calls, "_rt", fake)
    monkeypatch.setattr(cuda_calls, "_future", lambda device: FakeFuture(fake))
    return fake


@pytest.fixture
def worker():
    w = Worker("test-cuda-calls")
    yield w
    w.stop()


def test_a_call_follows_the_callers_stream_and_the_waiter_follows_it(rt, worker):
    calls = cuda_calls.CudaCalls(FakeComm(), worker)
    a, b = FakeTensor(rt, "a"), FakeTensor(rt, "b")
    work = calls.submit(lambda s: rt.log.append(("ringo", s, rt.current.name)), [a], [a, b], DEV)
    side = rt.made[0]
    assert rt.log == [("wait_stream", "side0", "caller"),          # after the caller's earlier work
                      ("ringo", side.cuda_stream, "side0"),        # on the group's stream, torch ops too
                      ("record_stream", "a", "side0"), ("record_stream", "b", "side0"),
                      ("record", 1, "side0")]                      # the work's event, after the call
    assert rt.current.name == "caller"
    rt.log.clear()
    assert work.wait() is True
    assert rt.log == [("wait_event", "caller", 1)]  # the waiter's stream waits; the host does not
    assert work.is_completed() and work.is_success() and work.result() == [a]
    work.synchronize()
    assert ("synchronize", 1) in rt.log
    rt.log.clear()
    fut = work.get_future()  # made when asked for, its event on the group's stream
    assert rt.log == [("future result", "side0")] and fut.value == [a] and work.get_future() is fut
    calls.submit(lambda s: None, [a], [a], DEV)
    assert len(rt.made) == 1  # one stream per device, made at the first call
    rt.log.clear()
    calls.synchronize()  # barrier's first step: the host waits for the group's streams
    assert rt.log == [("stream synchronize", "side0")]


def test_a_failed_enqueue_still_marks_the_point_and_fails_the_work_and_future(rt, worker):
    calls = cuda_calls.CudaCalls(FakeComm(), worker)
    a = FakeTensor(rt, "a")

    def fail(s):
        raise Error(_lib.REMOTE, "peer gone", "ringoAllReduce")
    work = calls.submit(fail, [a], [a], DEV)
    assert ("record", 1, "side0") in rt.log and ("record_stream", "a", "side0") in rt.log
    with pytest.raises(Error, match="peer gone"):
        work.wait()
    assert work.is_completed() and not work.is_success()
    assert work.get_future().error is work.exception()
    assert ("future error", "side0") in rt.log


def test_an_interrupt_is_the_callers_not_the_works(rt, worker):
    calls = cuda_calls.CudaCalls(FakeComm(), worker)

    def interrupted(s):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        calls.submit(interrupted, [], [], DEV)
    assert ("record", 1, "side0") in rt.log


def test_an_error_the_kernel_met_later_is_reported_once_its_event_has_passed(rt, worker, monkeypatch):
    monkeypatch.setattr(_lib, "last_error", lambda handle: "rank 1 timed out")
    calls = cuda_calls.CudaCalls(FakeComm(async_error=_lib.TIMEOUT), worker)
    work = calls.submit(lambda s: None, [], [], DEV)
    assert work.wait() is True  # enqueued fine
    assert not work.is_success()
    assert work.exception().code == _lib.TIMEOUT and "timed out" in str(work.exception())
    with pytest.raises(Error, match="timed out"):
        work.synchronize()


def test_host_work_queued_before_it_runs_first(rt, worker):
    calls = cuda_calls.CudaCalls(FakeComm(), worker)
    gate, order = threading.Event(), []
    worker.submit(lambda: (gate.wait(10), order.append("host")), [])
    threading.Timer(0.2, gate.set).start()
    calls.submit(lambda s: order.append(("cuda", threading.current_thread().name)), [], [], DEV)
    assert order == ["host", ("cuda", "test-cuda-calls")]  # it took its turn on the worker


def test_a_tensor_on_another_device_than_the_communicators_is_refused(rt, worker):
    calls = cuda_calls.CudaCalls(FakeComm(device=1), worker)
    with pytest.raises(Error, match=r"cuda:0, but this group's communicator is on cuda:1.*set_device"):
        calls.submit(lambda s: pytest.fail("enqueued"), [], [], DEV)
    assert rt.log == [] and rt.made == []


def test_a_communicator_without_a_device_is_refused(rt, worker):
    calls = cuda_calls.CudaCalls(FakeComm(device=-1), worker)
    with pytest.raises(Error, match="has no CUDA device"):
        calls.submit(lambda s: pytest.fail("enqueued"), [], [], DEV)
