# setup.py — the one build step pyproject.toml cannot say declaratively: put libringo.so (and the
# tools ringo-trace, ringo-model and ringo-bench) inside the package. Found in this order: RINGO_LIB (a
# built libringo.so), the repository one folder up (running `make lib` there when not built yet),
# else none: ringo then looks on the loader's path at import (an installed prefix). Also builds
# ringo.torch._fastcall, dist.all_reduce's blocking call in C, where Python's headers are there.
import os
import pathlib
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
TOOLS = ["ringo-trace", "ringo-model", "ringo-bench"]


def _make(targets):
    # The Makefile detects nvcc itself; RINGO_CUDA_BUILD=0 forces a host-only build.
    cuda = [f"CUDA={os.environ['RINGO_CUDA_BUILD']}"] if os.environ.get("RINGO_CUDA_BUILD") else []
    jobs = os.environ.get("RINGO_MAKE_JOBS", "2")
    subprocess.check_call(["make", f"-j{jobs}"] + cuda + targets, cwd=REPO)


def _find_built():
    """(libringo.so, [tool paths]) to ship, or (None, []) to rely on the loader at import."""
    if os.environ.get("RINGO_LIB"):
        lib = pathlib.Path(os.environ["RINGO_LIB"])
        if not lib.is_file():
            raise SystemExit(f"ringo: RINGO_LIB={lib} is not a file")
        tools = [lib.parent.parent / "bin" / t for t in TOOLS]
        return lib, [t for t in tools if t.is_file()]
    if (REPO / "Makefile").is_file() and (REPO / "include" / "ringo.h").is_file():
        build = REPO / "build"
        _make(["lib"] + [f"build/bin/{t}" for t in TOOLS])
        return build / "lib" / "libringo.so", [build / "bin" / t for t in TOOLS]
    return None, []


class BuildWithLib(build_py):
    def run(self):
        super().run()
        lib, tools = _find_built()
        if lib is None:
            return
        dest = pathlib.Path(self.build_lib) / "ringo"
        shutil.copy2(lib, dest / "libringo.so")
        (dest / "bin").mkdir(exist_ok=True)
        for t in tools:
            shutil.copy2(t, dest / "bin" / t.name)


# Optional: without Python's headers the package installs without it and ringo.torch runs that
# call in Python (ringo.torch.pg.fast_path() says which). It links nothing: libringo's function
# reaches it as an address from ctypes.
FASTCALL = Extension("ringo.torch._fastcall", ["ringo/torch/_fastcall.c"], optional=True,
                     extra_compile_args=["-O2", "-Wall", "-Wextra"])

setup(cmdclass={"build_py": BuildWithLib}, ext_modules=[FASTCALL])
