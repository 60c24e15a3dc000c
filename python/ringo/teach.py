# teach.py — ringo.trace(n) and ringo.model(...): the teaching tools' data as Python objects.
# trace() runs tools/ringo-trace (which replays the library's own ringo_schedule) and reads its
# printout back; model() evaluates the seed's cost model that tools/ringo-model prints.
# Tested by python/tests/test_teach.py, which checks both against the tools' own output.
import dataclasses
import math
import numbers
import os
import pathlib
import re
import shutil
import subprocess

from . import _lib


def tool(name):
    """Path of a teaching tool: RINGO_BIN_DIR, the copy inside the installed package, the
    repository's build/bin, then PATH."""
    here = pathlib.Path(__file__).resolve().parent
    dirs = [os.environ.get("RINGO_BIN_DIR"), here / "bin", here.parent.parent / "build" / "bin"]
    for d in dirs:
        if d and (pathlib.Path(d) / name).is_file():
            return str(pathlib.Path(d) / name)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"ringo: {name} not found (make tools, or set RINGO_BIN_DIR)")
    return found


@dataclasses.dataclass
class Message:
    """One chunk on the wire during one step: src sends chunk (holding the sum of `sent`), dst
    adds its own value (reduced=True, reduce-scatter) or keeps it (all-gather), ending with `after`."""
    src: int
    dst: int
    chunk: int
    sent: list
    after: list
    reduced: bool
    elements: int = None


@dataclasses.dataclass
class Step:
    phase: str  # "reduce-scatter" or "all-gather"
    index: int  # step s within its phase, as the seed numbers them
    messages: list
    holds: list  # holds[rank][chunk]: the ranks whose values that rank has summed for that chunk


@dataclasses.dataclass
class Trace:
    n: int
    count: int
    chunks: list  # [(first, end)] elements of each chunk, when count was given
    schedule: list  # schedule[rank][t] = (primitive code, chunk): ringo_schedule's fused steps
    start: list  # holds before step 0
    steps: list  # 2(N-1) Steps
    sent_elements: list  # per rank, when count was given
    text: str  # the tool's printout, for reading

    def owner(self, chunk):
        """The rank that finishes reducing `chunk` in the reduce-scatter phase."""
        last = self.steps[self.n - 2]
        return next(m.dst for m in last.messages if m.chunk == chunk)


_CELL = re.compile(r"\[?(-|r(\d+)\+\.\.\.\+r\d+ \((\d+)\)|r\d+(?:\+r\d+)*)\]?")


def _ranks(token, n):
    """'r2+r0' -> [2, 0]; 'r3+...+r1 (6)' -> the six ranks from 3 around the ring; '-' -> []."""
    m = _CELL.fullmatch(token.strip())
    if not m or m.group(1) == "-":
        return []
    if m.group(2) is not None:
        first, k = int(m.group(2)), int(m.group(3))
        return [(first + i) % n for i in range(k)]
    return [int(x) for x in re.findall(r"r(\d+)", m.group(1))]


def _holds_row(line, n):
    cells = [_ranks(c.group(0), n) for c in _CELL.finditer(line.split(None, 1)[1])]
    if len(cells) != n:
        raise ValueError(f"ringo.trace: cannot read a holds row of ringo-trace: {line!r}")
    return cells


_MSG = re.compile(r"\s+r(\d+) -> r(\d+)\s+chunk (\d+) = (.+?)\s+r\d+ (adds|keeps): chunk \d+ = (.+?)"
                  r"(?:\s+\((\d+) elements?\))?\s*$")


def parse_trace(text, n, count=None):
    """Reads ringo-trace's printout into a Trace (the format is the tool's; a change there shows up
    here as a ValueError, and in test_teach.py)."""
    lines = text.splitlines()
    chunks, schedule, start, steps, sent = [], [], None, [], []
    cur = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if m := re.match(r"\s+chunk (\d+) = elements \[(\d+), (\d+)\)", line):
            chunks.append((int(m.group(2)), int(m.group(3))))
        elif re.match(r"\s+rank\s+t=0", line):
            for row in lines[i + 1:i + 1 + n]:
                schedule.append([(p, int(c)) for p, c in re.findall(r"([A-Z]+):(\d+)", row)])
            i += n
        elif m := re.match(r"(reduce-scatter|all-gather) step (\d+):", line):
            cur = Step(m.group(1), int(m.group(2)), [], None)
            steps.append(cur)
        elif m := _MSG.match(line):
            cur.messages.append(Message(int(m.group(1)), int(m.group(2)), int(m.group(3)), _ranks(m.group(4), n),
                                        _ranks(m.group(6), n), m.group(5) == "adds",
                                        int(m.group(7)) if m.group(7) else None))
        elif line.strip().startswith("holds:"):
            holds = [_holds_row(row, n) for row in lines[i + 1:i + 1 + n]]
            i += n
            if cur is None:
                start = holds
            else:
                cur.holds = holds
        elif m := re.match(r"\s+r(\d+) sent (\d+) elements", line):
            sent.append(int(m.group(2)))
        i += 1
    if len(steps) != 2 * (n - 1) or len(schedule) != n:
        raise ValueError(f"ringo.trace: ringo-trace printed {len(steps)} steps and {len(schedule)} schedule rows, "
                         f"expected {2 * (n - 1)} and {n}")
    return Trace(n, count, chunks, schedule, start, steps, sent, text)


def _whole(value, what, low, high=None):
    """value as an int when it is a whole number in [low, high]; ValueError naming what otherwise (a
    float such as 2.5 is not silently cut to 2)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low or \
            (high is not None and value > high):
        span = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{what} must be a whole number {span}, got {value!r}")
    return int(value)


def _amount(value, what, low, high):
    """value as a float when it is a number in [low, high] (so finite); ValueError naming what."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not low <= value <= high:
        raise ValueError(f"{what} must be a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


# ringo-model's limits (tools/ringo-model.c): beyond them its numbers stop meaning anything, and
# model()'s turned into inf or an OverflowError.
MAX_BYTES, MAX_BW, MIN_LATENCY, MAX_LATENCY, MAX_RANKS = 1e18, 1e15, 1e-9, 1.0, 1 << 20


def trace(n, count=None):
    """The ring all-reduce of n ranks (2..32) step by step, from the library's own schedule: who
    sends which chunk to whom, the partial sums every rank holds after each step. With count, also
    each chunk's elements and the elements each rank sent (the 2(N-1)/N law)."""
    n = _whole(n, "ringo.trace: n", 2, 32)
    args = [tool("ringo-trace"), "-n", str(n)]
    if count is not None:
        count = _whole(count, "ringo.trace: count", 0, 2**63 - 1)
        args += ["-c", str(count)]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise ValueError(f"ringo.trace: {out.stderr.strip()}")
    return parse_trace(out.stdout, n, count)


@dataclasses.dataclass
class Model:
    """The seed's cost model of one ring all-reduce (what ringo-model prints), in SI units."""
    nranks: int
    bytes: float  # D: the vector on each rank
    factor: float  # 2(N-1)/N
    sent_per_rank: float  # factor * D, bytes (and as many received)
    naive_root: float  # (N-1) * D into one rank when a root gathers everything
    bandwidth_time: float  # seconds: sent_per_rank / bw (None without bw)
    latency_time: float  # seconds: 2(N-1) steps * latency (None without latency)
    total_time: float
    crossover_bytes: float  # D* = N * latency * bw: bandwidth term = latency term (None unless both)


def model(params=None, dtype="float32", bytes=None, nranks=8, bw=None, latency=None):
    """Evaluates the ring's cost for D = params * sizeof(dtype) (or bytes) on nranks ranks with bw
    bytes/s per rank and latency seconds per ring step. Same formulas as ringo-model (the seed's):
    factor 2(N-1)/N, time = factor*D/bw + 2(N-1)*latency, D* = N*latency*bw; and the same limits
    (D from 1 B to 1 EB, bw from 1 B/s to 1 PB/s, latency 0 or 1 ns to 1 s, up to 2**20 ranks)."""
    if (params is None) == (bytes is None):
        raise ValueError("ringo.model: give params (with dtype) or bytes")
    if not isinstance(dtype, str) or dtype not in _lib.DTYPE_BYTES:
        raise ValueError(f"ringo.model: unknown dtype {dtype}")
    n = _whole(nranks, "ringo.model: nranks", 1, MAX_RANKS)
    if bytes is not None:
        d = _amount(bytes, "ringo.model: bytes", 1, MAX_BYTES)
    else:
        d = _amount(params, "ringo.model: params", 0, MAX_BYTES) * _lib.DTYPE_BYTES[dtype]
        _amount(d, f"ringo.model: D = params x {_lib.DTYPE_BYTES[dtype]} bytes", 1, MAX_BYTES)
    bw = _amount(bw, "ringo.model: bw (bytes/s)", 1, MAX_BW) if bw is not None else None
    latency = _amount(latency, "ringo.model: latency (s)", 0, MAX_LATENCY) if latency is not None else None
    if latency and latency < MIN_LATENCY:
        raise ValueError(f"ringo.model: latency (s) must be 0 or from {MIN_LATENCY:g} to {MAX_LATENCY:g}, "
                         f"got {latency!r}")
    factor = 2.0 * (n - 1) / n
    t_bw = factor * d / bw if bw else None
    t_lat = 2 * (n - 1) * latency if latency is not None else None
    total = None if t_bw is None and t_lat is None else (t_bw or 0.0) + (t_lat or 0.0)
    cross = n * latency * bw if bw and latency is not None else None
    return Model(n, d, factor, factor * d, (n - 1) * d, t_bw, t_lat, total, cross)
