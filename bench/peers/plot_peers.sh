#!/bin/sh
# plot_peers.sh — draws $BUILD/peers/results/peers.png from a finished bench-peers.sh run: busbw vs size per N,
# ringo beside each peer library's best configuration and the memory bound (ringo-bench --bound), one panel
# per N. Needs rows.tsv and bound.tsv (make bench-peers); installs gnuplot-nox when missing. Run: make plot-peers.
set -eu

BUILD=${BUILD:-build}
OUT=${PEERS_OUT:-$BUILD/peers/results}
IMG=${PEERS_IMG:-docs/img}

say() { echo "plot_peers.sh: $*"; }
die() { echo "plot_peers.sh: $*" >&2; exit 1; }

[ -s "$OUT/rows.tsv" ] || die "$OUT/rows.tsv not found: run make bench-peers first"
if ! command -v gnuplot >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  say "installing gnuplot-nox"
  $sudo apt-get install -y --no-install-recommends gnuplot-nox >/dev/null 2>&1 || die "cannot install gnuplot-nox"
fi

# One file per (N, library): size and the best busbw over that library's configurations, the median over
# passes of each configuration first (what the table calls best); bound_N.dat: the bound's busbw.
python3 - "$OUT" <<'EOF'
import collections, statistics, sys
out = sys.argv[1]
runs = collections.defaultdict(list)
for line in open(f"{out}/rows.tsv"):
    f = line.rstrip("\n").split("\t")
    if len(f) >= 10 and int(f[8]) == 0:
        runs[(f[2], f[3], int(f[4]), int(f[5]))].append(float(f[7]))
best = collections.defaultdict(dict)
for (lib, cfg, n, b), v in runs.items():
    m = statistics.median(v)
    best[(n, lib)][b] = max(best[(n, lib)].get(b, 0.0), m)
for (n, lib), rows in best.items():
    with open(f"{out}/plot_{lib}_N{n}.dat", "w") as f:
        for b in sorted(rows):
            f.write(f"{b}\t{rows[b]:.4f}\n")
bound = collections.defaultdict(list)
try:
    for line in open(f"{out}/bound.tsv"):
        p, n, b, v = line.split("\t")
        bound[(int(n), int(b))].append(float(v))
except FileNotFoundError:
    pass
for n in sorted({k[0] for k in bound}):
    with open(f"{out}/plot_bound_N{n}.dat", "w") as f:
        for (m, b) in sorted(bound):
            if m == n:
                f.write(f"{b}\t{statistics.median(bound[(m, b)]):.4f}\n")
print(" ".join(str(n) for n in sorted({k[0] for k in best})))
EOF

NS=$(ls "$OUT"/plot_ringo_N*.dat | sed 's/.*_N\([0-9]*\)\.dat/\1/' | sort -n | tr '\n' ' ')
panels=""
for n in $NS; do
  curves="'$OUT/plot_ringo_N$n.dat' using 1:2 with linespoints pt 7 lw 2 title 'ringo'"
  for lib in impi ccl ompi mpich; do
    f=$OUT/plot_${lib}_N$n.dat
    [ -s "$f" ] || continue
    case $lib in impi) t="Intel MPI (best config)" ;; ccl) t="oneCCL (best config)" ;;
                 ompi) t="Open MPI (best coll/tuned or default)" ;; mpich) t="MPICH (best config)" ;; esac
    curves="$curves, '$f' using 1:2 with linespoints lw 2 title '$t'"
  done
  [ ! -s "$OUT/plot_bound_N$n.dat" ] ||
    curves="$curves, '$OUT/plot_bound_N$n.dat' using 1:2 with lines dt 3 lw 2 lc rgb 'black' title 'memory-bandwidth bound (--bound)'"
  panels="$panels
set title 'N = $n ranks (one host)'
plot $curves"
done
set -- $NS
mkdir -p "$IMG"
gnuplot <<EOF
set terminal pngcairo size $((520 * $#)),440 font ',10'
set output '$OUT/peers.png'
set multiplot layout 1,$# title 'all\\_reduce float32 sum, out of place: ringo beside the CPU peers (bench-peers.sh)'
set logscale x 2
set logscale y 10
set format x '%.0b%BB'
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
set key below
set grid
$panels
unset multiplot
EOF
cp "$OUT/peers.png" "$IMG/peers.png"
say "wrote $OUT/peers.png (copied to $IMG/peers.png)"
