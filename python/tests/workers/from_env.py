# from_env.py — torchrun worker: ringo.Comm.from_env() (no torch.distributed process group at
# all) and an all-reduce of a NumPy array; prints "from_env rank R ok". Used by test_torch.py.
import lines  # noqa: F401 - first: one write per printed line
import numpy as np

import ringo

comm = ringo.Comm.from_env()
x = np.full(4096, comm.rank + 1, np.int64)
comm.all_reduce(x)
assert (x == comm.size * (comm.size + 1) // 2).all(), x[:4]
print(f"from_env rank {comm.rank} ok", flush=True)
comm.destroy()
