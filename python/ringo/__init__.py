# ringo — Python bindings of libringo (ring all-reduce on host memory), its teaching tools' data,
# and (import ringo.torch) a torch.distributed backend named "ringo".
# Tests: python/tests (pytest), run by .ci/python_tests.sh.
from ._lib import path as library_path
from .comm import Comm, Error, group, unique_id, version
from .teach import Model, Trace, model, trace

__all__ = ["Comm", "Error", "group", "unique_id", "version", "trace", "model", "Trace", "Model", "library_path"]
