# test_torch_tensors.py — how backend "ringo" reads torch's reduce ops (ringo/torch/tensors.py), on the
# torch installed and on what torch before 2.12 hands a backend. Run: pytest test_torch_tensors.py
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from ringo import Error  # noqa: E402
from ringo.torch.tensors import op_name  # noqa: E402

R = dist.ReduceOp


class _OldPremulSum:
    """A PREMUL_SUM as torch 2.11's bindings show it: .op, no .factor, the factor in the pickled state."""

    op = R.RedOpType.PREMUL_SUM

    def __init__(self, factor):
        self._factor = factor

    def __getstate__(self):
        return (self.op, self._factor)


def test_plain_ops_have_no_factor():
    assert op_name(R.SUM) == ("sum", None)
    assert op_name(R.RedOpType.MAX) == ("max", None)
    assert op_name(R.AVG) == ("avg", None)


def test_premul_sum_factor_from_this_torch():
    assert op_name(dist._make_nccl_premul_sum(2.5)) == ("sum", 2.5)
    name, factor = op_name(dist._make_nccl_premul_sum(torch.tensor([3.0])))
    assert name == "sum" and torch.equal(factor, torch.tensor([3.0]))


def test_premul_sum_factor_where_torch_shows_no_factor_attribute():
    assert op_name(_OldPremulSum(0.5)) == ("sum", 0.5)


def test_premul_sum_without_a_readable_factor_is_refused_by_name():
    with pytest.raises(Error, match="PREMUL_SUM without a factor"):
        op_name(R.RedOpType.PREMUL_SUM)
    with pytest.raises(Error, match="BAND is not supported"):
        op_name(R.BAND)
