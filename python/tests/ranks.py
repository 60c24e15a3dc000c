# ranks.py — test helper: runs a function as N ringo ranks in spawned processes and brings each
# rank's result (or its exception text) back, with a bounded wait so a hung rank fails the test.
# Used by test_comm.py; the torch tests launch through torchrun instead (launch.py).
import multiprocessing as mp
import traceback


def _child(fn, n, uid, rank, q, args):
    try:
        import ringo
        with ringo.Comm(n, uid, rank) as comm:
            q.put((rank, True, fn(comm, *args)))
    except BaseException:  # noqa: BLE001 - the parent reports it
        q.put((rank, False, traceback.format_exc()))


def run_ranks(fn, n, *args, timeout=60):
    """fn(comm, *args) on n ranks; returns the n results in rank order, raising AssertionError with
    every failing rank's traceback."""
    import ringo
    uid = ringo.unique_id()  # the root's thread lives here, in the parent: spawned ranks start clean
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(fn, n, uid, r, q, args)) for r in range(n)]
    for p in procs:
        p.start()
    results, errors = {}, []
    try:
        for _ in range(n):
            rank, ok, val = q.get(timeout=timeout)
            (results.__setitem__(rank, val) if ok else errors.append(f"rank {rank}:\n{val}"))
    except Exception as e:  # queue.Empty: some rank hung or died without a word
        errors.append(f"only {len(results) + len(errors)} of {n} ranks answered within {timeout} s ({e!r})")
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    if errors:
        raise AssertionError("\n".join(errors))
    return [results[r] for r in range(n)]
