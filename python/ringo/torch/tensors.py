# tensors.py — how torch tensors and reduce ops meet ringo's dtypes and ops: the pointer, the
# element count and ringoDataType_t of a contiguous tensor, and ReduceOp -> ringoRedOp_t.
# Pure functions; tested through python/tests/test_torch_*.py.
import torch
import torch.distributed as dist

from .. import _lib
from ..comm import Error

DTYPES = {torch.int8: "int8", torch.uint8: "uint8", torch.int32: "int32", torch.uint32: "uint32",
          torch.int64: "int64", torch.uint64: "uint64", torch.float16: "float16",
          torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16"}
# Complex numbers reduce as pairs of reals for the ops that act on each part alone.
COMPLEX = {torch.complex64: torch.float32, torch.complex128: torch.float64}
# Bools reduce as their 0/1 bytes, as gloo's do: SUM and MAX are "any" (ringo's max), PRODUCT and MIN
# "all" (its min); AVG is not defined.
BOOL_OPS = {"sum": "max", "max": "max", "prod": "min", "min": "min"}

_R = dist.ReduceOp.RedOpType
OPS = {_R.SUM: "sum", _R.AVG: "avg", _R.PRODUCT: "prod", _R.MIN: "min", _R.MAX: "max",
       _R.PREMUL_SUM: "sum"}

# The fast path's tables, keyed by what is cheapest to read per call: torch.dtype, and the op's
# integer value (hashing the pybind enum itself costs a microsecond). Real dtypes and the ops
# that take no factor only; everything else goes the general way.
DTYPE_CODES = {t: _lib.DTYPES[name] for t, name in DTYPES.items()}
PLAIN_OP_CODES = {int(k.value): _lib.OPS[name] for k, name in OPS.items() if k != _R.PREMUL_SUM}


def check_device(t, what):
    """CPU tensors go through ringo's host path, CUDA ones through its device path; nothing else. The
    ring reads and writes their memory, so it must hold the values as they read: a dense layout, and
    no lazy negative or conjugate view (whose memory holds minus, or the conjugate of, its values)."""
    if t.device.type not in ("cpu", "cuda"):
        raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} is on {t.device}; this backend serves CPU "
                    "and CUDA tensors")
    check_memory(t, what)


def check_memory(t, what):
    """A dense layout whose memory holds the values as they read, alone (check_device's second half)."""
    if t.layout != torch.strided:
        raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} has layout {t.layout}, which is not supported "
                    "(dense tensors only: .to_dense() first)")
    if t.is_nested:  # strided layout, but no flat view of its elements to move
        raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} is a nested tensor, which is not supported "
                    "(pass its components, or .to_padded_tensor())")
    if t.is_quantized:  # its bytes are integers whose meaning (scale, zero point) would not travel
        raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} is quantized ({t.dtype}), which is not supported "
                    "(send .int_repr() and its quantization parameters, or .dequantize())")
    if t.is_neg() or t.is_conj():
        raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} is a lazy {'negative' if t.is_neg() else 'conjugate'}"
                    " view; call .resolve_neg() or .resolve_conj() first")


def check_outputs(outputs):
    """An output whose elements share memory (as after expand()) cannot hold one result per element."""
    for t in outputs:
        if t.numel() > 1 and not t.is_contiguous() and torch._debug_has_internal_overlap(t) == 1:
            raise Error(_lib.INVALID_ARGUMENT, "ringo backend: an output tensor's elements share memory (as after "
                        "expand()); pass one that owns each element (.clone())")


def call_device(tensors):
    """The one device every tensor of a call is on (torch.device), or None for a call with none."""
    device = None
    for t in tensors:
        check_memory(t, "a tensor of the call")
        if device is None:
            device = t.device
        elif t.device != device:
            raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: one call's tensors are on {device} and {t.device}; "
                        "they must share a device")
    return device


def reduce_view(t, op, what, factor=None):
    """(tensor to reduce, its ringo dtype code): complex as its real pairs for SUM/AVG/PREMUL_SUM.
    factor: PREMUL_SUM's, which takes floating (and complex) tensors only, as torch's nccl backend."""
    check_device(t, what)
    if factor is not None and not (t.is_floating_point() or t.is_complex()):
        raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: PREMUL_SUM of {what} of dtype {t.dtype} is not supported "
                    "(half, bfloat16, float, double and complex only, as with nccl)")
    if t.dtype in COMPLEX:
        if op not in ("sum", "avg"):
            raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {op} of {t.dtype} is not defined")
        t = torch.view_as_real(t)
    if t.dtype == torch.bool:
        if op not in BOOL_OPS:
            raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {op} of {what} of dtype torch.bool is not defined "
                        "(SUM and MAX are any, PRODUCT and MIN all)")
        return t.view(torch.uint8), _lib.DTYPES["uint8"]
    name = DTYPES.get(t.dtype)
    if name is None:
        raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: {what} has dtype {t.dtype}, which ringo does not "
                    f"reduce (it has {', '.join(_lib.DTYPES)})")
    return t, _lib.DTYPES[name]


def op_code(t, op):
    """ringo's op code for reducing tensor t (as the caller passed it, not reduce_view's byte view of a
    bool) with the op named op."""
    return _lib.OPS[BOOL_OPS[op] if t.dtype == torch.bool else op]


def byte_view(t, what):
    """Data movement needs no arithmetic: any dtype goes as its bytes."""
    check_device(t, what)
    return t.reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1)


def op_name(reduce_op):
    """ringo's op name for a torch ReduceOp (or RedOpType), and the PREMUL_SUM factor (or None)."""
    kind = getattr(reduce_op, "op", reduce_op)
    name = OPS.get(kind)
    if name is None:
        raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: ReduceOp {kind} is not supported (ringo has "
                    "SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM)")
    return name, (_premul_factor(reduce_op) if kind == _R.PREMUL_SUM else None)


def _premul_factor(reduce_op):
    """PREMUL_SUM's factor: torch 2.12 and later show it as .factor; before, only its pickled state holds it."""
    if hasattr(reduce_op, "factor"):
        return reduce_op.factor
    state = getattr(reduce_op, "__getstate__", lambda: None)()
    if isinstance(state, tuple) and len(state) == 2 and state[1] is not None:
        return state[1]
    raise Error(_lib.INVALID_ARGUMENT, f"ringo backend: ReduceOp PREMUL_SUM without a factor ringo can read "
                f"(torch {torch.__version__}); make it with dist._make_nccl_premul_sum(factor)")


def ptr(t):
    return t.data_ptr() if t.numel() else None
