# test_torch_p2p.py — backend "ringo"'s sends and receives, collected into one batch until a Work of
# theirs is waited on or the group is called again (ringo/torch/p2p.py), on a one-rank group talking to
# itself: ringo runs a send to this rank only inside a group that also holds the receive, so every
# exchange below completes only if its send and receive start together (the group: conftest.py).
# Run: pytest test_torch_p2p.py
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from ringo import Error  # noqa: E402
from ringo.torch.p2p import P2PWork  # noqa: E402

BIG = 1 << 20  # 4 MiB of float32: more than a link's FIFO holds


def test_a_send_waits_for_its_batch_and_the_receive_completes_it(group):
    got = torch.empty(BIG)
    send = dist.isend(torch.full((BIG,), 3.0), 0)
    assert isinstance(send, P2PWork) and group._p2p is not None  # collected, not started
    recv = dist.irecv(got, 0)
    recv.wait()  # starts both: alone, the send to this rank would fail
    assert group._p2p is None and send.is_completed() and send.is_success()
    send.wait()
    assert torch.equal(got, torch.full((BIG,), 3.0))


def test_receives_first_and_polling_start_the_batch(group):
    got = torch.empty(7)
    works = [dist.irecv(got, 0), dist.isend(torch.arange(7.0), 0)]
    while not works[1].is_completed():
        pass
    assert works[0].is_completed() and works[0].exception() is None
    assert torch.equal(got, torch.arange(7.0))


def test_futures_give_each_work_its_own_tensors(group):
    out, got = torch.arange(4.0), torch.empty(4)
    send, recv = dist.isend(out, 0), dist.irecv(got, 0)
    assert recv.get_future().wait() == [got]
    assert send.get_future().wait() == [out]
    assert torch.equal(got, out) and send.result() == [out]


def test_the_next_collective_starts_the_batch_first_even_on_the_fast_path(group):
    got = torch.empty(3)
    recv = dist.irecv(got, 0)
    dist.isend(torch.full((3,), 5.0), 0)
    t = torch.ones(2)
    dist.all_reduce(t)  # blocking: its C fast path must not run ahead of the collected pair
    assert group._p2p is None and recv.is_completed()
    assert torch.equal(got, torch.full((3,), 5.0)) and torch.equal(t, torch.ones(2))


def test_a_blocking_send_and_recv_pair_runs_as_one_batch(group):
    # dist.send is group.send(...).wait() (which torch refuses to this rank itself): the wait starts the
    # batch, which holds the recv posted before it.
    got = torch.empty(BIG)
    recv = dist.irecv(got, 0)
    group.send([torch.full((BIG,), 2.0)], 0, 0).wait()
    recv.wait()
    assert torch.equal(got, torch.full((BIG,), 2.0))


def test_a_failed_batch_fails_every_work_of_it_with_ringos_message(group):
    sub = dist.new_group([0])  # its own communicator: the failure leaves the default group usable
    send = dist.isend(torch.ones(4), 0, group=sub)
    recv = dist.irecv(torch.empty(8), 0, group=sub)
    with pytest.raises(Error, match="sends 16 x uint8 to itself but receives 32"):
        recv.wait()
    with pytest.raises(Error, match="sends 16 x uint8 to itself but receives 32"):
        send.wait()
    assert not send.is_success() and isinstance(send.exception(), Error)
    dist.destroy_process_group(sub)


def test_bad_arguments_raise_at_the_call_and_collect_nothing(group):
    with pytest.raises(Error, match="send peer 3 is not a rank"):
        group.send([torch.ones(2)], 3, 0)
    with pytest.raises(Error, match="is on meta"):
        dist.irecv(torch.empty(2, device="meta"), 0)
    assert group._p2p is None


def test_coalescing_returns_the_work_of_everything_called_inside(group):
    cpu = torch.device("cpu")
    t = torch.ones(3)
    group._start_coalescing(cpu)
    work = group.allreduce([t])
    assert group._end_coalescing(cpu) is work
    group._start_coalescing(cpu)
    got = torch.empty(2)
    group.send([torch.full((2,), 4.0)], 0, 0)
    group.recv([got], 0, 0)
    group._end_coalescing(cpu).wait()
    assert torch.equal(got, torch.full((2,), 4.0))
    group._start_coalescing(cpu)  # empty, as torch brackets an abort
    assert group._end_coalescing(cpu).is_completed()


def test_outside_coalescing_the_group_keeps_no_call_s_tensors(group):
    # FSDP frees an all-gather's output once it is used: a reference the group kept until its next
    # call would hold one unsharded parameter group in memory for as long.
    import time
    import weakref

    out = torch.empty(1 << 16)
    group.allgather_into_tensor_coalesced([out], [torch.ones(1 << 16)]).wait()
    gone = weakref.ref(out)
    del out
    deadline = time.monotonic() + 5  # the worker lets go of the call just after finishing its Work
    while gone() is not None and time.monotonic() < deadline:
        time.sleep(0.001)
    assert gone() is None, "the group still holds the tensors of a finished call"


def test_abort_fails_the_open_batch_by_name(group):
    sub = dist.new_group([0])
    recv = dist.irecv(torch.empty(2), 0, group=sub)
    sub.abort()
    with pytest.raises(Error, match="aborted before these sends and receives started"):
        recv.wait()


def test_an_isend_from_another_thread_as_coalescing_starts_joins_the_batch(group):
    # _start_coalescing starts the open batch, then opens the coalescing one: another thread's isend
    # between the two opened a batch of its own that the coalescing one then replaced, losing the send
    # (and the worker's hold for it). Here that thread is started right between the two.
    import threading
    got, sent, other = torch.empty(3), {}, []
    real = group._start_p2p

    def isend_from_another_thread():
        sent["work"] = dist.isend(torch.full((3,), 4.0), 0)

    def start_p2p_then_race(batch=None):
        real(batch)
        if not other:  # the first call: inside _start_coalescing
            other.append(threading.Thread(target=isend_from_another_thread))
            other[0].start()
            other[0].join(0.5)  # blocked on the group's lock now, if _start_coalescing holds it
    group._start_p2p = start_p2p_then_race
    try:
        with dist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
            del group._start_p2p
            recv = dist.irecv(got, 0)
            other[0].join(10)  # its isend is in the coalescing batch before the batch ends
        cm.wait()
    finally:
        group.__dict__.pop("_start_p2p", None)
    recv.wait()
    sent["work"].wait()
    assert torch.equal(got, torch.full((3,), 4.0))
