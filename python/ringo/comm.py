# comm.py — ringo.Comm: one rank of a ringo communicator, driven with NumPy arrays (or anything
# exposing a raw pointer), plus ringo.Error. Sits on _lib.py (ctypes over include/ringo.h).
# Tested by python/tests/test_comm.py (pytest; forks N ranks on this host).
import contextlib
import ctypes
import numbers
import os
import threading

import numpy as np

from . import _lib

_lib_ = _lib.lib


class Error(RuntimeError):
    """A ringo call failed. .code is the ringoResult_t value, .name its string, .message what
    ringoGetLastError said at the time (the library's own explanation)."""

    def __init__(self, code, message, call=""):
        self.code = int(code)
        self.name = _lib.error_string(self.code)
        self.message = message
        self.call = call
        where = f"{call}: " if call else ""
        super().__init__(f"ringo: {where}{self.name} ({self.code}): {message}")


def check(code, comm=None, call=""):
    """Raises Error for a result other than ringoSuccess, with the message of comm (or of this
    thread when comm is None or its message is empty)."""
    if code == _lib.SUCCESS:
        return
    msg = _lib.last_error(comm) if comm else ""
    if not msg:
        msg = _lib.last_error(None)
    raise Error(code, msg, call)


def version():
    v = ctypes.c_int()
    check(_lib_.ringoGetVersion(ctypes.byref(v)), call="ringoGetVersion")
    return v.value // 10000, v.value // 100 % 100, v.value % 100


def unique_id():
    """Starts a rendezvous root in this process and returns its id as 128 bytes: give them to every
    rank (any channel you like) and pass them to Comm(nranks, id, rank)."""
    uid = _lib.UniqueId()
    check(_lib_.ringoGetUniqueId(ctypes.byref(uid)), call="ringoGetUniqueId")
    # bytes(uid), not uid.internal: a c_char array reads as a C string and would stop at the first 0.
    return bytes(uid)


def _dtype_name(dtype):
    """The name of ringo's type that dtype= gives: one of ringo's names (bfloat16, which NumPy may not
    know), or anything numpy.dtype() reads (np.float32, "f4") in this machine's byte order."""
    if isinstance(dtype, str) and dtype in _lib.DTYPES:
        return dtype
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise Error(_lib.INVALID_ARGUMENT, f"dtype {dtype!r} is neither one of ringo's names ("
                    f"{', '.join(_lib.DTYPES)}) nor a NumPy dtype") from None
    if not d.isnative:
        raise Error(_lib.INVALID_ARGUMENT, f"dtype {d.str} is not in this machine's byte order")
    return d.name


def _dtype_code(arr, dtype):
    """ringoDataType_t for arr: dtype names it when NumPy cannot (bfloat16 travels as uint16 or as
    ml_dtypes.bfloat16), else arr.dtype's name decides. ringo reads the bytes as this machine's
    numbers, so a byte-swapped array, or a dtype of another element size, is refused; so is an array
    of Python objects under any name (a reduction or a copy from another process would write
    pointers that are not its objects')."""
    if arr.dtype.hasobject:
        raise Error(_lib.INVALID_ARGUMENT, f"array of {arr.dtype} holds Python objects, which ringo cannot "
                    "move or reduce")
    name = _dtype_name(dtype) if dtype is not None else np.dtype(arr.dtype).name
    if name not in _lib.DTYPES:
        raise Error(_lib.INVALID_ARGUMENT, f"dtype {name} is not one ringo reduces "
                    f"(it has {', '.join(_lib.DTYPES)})")
    if not arr.dtype.isnative:
        raise Error(_lib.INVALID_ARGUMENT, f"array of {arr.dtype.str} is not in this machine's byte order "
                    "(use arr.astype(arr.dtype.newbyteorder('=')))")
    if arr.dtype.itemsize != _lib.DTYPE_BYTES[name]:
        raise Error(_lib.INVALID_ARGUMENT, f"dtype {name} has {_lib.DTYPE_BYTES[name]}-byte elements, the array "
                    f"{arr.dtype.itemsize}-byte ones ({arr.dtype})")
    return _lib.DTYPES[name]


def _pair(call, send, recv, dtype):
    """ringoDataType_t of a call on send and recv, which must be arrays of one dtype: ringo converts
    nothing, and counts elements of the send array's type in both."""
    for what, a in (("send", send), ("recv", recv)):
        if not isinstance(a, np.ndarray):
            raise Error(_lib.INVALID_ARGUMENT, f"{call}: {what} must be a numpy.ndarray, got {type(a).__name__}")
    if send.dtype != recv.dtype:
        raise Error(_lib.INVALID_ARGUMENT, f"{call}: send is {send.dtype} but recv is {recv.dtype} "
                    "(ringo converts nothing)")
    return _dtype_code(send, dtype)


def _c_int(value, what):
    """value for a C int argument: a whole number that fits, not a float cut down or a big int
    wrapped round by ctypes."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not -2**31 <= value < 2**31:
        raise Error(_lib.INVALID_ARGUMENT, f"{what} must be an int in [-2**31, 2**31), got {value!r}")
    return int(value)


def _op_code(op):
    code = _lib.OPS.get(str(op).lower())
    if code is None:
        raise Error(_lib.INVALID_ARGUMENT, f"op {op!r} is not one of ringo's {', '.join(_lib.OPS)}")
    return code


def _ptr(arr, writable):
    """The data pointer of a C-contiguous array; ringo moves flat memory, so a strided view would
    silently read the wrong elements and is refused instead."""
    if not isinstance(arr, np.ndarray):
        raise Error(_lib.INVALID_ARGUMENT, f"expected a numpy.ndarray, got {type(arr).__name__}")
    if not arr.flags.c_contiguous:
        raise Error(_lib.INVALID_ARGUMENT, "array is not C-contiguous (use numpy.ascontiguousarray)")
    if writable and not arr.flags.writeable:
        raise Error(_lib.INVALID_ARGUMENT, "output array is read-only")
    held = getattr(_in_group, "arrays", None)
    if held is not None:  # read or written at ringoGroupEnd: kept alive until then
        held.append(arr)
    return arr.ctypes.data if arr.size else None


def _seconds(timeout):
    """A timeout as seconds: a number, or anything with total_seconds() (datetime.timedelta)."""
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise Error(_lib.INVALID_ARGUMENT, f"timeout must be seconds or a timedelta, got {type(timeout).__name__}")
    return float(seconds)


class Comm:
    """One rank of an nranks ringo communicator.

    Comm(nranks, uid, rank)  every rank passes the same uid (bytes from ringo.unique_id());
                             timeout= (seconds or a timedelta) is this communicator's RINGO_TIMEOUT.
    Comm.from_env()          under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
    Comm.from_mpi(comm)      over an mpi4py communicator (ringoCommInitMPI).

    The collectives take NumPy arrays of any of ringo's ten dtypes (bfloat16 as uint16 arrays with
    dtype="bfloat16") and run on host memory: each call returns when its result is in place."""

    def __init__(self, nranks, uid, rank, timeout=None, _handle=None):
        if _handle is None:
            try:  # the id's 128 bytes, however they travelled (bytes, a NumPy array, a memoryview)
                uid = bytes(memoryview(uid).cast("B"))
            except TypeError:
                raise Error(_lib.INVALID_ARGUMENT, f"unique id must be bytes (ringo.unique_id()), got "
                            f"{type(uid).__name__}") from None
            nranks, rank = _c_int(nranks, "nranks"), _c_int(rank, "rank")
            if len(uid) != _lib.UNIQUE_ID_BYTES:
                raise Error(_lib.INVALID_ARGUMENT, f"unique id must be {_lib.UNIQUE_ID_BYTES} bytes, got {len(uid)}")
            cid = _lib.UniqueId()
            ctypes.memmove(ctypes.byref(cid), bytes(uid), _lib.UNIQUE_ID_BYTES)
            h = ctypes.c_void_p()
            if timeout is None:
                check(_lib_.ringoCommInitRank(ctypes.byref(h), int(nranks), cid, int(rank)), call="ringoCommInitRank")
            else:
                config = _lib.Config(ctypes.sizeof(_lib.Config), _seconds(timeout))
                check(_lib_.ringoCommInitRankConfig(ctypes.byref(h), int(nranks), cid, int(rank), ctypes.byref(config)),
                      call="ringoCommInitRankConfig")
            _handle = h
        self._h = _handle

    # --- construction from a launcher ---------------------------------------------------------
    @classmethod
    def from_store(cls, store, rank, nranks, key="ringo/uid", timeout=None):
        """Rendezvous through a torch.distributed Store: rank 0 makes the id and sets it under key,
        the others wait for it (the store's own timeout bounds the wait). timeout: as Comm's."""
        if rank == 0:
            uid = unique_id()
            store.set(key, uid)
        else:
            uid = bytes(store.get(key))
        return cls(nranks, uid, rank, timeout=timeout)

    @classmethod
    def from_env(cls, key="ringo/uid"):
        """Under torchrun (or any launcher setting RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): the
        id travels through a torch TCPStore at MASTER_ADDR:MASTER_PORT, hosted by torchrun's agent
        when it says so (TORCHELASTIC_USE_AGENT_STORE), else by rank 0 — as env:// does."""
        try:
            rank, nranks = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        except KeyError as e:
            raise Error(_lib.INVALID_ARGUMENT, f"Comm.from_env needs {e.args[0]} in the environment (torchrun sets it)")
        try:
            from torch.distributed import TCPStore
        except ImportError:
            raise Error(_lib.INVALID_USAGE, "Comm.from_env rendezvous uses torch.distributed.TCPStore; install torch "
                        "or share ringo.unique_id() yourself")
        agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        store = TCPStore(addr, port, nranks, is_master=(rank == 0 and not agent))
        return cls.from_store(store, rank, nranks, key)

    @classmethod
    def from_mpi(cls, mpi_comm=None):
        """Every rank of mpi_comm (default mpi4py's COMM_WORLD) calls it; needs mpi4py and a
        libringo built with MPI, initialised at MPI_THREAD_SERIALIZED or more (mpi4py's default
        is MULTIPLE)."""
        try:
            from mpi4py import MPI
        except ImportError:
            raise Error(_lib.INVALID_USAGE, "Comm.from_mpi needs mpi4py (pip install mpi4py)")
        if not _lib.HAS_MPI:
            raise Error(_lib.INVALID_USAGE, "this libringo was built without MPI (make says mpi: no)")
        mpi_comm = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
        # MPI_Comm is a handle whose size is the implementation's; read it where mpi4py keeps it.
        handle = ctypes.c_void_p.from_address(MPI._addressof(mpi_comm)).value
        h = ctypes.c_void_p()
        check(_lib_.ringoCommInitMPI(ctypes.byref(h), handle), call="ringoCommInitMPI")
        return cls(0, b"", 0, _handle=h)

    # --- life cycle and queries ------------------------------------------------------------------
    @property
    def handle(self):
        if self._h is None:
            raise Error(_lib.INVALID_USAGE, "communicator already destroyed")
        return self._h

    def _int_query(self, fn, name):
        v = ctypes.c_int()
        check(fn(self.handle, ctypes.byref(v)), self.handle, name)
        return v.value

    @property
    def rank(self):
        return self._int_query(_lib_.ringoCommUserRank, "ringoCommUserRank")

    @property
    def size(self):
        return self._int_query(_lib_.ringoCommCount, "ringoCommCount")

    @property
    def device(self):
        """CUDA device of the communicator, -1 for a host communicator."""
        return self._int_query(_lib_.ringoCommCuDevice, "ringoCommCuDevice")

    def async_error(self):
        """The ringoResult_t that ended asynchronous work on this communicator, 0 if none."""
        return self._int_query(_lib_.ringoCommGetAsyncError, "ringoCommGetAsyncError")

    def stats(self):
        """Cumulative payload bytes this rank sent and received, and collectives completed."""
        s = _lib.CommStats()
        check(_lib_.ringoCommGetStats(self.handle, ctypes.byref(s)), self.handle, "ringoCommGetStats")
        return {"bytes_sent": s.bytesSent, "bytes_received": s.bytesReceived, "collectives": s.collectives}

    def destroy(self):
        """Frees the communicator once a call another thread runs on it has finished. Refused, and the
        communicator kept, inside a ringo.group() that holds calls on it."""
        if self._h is not None:
            check(_lib_.ringoCommDestroy(self._h), self._h, "ringoCommDestroy")
            self._h = None

    def abort(self):
        """Ends work blocked on this communicator in another thread, and frees it."""
        if self._h is not None:
            h, self._h = self._h, None
            check(_lib_.ringoCommAbort(h), call="ringoCommAbort")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __repr__(self):
        if self._h is None:
            return "ringo.Comm(destroyed)"
        return f"ringo.Comm(rank={self.rank}, size={self.size})"

    def _fail(self, rc, call):
        """A raw call's failure: after destroy() the handle is None, which C can only call NULL."""
        check(rc, self.handle, call)

    # --- raw calls on pointers (the torch backend uses these) ----------------------------------------
    # One line each on purpose: a blocking 4 KiB all-reduce costs a few microseconds in C, so the
    # Python around it is kept to the call and one test of its result. stream: a cudaStream_t as an
    # integer for device memory (the call is then enqueued on it), None for host memory.
    def all_reduce_ptr(self, send, recv, count, dt, op, stream=None):
        rc = _lib_.ringoAllReduce(send, recv, count, dt, op, self._h, stream)
        if rc:
            self._fail(rc, "ringoAllReduce")

    def reduce_scatter_ptr(self, send, recv, recvcount, dt, op, stream=None):
        rc = _lib_.ringoReduceScatter(send, recv, recvcount, dt, op, self._h, stream)
        if rc:
            self._fail(rc, "ringoReduceScatter")

    def all_gather_ptr(self, send, recv, sendcount, dt, stream=None):
        rc = _lib_.ringoAllGather(send, recv, sendcount, dt, self._h, stream)
        if rc:
            self._fail(rc, "ringoAllGather")

    def broadcast_ptr(self, send, recv, count, dt, root, stream=None):
        rc = _lib_.ringoBroadcast(send, recv, count, dt, int(root), self._h, stream)
        if rc:
            self._fail(rc, "ringoBroadcast")

    def reduce_ptr(self, send, recv, count, dt, op, root, stream=None):
        rc = _lib_.ringoReduce(send, recv, count, dt, op, int(root), self._h, stream)
        if rc:
            self._fail(rc, "ringoReduce")

    def send_ptr(self, buf, count, dt, peer, stream=None):
        rc = _lib_.ringoSend(buf, count, dt, int(peer), self._h, stream)
        if rc:
            self._fail(rc, "ringoSend")

    def recv_ptr(self, buf, count, dt, peer, stream=None):
        rc = _lib_.ringoRecv(buf, count, dt, int(peer), self._h, stream)
        if rc:
            self._fail(rc, "ringoRecv")

    # --- collectives on NumPy arrays -------------------------------------------------------------------
    def all_reduce(self, send, recv=None, op="sum", dtype=None):
        """recv = op over ranks of send; in place when recv is None or send. Returns recv."""
        recv = send if recv is None else recv
        dt = _pair("all_reduce", send, recv, dtype)
        _same_shape(send.size, recv.size, "all_reduce: recv")
        self.all_reduce_ptr(_ptr(send, False), _ptr(recv, True), send.size, dt, _op_code(op))
        return recv

    def reduce_scatter(self, send, recv=None, op="sum", dtype=None):
        """recv = op over ranks of this rank's 1/N of send. recv None: in place, the result is the
        view send[rank*k:(rank+1)*k] of the flat array, returned."""
        n = self.size
        dt = _pair("reduce_scatter", send, send if recv is None else recv, dtype)
        if send.size % n:
            raise Error(_lib.INVALID_ARGUMENT, f"reduce_scatter: send has {send.size} elements, not a multiple of {n} ranks")
        k = send.size // n
        if recv is None:
            recv = send.reshape(-1)[self.rank * k:(self.rank + 1) * k]
        _same_shape(k, recv.size, "reduce_scatter: recv")
        self.reduce_scatter_ptr(_ptr(send, False), _ptr(recv, True), k, dt, _op_code(op))
        return recv

    def all_gather(self, send, recv=None, dtype=None):
        """recv = every rank's send, in rank order (a new array of N*send.size when recv is None).
        In place when send is the view recv[rank*k:(rank+1)*k]. Returns recv."""
        if recv is None and isinstance(send, np.ndarray):
            recv = np.empty(send.size * self.size, dtype=send.dtype)
        dt = _pair("all_gather", send, recv, dtype)
        _same_shape(send.size * self.size, recv.size, "all_gather: recv")
        self.all_gather_ptr(_ptr(send, False), _ptr(recv, True), send.size, dt)
        return recv

    def broadcast(self, send, recv=None, root=0, dtype=None):
        """recv = root's send on every rank; in place when recv is None. Returns recv."""
        recv = send if recv is None else recv
        dt = _pair("broadcast", send, recv, dtype)
        _same_shape(send.size, recv.size, "broadcast: recv")
        self.broadcast_ptr(_ptr(send, False), _ptr(recv, True), recv.size, dt, _c_int(root, "broadcast: root"))
        return recv

    def reduce(self, send, recv=None, op="sum", root=0, dtype=None):
        """recv on root = op over ranks of send (recv untouched elsewhere); in place when recv is None."""
        recv = send if recv is None else recv
        dt = _pair("reduce", send, recv, dtype)
        _same_shape(send.size, recv.size, "reduce: recv")
        self.reduce_ptr(_ptr(send, False), _ptr(recv, True), send.size, dt, _op_code(op), _c_int(root, "reduce: root"))
        return recv

    def send(self, arr, peer, dtype=None):
        """Sends arr to peer, which calls recv with as many elements of the same dtype."""
        self.send_ptr(_ptr(arr, False), arr.size, _dtype_code(arr, dtype), _c_int(peer, "send: peer"))

    def recv(self, arr, peer, dtype=None):
        """Receives into arr from peer. Returns arr."""
        self.recv_ptr(_ptr(arr, True), arr.size, _dtype_code(arr, dtype), _c_int(peer, "recv: peer"))
        return arr


def _same_shape(want, got, what):
    if want != got:
        raise Error(_lib.INVALID_ARGUMENT, f"{what} has {got} elements, expected {want}")


_in_group = threading.local()  # .arrays: what this thread's open group's calls point into, or None


@contextlib.contextmanager
def group():
    """ringoGroupStart/End around the block: the sends and receives (and collectives) this thread
    issues inside progress together at the end, so an exchange written as a loop completes. The
    arrays they are given are kept alive until then (comm.send(x * 2, peer) makes a temporary)."""
    check(_lib_.ringoGroupStart(), call="ringoGroupStart")
    outermost = getattr(_in_group, "arrays", None) is None
    if outermost:
        _in_group.arrays = []
    try:
        yield
    finally:
        try:
            check(_lib_.ringoGroupEnd(), call="ringoGroupEnd")
        finally:
            if outermost:
                _in_group.arrays = None
