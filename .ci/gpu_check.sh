#!/usr/bin/env bash
# gpu_check.sh — `make gpu-check LOG=dir` on a machine with a GPU: builds ringo with CUDA for sm_90, runs the
# GPU suites (and again under MPS when it starts) and the NCCL drop-in's client on device memory (N = 2, 4), then
# the device benchmark with N = 2..8 ranks on one GPU (threads of one process) and with N = 2, 4, 8 forked
# ranks (under MPS when it starts), prints one line per target of issue 28 (met, NOT MET or NOT MEASURED, from
# the bench tables), runs the torch backend on CUDA tensors (.ci/gpu_check_torch.sh), and writes into LOG the whole log (gpu_check.log), the bench tables (table.txt), the
# verdict and target lines plus the tables (summary.txt: what docs/gpu-check-h200.txt keeps) and each run's
# own output and JSON (runs.tgz): four files. Needs nvcc, a GPU with its driver, and GoogleTest: its headers
# and library, or its sources (GTEST_SRC, ./gtest-src or /usr/src/googletest), built here for a machine that
# cannot install it. Exit 0 only if every suite and NCCL device run ran and passed and every bench row was
# right (the targets are reported, not judged in the exit code); always done in under 8 minutes. Warnings do
# not stop this build (WERROR=0): its compiler need not be CI's.
set -u -o pipefail

# One process drives several ranks' streams (ringo's own and the callers'): with CUDA's default of 8
# hardware queues they share queues, and a spinning ring kernel at the head of one would hold back the
# launch of the kernel it waits for. 32 is the most CUDA gives.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
# A stuck ring then ends as ringo's own timeout error, naming the wait, before a part's cap kills it.
export RINGO_TIMEOUT=${RINGO_TIMEOUT:-20}

LOG=${1:-${LOG:-gpu-check-log}}
BUILD=${BUILD:-build-gpu}
BUILD_ABS=$(mkdir -p "$BUILD" && cd "$BUILD" && pwd)
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
# The GPU suites: the reduce-copy kernels, the ring kernel, the device-pointer collectives and sends (InitAll
# N = 2, 4, 8 on one GPU) and the multi-process CUDA IPC path (test_device, first: it is the one that needs
# the GPU most), the device one-shot kernel against its CPU reference, the DDP layer on device memory and its
# scale kernel. test_cuda_ring runs the ring kernel's code on the CPU (its GPU evidence comes from the others).
GPU_SUITES=(test_device test_cuda_kernels test_cuda_ring test_cuda_oneshot test_ddp_device test_ddp_scale)
# With MPI: device collectives whose ring leaves the (fake) host, staged through host memory
# (test/mpi/test_mpi_staged.cc, under mpirun by run_tests.sh).
if command -v mpicc >/dev/null 2>&1; then GPU_SUITES+=(mpi/test_mpi_staged); else NO_MPI=1; fi
# test/nccl/nccl_device_program.c: an NCCL program on device buffers, linked against ringo's libnccl.so.2, run
# with each of these rank counts (all ranks on GPU 0, driven from one thread) for at most NCCL_DEVICE_S each.
NCCL_DEVICE_RUNS=(2 4)
# Benchmark runs, "N devices" ("-" = the default, every rank on device 0): every N of issue 28's targets.
BENCH_RUNS=("2 -" "3 -" "4 -" "5 -" "6 -" "7 -" "8 -")
BENCH_ARGS=(-b 1M -e 1G -f 4 -d all)
# The same benchmark with every rank a forked process (-P: CUDA IPC between them), under MPS when it starts
# (without it the processes' kernels time-slice), at the sizes where processes must be within PROCS_PCT % of
# threads.
PROC_RUNS=(2 4 8)
PROC_ARGS=(-b 64M -e 1G -f 4 -d all)
PROCS_PCT=5
# The ring's times before issue 28 (N, size, type, time in us), for the target that no size be slower.
BASELINE=.ci/gpu_baseline_h200.txt
# Slower than the baseline by more than this many percent counts as slower (run-to-run spread on the H200
# was up to 2 % at a size).
SLOWER_PCT=3
# Seconds: each part gets its cap, or less so that the whole run ends by DEADLINE_S (under 8 minutes with
# the kill grace periods and MPS's stop): the parts after it are left at least what they reserve.
# GPU_CHECK_S sets a shorter deadline (a rerun with less machine time left); the parts get what it leaves.
BUILD_S=240 TESTS_S=200 BENCH_S=220 PROCS_S=70 TORCH_S=100 DEADLINE_S=${GPU_CHECK_S:-440}
# The benchmark runs leave the torch part at least this much of the deadline.
TORCH_MIN_S=75
[ "$DEADLINE_S" -ge 240 ] 2>/dev/null && [ "$DEADLINE_S" -le 440 ] || { echo "gpu-check: GPU_CHECK_S must be 240..440 (the build alone keeps 60 s)"; exit 2; }
# Of the tests' share, the NCCL device runs are left at least NCCL_DEVICE_SHARE_S (and whatever the suites
# leave), each at most NCCL_DEVICE_S.
NCCL_DEVICE_SHARE_S=30 NCCL_DEVICE_S=60
# The tests' second pass, under MPS, gets this much of the suites' share.
MPS_PASS_S=40
FAILS=()

step() { echo; echo "=== $* ($(date +%T))"; }
problem() { echo "gpu-check: problem: $*"; FAILS+=("$*"); }
# budget CAP RESERVE: seconds for the next part.
budget() {
  local left=$((DEADLINE_S - (SECONDS - START) - $2))
  local t=$(($1 < left ? $1 : left))
  echo $((t < 10 ? 10 : t))
}

# ---------------------------------------------------------------- MPS

MPS_ON=0
mps_start() {
  # Short paths (the control socket's must fit a sockaddr_un) outside LOG, which keeps four files.
  MPS_PIPE=$WORK/mps/pipe
  export CUDA_MPS_LOG_DIRECTORY=$WORK/mps/log
  mkdir -p "$MPS_PIPE" "$CUDA_MPS_LOG_DIRECTORY" "$NO_MPS"
  [ -x /usr/local/nvidia/bin/nvidia-cuda-mps-control ] && PATH=$PATH:/usr/local/nvidia/bin
  if ! command -v nvidia-cuda-mps-control >/dev/null; then
    echo "MPS: not started: nvidia-cuda-mps-control not found; multi-process tests run time-sliced only"
    return
  fi
  # The daemon keeps no descriptor of this script's output (a daemon holding tee's pipe would keep the
  # log open after the end).
  CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE timeout 10 nvidia-cuda-mps-control -d </dev/null >>"$CUDA_MPS_LOG_DIRECTORY/d.out" 2>&1
  local rc=$?
  # -d returns once the daemon has forked; it is up when it answers on its pipe.
  # The daemon answering is not enough (in a container its server may fail to start): one real client
  # run, the NCCL program with one rank, must pass under it.
  local probe=$BUILD/test/nccl_device_program
  if [ "$rc" -eq 0 ] && echo get_server_list | CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE timeout 5 nvidia-cuda-mps-control >/dev/null &&
    { [ ! -x "$probe" ] || CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE timeout 20 "$probe" 1 >/dev/null 2>&1; }; then
    MPS_ON=1
    echo "MPS: started (CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE, logs in $CUDA_MPS_LOG_DIRECTORY)"
  elif [ "$rc" -eq 0 ]; then
    echo "MPS: the daemon started but a client could not run under it; multi-process tests run time-sliced only"
    tail -n 5 "$CUDA_MPS_LOG_DIRECTORY/control.log" "$CUDA_MPS_LOG_DIRECTORY/server.log" 2>/dev/null
    MPS_ON=1
    mps_stop
  else
    echo "MPS: not started (nvidia-cuda-mps-control -d: exit $rc); multi-process tests run time-sliced only"
    tail -n 5 "$CUDA_MPS_LOG_DIRECTORY/control.log" 2>/dev/null
  fi
}

mps_stop() {
  [ "$MPS_ON" -eq 1 ] || return 0
  MPS_ON=0
  if echo quit | CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1; then
    echo "MPS: stopped"
  else
    echo "MPS: 'quit' failed or timed out (exit $?)"
  fi
}

# ---------------------------------------------------------------- parts

# gtest_setup: 0 when GoogleTest can be compiled against: installed, or built here from its sources into
# $BUILD/gtest (CPATH and LIBRARY_PATH then point at them, which the Makefile's -lgtest honours).
gtest_setup() {
  local lib d src=""
  lib=$(ls /usr/lib/libgtest.* /usr/lib/*/libgtest.* /usr/local/lib/libgtest.* /usr/local/lib/*/libgtest.* 2>/dev/null | head -n 1)
  if { [ -f /usr/include/gtest/gtest.h ] || [ -f /usr/local/include/gtest/gtest.h ]; } && [ -n "$lib" ]; then
    echo "GoogleTest: installed ($lib)"
    return 0
  fi
  for d in "${GTEST_SRC:-}" gtest-src /usr/src/googletest; do
    [ -n "$d" ] || continue
    if [ -f "$d/googletest/src/gtest-all.cc" ]; then src=$d/googletest; break; fi
    if [ -f "$d/src/gtest-all.cc" ]; then src=$d; break; fi
  done
  if [ -z "$src" ]; then
    echo "GoogleTest: not installed, and no sources (GTEST_SRC, ./gtest-src or /usr/src/googletest)"
    return 1
  fi
  src=$(cd "$src" && pwd)
  local out
  out=$(mkdir -p "$BUILD/gtest" && cd "$BUILD/gtest" && pwd) || return 1
  echo "GoogleTest: not installed; building it from $src"
  if ! "${CXX:-c++}" -std=c++17 -O1 -pthread -isystem "$src/include" -I"$src" -c "$src/src/gtest-all.cc" \
    -o "$out/gtest-all.o" || ! ar rcs "$out/libgtest.a" "$out/gtest-all.o"; then
    echo "GoogleTest: the build from $src failed"
    return 1
  fi
  export CPATH="$src/include${CPATH:+:$CPATH}" LIBRARY_PATH="$out${LIBRARY_PATH:+:$LIBRARY_PATH}"
}

# build_all: fills BINS with the suites that built; a missing or unbuilt suite is a problem. Without
# GoogleTest the suites are not built (a problem), but the library, the benchmark and the NCCL program are,
# and run.
build_all() {
  local targets=(lib "$BUILD/bin/ringo-gpu-bench" "$BUILD/test/nccl_device_program") s gtest=1
  BINS=()
  gtest_setup || { gtest=0; problem "GoogleTest not found: the GPU suites were neither built nor run"; }
  for s in "${GPU_SUITES[@]}"; do
    [ "$gtest" -eq 1 ] || continue
    if [ -f "test/$s.cc" ]; then targets+=("$BUILD/test/$s"); else problem "$s missing (no test/$s.cc)"; fi
  done
  # Old binaries go first, so that one that fails to build now cannot run in its place.
  rm -f "$BUILD/bin/ringo-gpu-bench" "$BUILD/test/nccl_device_program" "${GPU_SUITES[@]/#/$BUILD/test/}"
  local cap t0=$SECONDS
  cap=$(budget $BUILD_S 180)
  step "build (BUILD=$BUILD, -j$JOBS, sm_90 + compute_90 PTX, at most $cap s)"
  timeout -k 10 "$cap" make --no-print-directory -k -j"$JOBS" BUILD="$BUILD" CUDA=1 WERROR=0 "${targets[@]}"
  local rc=$?
  echo "build took $((SECONDS - t0)) s (make exit $rc)"
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && problem "build took over $cap s"
  for s in "${GPU_SUITES[@]}"; do
    [ -f "test/$s.cc" ] && [ "$gtest" -eq 1 ] || continue
    # DeviceNoGpu checks the no-GPU error and skips where a GPU answers: not run here.
    local filter=""
    [ "$s" = test_device ] && filter="@-DeviceNoGpu.*"
    if [ -x "$BUILD/test/$s" ]; then BINS+=("$BUILD/test/$s$filter"); else problem "$s did not build"; fi
  done
  [ -x "$BUILD/bin/ringo-gpu-bench" ] || problem "ringo-gpu-bench did not build"
  [ -x "$BUILD/test/nccl_device_program" ] || problem "nccl_device_program did not build"
}

# reap_leftovers: kills what a part killed at its cap left running (run_tests.sh's own timeout runs a suite in
# a process group of its own, which the outer timeout does not reach), so that the next part finds the GPU's
# SMs free: the ranks' ring kernels must all be resident at once.
reap_leftovers() {
  local pid exe left=0
  [ -n "$BUILD_ABS" ] && [ "$BUILD_ABS" != / ] || return 0
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    [ "$pid" -eq $$ ] && continue
    # By the program's own path: this build's binaries, however they were started (mpirun exits
    # once its ranks are gone).
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
    case $exe in "$BUILD_ABS"/*) kill -KILL "$pid" 2>/dev/null && left=$((left + 1)) ;; esac
  done
  [ "$left" -eq 0 ] || echo "gpu-check: killed $left process(es) a timed-out part left running"
}

# test_pass NAME CAP ENV...: runs the suites in RUN_BINS once with ENV; a failure, a timeout or a skip (on a GPU
# machine a skipped GPU test checked nothing) is a problem.
test_pass() {
  local name=$1 cap=$2 out rc summary skipped t0=$SECONDS
  shift 2
  step "tests: $name ($*; at most $cap s)"
  out=$(mktemp)
  env "$@" RINGO_TEST_TIMEOUT=$((cap - 5)) timeout -k 5 "$cap" .ci/run_tests.sh "${RUN_BINS[@]}" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  reap_leftovers
  summary=$(tail -n 1 "$out")
  rm -f "$out"
  echo "tests ($name) took $((SECONDS - t0)) s"
  skipped=$(echo "$summary" | sed -n 's/.*, \([0-9]*\) skipped$/\1/p')
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then problem "tests ($name) took over $cap s"
  elif [ "$rc" -ne 0 ]; then problem "tests ($name): $summary"
  elif [ "${skipped:-0}" -ne 0 ]; then problem "tests ($name): $summary — a GPU test skipped (no usable device?)"
  else echo "gpu-check: tests ($name): $summary"; PASSED+=("tests ($name): $summary")
  fi
}

# The suites, then the NCCL device runs with what the suites left of the tests' share.
run_tests_all() {
  local cap t0=$SECONDS
  cap=$(budget $TESTS_S 120)
  local suites=$((cap - NCCL_DEVICE_SHARE_S))
  if [ ${#BINS[@]} -eq 0 ]; then problem "no GPU suite to run"; else run_suites $((suites < 10 ? 10 : suites)); fi
  run_nccl_device $((cap - (SECONDS - t0)))
}

# run_suites CAP: the built suites without MPS, then, if MPS starts, the multi-process tests again with it
# (the rest has one process per GPU, which MPS does not change), within CAP seconds.
run_suites() {
  local cap=$1 t0=$SECONDS
  step "MPS"
  mps_start
  # Without MPS first: pointing CUDA at an empty pipe folder keeps even a system-wide MPS daemon out.
  # Starting MPS (and its probe) came out of the same share.
  local first=$((cap - (SECONDS - t0)))
  [ "$MPS_ON" -eq 1 ] && first=$((first - MPS_PASS_S))
  first=$((first < 20 ? 20 : first))
  RUN_BINS=("${BINS[@]}")
  # Pieces of 64 KiB: the staged device tests' collectives (about 1 MiB) are pipelined in several
  # phases (src/staged.c) with real copies and wait kernels, not staged whole as 1 MiB pieces would.
  test_pass "without MPS" "$first" CUDA_MPS_PIPE_DIRECTORY="$NO_MPS" \
    RINGO_STAGED_PIECE_BYTES=64K
  if [ "$MPS_ON" -eq 1 ]; then
    local rest=$((cap - (SECONDS - t0))) b
    RUN_BINS=()
    for b in "${BINS[@]}"; do
      case $b in
        */test_device*) RUN_BINS+=("${b%%@*}@*DeviceProcesses.*:DeviceP2pProcesses.*") ;;
        */mpi/test_mpi_staged*) RUN_BINS+=("${b%%@*}@MpiStagedDevice.*") ;;
      esac
    done
    # One rank per process here: the default hardware queues are plenty, and each MPS client's queues
    # count against the server's.
    test_pass "with MPS" $((rest < 20 ? 20 : rest)) CUDA_MPS_PIPE_DIRECTORY="$MPS_PIPE" CUDA_DEVICE_MAX_CONNECTIONS=8
  fi
  mps_stop
}

# run_nccl_device SHARE: each NCCL_DEVICE_RUNS count in turn, within SHARE seconds, every later run left at least
# 10 s. Outside MPS, as the single process it is. Exit 2 (no CUDA device) is a problem here too.
run_nccl_device() {
  local share=$1 prog=$BUILD/test/nccl_device_program later=${#NCCL_DEVICE_RUNS[@]} t0=$SECONDS n cap
  [ -x "$prog" ] || return 0 # build_all reported it
  mkdir -p "$NO_MPS"
  for n in "${NCCL_DEVICE_RUNS[@]}"; do
    later=$((later - 1))
    cap=$((share - (SECONDS - t0) - 10 * later))
    cap=$((cap > NCCL_DEVICE_S ? NCCL_DEVICE_S : cap))
    cap=$((cap < 10 ? 10 : cap))
    step "NCCL drop-in on device memory: nccl_device_program $n (at most $cap s)"
    CUDA_MPS_PIPE_DIRECTORY="$NO_MPS" timeout -k 5 "$cap" "$prog" "$n" 2>&1
    judge_run $? "nccl_device_program $n" "$cap" "a failed check, named in the log"
  done
}

# judge_run RC NAME CAP WHAT: the verdict on one run of a GPU program (exit 2: it found no GPU).
judge_run() {
  case $1 in
    0) PASSED+=("$2") ;;
    2) problem "$2: no CUDA device" ;;
    124 | 137) problem "$2 took over $3 s" ;;
    *) problem "$2: exit $1 ($4)" ;;
  esac
}

# The benchmark runs share BENCH_S (or what the deadline leaves) in proportion to N + 4 (the fixed part is the
# host's: pinned buffers, filling the inputs), a run that ends early leaving its time to the next ones.
run_bench_all() {
  local bench=$BUILD/bin/ringo-gpu-bench total t0=$SECONDS weight=0 spec n g
  [ -x "$bench" ] || return
  total=$(budget $BENCH_S $((30 + TORCH_MIN_S)))
  for spec in "${BENCH_RUNS[@]}"; do weight=$((weight + ${spec%% *} + 4)); done
  for spec in "${BENCH_RUNS[@]}"; do
    n=${spec%% *} g=${spec#* }
    local cap=$(((total - (SECONDS - t0)) * (n + 4) / weight))
    weight=$((weight - n - 4))
    cap=$((cap < 10 ? 10 : cap))
    # -t bounds each of the benchmark's waits: a third of the cap, so a stuck stream is its report.
    local args=(-N "$n" "${BENCH_ARGS[@]}" -t $((cap / 3 < 10 ? 10 : cap / 3)) -J "$RUNS/bench_N$n.json")
    [ "$g" != - ] && args+=(-g "$g")
    step "bench N=$n (at most $cap s)"
    echo "\$ $bench ${args[*]}"
    timeout -k 5 "$cap" "$bench" "${args[@]}" 2>&1 | tee "$RUNS/bench_N$n.txt"
    local rc=${PIPESTATUS[0]}
    reap_leftovers
    { echo "## N=$n: ringo-gpu-bench ${args[*]} (exit $rc)"; cat "$RUNS/bench_N$n.txt"; perf_line "$n"; echo; } \
      >>"$LOG/table.txt"
    perf_line "$n"
    judge_run "$rc" "bench N=$n" "$cap" "an error, or a wrong or differing element"
  done
}

# The process runs (PROC_RUNS), sharing PROCS_S (or what the deadline leaves) like the thread runs, under MPS
# when it starts. A wrong or differing element, an error or a timeout is a problem, as for the threads.
run_bench_procs() {
  local bench=$BUILD/bin/ringo-gpu-bench total t0=$SECONDS weight=0 n mps="without MPS"
  [ -x "$bench" ] || return
  total=$(budget $PROCS_S $TORCH_MIN_S)
  for n in "${PROC_RUNS[@]}"; do weight=$((weight + n + 4)); done
  step "MPS for the process runs"
  mps_start
  [ "$MPS_ON" -eq 1 ] && mps="under MPS"
  for n in "${PROC_RUNS[@]}"; do
    local cap=$(((total - (SECONDS - t0)) * (n + 4) / weight))
    weight=$((weight - n - 4))
    cap=$((cap < 10 ? 10 : cap))
    local args=(-P -N "$n" "${PROC_ARGS[@]}" -t $((cap / 3 < 10 ? 10 : cap / 3)) -J "$RUNS/bench_P$n.json")
    step "bench N=$n, ranks as processes $mps (at most $cap s)"
    echo "\$ $bench ${args[*]}"
    env CUDA_MPS_PIPE_DIRECTORY="$([ "$MPS_ON" -eq 1 ] && echo "$MPS_PIPE" || echo "$NO_MPS")" CUDA_DEVICE_MAX_CONNECTIONS=8 \
      timeout -k 5 "$cap" "$bench" "${args[@]}" 2>&1 | tee "$RUNS/bench_P$n.txt"
    local rc=${PIPESTATUS[0]}
    reap_leftovers
    { echo "## N=$n processes $mps: ringo-gpu-bench ${args[*]} (exit $rc)"; cat "$RUNS/bench_P$n.txt"; echo; } >>"$LOG/table.txt"
    judge_run "$rc" "bench N=$n processes" "$cap" "an error, or a wrong or differing element"
  done
  PROCS_MPS=$mps
  mps_stop
}

# run_torch: torch.distributed backend "ringo" on CUDA tensors, with the machine's python3 and torch, within what
# the deadline leaves (at most TORCH_S, at least TORCH_MIN_S unless the build and tests overran); after the
# benchmarks, before the experiments, which only use what is left.
run_torch() {
  local cap
  cap=$(budget $TORCH_S 0)
  step "torch backend \"ringo\" on CUDA tensors: .ci/gpu_check_torch.sh (at most $cap s)"
  CUDA_MPS_PIPE_DIRECTORY="$NO_MPS" timeout -k 5 "$cap" .ci/gpu_check_torch.sh "$BUILD_ABS" "$WORK/py" 2>&1
  judge_run $? "torch backend on CUDA tensors" "$cap" "a failed test, named in the log"
  reap_leftovers
}

# ---------------------------------------------------------------- issue 28's targets

# One line per target, after the benchmark runs, from their tables (not part of the PASS/FAIL verdict, which
# is about right results): "met", "NOT MET" with the rows that miss, or "NOT MEASURED" with why. A share is
# hbm over the higher of the run's two d2d copy measurements, as the bench's own perf line takes it.

# bench_rows N [P]: "size type time_us share" for each row of run N's table (nothing when it did not run);
# P: of the process run.
bench_rows() {
  local f=$RUNS/bench_${2:-N}$1.txt ref
  [ -f "$f" ] || return 0
  ref=$(sed -n 's|^# d2d copy: start \([0-9.]*\) GB/s, end \([0-9.]*\) GB/s.*|\1 \2|p' "$f" |
    awk '{ print ($1 > $2 ? $1 : $2) }')
  [ -n "$ref" ] || return 0
  awk -v ref="$ref" '!/^#/ && NF == 11 && $10 ~ /^[0-9]+$/ { printf "%s %s %s %.1f\n", $1, $3, $4, 100 * $8 / ref }' "$f"
}

# mib BYTES: a size as the targets name it.
mib() { awk -v b="$1" 'BEGIN { if (b >= 1073741824) printf "%g GiB", b / 1073741824; else printf "%g MiB", b / 1048576 }'; }

# target_share PCT SIZE...: every N and both dtypes at least PCT % of the copy at each SIZE (bytes).
target_share() {
  local pct=$1 n t size row miss="" absent="" low="" lowest=101
  shift
  for n in $BENCH_NS; do
    for t in float32 bfloat16; do
      for size in "$@"; do
        row=$(bench_rows "$n" | awk -v s="$size" -v t="$t" '$1 == s && $2 == t { print $4; exit }')
        if [ -z "$row" ]; then absent+=" N=$n"; continue 2; fi
        if awk -v a="$row" -v b="$lowest" 'BEGIN { exit !(a < b) }'; then lowest=$row low="N=$n $t $(mib "$size")"; fi
        awk -v a="$row" -v p="$pct" 'BEGIN { exit !(a < p) }' && miss+="; N=$n $t $(mib "$size") $row %"
      done
    done
  done
  absent=$(echo "$absent" | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/^ *//; s/ *$//; s/ /, /g')
  local what="N = ${BENCH_NS// /, }, float32 and bfloat16, threads"
  if [ -n "$miss" ]; then verdict "NOT MET (${miss#; })${absent:+; not measured: $absent}" "$what"
  elif [ -n "$absent" ]; then verdict "NOT MEASURED ($absent: no bench table)${low:+; the rest met, lowest $lowest % at $low}" "$what"
  else verdict "met (lowest $lowest % at $low)" "$what"
  fi
}

# verdict TEXT WHAT: the line for the target in TARGET (set by the caller).
verdict() { echo "gpu-check: target: $TARGET ($2): $1"; }

# target_latency N US: 1 MiB all-reduces of N ranks in at most US microseconds, both dtypes.
target_latency() {
  local n=$1 us=$2 t time miss="" got=""
  for t in float32 bfloat16; do
    time=$(bench_rows "$n" | awk -v t="$t" '$1 == 1048576 && $2 == t { print $3; exit }')
    if [ -z "$time" ]; then verdict "NOT MEASURED (no bench row for N=$n $t 1 MiB)" "N = $n"; return; fi
    got+=", $t $time us"
    awk -v a="$time" -v b="$us" 'BEGIN { exit !(a > b) }' && miss+=", $t $time us"
  done
  if [ -n "$miss" ]; then verdict "NOT MET (${miss#, })" "N = $n"; else verdict "met (${got#, })" "N = $n"; fi
}

# target_processes: every row of a process run at most PROCS_PCT % slower than the thread run's row of that N,
# size and type.
target_processes() {
  local n out miss="" compared=0 absent=""
  local what="N = ${PROC_RUNS[*]}, float32 and bfloat16, ${PROCS_MPS:-not run}"
  for n in "${PROC_RUNS[@]}"; do
    out=$(bench_rows "$n" P | awk -v n="$n" -v pct="$PROCS_PCT" '
      NR == FNR { threads[$1 " " $2] = $3; next }
      ($1 " " $2) in threads {
        c++; t = threads[$1 " " $2]
        if ($3 > t * (1 + pct / 100)) m = m sprintf("; N=%s %s %g MiB %s us against %s us", n, $2, $1 / 1048576, $3, t)
      }
      END { printf "%d%s", c, m }' <(bench_rows "$n") -)
    [ "${out%%;*}" -eq 0 ] && absent+=", N=$n"
    compared=$((compared + ${out%%;*}))
    [ "$out" = "${out%%;*}" ] || miss+=";${out#*;}"
  done
  if [ -n "$miss" ]; then verdict "NOT MET (${miss#; })${absent:+; not measured: ${absent#, }}" "$what"
  elif [ "$compared" -eq 0 ]; then verdict "NOT MEASURED (no process row beside a thread row)" "$what"
  elif [ -n "$absent" ]; then verdict "NOT MEASURED for ${absent#, }; the rest met ($compared rows)" "$what"
  else verdict "met ($compared rows)" "$what"
  fi
}

# target_no_slower: no row of a bench table slower than the baseline's row of that N, size and type by
# more than SLOWER_PCT % (the baseline has N = 2, 4 and 8).
target_no_slower() {
  local n out miss="" compared=0
  local what="every size of N = 2, 4, 8 against $BASELINE, $SLOWER_PCT % spread allowed"
  [ -f "$BASELINE" ] || { verdict "NOT MEASURED ($BASELINE missing)" "$what"; return; }
  for n in $BENCH_NS; do
    # "count; N=... slower row; ...": the rows compared, then each one slower.
    out=$(bench_rows "$n" | awk -v n="$n" -v pct="$SLOWER_PCT" '
      NR == FNR { if ($1 == n) base[$2 " " $3] = $4; next }
      ($1 " " $2) in base {
        c++; b = base[$1 " " $2]
        if ($3 > b * (1 + pct / 100)) m = m sprintf("; N=%s %s %g MiB %s us (was %s)", n, $2, $1 / 1048576, $3, b)
      }
      END { printf "%d%s", c, m }' <(grep -v '^#' "$BASELINE") -)
    compared=$((compared + ${out%%;*}))
    [ "$out" = "${out%%;*}" ] || miss+=";${out#*;}"
  done
  if [ "$compared" -eq 0 ]; then verdict "NOT MEASURED (no bench row to compare)" "$what"
  elif [ -n "$miss" ]; then verdict "NOT MET (${miss#; })" "$what"
  else verdict "met ($compared rows)" "$what"
  fi
}

print_targets() {
  step "issue 28's targets (not part of the verdict)"
  BENCH_NS=$(for spec in "${BENCH_RUNS[@]}"; do echo -n "${spec%% *} "; done | sed 's/ $//')
  TARGET=">= 90 % of the d2d copy at 256 MiB and 1 GiB" target_share 90 268435456 1073741824
  TARGET=">= 75 % of the d2d copy at 16 MiB" target_share 75 16777216
  TARGET="1 MiB all-reduce in <= 8 us" target_latency 2 8
  TARGET="1 MiB all-reduce in <= 20 us" target_latency 8 20
  TARGET="forked processes over CUDA IPC within $PROCS_PCT % of threads at >= 64 MiB" target_processes
  TARGET="no size slower than before" target_no_slower
  oneshot_line
}

# The device one-shot kernel's times from test_cuda_oneshot: the combine alone, and the boarded kernel (the
# input copied into each rank's board, the flags, the combine) of N ranks on one GPU: what the threshold
# (RINGO_DEV_ONESHOT_BYTES_DEFAULT, src/include/cuda_oneshot.h) is to be picked from. The one-shot is not yet
# wired into device collectives, so no all-reduce of the bench took it.
oneshot_line() {
  local times
  local what
  for what in kernel boarded; do
    times=$(grep -h "^# oneshot-$what " "$LOG/gpu_check.log" 2>/dev/null | sed "s/^# oneshot-$what //; s/ per .*//" |
      paste -sd ';' - | sed 's/;/; /g')
    [ "$what" = kernel ] && what="kernel alone, combine only" || what="boarded kernel (copy, flags, combine; N kernels on one GPU)"
    echo "gpu-check: one-shot $what (the threshold, 1 MiB, is not yet measured end to end): ${times:-NOT MEASURED (the timing tests of test_cuda_oneshot did not run)}"
  done
}

# Informational, not part of the verdict, with what the deadline leaves (at least 20 s each, in this order):
# N = 2 again with one knob changed at a time, each over the sizes it matters for ("knob|sizes"), so that the
# next change to the kernel's synchronisation, channel count or slices starts from a measurement: one round at
# a time through each step (the order before windows) at 256 MiB and above; full slots for every slice (the
# slices before they spread short chunks over every channel) at 1-64 MiB, beside the N = 2 run's own rows; no
# fence before each flag's release, system-scope flags (the default before GPU scope in one process) and 32
# channels at 256 MiB and above.
EXPERIMENTS=("RINGO_CUDA_WINDOW=1|-b 256M -e 1G -f 2" "RINGO_CUDA_MIN_SLICE_BYTES=256K|-b 1M -e 64M -f 4"
  "RINGO_CUDA_FENCE=0|-b 256M -e 1G -f 2" "RINGO_CUDA_GPU_SCOPE=0|-b 256M -e 1G -f 2"
  "RINGO_CUDA_CHANNELS=32|-b 256M -e 1G -f 2")
run_experiments() {
  local bench=$BUILD/bin/ringo-gpu-bench x
  [ -x "$bench" ] || return
  for x in "${EXPERIMENTS[@]}"; do
    local e=${x%%|*} sizes
    read -r -a sizes <<<"${x#*|}"
    local cap=$((DEADLINE_S - (SECONDS - START) - 10))
    if [ "$cap" -lt 20 ]; then
      echo "gpu-check: experiment $e not run: no time left"
      continue
    fi
    cap=$((cap > 30 ? 30 : cap))
    local tag=${e//[^A-Za-z0-9]/_}
    step "experiment: N=2 with $e, ${sizes[*]} (at most $cap s; not part of the verdict)"
    env "$e" timeout -k 5 "$cap" "$bench" -N 2 "${sizes[@]}" -d float32 -t $((cap / 3 < 10 ? 10 : cap / 3)) 2>&1 |
      tee "$RUNS/experiment_$tag.txt"
    { echo "## experiment N=2, $e (exit ${PIPESTATUS[0]})"; cat "$RUNS/experiment_$tag.txt"; echo; } >>"$LOG/table.txt"
    reap_leftovers
  done
}

# The issue's performance target (not part of the verdict): the benchmark's own line (the lowest hbm at
# 256 MiB and above over the higher of its two copy measurements), or why there is none.
perf_line() {
  local line
  line=$(grep -m 1 '^# perf:' "$RUNS/bench_N$1.txt")
  echo "# perf N=$1: ${line:-no perf line (the run ended before its last row)}"
}

main() {
  START=$SECONDS
  PASSED=()
  # Stop MPS however this ends (a signal included), so that no daemon outlives the check.
  trap mps_stop EXIT
  trap 'exit 130' INT TERM
  local commit="unknown (no git checkout)"
  if git rev-parse --short HEAD >/dev/null 2>&1; then
    commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')
  fi
  echo "ringo gpu-check: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), commit $commit"
  echo "Runs: ${GPU_SUITES[*]} (without MPS, then with MPS if it starts), nccl_device_program with N = ${NCCL_DEVICE_RUNS[*]},"
  echo "then ringo-gpu-bench with N = 2..8 ranks on GPU 0 (${BENCH_ARGS[*]}) beside the GPU's measured"
  echo "cudaMemcpy device-to-device bandwidth, the same with N = ${PROC_RUNS[*]} forked ranks (${PROC_ARGS[*]}),"
  echo "one line per target of issue 28, then torch's backend \"ringo\" on CUDA tensors (N = 2, DDP, FSDP)."

  [ "${NO_MPI:-0}" -eq 1 ] && echo "gpu-check: mpicc not found: device collectives across hosts (staged) are not run"
  step "device"
  # Only informative: the suites and the benchmark ask the CUDA runtime themselves, and fail (a skipped
  # test, "no CUDA device") when it has no device.
  if command -v nvidia-smi >/dev/null; then
    timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap,compute_mode,persistence_mode \
      --format=csv || echo "gpu-check: nvidia-smi failed (exit $?): no GPU or no driver?"
    local driver mode
    driver=$(timeout 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
    mode=$(timeout 30 nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -n 1)
    # CUDA 13's runtime needs driver R580 or later: with an older one every part would only report that.
    if [ -n "$driver" ] && [ "${driver%%.*}" -lt 580 ] 2>/dev/null; then
      problem "driver $driver is older than R580, which CUDA 13 needs; nothing run"
      step "verdict after $((SECONDS - START)) s"
      echo "gpu-check: FAIL: $(join "${FAILS[@]}")"
      return 1
    fi
    case $mode in *Exclusive*) echo "gpu-check: compute mode $mode: ranks in several processes can only share the GPU under MPS" ;; esac
  else
    echo "gpu-check: nvidia-smi not found (no GPU driver?)"
  fi
  local nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
  [ -x "$nvcc" ] || nvcc=$(command -v nvcc || true)
  if [ -z "$nvcc" ]; then
    problem "nvcc not found (set CUDA_HOME); nothing built"
  else
    "$nvcc" --version | tail -n 2
    build_all
    run_tests_all
    run_bench_all
    run_bench_procs
    print_targets
    run_torch
    run_experiments
  fi

  step "verdict after $((SECONDS - START)) s"
  if [ ${#FAILS[@]} -ne 0 ]; then
    echo "gpu-check: FAIL: $(join "${FAILS[@]}")"
    return 1
  fi
  echo "gpu-check: PASS: $(join "${PASSED[@]}")"
}

# join ITEM...: the items on one line, separated by "; ".
join() {
  local out=$1
  shift
  for item in "$@"; do out+="; $item"; done
  echo "$out"
}

mkdir -p "$LOG" || exit 1
# Scratch (MPS pipes and logs, a pipe folder with no daemon, each run's own files) outside LOG, which
# ends with four files (a tool that returns a handful of files gets all of them).
WORK=$(mktemp -d /tmp/ringo-gc.XXXXXX) || exit 1
trap 'rm -rf "$WORK"' EXIT
NO_MPS=$WORK/mps/none RUNS=$WORK/runs
mkdir -p "$NO_MPS" "$RUNS" || exit 1
# What an earlier version left in LOG goes too (it kept these files and MPS's folder there).
rm -rf "$LOG/table.txt" "$LOG/runs.tgz" "$LOG"/bench_N*.txt "$LOG"/bench_N*.json "$LOG"/experiment_*.txt "$LOG/mps"
main 2>&1 | tee "$LOG/gpu_check.log"
rc=${PIPESTATUS[0]}
tar czf "$LOG/runs.tgz" -C "$WORK" runs mps 2>/dev/null
rm -rf "$WORK"
{
  grep '^gpu-check: \(PASS\|FAIL\)' "$LOG/gpu_check.log" | tail -n 1
  grep '^gpu-check: \(target: \|one-shot kernel\)' "$LOG/gpu_check.log"
  [ -f "$LOG/table.txt" ] && { echo; cat "$LOG/table.txt"; }
} >"$LOG/summary.txt"
echo "gpu-check: log in $LOG/gpu_check.log, verdict and tables in $LOG/summary.txt, each run's files in $LOG/runs.tgz"
exit "$rc"
