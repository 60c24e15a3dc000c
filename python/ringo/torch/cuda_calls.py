# cuda_calls.py — a ringo process group's calls on CUDA tensors: enqueued from the caller's thread on the
# group's own stream for the device, after the caller's current stream, as torch's nccl backend does.
# Tested on a GPU by python/tests/test_torch_cuda.py (skipped without one; `make gpu-check` runs it).
import torch
from torch._C._distributed_c10d import Work
from torch.futures import Future

from .. import _lib
from ..comm import Error
from .worker import QUEUED, future_value

# CUDA as torch exposes it, and a CUDA-aware future of one device: test_torch_cuda.py puts recording
# fakes here to check the order of events without a GPU.
_rt = torch.cuda


def _future(device):
    return Future(devices=[device])


class CudaWork(Work):
    """Work of one call on CUDA tensors. wait() makes the waiting thread's current stream wait for
    the call (the host goes on, as with nccl); synchronize() waits on the host too. get_future()
    is a CUDA-aware future: its callbacks and wait() see the outputs once the call has run (made
    when first asked for, at the group stream's point then, which DDP reaches at once).
    A failure while enqueuing is raised by wait(); one the ring kernel meets later (a dead peer,
    RINGO_TIMEOUT) by the group's next call, and by synchronize() once the kernel has ended.
    ringo keeps such an error per communicator, not per call: once set, every work of the group
    whose event has passed reports it from exception() and is_success()."""

    def __init__(self, outputs, device, side, done, error, comm):
        super().__init__()
        self._outputs, self._device, self._side, self._done = outputs, device, side, done
        self._fut, self._error, self._comm = None, error, comm

    def _late_error(self):
        """The error the kernel ended with, once its event has passed (None while it runs)."""
        if self._error is None and self._done.query():
            try:
                code = self._comm.async_error()
            except Error:  # the group was destroyed since: nothing more to learn
                return None
            if code != _lib.SUCCESS:
                self._error = Error(code, _lib.last_error(self._comm.handle), "ring kernel")
        return self._error

    def wait(self, timeout=None):
        if self._error is not None:
            raise self._error
        _rt.current_stream(self._device).wait_event(self._done)
        return True

    def synchronize(self):
        self.wait()
        self._done.synchronize()
        if self._late_error() is not None:
            raise self._error

    def get_future(self):
        if self._fut is None:
            self._fut = _future(self._device)
            with _rt.stream(self._side):  # the future's event is taken on the group's stream
                if self._error is None:
                    self._fut.set_result(future_value(self._outputs))
                else:
                    self._fut.set_exception(self._error)
        return self._fut

    def is_completed(self):
        return self._error is not None or self._done.query()

    def is_success(self):
        return self.is_completed() and self._late_error() is None

    def exception(self):
        return self._late_error()

    def result(self):
        self.wait()
        return future_value(self._outputs)


class CudaCalls:
    """The CUDA side of one process group: a stream per device, made at its first call. Calls keep
    the group's one order with its host calls: a CUDA call enqueues once the worker's queued host
    work has run (rarely anything: a group is mostly used on one kind of tensor)."""

    def __init__(self, comm, worker):
        self._comm, self._worker = comm, worker
        self._streams = {}

    def _stream(self, device):
        side = self._streams.get(device.index)
        if side is None:
            # The communicator's device is the one current when the group was made; -1 when it has
            # none (a libringo built without CUDA, RINGO_CUDA=0, or no GPU seen then), and a host
            # path must never be handed device pointers.
            have = self._comm.device
            if have < 0:
                raise Error(_lib.INVALID_USAGE, f"ringo backend: a tensor on {device}, but this group's communicator "
                            "has no CUDA device (libringo built without CUDA, RINGO_CUDA=0, or no GPU visible at "
                            "init_process_group)")
            if have != device.index:
                raise Error(_lib.INVALID_USAGE, f"ringo backend: a tensor on {device}, but this group's communicator "
                            f"is on cuda:{have}, the device current at init_process_group (call "
                            "torch.cuda.set_device(local_rank) before it, as for nccl)")
            side = self._streams[device.index] = _rt.Stream(device)
        return side

    def check(self, device):
        """Raises, as submit would, when this group cannot serve tensors on device."""
        self._stream(device)

    def submit(self, fn, outputs, tensors, device):
        """Enqueues fn(stream handle) on the group's stream after the current stream's work, and
        returns its Work. tensors: every CUDA tensor the call reads or writes (kept alive for the
        allocator until the stream has passed them)."""
        side = self._stream(device)
        caller = _rt.current_stream(device)
        done = _rt.Event()

        def launch():
            with _rt.stream(side):
                side.wait_stream(caller)
                try:
                    fn(side.cuda_stream)
                finally:
                    for t in tensors:
                        t.record_stream(side)
                    done.record(side)

        error = self._worker.run_here(launch)
        if error is QUEUED:  # host calls issued before it run first
            try:
                self._worker.submit(launch, outputs).wait()
                error = None
            except Exception as e:  # noqa: BLE001 - the Work raises it from wait()
                error = e
        if error is not None and not isinstance(error, Exception):
            raise error  # KeyboardInterrupt and the like are the caller's, not the work's
        return CudaWork(outputs, device, side, done, error, self._comm)

    def synchronize(self):
        """Waits on the host for everything the group has enqueued on its streams (barrier's first step,
        as nccl's barrier waits for the device)."""
        for side in self._streams.values():
            side.synchronize()
