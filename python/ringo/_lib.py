# _lib.py — finds libringo.so and declares the public C API of include/ringo.h (and ringo_mpi.h) for ctypes.
# Only the functions the header exports are bound; nothing of src/ is reached.
# Tested by python/tests/test_comm.py (pytest), run by .ci/python_tests.sh.
import ctypes
import os
import pathlib

UNIQUE_ID_BYTES = 128  # RINGO_UNIQUE_ID_BYTES

# ringoResult_t, in the header's order; the strings come from the library itself.
SUCCESS, UNHANDLED_CUDA, SYSTEM, INTERNAL, INVALID_ARGUMENT, INVALID_USAGE, REMOTE, IN_PROGRESS, TIMEOUT = range(9)

# ringoDataType_t by NumPy/torch name. bfloat16 has no NumPy type: the caller names it.
DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
          "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
# Bytes per element of each.
DTYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
               "float16": 2, "float32": 4, "float64": 8, "bfloat16": 2}
# ringoRedOp_t.
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class Config(ctypes.Structure):
    """ringoConfig_t (ringo.h): a communicator's settings over the environment's; 0 keeps the environment's."""
    _fields_ = [("size", ctypes.c_size_t), ("timeoutSeconds", ctypes.c_double)]


class CommStats(ctypes.Structure):
    _fields_ = [("bytesSent", ctypes.c_uint64), ("bytesReceived", ctypes.c_uint64),
                ("collectives", ctypes.c_uint64)]


def _candidates():
    """Where libringo.so may be, most explicit first: RINGO_LIB, a copy inside the installed package
    (the build hook puts one there), the repository's build folder, then the loader's own search
    (an installed prefix on LD_LIBRARY_PATH or in ld.so.conf)."""
    if os.environ.get("RINGO_LIB"):
        yield os.environ["RINGO_LIB"]
    here = pathlib.Path(__file__).resolve().parent
    yield str(here / "libringo.so")
    yield str(here.parent.parent / "build" / "lib" / "libringo.so")
    yield "libringo.so.0"
    yield "libringo.so"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("ringo: cannot load libringo.so; build it with `make lib` or set RINGO_LIB. Tried: "
                      + "; ".join(tried))


lib, path = _load()

_c = ctypes
_comm = _c.c_void_p
_res = _c.c_int
_SIGS = {
    "ringoGetVersion": [_c.POINTER(_c.c_int)],
    "ringoGetUniqueId": [_c.POINTER(UniqueId)],
    "ringoCommInitRank": [_c.POINTER(_comm), _c.c_int, UniqueId, _c.c_int],
    "ringoCommInitRankConfig": [_c.POINTER(_comm), _c.c_int, UniqueId, _c.c_int, _c.POINTER(Config)],
    "ringoCommInitAll": [_c.POINTER(_comm), _c.c_int, _c.POINTER(_c.c_int)],
    "ringoCommDestroy": [_comm],
    "ringoCommAbort": [_comm],
    "ringoCommCount": [_comm, _c.POINTER(_c.c_int)],
    "ringoCommUserRank": [_comm, _c.POINTER(_c.c_int)],
    "ringoCommCuDevice": [_comm, _c.POINTER(_c.c_int)],
    "ringoCommGetAsyncError": [_comm, _c.POINTER(_c.c_int)],
    "ringoCommGetStats": [_comm, _c.POINTER(CommStats)],
    "ringoAllReduce": [_c.c_void_p, _c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int, _comm, _c.c_void_p],
    "ringoReduceScatter": [_c.c_void_p, _c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int, _comm, _c.c_void_p],
    "ringoAllGather": [_c.c_void_p, _c.c_void_p, _c.c_size_t, _c.c_int, _comm, _c.c_void_p],
    "ringoBroadcast": [_c.c_void_p, _c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int, _comm, _c.c_void_p],
    "ringoReduce": [_c.c_void_p, _c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int, _c.c_int, _comm, _c.c_void_p],
    "ringoSend": [_c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int, _comm, _c.c_void_p],
    "ringoRecv": [_c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int, _comm, _c.c_void_p],
    "ringoGroupStart": [],
    "ringoGroupEnd": [],
}
for _name, _args in _SIGS.items():
    _f = getattr(lib, _name)
    _f.argtypes = _args
    _f.restype = _res
lib.ringoGetErrorString.argtypes = [_c.c_int]
lib.ringoGetErrorString.restype = _c.c_char_p
lib.ringoGetLastError.argtypes = [_comm]
lib.ringoGetLastError.restype = _c.c_char_p
# ringoCommInitMPI exists only in a build with MPI; its MPI_Comm argument is passed as the handle
# mpi4py gives (Open MPI: a pointer).
HAS_MPI = hasattr(lib, "ringoCommInitMPI")
# A build with CUDA links libcudart, and dlsym on libringo's handle also searches what it loaded.
HAS_CUDA = hasattr(lib, "cudaGetDeviceCount")
if HAS_MPI:
    lib.ringoCommInitMPI.argtypes = [_c.POINTER(_comm), _c.c_void_p]
    lib.ringoCommInitMPI.restype = _res


def error_string(code):
    return lib.ringoGetErrorString(code).decode()


def last_error(comm=None):
    return lib.ringoGetLastError(comm).decode(errors="replace")
