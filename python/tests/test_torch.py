# test_torch.py — the torch.distributed backend "ringo" under real PyTorch on this machine:
# every collective on every shared dtype (torchrun N = 2 and 4), DDP against gloo, FSDP2 against
# DDP, pipeline parallelism against gloo, functional collectives, DTensor, tensor parallelism, FSDP1 and
# object collectives against gloo, distributed checkpoint and monitored_barrier, and a rank killed
# mid-training.
# Run: pytest python/tests/test_torch.py (needs torch).
import re

import pytest

torch = pytest.importorskip("torch")
from launch import spawn, torchrun  # noqa: E402
from ringo.torch.pg import fast_path  # noqa: E402


def _report(proc):
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"


@pytest.mark.parametrize("n", [2, 4])
def test_every_collective_every_dtype(n):
    proc = torchrun("collectives.py", n)
    assert proc.returncode == 0, _report(proc)
    counts = re.findall(r"ringo collectives rank (\d+): (\d+) checks, (\d+) failed, blocking all_reduce in (\w+)",
                        proc.stdout)
    assert sorted(int(r) for r, _, _, _ in counts) == list(range(n)), _report(proc)
    assert all(int(c) > 150 and int(f) == 0 for _, c, f, _ in counts), _report(proc)
    # The checks ran through the C fast path (ringo.torch._fastcall) where it is built.
    assert all(path == ("C" if fast_path() else "Python") for _, _, _, path in counts), _report(proc)


def test_ddp_matches_gloo_and_fsdp_matches_ddp_on_2_ranks():
    proc = torchrun("ddp_fsdp.py", 2, 50, 5)
    assert proc.returncode == 0, _report(proc)
    assert len(re.findall(r"ddp rank \d: 50 steps", proc.stdout)) == 2, _report(proc)
    assert len(re.findall(r"fsdp rank \d: 5 steps", proc.stdout)) == 2, _report(proc)
    assert len(re.findall(r"ddp_fsdp rank \d: 0 failed", proc.stdout)) == 2, _report(proc)


def test_ddp_matches_gloo_on_4_ranks():
    # Four ranks sum in another order than two; 20 steps keep the stage inside its time budget.
    proc = torchrun("ddp_fsdp.py", 4, 20, 0)
    assert proc.returncode == 0, _report(proc)
    assert len(re.findall(r"ddp_fsdp rank \d: 0 failed", proc.stdout)) == 4, _report(proc)


def test_pipeline_parallel_1f1b_matches_gloo():
    # torch.distributed.pipelining's batched sends and receives of 1 MiB activations, more than a FIFO.
    proc = torchrun("pipeline.py", 2)
    assert proc.returncode == 0, _report(proc)
    assert len(re.findall(r"pipeline rank \d: 3 steps, 0 failed", proc.stdout)) == 2, _report(proc)


@pytest.mark.parametrize("n", [2, 3])
def test_functional_dtensor_tensor_parallel_fsdp1_and_objects_match_gloo(n):
    # Bit for bit at N = 2; at 3, gloo adds floating-point sums in another order (1e-5).
    proc = torchrun("parallelism.py", n)
    assert proc.returncode == 0, _report(proc)
    counts = re.findall(r"parallelism rank \d: (\d+) checks, 0 failed", proc.stdout)
    assert len(counts) == n and all(int(c) >= 6 for c in counts), _report(proc)


def test_checkpoint_and_monitored_barrier(tmp_path):
    proc = torchrun("trainer_tools.py", 3, tmp_path)
    assert proc.returncode == 0, _report(proc)
    assert len(re.findall(r"tools rank \d: \d+ checks, 0 failed", proc.stdout)) == 3, _report(proc)
    # torch before 2.12 refuses monitored_barrier on any backend but gloo, before asking the group.
    told = "monitored_barrier checked" if torch.__version__ >= "2.12" else "monitored_barrier refused by torch"
    assert proc.stdout.count(told) == 3, _report(proc)


def test_killed_rank_fails_the_others_with_ringos_message():
    timeout_s = 5
    results = spawn("kill.py", 3, env={"RINGO_TIMEOUT": str(timeout_s)})
    outs = "\n".join(f"--- rank {r} exit {rc}\n{out[-2000:]}" for r, (rc, out) in enumerate(results))
    assert results[2][0] == 3, outs
    killed_at = float(re.search(r"KILLED-AT: ([0-9.]+)", results[2][1]).group(1))
    for rc, out in results[:2]:
        assert rc == 7, outs  # ended by the error, not by a hang or a clean finish
        assert re.search(r"RINGO-ERROR: .*ringo: ringo\w+: .*rank 2", out), outs  # ringo's own message
        failed_at = float(re.search(r"RINGO-ERROR-AT: ([0-9.]+)", out).group(1))
        assert failed_at - killed_at < timeout_s + 3, outs  # within RINGO_TIMEOUT (plus load slack)


@pytest.mark.parametrize("ringo_timeout, pg_timeout, bound", [("", 2, 2), ("1", 60, 1)])
def test_group_timeout_bounds_a_wait_unless_ringo_timeout_is_set(ringo_timeout, pg_timeout, bound):
    # init_process_group(timeout=...) is the group's RINGO_TIMEOUT (as gloo's bounds an operation), and
    # RINGO_TIMEOUT in the environment wins where set. Rank 1 comes 6 s late to a barrier.
    results = spawn("timeout.py", 2, env={"RINGO_TIMEOUT": ringo_timeout}, args=(pg_timeout, 6))
    outs = "\n".join(f"--- rank {r} exit {rc}\n{out[-2000:]}" for r, (rc, out) in enumerate(results))
    m = re.search(r"BARRIER rank 0 failed after ([0-9.]+): .*timed out after", results[0][1])
    assert m, outs
    assert bound - 0.2 <= float(m.group(1)) < bound + 3, outs  # the bound, not RINGO_TIMEOUT's 300 s default


def test_abort_process_group_returns():
    proc = torchrun("abort.py", 2, timeout=120)
    assert proc.returncode == 0, _report(proc)
    assert len(re.findall(r"abort rank \d: aborted ok, \[2.0, 2.0, 2.0\]", proc.stdout)) == 2, _report(proc)


def test_comm_from_torchrun_environment():
    proc = torchrun("from_env.py", 3)
    assert proc.returncode == 0, _report(proc)
    assert sorted(re.findall(r"from_env rank (\d) ok", proc.stdout)) == ["0", "1", "2"], _report(proc)
