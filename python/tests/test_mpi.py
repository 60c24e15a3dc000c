# test_mpi.py — ringo.Comm.from_mpi over mpi4py's COMM_WORLD under mpirun (2 ranks): an
# all-reduce whose result every rank checks. Skipped where mpi4py or mpirun is missing.
# Run: pytest python/tests/test_mpi.py
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py")

PROGRAM = """
import sys
import numpy as np, ringo
from mpi4py import MPI
comm = ringo.Comm.from_mpi()
x = np.full(1000, comm.rank + 1, np.float64)
comm.all_reduce(x)
assert comm.size == MPI.COMM_WORLD.Get_size() and (x == 3).all(), x[:4]
sys.stdout.write(f"mpi rank {comm.rank} ok\\n")  # one write, even unbuffered: lines cannot interleave
sys.stdout.flush()
comm.destroy()
"""


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_comm_from_mpi4py():
    out = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable, "-c", PROGRAM],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(" ok") == 2, out.stdout
