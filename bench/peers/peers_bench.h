/* peers_bench.h — the loop every peer harness shares (peers_mpi.c, peers_ccl.cc): ringo-bench's sizes,
 * fill, exact-sum check and timing rule for a float32 sum all-reduce, out of place. Header-only, C or C++,
 * needs <mpi.h> (the peer's own MPI, or Intel MPI under oneCCL). Run: bench/peers/bench-peers.sh --quick. */
#ifndef PEERS_BENCH_H_
#define PEERS_BENCH_H_

#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The rules ringo-bench follows (bench/bench.h), so that a row here and a row there mean the same:
 * 20 timed iterations unless the last warm-up says a row would last over ITER_BUDGET_S, then fewer but
 * never under MIN_AUTO_ITERS. */
#define PEERS_ITER_BUDGET_S 1.0
#define PEERS_MIN_AUTO_ITERS 5

struct peers_opts {
  size_t minbytes, maxbytes;
  int factor, iters, warmup, check, iters_explicit;
  const char *lib, *config; /* labels printed in every row, e.g. "ompi" and "tuned-4" */
};

/* One all-reduce of count floats from s into r (out of place) by the peer; returns 0 on success. */
typedef int (*peers_call_fn)(void* ctx, const float* s, float* r, size_t count);

static double peers_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void peers_die(const char* what) {
  fprintf(stderr, "peers-bench: %s\n", what);
  fflush(NULL);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* ringo-bench's byte counts: a number with an optional K/M/G (powers of 1024). */
static size_t peers_bytes(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (end == s || v < 0) peers_die("bad size");
  if (*end == 'K' || *end == 'k') v *= 1024.0;
  else if (*end == 'M' || *end == 'm') v *= 1024.0 * 1024.0;
  else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024.0 * 1024.0;
  return (size_t)v;
}

/* -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -c 0|1 -L LIB -C CONFIG; ringo-bench's defaults except
 * the sizes, which default to the peers' range. */
static struct peers_opts peers_parse(int argc, char** argv) {
  struct peers_opts o = {4096, 256u << 20, 4, 20, 5, 1, 0, "?", "default"};
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *f = argv[i], *v = argv[i + 1];
    if (!strcmp(f, "-b")) o.minbytes = peers_bytes(v);
    else if (!strcmp(f, "-e")) o.maxbytes = peers_bytes(v);
    else if (!strcmp(f, "-f")) o.factor = atoi(v);
    else if (!strcmp(f, "-n")) o.iters = atoi(v), o.iters_explicit = 1;
    else if (!strcmp(f, "-w")) o.warmup = atoi(v);
    else if (!strcmp(f, "-c")) o.check = atoi(v);
    else if (!strcmp(f, "-L")) o.lib = v;
    else if (!strcmp(f, "-C")) o.config = v;
    else peers_die("usage: -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -c 0|1 -L LIB -C CONFIG");
  }
  if (o.factor < 2 || o.iters < 1 || o.warmup < 0 || o.minbytes < 4) peers_die("bad option value");
  return o;
}

/* Input element i of rank r: ringo-bench's input_value() for sum, small integers so that every
 * partial sum is exact in float32 and the check can compare bit for bit; the (i >> 7) term breaks
 * the short period that would hide a slice landing at the wrong offset. */
static float peers_input(int r, size_t i) {
  uint64_t h = ((uint64_t)i * 7u + (uint64_t)r * 31u + (i >> 7)) % 127u;
  return (float)(h % 4);
}

static uint64_t peers_check(const float* got, size_t count, int nranks) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    float want = 0;
    for (int r = 0; r < nranks; r++) want += peers_input(r, i);
    wrong += memcmp(&got[i], &want, sizeof want) != 0;
  }
  return wrong;
}

/* ringo-bench's quiet barrier (bench_mpi.h): waiters yield the CPU instead of spinning, so when ranks
 * outnumber cores the stragglers of one call are not slowed by spinning early finishers. Untimed. */
static void peers_quiet_barrier(void) {
  MPI_Request req;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS) peers_die("MPI_Ibarrier failed");
  for (int done = 0;;) {
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) peers_die("MPI_Test failed");
    if (done) return;
    sched_yield();
  }
}

static double peers_timed(peers_call_fn call, void* ctx, const float* s, float* r, size_t count) {
  peers_quiet_barrier();
  double t0 = peers_now();
  if (call(ctx, s, r, count) != 0) peers_die("the peer's all-reduce failed");
  return peers_now() - t0;
}

static int peers_cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* ringo-bench's rule: the median over iterations of the slowest rank's time of that iteration. */
static double peers_slowest_median(double* t, int n) {
  MPI_Allreduce(MPI_IN_PLACE, t, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  qsort(t, (size_t)n, sizeof *t, peers_cmp);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int peers_iters(const struct peers_opts* o, double warm_s) {
  if (o->iters_explicit || o->warmup == 0) return o->iters;
  MPI_Allreduce(MPI_IN_PLACE, &warm_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (warm_s * o->iters <= PEERS_ITER_BUDGET_S) return o->iters;
  int k = (int)(PEERS_ITER_BUDGET_S / warm_s);
  return k < PEERS_MIN_AUTO_ITERS ? (o->iters < PEERS_MIN_AUTO_ITERS ? o->iters : PEERS_MIN_AUTO_ITERS) : k;
}

/* One row per size: fresh inputs and a sentinel over the output (0xff bytes, a NaN), one checked call,
 * the warm-up, the timed loop; rank 0 prints it. Returns the wrong elements over all ranks and sizes. */
static uint64_t peers_run(const struct peers_opts* o, const char* version, peers_call_fn call, void* ctx) {
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  void *sp = NULL, *rp = NULL;
  double* times = (double*)calloc(1024, sizeof(double));
  if (posix_memalign(&sp, 4096, o->maxbytes) || posix_memalign(&rp, 4096, o->maxbytes) || !times)
    peers_die("cannot allocate the buffers");
  float *s = (float*)sp, *r = (float*)rp;
  if (rank == 0) {
    printf("# peers-bench %s %s: %s\n# float32 sum all-reduce, out of place, N = %d; time: median of the "
           "slowest rank, quiet barrier before each call\n", o->lib, o->config, version, n);
    printf("#\tlib\tconfig\tN\tbytes\tcount\ttime_us\talgbw\tbusbw\twrong\titers\n");
  }
  uint64_t wrong_all = 0;
  for (size_t bytes = o->minbytes; bytes <= o->maxbytes; bytes *= (size_t)o->factor) {
    const size_t count = bytes / sizeof(float);
    memset(r, 0xff, bytes);
    for (size_t i = 0; i < count; i++) s[i] = peers_input(rank, i);
    unsigned long long wrong = 0;
    peers_timed(call, ctx, s, r, count);
    if (o->check) wrong = peers_check(r, count, n);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    double warm_s = 0;
    for (int k = 0; k < o->warmup; k++) warm_s = peers_timed(call, ctx, s, r, count);
    int iters = peers_iters(o, warm_s);
    if (iters > 1024) iters = 1024;
    for (int k = 0; k < iters; k++) times[k] = peers_timed(call, ctx, s, r, count);
    const double t = peers_slowest_median(times, iters);
    const double algbw = t > 0 ? (double)bytes / t / 1e9 : 0, busbw = algbw * 2.0 * (n - 1) / n;
    if (rank == 0) {
      printf("row\t%s\t%s\t%d\t%zu\t%zu\t%.2f\t%.4f\t%.4f\t%llu\t%d\n", o->lib, o->config, n, bytes, count,
             1e6 * t, algbw, busbw, wrong, iters);
      fflush(stdout);
    }
    wrong_all += wrong;
    if (bytes > o->maxbytes / (size_t)o->factor) break;
  }
  free(sp);
  free(rp);
  free(times);
  return wrong_all;
}

#endif /* PEERS_BENCH_H_ */
