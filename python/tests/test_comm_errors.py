# test_comm_errors.py — bad input to ringo.Comm gets a ringo.Error and loses nothing: mismatched or
# byte-swapped dtypes, object arrays under any name, ints ctypes would wrap, overlapping buffers, things
# that are not arrays, arrays a group must keep alive, destroy inside a group; after each refusal a
# correct call still works.
# Run: pytest python/tests/test_comm_errors.py (needs libringo.so: make lib).
import gc
from datetime import timedelta

import numpy as np
import pytest

import ringo
from ranks import run_ranks

INVALID_ARGUMENT, INVALID_USAGE = 4, 5


def _bad_calls(comm):
    """(what, call) pairs every rank makes alike; each must be refused before anything moves."""
    n = comm.size
    f4, i1 = np.ones(8 * n, np.float32), np.zeros(8 * n, np.int8)
    x = np.arange(8 * n, dtype=np.float64)
    return [
        ("all_reduce float32 into int8", lambda: comm.all_reduce(f4, i1)),
        ("all_reduce float32 into int32", lambda: comm.all_reduce(f4, np.zeros(8 * n, np.int32))),
        ("reduce_scatter float64 into float32", lambda: comm.reduce_scatter(x, np.zeros(8, np.float32))),
        ("all_gather int32 into int8", lambda: comm.all_gather(np.ones(8, np.int32), i1)),
        ("broadcast int8 into int64", lambda: comm.broadcast(np.ones(4, np.int8), np.zeros(4, np.int64))),
        ("reduce float32 into float64", lambda: comm.reduce(f4, np.zeros(8 * n))),
        ("dtype bfloat16 on float32", lambda: comm.all_reduce(f4.copy(), dtype="bfloat16")),
        ("dtype float64 on int8", lambda: comm.all_reduce(i1.copy(), dtype="float64")),
        ("dtype a list", lambda: comm.all_reduce(f4.copy(), dtype=["float32"])),
        ("dtype big-endian float32 on float32", lambda: comm.all_reduce(f4.copy(), dtype=">f4")),
        ("object array renamed int64", lambda: comm.all_reduce(np.array([object()] * 4), dtype="int64")),
        ("object record renamed uint64", lambda: comm.broadcast(np.zeros(4, [("o", object)]), dtype="uint64")),
        ("big-endian int32", lambda: comm.all_reduce(np.ones(4, ">i4"))),
        ("big-endian float64", lambda: comm.broadcast(np.ones(4, ">f8"))),
        ("root 2**32 + 1", lambda: comm.broadcast(f4.copy(), root=2**32 + 1)),
        ("root None", lambda: comm.reduce(f4.copy(), root=None)),
        ("root 0.5", lambda: comm.broadcast(f4.copy(), root=0.5)),
        ("peer 2**32 + 1", lambda: comm.send(f4, 2**32 + 1)),
        ("all_reduce of a list", lambda: comm.all_reduce([1.0, 2.0])),
        ("reduce_scatter of a float", lambda: comm.reduce_scatter(3.0)),
        ("all_gather of bytes", lambda: comm.all_gather(b"ab")),
        ("broadcast of a memoryview", lambda: comm.broadcast(memoryview(b"abcd"))),
        ("all_reduce recv one element past send", lambda: comm.all_reduce(x[:-1], x[1:])),
        ("reduce_scatter recv at an odd element of send", lambda: comm.reduce_scatter(x[:2 * n], x[1:3])),
        ("all_gather send at an odd element of recv", lambda: comm.all_gather(x[1:3], x[:2 * n])),
    ]


def _refusals(comm):
    """What each bad call raised, and whether a correct all-reduce worked right after it."""
    out = []
    for what, call in _bad_calls(comm):
        try:
            call()
            raised = None
        except ringo.Error as e:
            raised = (e.code, e.message)
        except Exception as e:  # noqa: BLE001 - anything but ringo.Error is a failure of the test
            raised = (type(e).__name__, str(e))
        ok = comm.all_reduce(np.ones(4, np.float32)).tolist() == [float(comm.size)] * 4
        out.append((what, raised, ok))
    return out


@pytest.mark.parametrize("n", [1, 2])
def test_bad_calls_are_ringo_errors_and_the_comm_stays_usable(n):
    for rank_results in run_ranks(_refusals, n):
        for what, raised, ok in rank_results:
            assert raised is not None and raised[0] == INVALID_ARGUMENT, f"{what}: {raised}"
            assert ok, f"{what}: the all-reduce after it failed"


def _group_temporaries(comm):
    """Two sends of temporaries, a receive into one nobody keeps and one into `got`, inside a group,
    then other arrays of the same size made where the temporaries were: the group must have kept them."""
    n, me, k = comm.size, comm.rank, 1 << 16
    got = np.empty(k)
    with ringo.group():
        comm.send(np.arange(k) * 2.0 + me, (me + 1) % n)
        comm.send(np.arange(k) * 3.0 + me, (me + 1) % n)
        comm.recv(np.empty(k), (me - 1) % n)  # discarded
        comm.recv(got, (me - 1) % n)
        gc.collect()
        junk = [np.full(k, -1.0) for _ in range(8)]
    del junk
    return bool(np.array_equal(got, np.arange(k) * 3.0 + (me - 1) % n))


def test_a_group_keeps_the_arrays_it_was_given_alive():
    assert all(run_ranks(_group_temporaries, 2))


def _destroy_in_group(comm):
    x = np.ones(4, np.float32)
    with ringo.group():
        comm.all_reduce(x)
        with pytest.raises(ringo.Error) as e:
            comm.destroy()
    refused = e.value.code == INVALID_USAGE and "ringoGroupEnd" in e.value.message
    return refused, comm.all_reduce(np.ones(2, np.float32)).tolist()


def test_destroy_is_refused_while_the_open_group_holds_the_comms_calls():
    [(refused, after)] = run_ranks(_destroy_in_group, 1)
    assert refused and after == [1.0, 1.0]


def test_dtype_may_be_named_as_numpy_names_it():
    # np.float32 was refused as "dtype <class 'numpy.float32'> is not one ringo reduces".
    with ringo.Comm(1, ringo.unique_id(), 0) as comm:
        for dtype in (np.float32, np.dtype("float32"), "f4", "float32"):
            assert comm.all_reduce(np.ones(2, np.float32), dtype=dtype).tolist() == [1.0, 1.0]
        assert comm.all_reduce(np.ones(2, np.int32), dtype=np.uint32).tolist() == [1, 1]  # a rename, as before


@pytest.mark.parametrize("nranks, uid, rank", [(1, None, 0), (1, "x" * 128, 0), (2**32 + 1, "id", 0),
                                               (1, "id", 2**32), (1.5, "id", 0), (1, "id", 0.2)])
def test_constructor_arguments_are_checked_before_ctypes_sees_them(nranks, uid, rank):
    # With a real id, 2**32 + 1 ranks would wrap round to a working one-rank communicator.
    uid = ringo.unique_id() if uid == "id" else uid
    with pytest.raises(ringo.Error) as e:
        ringo.Comm(nranks, uid, rank)
    assert e.value.code == INVALID_ARGUMENT


def _one_rank_sum(uid_as):
    import ringo as r
    uid = r.unique_id()
    with r.Comm(1, uid_as(uid), 0) as comm:
        return comm.all_reduce(np.ones(2, np.float32)).tolist()


@pytest.mark.parametrize("uid_as", [bytes, bytearray, memoryview, lambda b: np.frombuffer(b, np.uint8)])
def test_the_unique_id_may_travel_as_any_bytes_like_object(uid_as):
    assert _one_rank_sum(uid_as) == [1.0, 1.0]


def test_calls_on_a_destroyed_comm_say_it_was_destroyed():
    # They said "comm is NULL" (the None handle passed to C) while rank and size said "destroyed".
    comm = ringo.Comm(1, ringo.unique_id(), 0)
    comm.destroy()
    x = np.ones(2, np.float32)
    for call in (lambda: comm.all_reduce(x), lambda: comm.broadcast(x), lambda: comm.send(x, 0),
                 lambda: comm.rank):
        with pytest.raises(ringo.Error, match="already destroyed") as e:
            call()
        assert e.value.code == INVALID_USAGE


@pytest.mark.parametrize("timeout, message", [(-1, "timeoutSeconds -1 is not in"), (2e9, "is not in \\[0.001, 1e9\\]"),
                                              ("5", "seconds or a timedelta, got str"),
                                              (True, "seconds or a timedelta, got bool")])
def test_a_bad_timeout_is_refused_by_name_and_the_id_stays_usable(timeout, message):
    uid = ringo.unique_id()
    with pytest.raises(ringo.Error, match=message) as e:
        ringo.Comm(1, uid, 0, timeout=timeout)
    assert e.value.code == INVALID_ARGUMENT
    with ringo.Comm(1, uid, 0, timeout=timedelta(seconds=5)) as comm:  # a timedelta, as torch gives it
        assert comm.all_reduce(np.ones(2, np.float32)).tolist() == [1.0, 1.0]
