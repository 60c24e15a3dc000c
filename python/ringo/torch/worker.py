# worker.py — the communication thread of one ringo process group and the Work objects it completes.
# Every collective of a group runs on that group's one thread, in the order the caller issued
# them, so all ranks issue ringo calls in the same order and the caller's thread (autograd's,
# under DDP) goes on computing. A blocking call (async_op=False) with nothing queued runs on the
# caller's thread instead: the hand-off to the thread costs more than a small all-reduce.
# Tested through python/tests/test_torch.py.
import contextlib
import queue
import threading

from torch._C._distributed_c10d import Work
from torch.futures import Future

from .. import _lib
from ..comm import Error


def future_value(outputs):
    """What a Work's future completes with, shaped as gloo's: a call's one output list (all_gather's,
    gather's) as that list, not nested in another; else the outputs (all_reduce's [tensor])."""
    return outputs[0] if len(outputs) == 1 and isinstance(outputs[0], list) else outputs


class RingoWork(Work):
    """Work of one collective: wait() blocks until it ran and raises the ringo.Error it ended with;
    get_future() gives a future that completes with the outputs, or in error (as a C++ future
    error, so DDP's reducer sees it too). The future is made only when asked for."""

    # Work that ran on the caller's thread is born done: these class defaults describe it, so
    # making one costs the C++ object and one attribute (a blocking small all-reduce pays it).
    _done = True
    _error = None
    _base = _fut = None
    _future_asked_by = None  # the thread that asked for the future
    _lock = contextlib.nullcontext()  # nothing changes any more, nothing to guard

    def __init__(self, outputs):
        super().__init__()
        self._outputs = outputs
        self._done = False
        # Held until the work is done: a plain lock as the latch, cheaper than an Event.
        self._latch = threading.Lock()
        self._latch.acquire()
        self._lock = threading.Lock()

    def _result(self, _):
        # Runs when _base completes: raising here makes _fut an errored future. Without the
        # worker's frames, which torch would print as "At:" lines under ringo's message.
        if self._error is not None:
            raise self._error.with_traceback(None)
        return future_value(self._outputs)

    def _finish(self, error):
        """Marks the work done; returns the future to complete (its callbacks run where it is), or None."""
        with self._lock:
            self._error = error
            self._done = True
            base = self._base
        self._latch.release()
        return base

    def wait(self, timeout=None):
        """True once the work is done; its error if it failed. With timeout (a timedelta, as torch
        passes it; zero or none: no limit) a RuntimeError when it is not done by then, as gloo's."""
        if not self._done:
            seconds = min(timeout.total_seconds(), threading.TIMEOUT_MAX) if timeout is not None else 0
            if not self._latch.acquire(timeout=seconds if seconds > 0 else -1):
                raise RuntimeError(f"ringo backend: Work.wait timed out after {seconds:g} s (the collective goes on)")
            self._latch.release()
        if self._error is not None:
            raise self._error
        return True

    def get_future(self):
        with self._lock:
            if self._fut is None:
                self._future_asked_by = threading.current_thread()
                self._base = Future()
                self._fut = self._base.then(self._result)
                if self._done:
                    self._base.set_result(None)
            return self._fut

    def is_completed(self):
        return self._done

    def is_success(self):
        return self._done and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._outputs

    def synchronize(self):
        self.wait()


QUEUED = object()  # run_here's answer when the call has to wait its turn on the worker


def done_work(outputs, error=None):
    """The work of a call that already ran on the caller's thread."""
    work = _DoneWork()
    work._outputs = outputs
    if error is not None:
        work._error = error
    return work


class _DoneWork(RingoWork):
    __init__ = Work.__init__  # the C++ object alone: RingoWork's class defaults say done


class Worker:
    """A daemon thread running queued (function, work) pairs first in, first out. After the first
    failure the communicator is in error (ringo poisons it), so later work fails fast with the
    same message rather than blocking."""

    def __init__(self, name):
        self._name = name
        self._q = queue.SimpleQueue()
        # Futures are completed, and their callbacks run, on a thread of their own, one at a time in
        # the order the work ran (the same on every rank): a callback may issue collectives on this
        # group and wait for them, which on this worker's thread would wait for work queued behind
        # itself. A future asked for on that thread (DDP's PowerSGD hook waits for one inside its
        # callbacks) is completed by this worker instead, or it would wait for itself.
        self._completions = None
        self._completer = None
        self._state = threading.Lock()  # guards _pending
        self._pending = 0  # submitted and not finished, and batches held (hold)
        self._stopped = False  # stop() was called: nothing more runs
        self._running = threading.Lock()  # held while a function runs: one ringo call at a time
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, outputs, blocking=False):
        """The work of fn: run here when blocking and nothing is queued, else queued in order."""
        if self._stopped:  # its Work would wait for ever on a thread that has ended
            raise self._stopped_error()
        if blocking:
            error = self.run_here(fn)
            if error is not QUEUED:
                return done_work(outputs, error)
        with self._state:
            if self._stopped:  # stop() came between the look above and here
                raise self._stopped_error()
            self._pending += 1
        work = RingoWork(outputs)
        self._q.put((fn, work))
        return work

    def _stopped_error(self):
        return Error(_lib.INVALID_USAGE, f"ringo backend: {self._name} was destroyed (destroy_process_group or "
                     "abort); no more calls run on it")

    def hold(self):
        """Counts work the caller is still collecting (a batch of sends and receives) as pending, so
        that no call runs on the caller's thread ahead of it; release() when it is submitted."""
        with self._state:
            self._pending += 1

    def release(self):
        with self._state:
            self._pending -= 1

    def run_here(self, fn, *args):
        """Runs fn(*args) on the caller's thread when no work is queued or running, and returns
        what it raised (None when it succeeded); returns QUEUED, running nothing, otherwise."""
        # Nothing queued, and the right to run taken; looked at again once taken, because work
        # submitted before it must run first. Work submitted after waits on _running.
        if self._pending or not self._running.acquire(False):
            return QUEUED
        if self._pending:
            self._running.release()
            return QUEUED
        try:
            fn(*args)
            return None
        except BaseException as e:  # noqa: BLE001 - the caller raises it from wait()
            return e
        finally:
            self._running.release()

    def _call(self, fn):
        """Runs fn, which holds _running (taken by the caller), and returns what it raised, or None."""
        try:
            fn()
            error = None
        except BaseException as e:  # noqa: BLE001 - every failure must reach the waiter
            error = e
        finally:
            self._running.release()
            with self._state:
                self._pending -= 1
        return error

    def _run(self, fn, work):
        self._running.acquire()
        base = work._finish(self._call(fn))
        if base is None:
            return
        if work._future_asked_by is self._completer:
            base.set_result(None)
            return
        if self._completer is None:
            self._completions = queue.SimpleQueue()
            self._completer = threading.Thread(target=self._complete_loop, name=f"{self._name}-futures", daemon=True)
            self._completer.start()
        self._completions.put(base)

    def _complete_loop(self):
        while True:
            future = self._completions.get()
            if future is None:
                return
            future.set_result(None)
            future = None  # and its callbacks' captures with it, until the next completion

    def _loop(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            self._run(*item)
            item = None  # else the last call's tensors live on until the next call arrives

    def stop(self):
        """Lets queued work finish, then ends the thread."""
        with self._state:
            self._stopped = True
        if self._thread.is_alive():
            self._q.put(None)
            if threading.current_thread() is not self._thread:
                self._thread.join()
        if self._completer is not None and self._completer.is_alive():
            self._completions.put(None)
            if threading.current_thread() is not self._completer:
                self._completer.join()
