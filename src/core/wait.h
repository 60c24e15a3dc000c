/* wait.h — ONE WAITER for every wait loop of the library: a deadline, the spin/yield/sleep policy,
 * the abort flag, when to look at a peer's liveness, and the network's turns (MPI registers its hook
 * with its first link, so no other link kind calls MPI). Each caller polls its own condition and
 * words its own errors; the policy lives here. Tested by test/test_wait.cc, and by every suite that
 * waits (test_shm, test_oneshot, test_p2p, test_failures, test/mpi/). */
#ifndef RINGO_WAIT_H_
#define RINGO_WAIT_H_

#include <stdint.h>

#ifdef __cplusplus
#include <atomic>
using std::atomic_int; /* so C++ tests can include this header */
using std::atomic_uint;
extern "C" {
#else
#include <stdatomic.h>
#endif

/* Process-wide turns for MPI. While an MPI link lives in this process, every wait of ringo (a shm
 * link, the board, the point-to-point engine) gives MPI a turn each round and naps briefly rather
 * than sleep: over TCP a posted MPI send, of any communicator, moves only while its rank calls into
 * MPI, and the rank it is for may be the one this rank waits on (a ring with two ranks per host
 * waited on itself until RINGO_TIMEOUT). own: the waiting communicator has MPI links itself, so its
 * call already calls MPI on this thread. Below MPI_THREAD_MULTIPLE only such waits take turns: any
 * other could call MPI beside another thread's MPI call (the user's, a group's other communicator,
 * the DDP thread). At MPI_THREAD_MULTIPLE every wait does. ringo_wait_net_waiting: 1 when turns are taken. */
struct ringo_net_hook {
  int (*waiting)(int own);
  void (*progress)(int own);
};
/* Registers the process's network hook (the MPI transport's); registering it again does nothing. */
void ringo_wait_register_net(const struct ringo_net_hook* hook);
/* 1 when a wait should take the network's turns (and nap briefly rather than sleep). */
int ringo_wait_net_waiting(int own);
/* Gives the network one turn where ringo_wait_net_waiting says so. */
void ringo_wait_net_progress(int own);

/* How one wait behaves. A field left 0 takes the behaviour named beside it. */
struct ringo_wait_policy {
  double timeout_s;              /* the deadline, from the wait's start (RINGO_TIMEOUT bounds each wait) */
  const atomic_int* abort_flag;  /* ends the wait when set; NULL: nothing aborts it */
  int min_yields;                /* pauses that yield at least, before one may sleep */
  double yield_s;                /* and yield for at least this long from the start */
  long sleep_ns;                 /* one sleep */
  long net_sleep_ns;             /* one sleep while the network takes turns (0: sleep_ns) */
  long max_sleep_ns;             /* > sleep_ns: each sleep doubles up to this (backoff) */
  double liveness_s;             /* how often to look at the awaited peer; 0: never */
  int net;                       /* RINGO_WAIT_NET_*: whose network turns this wait gives */
  int crowded;                   /* the host's ranks outnumber its CPUs: yields never turn into
                                    sleeps for being slow (ringo_yield's watch, core.h) */
};
enum { RINGO_WAIT_NET_SHARED = 0, RINGO_WAIT_NET_OWN = 1, RINGO_WAIT_NET_NONE = 2 };

struct ringo_waiter {
  struct ringo_wait_policy p;
  double start, deadline, yield_until, next_alive;
  long sleep_ns;                 /* the next sleep (grows with backoff) */
  int round;                     /* pauses so far */
};

/* What ends a wait other than the awaited event. */
enum ringo_wait_end { RINGO_WAIT_GO_ON = 0, RINGO_WAIT_ABORTED, RINGO_WAIT_TIMED_OUT };

/* Begins a wait at now under policy p. */
void ringo_waiter_start(struct ringo_waiter* w, const struct ringo_wait_policy* p, double now);
/* Abort first, then the deadline. */
enum ringo_wait_end ringo_waiter_check(const struct ringo_waiter* w, double now);
/* 1 when the awaited peer's liveness is due to be looked at (then not again for liveness_s). */
int ringo_waiter_liveness_due(struct ringo_waiter* w, double now);
/* One pause, part one: the network's turn, then a yield while the policy says to (returns 1, and
 * the caller looks at its condition again); 0: the caller should sleep now (ringo_waiter_sleep,
 * or its own futex for at most ringo_waiter_sleep_ns). */
int ringo_waiter_yield(struct ringo_waiter* w, double now);
/* The next sleep, cut to the time left before the deadline. */
long ringo_waiter_sleep_ns(const struct ringo_waiter* w, double now);
/* Sleeps ringo_waiter_sleep_ns (growing it under backoff). */
void ringo_waiter_sleep(struct ringo_waiter* w, double now);
/* Sleeps on word while it holds expected (a futex), for at most ringo_waiter_sleep_ns. */
void ringo_waiter_futex(struct ringo_waiter* w, double now, atomic_uint* word, uint32_t expected);

/* 1 when process pid no longer runs (gone, or a zombie: a SIGKILLed rank's parent may not have
 * reaped it yet). */
int ringo_wait_pid_gone(int pid);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_WAIT_H_ */
