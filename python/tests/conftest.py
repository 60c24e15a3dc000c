# conftest.py — pytest fixtures shared by the torch suites: a one-rank default process group on backend
# "ringo" (a rank talking to itself). Used by test_torch_cuda.py and test_torch_p2p.py.
import pytest

from launch import free_port


@pytest.fixture(scope="module")
def group():
    """The default group, one rank on backend "ringo", for the tests of one module; destroyed after them."""
    dist = pytest.importorskip("torch.distributed")
    import ringo.torch  # noqa: F401 - registers "ringo"

    store = dist.TCPStore("127.0.0.1", free_port(), 1, True)
    dist.init_process_group("ringo", store=store, rank=0, world_size=1)
    yield dist.distributed_c10d._get_default_group()
    dist.destroy_process_group()
