#!/bin/sh
# plot_ddp.sh — trains the MLP of bench/mlp.h with ddp_train on N = 1 (batch B) and N = 4 (batch B/4
# each) and draws both loss curves on $BUILD/plots/ddp_loss.png, copied to docs/img/. Needs a built
# $BUILD/bin/ddp_train; installs gnuplot-nox when missing. Run: make plot (or BUILD=build bench/plot_ddp.sh).
set -eu

BUILD=${BUILD:-build}
BIN=$BUILD/bin/ddp_train
OUT=${PLOT_DIR:-$BUILD/plots}
B=${PLOT_DDP_BATCH:-64}
STEPS=${PLOT_DDP_STEPS:-150}
DIMS=${PLOT_DDP_DIMS:-32,128,128,4}
LR=${PLOT_DDP_LR:-0.3}
BUCKETS=${PLOT_DDP_BUCKETS:-"-b 16K -f 2K"}   # three buckets for the default model, overlapped
IMG=docs/img

say() { echo "plot_ddp.sh: $*"; }
die() { echo "plot_ddp.sh: $*" >&2; exit 1; }

[ -x "$BIN" ] || die "$BIN not found: build it first (make)"

if ! command -v gnuplot >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing gnuplot-nox"
  $sudo apt-get install -y --no-install-recommends gnuplot-nox >/dev/null 2>&1 ||
    { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends gnuplot-nox >/dev/null; } ||
    die "cannot install gnuplot-nox; install it and run again"
fi

mkdir -p "$OUT" "$IMG"

# Same seed, same data stream, same global batch: only the number of ranks differs.
for n in 1 4; do
  say "N = $n, global batch $B ($((B / n)) per rank), $STEPS steps -> $OUT/ddp_loss_N$n.txt"
  # shellcheck disable=SC2086
  "$BIN" -N "$n" -B "$B" -s "$STEPS" -l "$DIMS" -r "$LR" $BUCKETS -m overlap >"$OUT/ddp_loss_N$n.txt"
  awk '$1 == "overlap" { print $2, $3 }' "$OUT/ddp_loss_N$n.txt" >"$OUT/ddp_loss_N$n.dat"
done
for n in 1 4; do [ -s "$OUT/ddp_loss_N$n.dat" ] || die "ddp_train printed no loss lines for N = $n"; done

# The largest step-by-step relative difference of the two curves, for the title.
DIFF=$(paste "$OUT/ddp_loss_N1.dat" "$OUT/ddp_loss_N4.dat" |
  awk '{ d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > m) m = d } END { printf "%.1e", m }')
say "largest relative loss difference between N = 1 and N = 4 over $STEPS steps: $DIFF"

gnuplot <<EOF
set terminal pngcairo size 720,440 font ',10'
set output '$OUT/ddp_loss.png'
set title "DDP on ringo: MLP $(echo "$DIMS" | tr , -), global batch $B, SGD lr $LR\nlargest step-by-step relative difference of the two curves: $DIFF"
set xlabel 'step'
set ylabel 'mean cross-entropy over the global batch'
set key top right
set grid
plot '$OUT/ddp_loss_N1.dat' using 1:2 with lines lw 3 lc rgb '#4477aa' title 'N = 1 rank, batch $B', \\
     '$OUT/ddp_loss_N4.dat' using 1:2 with points pt 6 ps 0.8 lc rgb '#cc3311' title 'N = 4 ranks, batch $((B / 4)) each (weighted average of gradients)'
EOF

cp "$OUT/ddp_loss.png" "$IMG/"
say "wrote $OUT/ddp_loss.png (copied to $IMG/)"
