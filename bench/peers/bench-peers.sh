#!/bin/bash
# bench-peers.sh — ringo beside the strongest CPU peers (Open MPI's coll/tuned algorithms, MPICH, Intel MPI,
# oneCCL), float32 sum all-reduce, interleaved run by run (A B C D A B C D), one table of busbw and ringo's
# ratio to the best peer per size. Installs what is missing under $BUILD/peers/. Run: make bench-peers
# (full: N = 2 4 8, 256 B .. 256 MiB, two passes) or bench/peers/bench-peers.sh --quick (smoke, about a minute).
set -euo pipefail

BUILD=${BUILD:-build}
P=$BUILD/peers
V=$PWD/$P/venv                      # Intel MPI and oneCCL, from PyPI
OUT=${PEERS_OUT:-$P/results}
IMPI_VERSION=${PEERS_IMPI_VERSION:-2021.19.0}
CCL_VERSION=${PEERS_CCL_VERSION:-2022.2.0}

# Sizes as ringo-bench takes them: 4 KiB .. 256 MiB x4 per row (target 1.2x the best peer), and
# 256 B and 1 KiB below it (target: parity).
MINB=256 MAXB=256M FACTOR=4 NS="2 4 8" PASSES=2 WARMUP=2 ITERS=""
# Every configuration tried; each is one launch over all sizes. "ringo" is ringo-bench under Open MPI's
# mpirun, alone as every peer's harness is (Open MPI's collectives interleaved call by call, as
# --compare mpi does, made ringo's 16-64 KiB calls 1.75x slower: docs/peers.md), and under their
# timing rule: --barrier, an untimed yielding barrier before every call.
CONFIGS=${PEERS_CONFIGS:-"ringo:default ringo:unbound ringo:pinned ompi:default ompi:tuned-1 ompi:tuned-2 ompi:tuned-3 ompi:tuned-4 ompi:tuned-5
  ompi:tuned-6 mpich:default mpich:recursive_doubling mpich:reduce_scatter_allgather impi:default impi:adjust-1
  impi:adjust-2 impi:adjust-8 impi:adjust-10 impi:adjust-11 impi:adjust-12 ccl:default ccl:ring
  ccl:rabenseifner ccl:nreduce ccl:double_tree ccl:recursive_doubling"}

for n in 2 4 8 16; do
  v=PEERS_CONFIGS_N$n
  [ -z "${!v:-}" ] || declare "CONFIGS_N$n=${!v}"
done

usage() {
  cat <<EOF
usage: bench/peers/bench-peers.sh [--quick] [--install-only] [--np "2 4 8"] [--passes P] [-b MIN] [-e MAX]
                                  [-f FACTOR] [--configs "lib:cfg ..."] [--table-only]
  --quick         N = 2, 256 B .. 1 MiB x16, one pass, 5 iterations: a smoke test of every configuration
  --table-only    print the table from the rows already in $OUT/rows.tsv
  PEERS_CONFIGS   the configurations (default: every one listed at the top of this script);
                  PEERS_CONFIGS_N4, PEERS_CONFIGS_N8: the list at that N instead
EOF
}

say() { echo "bench-peers: $*" >&2; }
die() { echo "bench-peers: $*" >&2; exit 1; }

INSTALL_ONLY=0 TABLE_ONLY=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) MAXB=1M FACTOR=16 NS=2 PASSES=1 ITERS=5 WARMUP=1 ;;
    --install-only) INSTALL_ONLY=1 ;;
    --table-only) TABLE_ONLY=1 ;;
    --np) NS=$2; shift ;;
    --passes) PASSES=$2; shift ;;
    -b) MINB=$2; shift ;;
    -e) MAXB=$2; shift ;;
    -f) FACTOR=$2; shift ;;
    --configs) CONFIGS=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done

# ---------------------------------------------------------------- install what is missing

apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  say "installing $* from Debian"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "$@" >/dev/null ||
    { $sudo apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "$@" >/dev/null; } ||
    die "cannot install $*; install them and run again"
}

# MPICH and Open MPI both register mpicc/mpirun alternatives; the project's tests need Open MPI's, so
# both are called by their full paths here and the system's choice is checked to be unchanged.
install_debian() {
  local before
  before=$(readlink -f /usr/bin/mpirun 2>/dev/null || echo none)
  [ -x /usr/bin/mpicc.openmpi ] && [ -x /usr/bin/mpirun.openmpi ] || apt_install openmpi-bin libopenmpi-dev
  [ -x /usr/bin/mpicc.mpich ] && [ -x /usr/bin/mpiexec.mpich ] || apt_install mpich libmpich-dev
  local after
  after=$(readlink -f /usr/bin/mpirun 2>/dev/null || echo none)
  [ "$before" = none ] || [ "$before" = "$after" ] ||
    die "installing MPICH moved /usr/bin/mpirun from $before to $after; restore it (update-alternatives --set mpirun $before)"
}

# Intel MPI and oneCCL from PyPI into a venv. Both wheels declare libfabric (>= 2.6), which PyPI does
# not serve, hence --no-deps: Intel MPI then runs on its shm fabric only (I_MPI_FABRICS=shm) and oneCCL
# on its MPI transport (CCL_ATL_TRANSPORT=mpi; ofi needs libfabric). oneccl-cpu 2022.2's libccl.so.1
# names libccl.so.2 as NEEDED but the wheel ships no such file, and it calls the Intel compiler runtime
# (_intel_fast_memcpy, __intel_cpu_features_init_x) without declaring it: the runtime comes from
# intel-cmplr-lib-rt, and libccl.so.2 is a link to libccl.so.1 itself (the loader sees one file).
install_pypi() {
  if [ ! -e "$V/lib/libmpi.so.12" ] || [ ! -e "$V/lib/libccl.so.1" ] || [ ! -e "$V/lib/libintlc.so.5" ]; then
    say "installing impi-rt/impi-devel $IMPI_VERSION, oneccl-cpu/oneccl-cpu-devel $CCL_VERSION and intel-cmplr-lib-rt into $V"
    [ -x "$V/bin/pip" ] || python3 -m venv "$V"
    "$V/bin/pip" install -q --disable-pip-version-check --no-deps "impi-rt==$IMPI_VERSION" "impi-devel==$IMPI_VERSION" \
      "oneccl-cpu==$CCL_VERSION" "oneccl-cpu-devel==$CCL_VERSION" intel-cmplr-lib-rt
  fi
  [ -e "$V/lib/libccl.so.2" ] || ln -sf libccl.so.1 "$V/lib/libccl.so.2"
}

install_ringo() {
  [ -x "$BUILD/bin/ringo-bench" ] && return 0
  say "building ringo (make CUDA=0 lib tools)"
  make --no-print-directory -j"$(nproc)" CUDA=0 BUILD="$BUILD" lib tools >/dev/null
}

# The harnesses, one per library, from the same loop (peers_bench.h).
build_harnesses() {
  local w="-O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE" src=bench/peers b=$P/bin
  mkdir -p "$b"
  build_one() { # target, sources..., then the command
    local t=$1; shift
    [ "$t" -nt $src/peers_bench.h ] && [ "$t" -nt "$1" ] && return 0
    shift
    "$@" -o "$t" || die "cannot build $t"
  }
  build_one $b/peers-ompi $src/peers_mpi.c /usr/bin/mpicc.openmpi -std=c11 $w $src/peers_mpi.c
  build_one $b/peers-mpich $src/peers_mpi.c /usr/bin/mpicc.mpich -std=c11 $w $src/peers_mpi.c
  build_one $b/peers-impi $src/peers_mpi.c gcc -std=c11 $w $src/peers_mpi.c -I"$V/include" -L"$V/lib" \
    -Wl,-rpath,"$V/lib" -lmpi
  # --no-as-needed keeps libintlc, which libccl needs but does not name, among the loaded libraries.
  build_one $b/peers-ccl $src/peers_ccl.cc g++ -std=c++17 $w $src/peers_ccl.cc -I$src -I"$V/include" -L"$V/lib" \
    -Wl,-rpath,"$V/lib" -Wl,--no-as-needed -lccl -lintlc -lmpi 2> >(grep -v "may conflict with" >&2)
}

# ---------------------------------------------------------------- one configuration, one launch

OMPIRUN=(/usr/bin/mpirun.openmpi --allow-run-as-root --oversubscribe)
# Intel MPI (and oneCCL on it) on the shm fabric only; I_MPI_ROOT as its vars.sh would set it.
IMPIRUN=(env I_MPI_ROOT="$V" PATH="$V/bin:$PATH" I_MPI_FABRICS=shm "$V/bin/mpiexec")

harness_args() {
  local a=(-b "$MINB" -e "$MAXB" -f "$FACTOR" -w "$WARMUP" -L "$1" -C "$2")
  [ -z "$ITERS" ] || a+=(-n "$ITERS")
  echo "${a[@]}"
}

# Runs lib:cfg at N ranks; appends its rows, tagged with the pass and the load average, to $OUT/rows.tsv.
run_config() {
  local lib=${1%%:*} cfg=${1#*:} n=$2 pass=$3 log
  local load; load=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' '/')
  log=$OUT/logs/$lib-$cfg-N$n-pass$pass.log
  local args; args=$(harness_args "$lib" "$cfg")
  local rc=0
  case $lib in
    ringo)
      local it=(); [ -z "$ITERS" ] || it=(-n "$ITERS")
      # unbound: mpirun's --bind-to none, as make plot runs it (at N <= cores Open MPI pins each rank
      # to a core, and a rank that sleeps while it waits then queues behind whatever runs there).
      # pinned: each rank to one core, round robin, at any N, as Intel MPI pins by default and MPICH's
      # -bind-to core here (Open MPI's default binds no rank once they outnumber the cores).
      local bind=()
      case $cfg in
        unbound) bind=(--bind-to none) ;;
        pinned) bind=(--bind-to core:overload-allowed --map-by core) ;;
      esac
      timeout 900 "${OMPIRUN[@]}" "${bind[@]}" -np "$n" "$BUILD/bin/ringo-bench" -b "$MINB" -e "$MAXB" -f "$FACTOR" -w "$WARMUP" \
        "${it[@]}" -d float32 -o sum --barrier --bound -J "$log.json" >"$log" 2>&1 || rc=$?
      [ $rc -ne 0 ] || python3 - "$log.json" "$pass" "$load" "$OUT/bound.tsv" "$cfg" >>"$OUT/rows.tsv" <<'EOF' || rc=$?
import json, sys
d = json.load(open(sys.argv[1]))
# --bound's memory bound as a busbw: bound_frac = T_bound / time, so busbw / bound_frac.
with open(sys.argv[4], "a") as f:
    for w in d["rows"]:
        if w.get("bound_frac"):
            f.write("%s\t%d\t%d\t%.4f\n" % (sys.argv[2], w["nranks"], w["size"], w["oop_busbw"] / w["bound_frac"]))
for w in d["rows"]:
    cfg = sys.argv[5]
    for lib, c, key in (("ringo", cfg, "oop"),):
        wrong = w[key + "_wrong"] + w[key.replace("oop", "ip") + "_wrong"]
        print("\t".join(str(x) for x in (sys.argv[2], sys.argv[3], lib, c, w["nranks"], w["size"],
                                          w[key + "_time_us"], w[key + "_busbw"], wrong, w["iters"])))
EOF
      ;;
    ompi|mpich|impi|ccl)
      local launch=()
      case $lib:$cfg in
        ompi:default) launch=("${OMPIRUN[@]}" -np "$n") ;;
        ompi:tuned-*) launch=("${OMPIRUN[@]}" --mca coll_tuned_use_dynamic_rules 1
                              --mca coll_tuned_allreduce_algorithm "${cfg#tuned-}" -np "$n") ;;
        mpich:default) launch=(/usr/bin/mpiexec.mpich -bind-to core -n "$n") ;;
        mpich:*) launch=(env MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM="$cfg" /usr/bin/mpiexec.mpich -bind-to core -n "$n") ;;
        impi:default) launch=("${IMPIRUN[@]}" -n "$n") ;;
        impi:adjust-*) launch=("${IMPIRUN[@]}" -genv I_MPI_ADJUST_ALLREDUCE "${cfg#adjust-}" -n "$n") ;;
        ccl:default) launch=("${IMPIRUN[@]}" -genv CCL_ATL_TRANSPORT mpi -n "$n") ;;
        ccl:*) launch=("${IMPIRUN[@]}" -genv CCL_ATL_TRANSPORT mpi -genv CCL_ALLREDUCE "$cfg" -n "$n") ;;
      esac
      # shellcheck disable=SC2086
      timeout 900 "${launch[@]}" "$P/bin/peers-$lib" $args >"$log" 2>&1 || rc=$?
      awk -v pass="$pass" -v load="$load" -F'\t' '$1 == "row" {
            print pass "\t" load "\t" $2 "\t" $3 "\t" $4 "\t" $5 "\t" $7 "\t" $9 "\t" $10 "\t" $11 }' "$log" >>"$OUT/rows.tsv"
      ;;
    *) die "unknown library in configuration $1" ;;
  esac
  [ $rc -eq 0 ] || say "$lib:$cfg at N = $n failed (exit $rc): see $log"
  echo "$(date +%T) pass $pass N=$n $lib:$cfg rc=$rc load $load" >>"$OUT/runs.log"
}

# ---------------------------------------------------------------- the table

print_table() {
  python3 bench/peers/peers_table.py "$OUT/rows.tsv" | tee "$OUT/table.md"
}

if [ $TABLE_ONLY -eq 1 ]; then print_table; exit 0; fi
install_debian
install_pypi
install_ringo
build_harnesses
[ $INSTALL_ONLY -eq 0 ] || exit 0

mkdir -p "$OUT/logs"
: >"$OUT/rows.tsv"
: >"$OUT/runs.log"
: >"$OUT/bound.tsv"
say "sizes $MINB .. $MAXB x$FACTOR, N = $NS, $PASSES pass(es), configurations: $(echo $CONFIGS | wc -w); load $(cat /proc/loadavg)"
for pass in $(seq 1 "$PASSES"); do
  for n in $NS; do
    # PEERS_CONFIGS_N8 (and so on) replaces the list at that N: N = 8 on 2 cores is slow to run.
    cfgs=CONFIGS_N$n
    cfgs=${!cfgs:-$CONFIGS}
    for c in $cfgs; do
      say "pass $pass N=$n $c"
      run_config "$c" "$n" "$pass"
    done
  done
done
print_table
