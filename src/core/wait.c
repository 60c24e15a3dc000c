/* wait.c — the one waiter (wait.h): deadline, yield-then-sleep policy, abort, liveness schedule,
 * process liveness, and the network's turns through the hook the MPI transport registers.
 * Tested by test/test_wait.cc and every suite that waits. */
#include "core/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

static _Atomic(const struct ringo_net_hook*) net_hook;

void ringo_wait_register_net(const struct ringo_net_hook* hook) {
  atomic_store_explicit(&net_hook, hook, memory_order_release);
}

int ringo_wait_net_waiting(int own) {
  const struct ringo_net_hook* h = atomic_load_explicit(&net_hook, memory_order_acquire);
  return h ? h->waiting(own) : 0;
}

void ringo_wait_net_progress(int own) {
  const struct ringo_net_hook* h = atomic_load_explicit(&net_hook, memory_order_acquire);
  if (h) h->progress(own);
}

void ringo_waiter_start(struct ringo_waiter* w, const struct ringo_wait_policy* p, double now) {
  w->p = *p;
  w->start = now;
  w->deadline = now + p->timeout_s;
  w->yield_until = now + p->yield_s;
  w->next_alive = now + p->liveness_s;
  w->sleep_ns = p->sleep_ns;
  w->round = 0;
}

enum ringo_wait_end ringo_waiter_check(const struct ringo_waiter* w, double now) {
  if (w->p.abort_flag && atomic_load_explicit(w->p.abort_flag, memory_order_relaxed) != 0) return RINGO_WAIT_ABORTED;
  if (now >= w->deadline) return RINGO_WAIT_TIMED_OUT;
  return RINGO_WAIT_GO_ON;
}

int ringo_waiter_liveness_due(struct ringo_waiter* w, double now) {
  if (w->p.liveness_s <= 0 || now < w->next_alive) return 0;
  w->next_alive = now + w->p.liveness_s;
  return 1;
}

int ringo_waiter_yield(struct ringo_waiter* w, double now) {
  if (w->p.net != RINGO_WAIT_NET_NONE) ringo_wait_net_progress(w->p.net == RINGO_WAIT_NET_OWN);
  const int yielding = w->round++ < w->p.min_yields || now < w->yield_until;
  return yielding && ringo_yield(!w->p.crowded);
}

long ringo_waiter_sleep_ns(const struct ringo_waiter* w, double now) {
  const int net = w->p.net != RINGO_WAIT_NET_NONE && ringo_wait_net_waiting(w->p.net == RINGO_WAIT_NET_OWN);
  const long nap = net && w->p.net_sleep_ns > 0 ? w->p.net_sleep_ns : w->sleep_ns;
  const double left = w->deadline - now;
  return left < nap * 1e-9 ? (long)(left * 1e9) + 1 : nap;
}

static void grow(struct ringo_waiter* w) {
  if (w->p.max_sleep_ns > w->sleep_ns) w->sleep_ns = 2 * w->sleep_ns < w->p.max_sleep_ns ? 2 * w->sleep_ns : w->p.max_sleep_ns;
}

void ringo_waiter_sleep(struct ringo_waiter* w, double now) {
  const long ns = ringo_waiter_sleep_ns(w, now);
  const struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
  nanosleep(&ts, NULL);
  grow(w);
}

void ringo_waiter_futex(struct ringo_waiter* w, double now, atomic_uint* word, uint32_t expected) {
  const long ns = ringo_waiter_sleep_ns(w, now);
  const struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
  syscall(SYS_futex, (void*)word, FUTEX_WAIT, expected, &ts, NULL, 0);
  grow(w);
}

/* A process that has exited, or is a zombie nobody has reaped yet, will never move its counter. */
int ringo_wait_pid_gone(int pid) {
  if (kill(pid, 0) == -1 && errno == ESRCH) return 1;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* paren = strrchr(buf, ')'); /* the command name may itself contain ')' */
  return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}
