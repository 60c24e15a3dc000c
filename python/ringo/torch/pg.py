# pg.py — ProcessGroupRingo: torch.distributed's collectives on CPU and CUDA tensors through one ringo
# communicator per process group. Each call checks its arguments on the caller's thread (a bad
# call raises there), then queues the data movement on the group's worker (CPU tensors) or
# enqueues it on the group's CUDA stream (cuda_calls.py), and returns its Work.
# Tested by python/tests/test_torch_*.py under torchrun (N = 2 and 4).
import ctypes
import inspect
import os
import threading

import torch
import torch.distributed as dist

from .. import _lib, comm as _comm
from ..comm import Comm, Error, check
from .cuda_calls import CudaCalls
from .monitored import monitored_barrier as _monitored_barrier
from .p2p import P2PBatch, P2PWork
from .tensors import (DTYPE_CODES, PLAIN_OP_CODES, byte_view, call_device, check_device, check_outputs, op_code, op_name,
                      ptr, reduce_view)
from .worker import QUEUED, Worker, done_work

try:  # built by `pip install ./python` when Python's headers are there (optional: see python/README.md)
    from . import _fastcall
except ImportError:
    _fastcall = None
# The one caller whose blocking all-reduce the C path serves: it reads a None result as "done".
_DIST_ALL_REDUCE = inspect.unwrap(dist.all_reduce).__code__


def _contiguous(t):
    return t if t.is_contiguous() else t.contiguous()


def _write_back(dst, src):
    """The result into the caller's tensor, whatever autograd thinks of writing it from Python (a view
    of a parameter, an inference tensor): the ring writes its memory directly, as gloo does."""
    if src is dst:
        return
    if dst.is_inference():
        with torch.inference_mode():
            dst.copy_(src)
    else:
        dst.detach().copy_(src)  # the same memory and version counter, without autograd's objections


def _scaled(t, factor):
    """PREMUL_SUM's input: t times factor (a Python number or a one-element tensor)."""
    return t * (factor.to(t.device, t.dtype) if isinstance(factor, torch.Tensor) else factor)


def _apart(src, dst, in_place_at):
    """src, or a copy of it where it shares bytes with dst without being the in-place layout (src at
    in_place_at in dst's memory): ringo refuses such buffers, and gloo serves them (both contiguous)."""
    a, na, b, nb = src.data_ptr(), src.numel() * src.element_size(), dst.data_ptr(), dst.numel() * dst.element_size()
    if na == 0 or nb == 0 or a == in_place_at or a + na <= b or b + nb <= a:
        return src
    return src.clone()


def _splits(t, sizes, n, what):
    """Byte offsets of the n pieces of t along dim 0 (equal pieces when sizes is empty)."""
    rows = t.shape[0] if t.dim() else 1
    sizes = list(sizes) if sizes else [rows // n] * n
    if len(sizes) != n or sum(sizes) != rows or (not any(sizes) and rows) or min(sizes) < 0:
        raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} splits {sizes} do not cut {rows} rows into {n}")
    row_bytes = (t.numel() // rows if rows else 0) * t.element_size()
    offs, at = [], 0
    for s in sizes:
        offs.append((at * row_bytes, s * row_bytes))
        at += s
    return offs


def _flat(*groups):
    """The tensors of lists of tensors and of lists of them."""
    out = []
    for g in groups:
        for x in g:
            if isinstance(x, torch.Tensor):
                out.append(x)
            else:
                out.extend(x)
    return out


def _raise_all_reduce_error(code, handle):
    check(code, handle, "ringoAllReduce")


def fast_path():
    """Whether dist.all_reduce's blocking call runs through ringo.torch._fastcall (C) here."""
    return _fastcall is not None


class ProcessGroupRingo(dist.ProcessGroup):
    """One rank of a torch process group whose CPU collectives run on a ringo communicator."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        # The store torch hands a backend is already prefixed by the group's name, so a subgroup's
        # id lands under its own key and never meets the world's.
        # The group's timeout (init_process_group's, 30 min unless given) bounds each of its waits, as
        # gloo's bounds each operation; RINGO_TIMEOUT, where the environment sets it, wins.
        seconds = None
        if timeout is not None and not os.environ.get("RINGO_TIMEOUT"):
            seconds = min(max(timeout.total_seconds(), 0.001), 1e9)  # ringo's range for it
        self._comm = Comm.from_store(store, rank, size, key="ringo/unique_id", timeout=seconds)
        self._store = store  # monitored_barrier meets through it
        self._serves = [torch.device("cpu")] + ([torch.device("cuda")] if self._comm.device >= 0 else [])
        self._monitored = 0  # monitored_barrier calls so far: each has its own keys
        self._n = size
        self._me = rank
        self._worker = Worker(f"ringo-pg-{rank}/{size}")
        self._cuda = CudaCalls(self._comm, self._worker)
        self._p2p = None  # the P2PBatch collecting sends and receives, or None
        self._p2p_lock = threading.RLock()  # guards _p2p; starting a batch calls _submit, which may start one
        # Between _start_coalescing and _end_coalescing, the Work _submit made last: all before it are
        # done when it is (one order). None outside, so no call's tensors outlive their Work.
        self._last_work = None
        self._coalescing = False
        if _fastcall is not None:
            # An instance attribute wins over the method: dist.all_reduce calls the C object,
            # which hands every call but its own blocking one to the method, bound here.
            self.allreduce = _fastcall.AllReduce(
                ctypes.cast(_lib.lib.ringoAllReduce, ctypes.c_void_p).value, self.allreduce, _DIST_ALL_REDUCE,
                self._comm, self._worker, DTYPE_CODES, PLAIN_OP_CODES, _raise_all_reduce_error)

    def getBackendName(self):
        return "ringo"

    # torch asks a group for its backend per device (batch_isend_irecv, init_process_group's device_id,
    # new_group's split check, abort): a Python group is its own, for CPU and CUDA alike. It batches
    # sends and receives (_start_coalescing) and cannot split a communicator.
    supports_coalescing = True
    supports_splitting = False

    def _get_backend(self, device):
        return self

    # The devices the group serves. torch reads them where a CPU backend is required (monitored_barrier,
    # distributed checkpoint's async_save) and to place object collectives. A Python group registers
    # no C++ backend, so torch's own answer would be none.
    @property
    def _device_types(self):
        return list(self._serves)

    # torch names a group after creating it. ProcessGroup's C++ getter reads the name from a
    # registered C++ backend, and a Python group has none, so the name is kept here as well.
    def _set_group_name(self, name):
        self._group_name = name
        super()._set_group_name(name)

    @property
    def group_name(self):
        return getattr(self, "_group_name", "")

    def _set_group_desc(self, desc):
        self._group_desc = desc
        super()._set_group_desc(desc)

    @property
    def group_desc(self):
        return getattr(self, "_group_desc", "")

    def name(self):
        return "ringo"

    @property
    def ringo_comm(self):
        """The ringo.Comm under this group (its stats() count the bytes the group moved)."""
        return self._comm

    def _submit(self, fn, outputs, opts=None, inputs=()):
        """The Work of fn(stream=None): on CPU tensors queued on the worker (a blocking call, opts.asyncOp
        False, may run right here); on CUDA tensors enqueued on the group's stream for their device.
        inputs: tensors fn reads besides outputs (lists of tensors may nest one deep)."""
        tensors = _flat(outputs, inputs)
        device = call_device(tensors)
        check_outputs(_flat(outputs))
        if self._p2p is not None:  # sends and receives called before this go first
            self._start_p2p()
        if device is None or device.type == "cpu":
            work = self._worker.submit(fn, outputs, blocking=opts is not None and not getattr(opts, "asyncOp", True))
        else:
            work = self._cuda.submit(fn, outputs, tensors, device)
        if self._coalescing:
            self._last_work = work
        return work

    # --- all-reduce family ------------------------------------------------------------------------
    def _reduce_in_place(self, t, op, factor, s=None):
        """All-reduce of one contiguous tensor in place (on the worker thread)."""
        if factor is not None:
            _write_back(t, _scaled(t, factor))
        v, dt = reduce_view(t, op, "tensor")
        self._comm.all_reduce_ptr(ptr(v), ptr(v), v.numel(), dt, op_code(t, op), s)

    def allreduce(self, tensors, opts=None):
        if opts is not None and not getattr(opts, "asyncOp", True) and len(tensors) == 1:
            work = self._allreduce_here(tensors, opts)
            if work is not None:
                return work
        op, factor = op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        views = [reduce_view(t, op, "allreduce tensor", factor) for t in tensors]
        if len(tensors) == 1 and factor is None and tensors[0].is_contiguous():
            # DDP's buckets and most user calls: one contiguous tensor, reduced where it lies.
            v, dt = views[0]
            p = ptr(v)
            args = (p, p, v.numel(), dt, op_code(tensors[0], op))
            return self._submit(lambda s=None: self._comm.all_reduce_ptr(*args, s), tensors, opts)

        def run(s=None):
            for t in tensors:
                c = _contiguous(t)
                self._reduce_in_place(c, op, factor, s)
                _write_back(t, c)
        return self._submit(run, tensors, opts)

    def _allreduce_here(self, tensors, opts):
        """dist.all_reduce's usual call, blocking on one contiguous CPU tensor of a real dtype with
        a plain op, run on this thread with as little Python as it needs: the torch-side cost of
        a small all-reduce is this function. None when the call is not that one, or work is queued."""
        t = tensors[0]
        dt = DTYPE_CODES.get(t.dtype)
        op = PLAIN_OP_CODES.get(opts.reduceOp.op.value)
        if dt is None or op is None or t.layout != torch.strided or not t.is_cpu or not t.is_contiguous() or t.is_neg():
            return None
        p = ptr(t)
        error = self._worker.run_here(self._comm.all_reduce_ptr, p, p, t.numel(), dt, op)
        return None if error is QUEUED else done_work(tensors, error)

    def allreduce_coalesced(self, tensors, opts=None):
        """One all-reduce per dtype over the tensors packed end to end (as Gloo coalesces)."""
        op, factor = op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        for t in tensors:
            reduce_view(t, op, "allreduce_coalesced tensor", factor)

        def run(s=None):
            for dtype in dict.fromkeys(t.dtype for t in tensors):
                same = [t for t in tensors if t.dtype == dtype]
                flat = torch.cat([t.reshape(-1) for t in same])
                self._reduce_in_place(flat, op, factor, s)
                at = 0
                for t in same:
                    _write_back(t, flat[at:at + t.numel()].view_as(t))
                    at += t.numel()
        return self._submit(run, tensors, opts)

    def reduce(self, tensors, opts=None):
        op, factor = op_name(opts.reduceOp)
        root = opts.rootRank
        self._check_root(root)
        for t in tensors:
            reduce_view(t, op, "reduce tensor", factor)

        def run(s=None):
            for t in tensors:
                c = _contiguous(t)
                send = _scaled(c, factor) if factor is not None else c
                sv, dt = reduce_view(send, op, "tensor")
                rv, _ = reduce_view(c, op, "tensor")
                self._comm.reduce_ptr(ptr(sv), ptr(rv), sv.numel(), dt, op_code(c, op), root, s)
                _write_back(t, c)
        return self._submit(run, tensors, opts)

    # --- reduce-scatter ---------------------------------------------------------------------------
    def _reduce_scatter_flat(self, out, flat, op, factor, s=None):
        """out = op over ranks of this rank's piece of the flat input (on the worker thread)."""
        send = _scaled(flat, factor) if factor is not None else flat
        c = _contiguous(out)
        send = _apart(send, c, c.data_ptr() - self._me * c.numel() * c.element_size())
        sv, dt = reduce_view(send, op, "input")
        rv, _ = reduce_view(c, op, "output")
        self._comm.reduce_scatter_ptr(ptr(sv), ptr(rv), rv.numel(), dt, op_code(c, op), s)
        _write_back(out, c)

    def _check_rs(self, out, inp_numel, op, what, factor=None):
        reduce_view(out, op, f"{what} output", factor)
        if inp_numel != out.numel() * self._n:
            raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} input has {inp_numel} elements, expected "
                        f"{self._n} x {out.numel()}")

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op, factor = op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        for out, ins in zip(output_tensors, input_tensors):
            if len(ins) != self._n or any(i.numel() != out.numel() or i.dtype != out.dtype for i in ins):
                raise Error(_lib.INVALID_ARGUMENT, "ringo backend: reduce_scatter needs one input per rank, each "
                            "the output's size and dtype (uneven pieces are not supported)")
            self._check_rs(out, out.numel() * self._n, op, "reduce_scatter", factor)

        def run(s=None):
            for out, ins in zip(output_tensors, input_tensors):
                self._reduce_scatter_flat(out, torch.cat([i.reshape(-1) for i in ins]), op, factor, s)
        return self._submit(run, output_tensors, opts, input_tensors)

    def reduce_scatter_single(self, output, input, opts=None):
        op, factor = op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        self._check_rs(output, input.numel(), op, "reduce_scatter_tensor", factor)
        if input.dtype != output.dtype:
            raise Error(_lib.INVALID_ARGUMENT, "ringo backend: reduce_scatter_tensor input and output dtypes differ")
        return self._submit(lambda s=None: self._reduce_scatter_flat(output, _contiguous(input).reshape(-1), op,
                                                                     factor, s), [output], opts, [input])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        op, factor = op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        for o, i in zip(outputs, inputs):
            self._check_rs(o, i.numel(), op, "reduce_scatter_tensor_coalesced", factor)

        def run(s=None):
            for o, i in zip(outputs, inputs):
                self._reduce_scatter_flat(o, _contiguous(i).reshape(-1), op, factor, s)
        return self._submit(run, outputs, opts, inputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # --- all-gather and broadcast: bytes, any dtype ---------------------------------------------------
    def _gather_flat(self, out, inp, s=None):
        """out (contiguous, n x inp's bytes) = every rank's inp in rank order (worker thread)."""
        src = byte_view(_contiguous(inp), "input")
        dst = byte_view(out, "output")
        src = _apart(src, dst, dst.data_ptr() + self._me * src.numel())
        self._comm.all_gather_ptr(ptr(src), ptr(dst), src.numel(), _lib.DTYPES["uint8"], s)

    def _check_ag(self, out, inp, what):
        check_device(inp, f"{what} input")
        check_device(out, f"{what} output")
        if out.numel() != inp.numel() * self._n or out.dtype != inp.dtype:
            raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} output must hold {self._n} x the input "
                        f"({inp.numel()} elements of {inp.dtype}), got {out.numel()} of {out.dtype}")

    def allgather(self, output_tensors, input_tensors, opts=None):
        for outs, inp in zip(output_tensors, input_tensors):
            if len(outs) != self._n or any(o.numel() != inp.numel() or o.dtype != inp.dtype for o in outs):
                raise Error(_lib.INVALID_ARGUMENT, "ringo backend: all_gather needs one output per rank, each the "
                            "input's size and dtype (uneven all_gather is not supported)")
            check_device(inp, "all_gather input")

        def run(s=None):
            for outs, inp in zip(output_tensors, input_tensors):
                flat = torch.empty(inp.numel() * self._n, dtype=inp.dtype, device=inp.device)
                self._gather_flat(flat, inp, s)
                for r, o in enumerate(outs):
                    _write_back(o, flat[r * inp.numel():(r + 1) * inp.numel()].view_as(o))
        return self._submit(run, output_tensors, opts, input_tensors)

    def all_gather_single(self, output, input, opts=None):
        self._check_ag(output, input, "all_gather_into_tensor")

        def run(s=None):
            c = _contiguous(output)
            self._gather_flat(c, input, s)
            _write_back(output, c)
        return self._submit(run, [output], opts, [input])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            self._check_ag(o, i, "all_gather_into_tensor_coalesced")

        def run(s=None):
            for o, i in zip(outputs, inputs):
                c = _contiguous(o)
                self._gather_flat(c, i, s)
                _write_back(o, c)
        return self._submit(run, outputs, opts, inputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        return self.allgather(output_lists, input_list, opts)

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        self._check_root(root)
        for t in tensors:
            check_device(t, "broadcast tensor")

        def run(s=None):
            for t in tensors:
                c = _contiguous(t)
                b = byte_view(c, "tensor")
                self._comm.broadcast_ptr(ptr(b), ptr(b), b.numel(), _lib.DTYPES["uint8"], root, s)
                _write_back(t, c)
        return self._submit(run, tensors, opts)

    def barrier(self, opts=None):
        """A one-byte host all-reduce, once this rank's CUDA work of the group has run."""
        one = torch.ones(1, dtype=torch.uint8, device="cpu")  # host path, whatever the default device

        def run(s=None):
            self._cuda.synchronize()
            self._comm.all_reduce_ptr(ptr(one), ptr(one), 1, _lib.DTYPES["uint8"], _lib.OPS["sum"])
        return self._submit(run, [], opts, [one])  # no outputs: its future completes with [], as gloo's

    def monitored_barrier(self, timeout, wait_all_ranks=False):
        """dist.monitored_barrier (torch 2.12 and later: before, torch lets gloo groups alone call it):
        rank 0 names the ranks that did not arrive within timeout (monitored.py)."""
        self._monitored += 1
        _monitored_barrier(self._store, self._me, self._n, self._monitored, timeout, wait_all_ranks)

    # --- point to point and all-to-all ---------------------------------------------------------------
    def _check_root(self, peer, what="root"):
        if not 0 <= peer < self._n:
            raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} {peer} is not a rank of this group of {self._n}")

    def send(self, tensors, dstRank, tag=0):
        """Messages between two ranks match in the order they were sent (tags are not looked at). The
        send starts with the batch it joins (p2p.py): when a Work of it is waited on, or at the
        group's next other call."""
        self._check_root(dstRank, "send peer")
        bufs = [byte_view(_contiguous(t), "send tensor") for t in tensors]
        return self._post(tensors, sends=[(dstRank, b) for b in bufs])

    def recv(self, tensors, srcRank, tag=0):
        self._check_root(srcRank, "recv peer")
        for t in tensors:
            check_device(t, "recv tensor")
        return self._post(tensors, recvs=[(srcRank, t) for t in tensors])

    def _post(self, tensors, sends=(), recvs=()):
        """The Work of sends and receives added to the open batch (a new one when none is open, or
        when the open one is on another device)."""
        device = call_device(tensors)
        if device.type == "cuda":
            self._cuda.check(device)  # a bad device raises here, at the call, not at the batch's start
        with self._p2p_lock:
            if self._p2p is not None and self._p2p.device != device:
                self._start_p2p()
            if self._p2p is None:
                self._open_p2p(device)
            batch = self._p2p
            batch.sends.extend(sends)
            batch.recvs.extend(recvs)
        return P2PWork(batch, tensors)

    def _open_p2p(self, device):
        """Opens a batch (under _p2p_lock); no call may run on the caller's thread ahead of it."""
        self._p2p = P2PBatch(device, self._start_p2p)
        self._worker.hold()

    def _close_p2p(self, batch=None):
        """The open batch, closed (if batch is given, only if it is that one), or None."""
        with self._p2p_lock:
            open_batch = self._p2p
            if open_batch is None or (batch is not None and batch is not open_batch):
                return None
            self._p2p = None
            self._worker.release()
            return open_batch

    def _start_p2p(self, batch=None):
        """Starts the open batch (if batch is given, only if it is that one) as one ringo group, so that its
        sends and receives progress together; its one Work covers them all."""
        with self._p2p_lock:  # held until its work is set: another thread's started() waits for it
            open_batch = self._close_p2p(batch)
            if open_batch is None:
                return
            sends, recvs = open_batch.sends, open_batch.recvs
            try:
                if not sends and not recvs:  # torch brackets an abort with these too, after the worker has stopped
                    open_batch.work = done_work([])
                else:
                    open_batch.work = self._submit(lambda s=None: self._exchange_into(sends, recvs, s),
                                                   [t for _, t in recvs], inputs=[b for _, b in sends])
            except Exception as e:  # noqa: BLE001 - the batch's works raise it from wait()
                open_batch.work = done_work([t for _, t in recvs], e)

    # --- batch_isend_irecv and _coalescing_manager bracket a batch of calls with these two -------------
    def _start_coalescing(self, device):
        with self._p2p_lock:  # one step: another thread's isend between the two would open a batch this replaced
            self._start_p2p()
            self._last_work, self._coalescing = None, True
            self._open_p2p(device)

    def _end_coalescing(self, device):
        """The Work of everything called since _start_coalescing: the batch's sends and receives start
        as one ringo group, and the group runs its calls in order, so the last one covers them all."""
        self._start_p2p()
        work, self._last_work, self._coalescing = self._last_work, None, False
        return work if work is not None else done_work([])

    def recv_anysource(self, tensors, tag=0):
        raise Error(_lib.INVALID_USAGE, "ringo backend: recv from any source is not supported (ringo matches "
                    "messages per peer; name the source)")

    def _exchange(self, sends, recvs, s=None):
        """Every (peer, bytes) of sends and recvs progressing together in one ringo group."""
        with _comm.group():
            for peer, b in sends:
                self._comm.send_ptr(ptr(b), b.numel(), _lib.DTYPES["uint8"], peer, s)
            for peer, b in recvs:
                self._comm.recv_ptr(ptr(b), b.numel(), _lib.DTYPES["uint8"], peer, s)

    def _exchange_into(self, sends, recvs, s=None):
        """_exchange with (peer, tensor) receives of any layout: each lands in a contiguous copy where
        it needs one, written back afterwards."""
        copies = [(p, t, _contiguous(t)) for p, t in recvs]
        self._exchange(sends, [(p, byte_view(c, "output")) for p, _, c in copies], s)
        for _, t, c in copies:
            _write_back(t, c)

    def _check_own_piece(self, sent, received, what):
        """The piece a rank sends itself must fill the piece it receives from itself: checked here, since
        in the group beside the other ranks' pieces a mismatch fails the whole communicator."""
        if sent != received:
            raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what}: this rank's own piece is {sent} bytes in the "
                        f"input and {received} bytes in the output")

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        check_device(input, "all_to_all_single input")
        check_device(output, "all_to_all_single output")
        if input.dtype != output.dtype:
            raise Error(_lib.INVALID_ARGUMENT, "ringo backend: all_to_all_single input and output dtypes differ")
        ins = _splits(input, input_split_sizes, self._n, "input")
        outs = _splits(output, output_split_sizes, self._n, "output")
        self._check_own_piece(ins[self._me][1], outs[self._me][1], "all_to_all_single")

        def run(s=None):
            src = byte_view(_contiguous(input), "input")
            c = _contiguous(output)
            dst = byte_view(c, "output")
            self._exchange([(p, src[o:o + k]) for p, (o, k) in enumerate(ins)],
                           [(p, dst[o:o + k]) for p, (o, k) in enumerate(outs)], s)
            _write_back(output, c)
        return self._submit(run, [output], opts, [input])

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if len(output_tensors) != self._n or len(input_tensors) != self._n:
            raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: all_to_all needs {self._n} inputs and outputs")
        mine_in, mine_out = input_tensors[self._me], output_tensors[self._me]
        self._check_own_piece(mine_in.numel() * mine_in.element_size(), mine_out.numel() * mine_out.element_size(),
                              "all_to_all")

        def run(s=None):
            self._exchange_into([(p, byte_view(_contiguous(t), "input")) for p, t in enumerate(input_tensors)],
                                list(enumerate(output_tensors)), s)
        return self._submit(run, output_tensors, opts, input_tensors)

    def _check_root_list(self, tensors, one, what):
        """The root's list of a gather or scatter: one tensor per rank, each of one's size and dtype.
        Checked before anything moves: a short list or a wrong size would leave a message unmatched."""
        if len(tensors) != self._n or any(t.numel() != one.numel() or t.dtype != one.dtype for t in tensors):
            raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} needs one tensor per rank on the root, each "
                        f"{one.numel()} elements of {one.dtype}; got {[(t.numel(), t.dtype) for t in tensors]}")

    def gather(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank
        self._check_root(root)
        if self._me == root:
            self._check_root_list(output_tensors[0], input_tensors[0], "gather")

        def run(s=None):
            inp = byte_view(_contiguous(input_tensors[0]), "input")
            self._exchange_into([(root, inp)], list(enumerate(output_tensors[0])) if self._me == root else [], s)
        return self._submit(run, output_tensors, opts, input_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank
        self._check_root(root)
        if self._me == root:
            self._check_root_list(input_tensors[0], output_tensors[0], "scatter")

        def run(s=None):
            sends = []
            if self._me == root:
                sends = [(p, byte_view(_contiguous(t), "input")) for p, t in enumerate(input_tensors[0])]
            self._exchange_into(sends, [(root, output_tensors[0])], s)
        return self._submit(run, output_tensors, opts, input_tensors)

    # --- life cycle -----------------------------------------------------------------------------------
    def shutdown(self):
        """destroy_process_group's call: finish queued work (sends and receives nobody waited on
        included), then free the communicator."""
        self._start_p2p()
        self._worker.stop()
        self._comm.destroy()

    def abort(self):
        """Ends a collective blocked on a dead or stuck peer, then frees the communicator."""
        self._comm.abort()
        batch = self._close_p2p()
        if batch is not None:
            batch.work = done_work([], Error(_lib.INVALID_USAGE, "ringo backend: the group was aborted before "
                                             "these sends and receives started"))
        self._worker.stop()

    def __repr__(self):
        return f"ProcessGroupRingo(rank={self._me}, size={self._n})"
