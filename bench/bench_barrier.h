/* bench_barrier.h — ringo-bench's untimed barrier for forked ranks (--barrier): a page the ranks share
 * from before the fork, where waiters yield the CPU. Header-only, C and C++. Tested by test/test_bench.cc. */
#ifndef RINGO_BENCH_BARRIER_H_
#define RINGO_BENCH_BARRIER_H_

#include <sched.h>
#include <stddef.h>
#include <sys/mman.h>

/* arrived counts this round's ranks; the last one to arrive resets it, then moves generation on,
 * which lets the others go. None leaves before generation moves, so none arrives early at the
 * next round's count. */
struct bench_barrier {
  unsigned arrived, generation;
};

/* A barrier in memory the processes forked after this call share; NULL if it cannot be mapped. */
static inline struct bench_barrier* bench_barrier_map(void) {
  void* p = mmap(NULL, sizeof(struct bench_barrier), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : (struct bench_barrier*)p;
}

/* Returns once all n ranks have called it for this round. Waiters yield instead of spinning, so
 * where ranks outnumber cores the ones still working get the CPU. */
static inline void bench_barrier_wait(struct bench_barrier* bb, int n) {
  const unsigned gen = __atomic_load_n(&bb->generation, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&bb->arrived, 1, __ATOMIC_ACQ_REL) == (unsigned)n) {
    __atomic_store_n(&bb->arrived, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&bb->generation, 1, __ATOMIC_RELEASE);
    return;
  }
  while (__atomic_load_n(&bb->generation, __ATOMIC_ACQUIRE) == gen) sched_yield();
}

#endif /* RINGO_BENCH_BARRIER_H_ */
