# worker.py — the communication thread of one ringo process group and the Work objects it completes.
# Every collective of a group runs on that group's one thread, in the order the caller issued
# them, so all ranks issue ringo calls in the same order and the caller's thread (autograd's,
# under DDP) goes on computing. Tested through python/tests/test_torch_*.py.
import queue
import threading

import torch
from torch._C._distributed_c10d import Work
from torch.futures import Future


class RingoWork(Work):
    """Work of one queued collective: wait() blocks until it ran and raises the ringo.Error it
    ended with; get_future() gives a future that completes with the outputs, or in error (as a
    C++ future error, so DDP's reducer sees it too)."""

    def __init__(self, outputs):
        super().__init__()
        self._outputs = outputs
        self._done = threading.Event()
        self._error = None
        self._base = Future()
        self._fut = self._base.then(self._result)

    def _result(self, _):
        # Runs on the worker thread when _base completes: raising here makes _fut an errored future.
        if self._error is not None:
            # Without the worker's frames: torch prints them as "At:" lines under ringo's message.
            raise self._error.with_traceback(None)
        return self._outputs

    def _finish(self, error):
        self._error = error
        self._done.set()
        self._base.set_result(None)

    def wait(self, timeout=None):
        self._done.wait()
        if self._error is not None:
            raise self._error
        return True

    def get_future(self):
        return self._fut

    def is_completed(self):
        return self._done.is_set()

    def is_success(self):
        return self._done.is_set() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._outputs

    def synchronize(self):
        self.wait()


class Worker:
    """A daemon thread running queued (function, work) pairs first in, first out. After the first
    failure the communicator is in error (ringo poisons it), so later work fails fast with the
    same message rather than blocking."""

    def __init__(self, name):
        self._q = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, outputs):
        work = RingoWork(outputs)
        self._q.put((fn, work))
        return work

    def _loop(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            fn, work = item
            try:
                fn()
                work._finish(None)
            except BaseException as e:  # noqa: BLE001 - every failure must reach the waiter
                work._finish(e)

    def stop(self):
        """Lets queued work finish, then ends the thread."""
        if self._thread.is_alive():
            self._q.put(None)
            if threading.current_thread() is not self._thread:
                self._thread.join()
