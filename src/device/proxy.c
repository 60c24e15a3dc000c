/* proxy.c — a communicator's proxy thread: host work that a device stream waits for, in stream
 * order. Needs core.h and a stream given as staged.h's operations. Tested through its users by
 * test/test_staged.cc and test/test_p2p_device.cc (a worker thread stands in for the stream).
 *
 *   the stream:   ... copies [marker k] [wait: flag >= k] copies ...
 *   the proxy:          waits for marker k -> runs work k -> flag = k
 *
 * A work may come in phases (a staged collective's pipeline, staged.c): the input copies of phase
 * p end with their own marker, and the stream waits for each phase's flag value before copying
 * that phase's output back, so the copies overlap the proxy's transfer:
 *
 *   the stream:   in 0 [m] in 1 [m] ... [wait k] out 0 [wait k+1] out 1 ...
 *   the proxy:           phase 0 -> flag = k; waits for marker 1 -> phase 1 -> flag = k+1 ...
 *
 * Why a thread of ringo's and not CUDA host functions: the host functions of one process may run
 * one at a time, and a communicator's work waits for its peers' — ranks of the same process
 * (ringoCommInitAll) would wait for each other in that one queue; nor may a host function call
 * CUDA, which a CUDA-aware MPI does inside its calls. The marker is a host function, but one that
 * only counts. */
#include "device/proxy.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "core/core.h"
#include "core/wait.h"

#define MARK_NAP_MAX_NS 1000000L /* the longest nap while the stream has not reached a marker */

struct ringo_proxy_task {
  struct ringo_proxy_task* next;
  struct ringo_proxy* px;
  ringo_proxy_fn fn;
  void* arg;
  uint64_t mark;   /* the marker the stream passes once phase 0's input copies are done */
  uint64_t number; /* the flag value that lets the stream go on after phase 0 */
  int nphases;     /* phase p: marker mark + p, flag value number + p */
  int cancelled;   /* the stream does not wait for it (its wait could not be enqueued): skip it */
};

struct ringo_proxy {
  ringoComm_t comm;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct ringo_proxy_task *head, *tail; /* under mu */
  int stop;                             /* under mu */
  atomic_int quit;                      /* teardown, or a failed stream: work (or a phase) the stream has
                                           not reached is skipped */
  atomic_uint_fast64_t marks;           /* markers the stream passed */
  uint64_t marks_issued, issued;        /* the submitting thread's: markers enqueued, flag values handed out */
  uint64_t last_number;                 /* the submitting thread's: the flag value of the last work's phase 0 */
  uint64_t* flag;                       /* pinned: phases finished; the stream waits on it */
  atomic_int pending;                   /* submitted and not finished */
  atomic_int running;                   /* work running now (its first marker passed) */
};

static void mark_reached(void* arg) {
  struct ringo_proxy* px = arg;
  atomic_fetch_add_explicit(&px->marks, 1, memory_order_release);
}

/* Whether a marker not passed yet never will be worth waiting for: the communicator was aborted,
 * is in error (it runs nothing more) or is being torn down, or the stream failed (it never gets
 * there). */
static int giving_up(struct ringo_proxy* px) {
  return atomic_load_explicit(&px->comm->abort_flag, memory_order_relaxed) ||
         atomic_load_explicit(&px->comm->error, memory_order_relaxed) != ringoSuccess ||
         atomic_load_explicit(&px->quit, memory_order_relaxed);
}

/* 1 once the stream passed marker `mark`; 0 when giving up first. */
static int wait_marker(struct ringo_proxy* px, uint64_t mark) {
  /* No deadline of its own: giving_up ends it, and the waits behind the marker have theirs. 64
   * yields, then naps from 1 us doubling up to MARK_NAP_MAX_NS. */
  const struct ringo_wait_policy policy = {.timeout_s = 1e30, .min_yields = 64, .sleep_ns = 1000,
                                           .max_sleep_ns = MARK_NAP_MAX_NS, .net = RINGO_WAIT_NET_NONE,
                                           .crowded = px->comm->crowded};
  struct ringo_waiter w;
  ringo_waiter_start(&w, &policy, ringo_now());
  while (atomic_load_explicit(&px->marks, memory_order_acquire) < mark) {
    if (giving_up(px)) return 0;
    const double now = ringo_now();
    if (!ringo_waiter_yield(&w, now)) ringo_waiter_sleep(&w, now);
  }
  return 1;
}

static struct ringo_proxy_task* next_work(struct ringo_proxy* px) {
  pthread_mutex_lock(&px->mu);
  while (!px->head && !px->stop) pthread_cond_wait(&px->cv, &px->mu);
  struct ringo_proxy_task* w = px->head;
  if (w) {
    px->head = w->next;
    if (!px->head) px->tail = NULL;
  }
  pthread_mutex_unlock(&px->mu);
  return w;
}

/* The flag always moves on past the work's last phase, whatever the work did, so the stream never
 * waits for ever: a failure leaves the communicator in error, which the caller learns from
 * ringoCommGetAsyncError. */
static void* proxy_main(void* arg) {
  struct ringo_proxy* px = arg;
  for (struct ringo_proxy_task* w; (w = next_work(px)) != NULL;) {
    const int run = !w->cancelled && wait_marker(px, w->mark);
    atomic_fetch_add_explicit(&px->running, run, memory_order_relaxed);
    w->fn(w->arg, run, w);
    atomic_fetch_sub_explicit(&px->running, run, memory_order_release);
    __atomic_store_n(px->flag, w->number + (uint64_t)w->nphases - 1, __ATOMIC_RELEASE);
    atomic_fetch_sub_explicit(&px->pending, 1, memory_order_release);
    free(w);
  }
  return NULL;
}

int ringo_proxy_phases_staged(struct ringo_proxy_task* task) {
  struct ringo_proxy* px = task->px;
  const uint64_t marks = atomic_load_explicit(&px->marks, memory_order_acquire);
  if (marks >= task->mark + (uint64_t)task->nphases - 1) return task->nphases;
  if (giving_up(px)) return -1;
  return marks >= task->mark ? (int)(marks - task->mark) + 1 : 0;
}

int ringo_proxy_phase_await(struct ringo_proxy_task* task, int p) {
  return wait_marker(task->px, task->mark + (uint64_t)p);
}

void ringo_proxy_phase_done(struct ringo_proxy_task* task, int p) {
  __atomic_store_n(task->px->flag, task->number + (uint64_t)p, __ATOMIC_RELEASE);
}

static ringoResult_t proxy_start(ringoComm_t comm, struct ringo_proxy** out, const struct ringo_stage_ops* ops) {
  struct ringo_proxy* px = calloc(1, sizeof *px);
  if (!px) return ringo_fail(ringoSystemError, "out of memory for the proxy");
  px->comm = comm;
  ringoResult_t res = ops->host_alloc(ops->ctx, (void**)&px->flag, 64);
  if (res != ringoSuccess) {
    free(px);
    return res;
  }
  __atomic_store_n(px->flag, 0, __ATOMIC_RELAXED);
  pthread_mutex_init(&px->mu, NULL);
  pthread_cond_init(&px->cv, NULL);
  const int err = pthread_create(&px->thread, NULL, proxy_main, px);
  if (err) {
    pthread_cond_destroy(&px->cv);
    pthread_mutex_destroy(&px->mu);
    ops->host_free(ops->ctx, px->flag);
    free(px);
    return ringo_fail(ringoSystemError, "rank %d: cannot start the proxy thread: %s", comm->rank, strerror(err));
  }
  *out = px;
  return ringoSuccess;
}

/* Hands w to the proxy. Only the submitting thread moves issued. */
static void push(struct ringo_proxy* px, struct ringo_proxy_task* w) {
  pthread_mutex_lock(&px->mu);
  px->issued = w->number + (uint64_t)w->nphases - 1;
  px->last_number = w->number;
  if (px->tail) px->tail->next = w;
  else px->head = w;
  px->tail = w;
  atomic_fetch_add_explicit(&px->pending, 1, memory_order_relaxed);
  pthread_cond_signal(&px->cv);
  pthread_mutex_unlock(&px->mu);
}

ringoResult_t ringo_proxy_ensure(ringoComm_t comm, struct ringo_proxy** pxp, const struct ringo_stage_ops* ops) {
  return *pxp ? ringoSuccess : proxy_start(comm, pxp, ops);
}

ringoResult_t ringo_proxy_mark(ringoComm_t comm, struct ringo_proxy** pxp, const struct ringo_stage_ops* ops) {
  if (!ops->wait_flag) return ringo_fail(ringoInternalError, "the proxy needs a stream that can wait on a flag");
  RINGO_CHECK(ringo_proxy_ensure(comm, pxp, ops));
  /* Counted only once on the stream: a marker that failed to enqueue is never waited for. */
  RINGO_CHECK(ops->host_fn(ops->ctx, mark_reached, *pxp));
  (*pxp)->marks_issued++;
  return ringoSuccess;
}

ringoResult_t ringo_proxy_submit(ringoComm_t comm, struct ringo_proxy** pxp, ringo_proxy_fn fn, void* arg, int nphases,
                                 const struct ringo_stage_ops* ops, int* handed) {
  int ignored;
  if (!handed) handed = &ignored;
  *handed = 0;
  struct ringo_proxy* px = *pxp;
  if (!px || nphases < 1 || px->marks_issued < (uint64_t)nphases)
    return ringo_fail(ringoInternalError, "rank %d: a proxy work of %d phases without its markers", comm->rank, nphases);
  struct ringo_proxy_task* w = calloc(1, sizeof *w);
  if (!w) return ringo_fail(ringoSystemError, "out of memory for the proxy's work");
  /* The markers are on the stream: the work must follow them, or markers and work would be
   * counted out of step (markers of a launch that failed before here are passed and skipped).
   * The stream's wait goes on before the proxy can see the work, so that a wait that cannot be
   * enqueued cancels it (the stream would not wait for it: it must not run). */
  *w = (struct ringo_proxy_task){NULL, px, fn, arg, px->marks_issued - (uint64_t)nphases + 1, px->issued + 1, nphases, 0};
  ringoResult_t res = ops->wait_flag(ops->ctx, px->flag, w->number);
  w->cancelled = res != ringoSuccess;
  push(px, w);
  *handed = 1;
  return res;
}

ringoResult_t ringo_proxy_wait_phase(struct ringo_proxy* px, int p, const struct ringo_stage_ops* ops) {
  return ops->wait_flag(ops->ctx, px->flag, px->last_number + (uint64_t)p);
}

int ringo_proxy_pending(const struct ringo_proxy* px) {
  return px ? atomic_load_explicit(&px->pending, memory_order_acquire) : 0;
}

int ringo_proxy_running(const struct ringo_proxy* px) {
  return px ? atomic_load_explicit(&px->running, memory_order_acquire) : 0;
}

void ringo_proxy_stream_failed(struct ringo_proxy* px) {
  if (px) atomic_store(&px->quit, 1);
}

void ringo_proxy_free(struct ringo_proxy* px, const struct ringo_stage_ops* ops) {
  if (!px) return;
  atomic_store(&px->quit, 1);
  pthread_mutex_lock(&px->mu);
  px->stop = 1;
  pthread_cond_signal(&px->cv);
  pthread_mutex_unlock(&px->mu);
  pthread_join(px->thread, NULL);
  pthread_cond_destroy(&px->cv);
  pthread_mutex_destroy(&px->mu);
  ops->host_free(ops->ctx, px->flag);
  free(px);
}
