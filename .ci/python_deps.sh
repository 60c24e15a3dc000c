#!/usr/bin/env bash
# python_deps.sh — the Python stage's environment: creates the venv ~/.cache/ringo/venv when it is
# missing and pip-installs torch, numpy, pytest, mpi4py (ringo.Comm.from_mpi's test) and cupy-cuda13x
# (the NCCL helper's check) only when they are missing, so a second run takes about a second.
# Prints the venv's python on its last line.
set -euo pipefail
venv=${RINGO_VENV:-$HOME/.cache/ringo/venv}
if [ ! -x "$venv/bin/python" ]; then
  echo "python_deps: creating $venv" >&2
  python3 -m venv "$venv"
fi
py=$venv/bin/python
# find_spec looks for a module without importing it (importing torch alone takes seconds).
missing=$("$py" - <<'PY'
import importlib.util
wanted = {"torch": "torch", "numpy": "numpy", "pytest": "pytest", "mpi4py": "mpi4py", "cupy": "cupy-cuda13x"}
print(" ".join(pkg for mod, pkg in wanted.items() if importlib.util.find_spec(mod) is None))
PY
)
if [ -n "$missing" ]; then
  echo "python_deps: installing $missing into $venv" >&2
  # shellcheck disable=SC2086 # one word per package
  "$py" -m pip install -q $missing >&2
fi
echo "$py"
