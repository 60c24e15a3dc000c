# test_torch_futures.py — what a Work's future completes with, on backend "ringo" beside a gloo group of the
# same rank, call by call: all_reduce's [tensor], all_gather's output list (not nested in another), the
# barrier's []. On a one-rank group (conftest.py). Run: pytest test_torch_futures.py
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

CALLS = {
    "all_reduce": lambda g: dist.all_reduce(torch.ones(3), group=g, async_op=True),
    "all_gather": lambda g: dist.all_gather([torch.empty(3)], torch.ones(3), group=g, async_op=True),
    "all_gather_into_tensor": lambda g: dist.all_gather_into_tensor(torch.empty(3), torch.ones(3), group=g,
                                                                    async_op=True),
    "broadcast": lambda g: dist.broadcast(torch.ones(3), 0, group=g, async_op=True),
    "barrier": lambda g: dist.barrier(group=g, async_op=True),
}


def _shape(value):
    """The nesting and sizes of a future's value: a tensor as its size, lists as lists."""
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    return [_shape(v) for v in value]


@pytest.fixture(scope="module")
def gloo(group):
    return dist.new_group([0], backend="gloo")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_future_value_has_gloos_shape(group, gloo, name):
    ours = CALLS[name](None).get_future().wait()
    theirs = CALLS[name](gloo).get_future().wait()
    assert _shape(ours) == _shape(theirs), name
