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


class RingoWork(Work):
    """Work of one collective: wait() blocks until it ran and raises the ringo.Error it ended with;
    get_future() gives a future that completes with the outputs, or in error (as a C++ future
    error, so DDP's reducer sees it too). The future is made only when asked for."""

    _FINISHED = contextlib.nullcontext()  # the lock of work born done: nothing changes any more

    def __init__(self, outputs, error=None, done=False):
        super().__init__()
        self._outputs = outputs
        self._done = done
        self._error = error
        self._base = self._fut = None
        if done:  # ran on the caller's thread: no latch to wait on, nothing to guard
            self._lock = self._FINISHED
            return
        # Held until the work is done: a plain lock as the latch, cheaper than an Event, which
        # matters for a blocking small all-reduce.
        self._latch = threading.Lock()
        self._latch.acquire()
        self._lock = threading.Lock()

    def _result(self, _):
        # Runs when _base completes: raising here makes _fut an errored future. Without the
        # worker's frames, which torch would print as "At:" lines under ringo's message.
        if self._error is not None:
            raise self._error.with_traceback(None)
        return self._outputs

    def _finish(self, error):
        with self._lock:
            self._error = error
            self._done = True
            base = self._base
        self._latch.release()
        if base is not None:
            base.set_result(None)

    def wait(self, timeout=None):
        if not self._done:
            with self._latch:
                pass
        if self._error is not None:
            raise self._error
        return True

    def get_future(self):
        with self._lock:
            if self._fut is None:
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


class Worker:
    """A daemon thread running queued (function, work) pairs first in, first out. After the first
    failure the communicator is in error (ringo poisons it), so later work fails fast with the
    same message rather than blocking."""

    def __init__(self, name):
        self._q = queue.SimpleQueue()
        self._state = threading.Lock()  # guards _pending
        self._pending = 0  # submitted and not finished
        self._running = threading.Lock()  # held while a function runs: one ringo call at a time
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, outputs, blocking=False):
        with self._state:
            inline = blocking and self._pending == 0
            self._pending += 1
            if inline:
                # Taken before the state lock is let go: work submitted after this call runs after it.
                self._running.acquire()
        if inline:
            return RingoWork(outputs, self._call(fn), done=True)
        work = RingoWork(outputs)
        self._q.put((fn, work))
        return work

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
        work._finish(self._call(fn))

    def _loop(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            self._run(*item)

    def stop(self):
        """Lets queued work finish, then ends the thread."""
        if self._thread.is_alive():
            self._q.put(None)
            if threading.current_thread() is not self._thread:
                self._thread.join()
