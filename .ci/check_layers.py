#!/usr/bin/env python3
"""check_layers.py — the layering rules of DESIGN.md checked on the tree and on a build.

Includes: a file of src/<layer>/ includes only its own folder, the folders of lower layers, the
kernel contracts (src/include/) and the public headers; tools/ sees the public headers and src/sched/;
bench/ and nccl/ see the public headers only. Calls (read off the build's objects with nm): an object
of src/<layer>/ calls only into its own folder and lower layers, no transport calls another, and no circle of calls joins two
files of src/ or two folders. Run by `make test` as `.ci/check_layers.py BUILD`; exits 1 on any
violation and prints each one.
"""
import collections
import os
import re
import subprocess
import sys

# Lower numbers are lower layers (DESIGN.md, "Layers"); -1: usable from every layer.
RANK = {"include": -1, "cuda": -1, "core": 0, "sched": 1, "reduce": 1, "transport": 2, "boot": 3,
        "comm": 4, "engine": 5, "device": 6, "api": 7, "ddp": 8}
PUBLIC = {"ringo.h", "ringo_mpi.h", "ringo_ddp.h"}
# What every transport may share: the table and the segment utility (transport/ itself).
TRANSPORT_SHARED = ("transport/table.o", "transport/segment.o")
INCLUDE_RX = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def source_files(root, folder, exts):
    for base, _, names in os.walk(os.path.join(root, folder)):
        for name in sorted(names):
            if name.endswith(exts):
                yield os.path.relpath(os.path.join(base, name), root)


def include_allowed(path, target):
    """Whether file `path` (relative to the repo) may include "target"."""
    parts = path.split("/")
    if target in PUBLIC:
        return True
    if parts[0] == "src":
        layer = parts[1]
        head = target.split("/")[0]
        if "/" not in target:
            return False  # every internal include names its folder
        if head == layer or head == "include":
            return True
        return head in RANK and RANK[head] < RANK[layer] and not (layer == "ddp")
    if parts[0] == "tools":
        return target.startswith("sched/") or "/" not in target  # its own headers beside it
    if parts[0] in ("bench", "nccl"):
        return "/" not in target or target.startswith("../bench/")
    return True


def check_includes(root):
    problems, checked = [], 0
    for folder in ("src", "tools", "bench", "nccl"):
        for path in source_files(root, folder, (".c", ".h", ".cc")):
            with open(os.path.join(root, path), encoding="utf-8") as f:
                text = f.read()
            for target in INCLUDE_RX.findall(text):
                checked += 1
                if not include_allowed(path, target):
                    problems.append(f"include: {path} includes \"{target}\", a layer it may not see")
    return problems, checked


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBR":
            defined.add(f[2])
        elif len(f) == 2 and f[0] == "U":
            used.add(f[1])
    return defined, used


def call_graph(build):
    objs = []
    for folder in ("src", "cuda"):
        objs += [os.path.join(build, "obj", p) for p in source_files(os.path.join(build, "obj"), folder, (".o",))]
    owner, uses = {}, {}
    for o in objs:
        name = os.path.relpath(o, os.path.join(build, "obj"))
        defined, used = symbols(o)
        for s in defined:
            owner[s] = name
        uses[name] = used
    graph = collections.defaultdict(set)
    for name, used in uses.items():
        for s in used:
            if s in owner and owner[s] != name:
                graph[name].add((owner[s], s))
    return graph, list(uses)


def layer_of(obj):
    parts = obj.split("/")
    return parts[1] if parts[0] == "src" else "cuda"


def cycles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
                continue
            if nxt not in index:
                index[nxt] = low[nxt] = counter[0]
                counter[0] += 1
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(edges.get(nxt, ())))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    return found


def check_calls(build):
    graph, nodes = call_graph(build)
    problems, checked = [], 0
    file_edges, folder_edges = collections.defaultdict(set), collections.defaultdict(set)
    for src, targets in graph.items():
        for dst, sym in sorted(targets):
            checked += 1
            a, b = layer_of(src), layer_of(dst)
            file_edges[src].add(dst)
            if a != b:
                folder_edges[a].add(b)
            if a != b and RANK[b] >= RANK[a] and RANK[b] != -1:
                problems.append(f"call: {src} calls {sym} of {dst}, a layer above or beside it")
            if a == b == "transport" and not (src.endswith(TRANSPORT_SHARED) or dst.endswith(TRANSPORT_SHARED)):
                problems.append(f"call: transport {src} calls {sym} of transport {dst}; no transport calls another")
    for comp in cycles(nodes, file_edges):
        problems.append("circle of calls between files: " + " <-> ".join(comp))
    for comp in cycles(sorted({layer_of(n) for n in nodes}), folder_edges):
        problems.append("circle of calls between folders: " + " <-> ".join(comp))
    return problems, checked


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build")
    problems, n_inc = check_includes(root)
    call_problems, n_calls = check_calls(build)
    problems += call_problems
    for p in problems:
        print("check_layers: " + p)
    print(f"check_layers: {n_inc} includes and {n_calls} calls between files checked, {len(problems)} violations")
    tally = os.environ.get("RINGO_TALLY")
    if tally:  # one check that passes or fails, in the gate's closing count
        with open(tally, "a", encoding="utf-8") as f:
            f.write("1 0 0\n" if not problems else "0 1 0\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
