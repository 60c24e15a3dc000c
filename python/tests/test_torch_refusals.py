# test_torch_refusals.py — backend "ringo" on tensors and calls it cannot serve as given: each is refused by
# name before anything moves, and the group stays usable; and the ones it serves where autograd would stop
# a write from Python (a parameter's view, an inference tensor), as gloo does. On a one-rank group
# (conftest.py). Run: pytest test_torch_refusals.py
from datetime import timedelta
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from ringo import Error  # noqa: E402


def _still_works():
    t = torch.ones(3)
    dist.all_reduce(t)
    return torch.equal(t, torch.ones(3))


def _quantized():
    # Its memory holds integers that mean something only with its scale and zero point, which would not
    # travel: a broadcast moved the integers alone (the receiver read them at its own scale).
    return torch.quantize_per_tensor(torch.ones(4), 0.5, 0, torch.quint8)


def _nested():
    # Its layout is strided, but it has no flat view: data movement failed inside torch's reshape.
    return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])


@pytest.mark.parametrize("what, call, message", [
    ("a negative view, MAX", lambda: dist.all_reduce(torch._neg_view(torch.tensor([2.0, 5.0])), dist.ReduceOp.MAX),
     "lazy negative view"),
    ("a negative view, async", lambda: dist.all_reduce(torch._neg_view(torch.ones(2)), async_op=True).wait(),
     "lazy negative view"),
    ("a negative view, broadcast", lambda: dist.broadcast(torch._neg_view(torch.ones(2)), 0), "lazy negative view"),
    ("a conjugate view", lambda: dist.broadcast(torch.ones(2, dtype=torch.complex64).conj(), 0), "resolve_conj"),
    ("a sparse tensor", lambda: dist.all_reduce(torch.ones(4).to_sparse()), "layout torch.sparse_coo"),
    ("a sparse CSR tensor", lambda: dist.all_reduce(torch.eye(2).to_sparse_csr()), "layout torch.sparse_csr"),
    ("a quantized tensor, broadcast", lambda: dist.broadcast(_quantized(), 0), "is quantized"),
    ("a quantized tensor, all_gather", lambda: dist.all_gather([_quantized()], _quantized()), "is quantized"),
    ("a quantized tensor, all_to_all", lambda: dist.all_to_all([_quantized()], [_quantized()]), "is quantized"),
    ("all_to_all_single, own piece of two sizes", lambda: dist.all_to_all_single(torch.empty(3), torch.ones(2)),
     "own piece is 8 bytes in the input and 12"),
    ("all_to_all, own piece of two sizes", lambda: dist.all_to_all([torch.empty(3)], [torch.ones(2)]),
     "own piece is 8 bytes in the input and 12"),
    ("a nested tensor, broadcast", lambda: dist.broadcast(_nested(), 0), "is a nested tensor"),
    ("a nested tensor, all_gather_into_tensor", lambda: dist.all_gather_into_tensor(_nested(), _nested()),
     "is a nested tensor"),
    ("an expanded output", lambda: dist.all_reduce(torch.ones(1).expand(3)), "share memory"),
    ("a gather list one long", lambda: dist.gather(torch.ones(2), [torch.empty(2)] * 2, dst=0), "one tensor per rank"),
    ("a gather list entry of another size", lambda: dist.gather(torch.ones(2), [torch.empty(3)], dst=0),
     "one tensor per rank"),
    ("a scatter list entry of another size", lambda: dist.scatter(torch.empty(2), [torch.ones(3)], src=0),
     "one tensor per rank"),
])
def test_refused_by_name_and_the_group_stays_usable(group, what, call, message):
    with pytest.raises((Error, ValueError, RuntimeError), match=message):
        call()
    assert _still_works(), what


@pytest.mark.parametrize("call", [
    lambda t, op: dist.all_reduce(t, op),
    lambda t, op: dist.all_reduce(t, op, async_op=True).wait(),
    lambda t, op: dist.all_reduce_coalesced([t], op),
    lambda t, op: dist.reduce(t, 0, op),
    lambda t, op: dist.reduce_scatter_tensor(torch.empty_like(t), t, op),
    lambda t, op: dist.reduce_scatter(torch.empty_like(t), [t], op),
])
def test_premul_sum_of_integers_is_refused_and_moves_nothing(group, call):
    # As torch's nccl backend (gloo refuses PREMUL_SUM altogether): reduce and reduce_scatter scaled an
    # int32 input into a float32 one and reduced its bits as int32.
    t = torch.tensor([1, 2, 3], dtype=torch.int32)
    with pytest.raises(Error, match="PREMUL_SUM of .* dtype torch.int32 is not supported"):
        call(t, dist._make_nccl_premul_sum(2.0))
    assert torch.equal(t, torch.tensor([1, 2, 3], dtype=torch.int32))
    assert _still_works()


def test_negative_split_sizes_are_refused_even_when_they_sum_right(group):
    from ringo.torch.pg import _splits
    with pytest.raises(Error, match="do not cut"):
        _splits(torch.empty(4), [5, -1], 2, "input")


def test_a_fast_path_all_reduce_reads_a_negative_view_as_its_values_or_refuses(group):
    t = torch._neg_view(torch.tensor([2.0, 5.0]))
    with pytest.raises(Error, match="lazy negative view"):
        dist.all_reduce(t, dist.ReduceOp.MAX)  # the C fast path must not take its raw memory either


def test_writes_autograd_forbids_from_python_go_through(group):
    p = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))
    dist.all_reduce(p.t())  # a view of a leaf that requires grad, not contiguous: written back
    dist.broadcast(p.t(), 0)
    assert torch.equal(p.detach(), torch.arange(6.0).reshape(2, 3))
    with torch.inference_mode():
        it = torch.arange(4.0).reshape(2, 2)
    dist.all_reduce(it.t())
    assert torch.equal(it, torch.arange(4.0).reshape(2, 2))
    q = torch.nn.Parameter(torch.full((3,), 2.0))
    dist.all_reduce(q, dist._make_nccl_premul_sum(0.5))  # the factor is applied in place
    assert torch.equal(q.detach(), torch.ones(3))


def test_wait_with_a_timeout_raises_when_the_work_is_not_done_by_then(group):
    group._worker.submit(lambda: time.sleep(1.0), [])  # the worker is busy for a second
    work = dist.all_reduce(torch.ones(2), async_op=True)
    with pytest.raises(RuntimeError, match="timed out after 0.1 s"):
        work.wait(timedelta(seconds=0.1))
    assert work.wait(timedelta.max) and work.is_success()  # no limit, not an overflow


def test_a_destroyed_subgroup_refuses_calls_instead_of_hanging(group):
    sub = dist.new_group([0])
    dist.destroy_process_group(sub)
    with pytest.raises(Error, match="was destroyed"):
        sub.allreduce([torch.ones(2)]).wait()
    assert _still_works()


def test_options_without_async_op_run_as_torch_before_2_8_passes_them(group):
    # AllreduceOptions gained asyncOp in torch 2.8; an options object without it takes the general path.
    class OldOptions:
        reduceOp = dist.ReduceOp.SUM
        timeout = None
    t = torch.ones(3)
    group.allreduce([t], OldOptions()).wait()
    assert torch.equal(t, torch.ones(3))
