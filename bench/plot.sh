#!/bin/sh
# plot.sh — runs ringo-bench and draws $BUILD/plots/busbw.png (busbw vs size: ringo, Open MPI, Gloo,
# the naive gather-to-root baseline, the memory bound) and bytes_per_rank.png (bytes sent by the busiest
# rank vs N: ring vs naive, both measured by the counters),
# copied to docs/img/. Needs a built $BUILD/bin/ringo-bench; installs gnuplot-nox and jq when missing. Run: make plot.
set -eu

BUILD=${BUILD:-build}
BIN=$BUILD/bin/ringo-bench
OUT=${PLOT_DIR:-$BUILD/plots}
MAXBYTES=${PLOT_MAXBYTES:-256M}     # busbw sweep: 1K .. MAXBYTES, x4 per row
NPS=${PLOT_NP:-"2 4"}               # one busbw panel per rank count
BYTES_SIZE=${PLOT_BYTES_SIZE:-4M}   # the one size for bytes sent per rank, N = 2 .. NMAX
NMAX=${PLOT_NMAX:-8}
IMG=docs/img

say() { echo "plot.sh: $*"; }
die() { echo "plot.sh: $*" >&2; exit 1; }

[ -x "$BIN" ] || die "$BIN not found: build it first (make)"

# Debian packages, installed only when the tool is missing.
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing $2"
  $sudo apt-get install -y --no-install-recommends "$2" >/dev/null 2>&1 ||
    { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends "$2" >/dev/null; } ||
    die "cannot install $2; install it and run again"
}
need gnuplot gnuplot-nox
need jq jq

mkdir -p "$OUT" "$IMG"

# Under mpirun each process is one rank and --compare mpi times Open MPI's MPI_Allreduce beside
# ringo; without mpirun (or a bench built without MPI) the ranks are forked and there is no MPI curve.
MPIRUN=""
if command -v mpirun >/dev/null 2>&1 && ldd "$BIN" 2>/dev/null | grep -q libmpi; then
  # --bind-to none: mpirun pins each of 2 ranks to a core, and a rank that sleeps while it waits
  # then queues behind whatever else runs on its core (MPI spins and keeps it; docs/performance.md).
  MPIRUN="mpirun --oversubscribe --bind-to none"
  [ "$(id -u)" -ne 0 ] || MPIRUN="$MPIRUN --allow-run-as-root"
fi

# ---------------------------------------------------------------- the runs
# Forked ranks run unbound too (--bind-to none), as mpirun's above and Gloo's below: one placement
# for every curve of the picture.
for np in $NPS; do
  json=$OUT/busbw_np$np.json
  if [ -n "$MPIRUN" ]; then
    say "busbw, $np ranks under mpirun, ringo vs Open MPI -> $json"
    $MPIRUN -np "$np" "$BIN" -b 1K -e "$MAXBYTES" -f 4 --compare mpi --bound --algo ring -J "$json" >"$OUT/busbw_np$np.txt"
  else
    say "busbw, $np forked ranks (no mpirun: no Open MPI curve) -> $json"
    "$BIN" -N "$np" -b 1K -e "$MAXBYTES" -f 4 --bound --algo ring --bind-to none -J "$json" >"$OUT/busbw_np$np.txt"
  fi
  # size, ringo busbw, Open MPI busbw, the bound's busbw (busbw / fraction of the bound reached).
  naive=$OUT/busbw_naive_np$np.json
  say "busbw, $np forked ranks, --algo naive -> $naive"
  "$BIN" -N "$np" -b 1K -e "$MAXBYTES" -f 4 --algo naive --bind-to none -J "$naive" >"$OUT/busbw_naive_np$np.txt"
  # Gloo beside ringo in forked ranks (its own run: a bench compares one library at a time); no
  # curve when the bench was built without Gloo.
  gloo=$OUT/busbw_gloo_np$np.json
  if "$BIN" -N "$np" -b 1K -e "$MAXBYTES" -f 4 --algo ring --compare gloo -J "$gloo" >"$OUT/busbw_gloo_np$np.txt" 2>&1; then
    say "busbw, $np forked ranks, beside Gloo -> $gloo"
  else
    say "no Gloo curve: $(tail -n 1 "$OUT/busbw_gloo_np$np.txt")"
    echo '{"rows": []}' >"$gloo"
  fi
  # size, ringo busbw, Open MPI busbw, the bound's busbw (busbw / fraction of the bound reached), naive
  # busbw, Gloo busbw.
  jq -r '.rows[] | [.size, .oop_busbw, (.mpi_oop_busbw // "NaN"),
           (if (.bound_frac // 0) > 0 then .oop_busbw / .bound_frac else "NaN" end)] | @tsv' \
    "$json" >"$OUT/busbw_np$np.ring"
  jq -r '.rows[] | [.oop_busbw] | @tsv' "$naive" | paste "$OUT/busbw_np$np.ring" - >"$OUT/busbw_np$np.naive"
  jq -r --slurpfile g "$gloo" '.rows[] | .size as $s | [([$g[0].rows[] | select(.size == $s) | .gloo_oop_busbw][0] // "NaN")] | @tsv' \
    "$json" | paste "$OUT/busbw_np$np.naive" - >"$OUT/busbw_np$np.dat"
done

: >"$OUT/bytes_per_rank.dat"
for n in $(seq 2 "$NMAX"); do
  json=$OUT/bytes_N$n.json
  say "bytes sent per rank, $n forked ranks, $BYTES_SIZE -> $json"
  "$BIN" -N "$n" -b "$BYTES_SIZE" -e "$BYTES_SIZE" -n 3 -w 1 --algo ring -J "$json" >/dev/null
  "$BIN" -N "$n" -b "$BYTES_SIZE" -e "$BYTES_SIZE" -n 3 -w 1 --algo naive -J "$OUT/bytes_naive_N$n.json" >/dev/null
  # N, D, ring's bytes sent per rank, naive's bytes sent by its busiest rank (rank 0), both measured.
  printf '%s\t%s\n' "$(jq -r '.rows[0] | [.nranks, .size, .sent_per_rank] | @tsv' "$json")" \
    "$(jq -r '.rows[0].sent_per_rank' "$OUT/bytes_naive_N$n.json")" >>"$OUT/bytes_per_rank.dat"
done
D=$(jq -r '.rows[0].size' "$OUT/bytes_N2.json")
MIB=$(awk "BEGIN { print $D / 1048576 }")

# ---------------------------------------------------------------- the pictures
panels=""
for np in $NPS; do
  panels="$panels
set title '$np ranks (one host, host memory)'
plot '$OUT/busbw_np$np.dat' using 1:2 with linespoints pt 7 lw 2 title 'ringo (ring)', \\
     '' using 1:3 with linespoints pt 5 lw 2 title 'Open MPI MPI\\_Allreduce', \\
     '' using 1:6 with linespoints pt 11 lw 2 title 'Gloo gloo::allreduce (TCP, forked ranks)', \\
     '' using 1:5 with linespoints pt 9 lw 2 title 'naive: gather to rank 0, send back (measured)', \\
     '' using 1:4 with lines dt 3 lw 2 lc rgb 'black' title 'memory-bandwidth bound (--bound, c = a + b)'"
done
set -- $NPS
gnuplot <<EOF
set terminal pngcairo size $((560 * $#)),440 font ',10'
set output '$OUT/busbw.png'
set multiplot layout 1,$# title 'all\\_reduce float32 sum, out-of-place: bus bandwidth vs size'
set logscale x 2
set format x '%.0b%BB'
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
set key below
set grid
$panels
unset multiplot
EOF

gnuplot <<EOF
set terminal pngcairo size 640,440 font ',10'
set output '$OUT/bytes_per_rank.png'
set title 'all\\_reduce of D = $MIB MiB: bytes sent by the busiest rank vs N'
set xlabel 'ranks N'
set ylabel 'bytes sent per rank (MiB)'
set xrange [1.5:$NMAX.5]
set key top left
set grid
plot '$OUT/bytes_per_rank.dat' using 1:(\$3 / 1048576.0) with points pt 7 ps 1.5 title 'ring, measured (counters)', \\
     '' using 1:(\$4 / 1048576.0) with points pt 5 ps 1.5 title 'naive rank 0, measured (counters)', \\
     [2:$NMAX] $MIB * 2.0 * (x - 1) / x with lines lw 2 title 'ring law 2(N-1)/N x D', \\
     [2:$NMAX] $MIB * (x - 1) with lines dt 2 lw 2 title 'naive root (N-1) x D'
EOF

cp "$OUT/busbw.png" "$OUT/bytes_per_rank.png" "$IMG/"
say "wrote $OUT/busbw.png and $OUT/bytes_per_rank.png (copied to $IMG/)"
