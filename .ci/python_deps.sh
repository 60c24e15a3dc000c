#!/usr/bin/env bash
# python_deps.sh — the Python stage's environment: creates the venv ~/.cache/ringo/venv when it is
# missing and pip-installs torch, numpy, pytest, mpi4py (ringo.Comm.from_mpi's test) and cupy-cuda13x
# (the NCCL helper's check) only when they are missing, so a second run takes about a second.
# Prints the venv's python on its last line. With `older-torch`: also puts torch $OLDER_TORCH (the
# GPU image's, the oldest ringo.torch is tested with) into a folder beside the venv when it is missing,
# without its dependencies (it uses the venv's, CUDA libraries included), and prints that folder last,
# to go first on PYTHONPATH.
set -euo pipefail
venv=${RINGO_VENV:-$HOME/.cache/ringo/venv}
OLDER_TORCH=${OLDER_TORCH:-2.11.0}
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
if [ "${1:-}" = older-torch ]; then
  site=$(dirname "$venv")/torch-$OLDER_TORCH
  if [ ! -e "$site/.complete" ]; then
    echo "python_deps: installing torch $OLDER_TORCH into $site" >&2
    rm -rf "$site"
    "$py" -m pip install -q --no-deps --no-compile --target "$site" "torch==$OLDER_TORCH" >&2
    # torch's libraries find CUDA's through ../../nvidia from their own folder: the venv's serve.
    ln -s "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia" "$site/nvidia"
    touch "$site/.complete"
  fi
  echo "$site"
  exit
fi
echo "$py"
