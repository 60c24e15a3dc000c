#!/usr/bin/env python3
# peers_table.py — bench-peers.sh's table: from rows.tsv (pass, load, lib, config, N, bytes, time_us, busbw,
# wrong, iters) the best configuration of each library per size, ringo's ratio to it and to the best peer,
# as markdown, plus best.tsv beside it for plot_peers.sh. Run: bench/peers/bench-peers.sh --table-only.
import collections
import os
import statistics
import sys

# The targets for ringo / the best peer: 1.2 from 4 KiB up, parity below.
TARGET_FROM, TARGET_ABOVE, TARGET_BELOW = 4096, 1.2, 1.0

NAMES = {"ompi": "Open MPI", "mpich": "MPICH", "impi": "Intel MPI", "ccl": "oneCCL"}


def size_name(b):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale and b % scale == 0:
            return f"{b // scale}{unit}"
    return str(b)


def main(path):
    # runs[(lib, cfg, n, bytes)][pass] = busbw; a configuration whose check found a wrong element is
    # left out of "best" (and named), never silently kept.
    runs = collections.defaultdict(dict)
    loads = collections.defaultdict(list)
    wrong = set()
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) < 10:
            continue
        p, load, lib, cfg, n, b, _t, busbw, bad = f[0], f[1], f[2], f[3], int(f[4]), int(f[5]), f[6], float(f[7]), int(f[8])
        if bad:
            wrong.add((lib, cfg, n))
            continue
        runs[(lib, cfg, n, b)][p] = busbw
        loads[n].append(float(load.split("/")[0]))
    med = {k: statistics.median(v.values()) for k, v in runs.items()}
    ns = sorted({k[2] for k in runs})
    sizes = sorted({k[3] for k in runs})
    libs = [l for l in NAMES if any(k[0] == l for k in runs)]
    out_dir = os.path.dirname(path)
    best_rows = []
    ratios = {}
    print("## ringo beside the best configuration of each peer (busbw GB/s, median over passes; ringo too"
          " shows its better configuration)\n")
    for n in ns:
        ld = loads[n]
        print(f"N = {n}, load average (1 min) during its runs: {min(ld):.2f}-{max(ld):.2f}\n")
        print("| size | ringo | " + " | ".join(NAMES[l] + " (best cfg)" for l in libs) +
              " | best peer | ringo/best | per pass |")
        print("|---" * (4 + len(libs)) + "|---|")
        for b in sizes:
            mine = [(v, k[1]) for k, v in med.items() if k[0] == "ringo" and k[2] == n and k[3] == b]
            if not mine:
                continue
            r, rcfg = max(mine)
            cells, best = [], None
            for l in libs:
                cands = [(v, k[1]) for k, v in med.items() if k[0] == l and k[2] == n and k[3] == b]
                if not cands:
                    cells.append("-")
                    continue
                v, cfg = max(cands)
                cells.append(f"{v:.2f} ({cfg})")
                if best is None or v > best[0]:
                    best = (v, l, cfg)
            if best is None or best[0] <= 0:  # every peer's busbw rounded to 0: no ratio to show
                continue
            ring_p = runs[("ringo", rcfg, n, b)]
            peer_p = runs[(best[1], best[2], n, b)]
            per = sorted(ring_p[p] / peer_p[p] for p in ring_p if p in peer_p and peer_p[p] > 0)
            per_s = f"{per[0]:.2f}-{per[-1]:.2f}" if per else "-"
            print(f"| {size_name(b)} | {r:.2f} ({rcfg}) | " + " | ".join(cells) +
                  f" | {NAMES[best[1]]} {best[2]} | **{r / best[0]:.2f}** | {per_s} |")
            best_rows.append((n, b, r, best[0], f"{best[1]}:{best[2]}", r / best[0]))
            ratios[(n, b)] = (r / best[0], f"{NAMES[best[1]]} {best[2]}")
        print()
    print("## ringo / the best peer, per size (the winner below each ratio)\n")
    print("| N | " + " | ".join(size_name(b) for b in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for n in ns:
        print(f"| {n} | " + " | ".join(f"{ratios[(n, b)][0]:.2f}" if (n, b) in ratios else "-" for b in sizes) + " |")
        print("|   | " + " | ".join(ratios[(n, b)][1] if (n, b) in ratios else "-" for b in sizes) + " |")
    print()
    print(f"## Against the targets ({TARGET_ABOVE}x the best peer from {size_name(TARGET_FROM)}, "
          f"{TARGET_BELOW}x below it; median over passes)\n")
    for n in ns:
        short = [(b, ratios[(n, b)][0]) for b in sizes if (n, b) in ratios and
                 ratios[(n, b)][0] < (TARGET_ABOVE if b >= TARGET_FROM else TARGET_BELOW)]
        have = sum((n, b) in ratios for b in sizes)
        what = ", ".join(f"{size_name(b)} ({r:.2f})" for b, r in short) or "none"
        print(f"- N = {n}: met at {have - len(short)} of {have} sizes; short at: {what}")
    print()
    print("## ringo / each library's best configuration (busbw ratio; < 1: ringo slower)\n")
    print("| N | peer | " + " | ".join(size_name(b) for b in sizes) + " |")
    print("|---|---|" + "---|" * len(sizes))
    for n in ns:
        for l in libs:
            cells = []
            for b in sizes:
                r = max([v for k, v in med.items() if k[0] == "ringo" and k[2] == n and k[3] == b], default=None)
                cands = [v for k, v in med.items() if k[0] == l and k[2] == n and k[3] == b]
                # A peer whose busbw printed as 0.0000 (a call of seconds): ringo is beyond any ratio.
                cells.append("-" if not (r and cands) else f"{r / max(cands):.2f}" if max(cands) > 0 else "inf")
            print(f"| {n} | {NAMES[l]} | " + " | ".join(cells) + " |")
    print()
    for lib, cfg, n in sorted(wrong):
        print(f"- left out: {lib}:{cfg} at N = {n} returned wrong elements")
    with open(os.path.join(out_dir, "best.tsv"), "w") as f:
        f.write("#N\tbytes\tringo_busbw\tbest_peer_busbw\tbest_peer\tratio\n")
        for row in best_rows:
            f.write("%d\t%d\t%.4f\t%.4f\t%s\t%.3f\n" % row)


if __name__ == "__main__":
    main(sys.argv[1])
