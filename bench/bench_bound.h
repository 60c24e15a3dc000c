/* bench_bound.h — ringo-bench's model: the memory bandwidth of this host (--bound, a STREAM-like copy
 * and add over all cores) and each collective's bus, law and memory-traffic factors.
 * Header-only, needs bench.h and pthreads; included by bench/ringo-bench.c (run it with --bound). */
#ifndef RINGO_BENCH_BOUND_H_
#define RINGO_BENCH_BOUND_H_

#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#include "bench.h"

struct bw_thread { double *a, *b, *c; size_t n; int reps, cpu; pthread_barrier_t* bar; double t0, t1; };

/* Each thread moves to its own core (threads inherit the caller's affinity, and mpirun binds a
 * rank to one core, which measures far less than the host has: docs/performance.md), first-
 * touches its own slice, then runs reps x (copy, add) between barriers that the main thread uses
 * to time the whole machine's pass. */
static void* bw_worker(void* arg) {
  struct bw_thread* t = arg;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(t->cpu, &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0)
    fprintf(stderr, "ringo-bench: --bound could not move a thread to cpu %d; the bound may be low\n", t->cpu);
  for (size_t i = 0; i < t->n; i++) { t->a[i] = 1.0; t->b[i] = 2.0; t->c[i] = 0.0; }
  pthread_barrier_wait(t->bar);
  for (int r = 0; r < t->reps; r++) {
    pthread_barrier_wait(t->bar);
    t->t0 = now_s();
    for (size_t i = 0; i < t->n; i++) t->c[i] = t->a[i];
    t->t1 = now_s();
    pthread_barrier_wait(t->bar);
    pthread_barrier_wait(t->bar);
    t->t0 = now_s();
    for (size_t i = 0; i < t->n; i++) t->c[i] = t->a[i] + t->b[i];
    t->t1 = now_s();
    pthread_barrier_wait(t->bar);
  }
  return NULL;
}

/* Best-of-5 copy and add bandwidth with one thread per core over three arrays of 4x the last-level
 * cache (64..256 MiB each), counted as bytes read + written (no write-allocate), like STREAM. */
static void measure_bound(struct opts* o) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN), llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  size_t bytes = llc > 0 ? 4 * (size_t)llc : 0, nt = ncpu > 0 ? (size_t)ncpu : 1;
  bytes = bytes < (64u << 20) ? 64u << 20 : bytes > (256u << 20) ? 256u << 20 : bytes;
  size_t per = bytes / sizeof(double) / nt;
  double* arr = xalloc(3 * per * nt * sizeof(double));
  pthread_t* tid = calloc(nt, sizeof *tid);
  struct bw_thread* th = calloc(nt, sizeof *th);
  pthread_barrier_t bar;
  if (!tid || !th) die(EXIT_USAGE);
  pthread_barrier_init(&bar, NULL, (unsigned)nt + 1);
  for (size_t i = 0; i < nt; i++) {
    th[i] = (struct bw_thread){arr + i * per, arr + (nt + i) * per, arr + (2 * nt + i) * per, per, 5, (int)i, &bar, 0, 0};
    if (pthread_create(&tid[i], NULL, bw_worker, &th[i]) != 0) die(EXIT_USAGE);
  }
  pthread_barrier_wait(&bar);
  double best[2] = {1e30, 1e30};
  for (int r = 0; r < 5; r++)
    for (int k = 0; k < 2; k++) {
      pthread_barrier_wait(&bar);
      pthread_barrier_wait(&bar);
      /* The workers time themselves: this thread shares a core with one of them and may not run
       * until that one is done, so its own clock could start late (it did: 280 GB/s "copy"). */
      double first = th[0].t0, last = th[0].t1;
      for (size_t i = 1; i < nt; i++) {
        first = th[i].t0 < first ? th[i].t0 : first;
        last = th[i].t1 > last ? th[i].t1 : last;
      }
      double dt = last - first;
      best[k] = dt < best[k] ? dt : best[k];
    }
  for (size_t i = 0; i < nt; i++) pthread_join(tid[i], NULL);
  double total = (double)(per * nt * sizeof(double));
  o->bw_copy = 2 * total / best[0] / 1e9;
  o->bw_add = 3 * total / best[1] / 1e9;
  pthread_barrier_destroy(&bar);
  free(arr);
  free(tid);
  free(th);
}

/* Per-rank factors of D (the full buffer in bytes) for collective coll on n ranks:
 * bus: nccl-tests' busbw/algbw; law: the ring's bytes sent by the busiest rank;
 * mem: memory traffic per rank in the single-copy ring, where a receiver reads its peer's slice
 * directly (bytes read + written, the STREAM convention). Derivations:
 *  all_reduce: n-1 reduce-scatter steps of D/n, each reads two slices and writes one (3), then
 *              n-1 all-gather steps, each reads one and writes one (2): 5(n-1)/n.
 *  reduce_scatter: the reduce steps alone: 3(n-1)/n.
 *  all_gather: the copy steps alone: 2(n-1)/n (an out-of-place rank's copy of its own block is
 *              left out so one bound serves both placements).
 *  broadcast: a pipelined chain; n-1 ranks each read D from their predecessor and write it:
 *             2(n-1)D in all, 2(n-1)/n per rank.
 *  reduce: a chain towards root; n-1 ranks each read the incoming partial and their own input
 *          and write the sum: 3(n-1)D in all, 3(n-1)/n per rank (what reduce_scatter moves). */
static void coll_factors(int coll, int n, double* bus, double* law, double* mem) {
  double m = (double)(n - 1) / n;
  switch (coll) {
    case COLL_ALL_REDUCE: *bus = 2 * m; *law = 2 * m; *mem = 5 * m; break;
    case COLL_REDUCE_SCATTER: *bus = m; *law = m; *mem = 3 * m; break;
    case COLL_ALL_GATHER: *bus = m; *law = m; *mem = 2 * m; break;
    case COLL_BROADCAST: *bus = 1; *law = n > 1; *mem = 2 * m; break;
    case COLL_SENDRECV: *bus = 1; *law = n > 1; *mem = 2.0 * (n > 1); break; /* all of D out, all in */
    default: *bus = 1; *law = n > 1; *mem = 3 * m; break;
  }
}

#endif /* RINGO_BENCH_BOUND_H_ */
