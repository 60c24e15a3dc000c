# launch.py — test helper: runs a worker script of tests/workers as N torch ranks, either through
# torchrun (python -m torch.distributed.run --standalone) or as N plain processes given the env://
# variables (so that one rank's death is not hidden by torchrun tearing the others down).
import os
import pathlib
import socket
import subprocess
import sys

WORKERS = pathlib.Path(__file__).resolve().parent / "workers"


def _env(extra):
    env = dict(os.environ)
    # Unbuffered, print() writes a line's text and its newline in two writes, and the ranks' lines
    # interleave on the shared pipe ("...in Cringo collectives rank 0"): for spawn(); torchrun adds
    # -u whatever the environment says, so the workers also import lines.py.
    env.pop("PYTHONUNBUFFERED", None)
    env.setdefault("RINGO_TIMEOUT", "30")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra or {})
    return env


def torchrun(script, n, *args, env=None, timeout=240):
    """CompletedProcess of torchrun --nproc-per-node n running tests/workers/<script>."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
           str(WORKERS / script), *map(str, args)]
    return subprocess.run(cmd, env=_env(env), capture_output=True, text=True, timeout=timeout)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(script, n, env=None, timeout=120, args=()):
    """[(returncode, output)] of n processes of tests/workers/<script> (with args) with RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT set as env:// reads them (rank 0 hosts the store)."""
    port = free_port()
    procs = []
    for r in range(n):
        e = _env(env)
        e.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, str(WORKERS / script), *map(str, args)], env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += f"\n[launch.py: killed after {timeout} s]"
        results.append((p.returncode, out))
    return results
