#!/bin/bash
# traffic.sh — the memory traffic each library really causes per all-reduce, simulated: every rank under
# cachegrind (32 MiB LL), runs of 1 and 3 timed calls differenced. Run: bench/peers/traffic.sh --np 2 -b 64M
set -euo pipefail

BUILD=${BUILD:-build}
P=$BUILD/peers
V=$PWD/$P/venv
NP=2 BYTES=64M CONFIGS="ringo ccl:nreduce ccl:ring impi:default impi:adjust-8"
LL=${TRAFFIC_LL:-33554432,16,64}   # this VM's L3: 32 MiB, 16-way, 64 B lines (cachegrind's guess is wrong here)

usage() {
  cat <<USAGE
usage: bench/peers/traffic.sh [--np N] [-b BYTES] [--configs "ringo ccl:nreduce impi:adjust-8 ..."]
  Per call and rank, in units of D (the all-reduce's bytes): LL (last-level cache) read and write misses
  x 64 B, i.e. the bytes that reach memory, L1 misses, and the data references and instructions.
  Each rank's cache is simulated alone, so lines another rank wrote into shared memory count as hits:
  what this counts is capacity traffic to DRAM, not cross-core transfers. Copies done in the kernel
  (CMA's process_vm_readv) are not seen at all. TRAFFIC_LL=size,ways,line sets the LL.
USAGE
}
while [ $# -gt 0 ]; do
  case $1 in
    --np) NP=$2; shift ;;
    -b) BYTES=$2; shift ;;
    --configs) CONFIGS=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done
command -v valgrind >/dev/null || { echo "traffic.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
bytes=$(numfmt --from=iec "$BYTES")
# The peers' harnesses and libraries only when a peer is asked for (bench-peers.sh installs them).
case " $CONFIGS " in *" impi:"*|*" ccl:"*) [ -x "$P/bin/peers-ccl" ] || BUILD=$BUILD bench/peers/bench-peers.sh --install-only ;; esac
make --no-print-directory -s BUILD="$BUILD" lib
mkdir -p "$P/bin" "$P/traffic"
cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/peers/traffic_ringo.c -o "$P/bin/traffic-ringo" \
  -L"$BUILD/lib" -Wl,-rpath,"$PWD/$BUILD/lib" -lringo

# Runs lib:cfg with ITERS timed calls under cachegrind; one output file per process in $P/traffic/lib-cfg-ITERS.
run() {
  local lib=${1%%:*} cfg=${1#*:} iters=$2 d=$P/traffic/${1/:/-}-$2
  rm -rf "$d" && mkdir -p "$d"
  local vg=(valgrind --tool=cachegrind --cache-sim=yes --LL="$LL" --cachegrind-out-file="$PWD/$d/cg.%p")
  case $lib in
    ringo) "${vg[@]}" "$P/bin/traffic-ringo" "$NP" "$bytes" "$iters" 2>"$d/log" ;;
    impi|ccl)
      local env=(-genv CCL_ATL_TRANSPORT mpi)
      case $lib:$cfg in
        *:default) ;;
        impi:*) env+=(-genv I_MPI_ADJUST_ALLREDUCE "${cfg#adjust-}") ;;
        ccl:*) env+=(-genv CCL_ALLREDUCE "$cfg") ;;
      esac
      env I_MPI_ROOT="$V" PATH="$V/bin:$PATH" I_MPI_FABRICS=shm "$V/bin/mpiexec" "${env[@]}" -n "$NP" "${vg[@]}" \
        "$P/bin/peers-$lib" -b "$bytes" -e "$bytes" -w 1 -n "$iters" -L "$lib" -C "$cfg" >"$d/log" 2>&1 ;;
    *) echo "traffic.sh: unknown configuration $1" >&2; exit 2 ;;
  esac
}

echo "# float32 sum all-reduce, out of place, N = $NP, D = $BYTES; per call and rank (run of 3 calls minus run of 1, / 2), in D"
printf '# %-16s %5s %9s %9s %9s %9s %11s %11s\n' config rank "LL read" "LL write" "LL total" "L1 miss" "data refs" instructions
for c in $CONFIGS; do
  if ! { run "$c" 1 && run "$c" 3; }; then echo "# $c failed: see $P/traffic/${c/:/-}-*/log"; continue; fi
  python3 - "$P/traffic/${c/:/-}" "$bytes" "$c" "$NP" <<'PY'
import glob, sys
base, D, name, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def ranks(it):  # the n processes with the most data references: the ranks (not a launcher or parent)
    rows = []
    for f in glob.glob(f"{base}-{it}/cg.*"):
        for line in open(f):
            if line.startswith("summary:"):
                rows.append([int(x) for x in line.split()[1:]])
    return sorted(rows, key=lambda r: -r[3])[:n]
a, b = ranks(1), ranks(3)
for i, (x, y) in enumerate(zip(a, b)):
    Ir, _, _, Dr, D1mr, DLmr, Dw, D1mw, DLmw = [(q - p) / 2 for p, q in zip(x, y)]
    print("  %-16s %5d %9.2f %9.2f %9.2f %9.2f %10.1fM %10.1fM" % (name, i, DLmr * 64 / D, DLmw * 64 / D,
          (DLmr + DLmw) * 64 / D, (D1mr + D1mw) * 64 / D, (Dr + Dw) / 1e6, Ir / 1e6))
PY
done
