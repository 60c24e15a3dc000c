# test_torch_worker.py — the torch backend's worker in one process: a blocking call runs on the
# caller's thread only when nothing is queued or running, keeps the order, and reports failures.
# Run: pytest python/tests/test_torch_worker.py (needs torch; no ranks, no communicator).
import threading

import pytest

pytest.importorskip("torch")
from ringo.torch.worker import QUEUED, Worker, done_work  # noqa: E402


@pytest.fixture
def worker():
    w = Worker("test-worker")
    yield w
    w.stop()


def test_blocking_call_runs_on_the_callers_thread_when_idle(worker):
    ran_on = []
    assert worker.run_here(lambda x: ran_on.append((threading.current_thread(), x)), 7) is None
    assert ran_on == [(threading.current_thread(), 7)]


def test_blocking_call_waits_its_turn_behind_queued_work(worker):
    gate, order = threading.Event(), []
    first = worker.submit(lambda: (gate.wait(10), order.append("queued")), ["out"])
    assert worker.run_here(order.append, "here") is QUEUED  # the queued work runs first
    second = worker.submit(lambda: order.append("blocking"), ["out2"], blocking=True)
    assert not first.is_completed() and not second.is_completed()
    gate.set()
    second.wait()
    assert first.is_completed() and order == ["queued", "blocking"]
    assert second.get_future().wait() == ["out2"]
    # Idle again: the next blocking call runs here and its work is born done.
    work = worker.submit(lambda: order.append("inline"), ["out3"], blocking=True)
    assert work.is_completed() and work.is_success() and order[-1] == "inline"
    assert work.get_future().wait() == ["out3"]


def test_a_held_batch_keeps_calls_off_the_callers_thread_until_released(worker):
    worker.hold()  # a batch of sends and receives is being collected
    assert worker.run_here(pytest.fail) is QUEUED
    worker.release()
    assert worker.run_here(lambda: None) is None


def test_a_future_callback_may_issue_work_on_the_group_and_wait_for_it():
    # DDP's PowerSGD hook does both; run on the worker's own thread, or with the inner future left to the
    # thread running the callback, a wait would never return (the worker is then left behind, not joined).
    worker = Worker("test-worker-callbacks")
    gate, ran, waited = threading.Event(), [], threading.Event()
    first = worker.submit(lambda: (gate.wait(10), ran.append("first")), ["a"])

    def callback(fut):
        worker.submit(lambda: ran.append("inner"), ["b"]).wait()
        assert worker.submit(lambda: ran.append("inner future"), ["c"]).get_future().wait() == ["c"]
        waited.set()
        return fut.value()
    chained = first.get_future().then(callback)  # registered before the work is done
    gate.set()
    assert waited.wait(10), "the callback's waits did not return"
    assert chained.wait() == ["a"] and ran == ["first", "inner", "inner future"]
    worker.stop()


def test_work_submitted_while_a_blocking_call_runs_waits_for_it(worker):
    started, release, order = threading.Event(), threading.Event(), []

    def blocking():
        started.set()
        release.wait(10)
        order.append("blocking")
    t = threading.Thread(target=worker.run_here, args=(blocking,))
    t.start()
    started.wait(10)
    queued = worker.submit(lambda: order.append("queued"), [])
    assert worker.run_here(order.append, "third") is QUEUED
    release.set()
    t.join()
    queued.wait()
    assert order == ["blocking", "queued"]


def test_failures_reach_the_waiter_and_the_future(worker):
    def boom():
        raise ValueError("ringo said no")
    error = worker.run_here(boom)
    assert isinstance(error, ValueError)
    for work in (done_work(["x"], error), worker.submit(boom, ["y"])):
        with pytest.raises(ValueError, match="ringo said no"):
            work.wait()
        assert work.is_completed() and not work.is_success()
        with pytest.raises(Exception, match="ringo said no"):
            work.get_future().wait()
    ok = done_work(["z"])
    assert ok.wait() and ok.is_success() and ok.exception() is None and ok.result() == ["z"]
