/* bench_bind.h — ringo-bench's --bind-to for forked ranks: rank r to one CPU, round robin over the CPUs
 * the bench may run on, as Intel MPI pins. Header-only, C and C++ (_GNU_SOURCE). Tested by test/test_bench.cc. */
#ifndef RINGO_BENCH_BIND_H_
#define RINGO_BENCH_BIND_H_

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

/* Unbound, the kernel may stack two forked ranks on one core for the first tens of milliseconds of a
 * launch, and every hand-off between them is then a context switch (docs/performance.md, "The benchmark"). */
enum { BENCH_BIND_NONE, BENCH_BIND_CORE };

/* The CPU rank `rank` gets: the (rank mod count)-th CPU of `allowed`; -1 if it holds none. */
static inline int bench_bind_cpu(const cpu_set_t* allowed, int rank) {
  const int count = CPU_COUNT(allowed);
  if (count <= 0 || rank < 0) return -1;
  int k = rank % count;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, allowed) && k-- == 0) return c;
  return -1;
}

/* Binds this process (a forked rank) to its CPU of `allowed`, the parent's set before the fork (never
 * empty: the launcher forks unbound ranks where it could not read it). Binding only steadies timings:
 * where it fails the rank runs unbound and says why on stderr. */
static inline void bench_bind_self(const cpu_set_t* allowed, int rank) {
  const int cpu = bench_bind_cpu(allowed, rank);
  if (cpu < 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0)
    fprintf(stderr, "ringo-bench: rank %d runs unbound (--bind-to core): binding to CPU %d failed: %s\n", rank, cpu,
            strerror(errno));
}

/* This process's CPUs as the header's rank lines give them: 1 + the CPU it is bound to where it may run
 * on one, else minus how many it may run on; 0 where the kernel will not say. */
static inline long long bench_bind_own_cpus(void) {
  cpu_set_t mine;
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) return 0;
  return CPU_COUNT(&mine) == 1 ? 1 + bench_bind_cpu(&mine, 0) : -(long long)CPU_COUNT(&mine);
}

#endif /* RINGO_BENCH_BIND_H_ */
