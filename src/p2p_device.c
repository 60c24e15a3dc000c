/* p2p_device.c — device ringoSend/ringoRecv: each batch is staged through pinned host memory in
 * stream order and run by the host point-to-point engine (p2p.c) on the communicator's proxy thread,
 * so the caller's thread never waits and every link kind (shm, MPI) serves device buffers.
 * Tested without a GPU by test/test_p2p_device.cc; on a GPU through test/test_device.cc.
 *
 *   ringo's stream:  [sends -> host] [marker] [wait: flag >= k] [host -> receives] ...
 *   proxy thread:              waits marker -> host engine runs batch k -> flag = k
 *
 * Why a thread of our own and not a CUDA host function: host functions of one process may run
 * one at a time, and a batch waits for its peers' batches, which may sit behind it in that one
 * queue when the peers are ranks of the same process (ringoCommInitAll). */
#include "p2p_device.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "core.h"

#define STAGE_ALIGN 64
#define MARK_NAP_MAX_NS 1000000L /* the proxy's longest nap while the stream has not staged a batch */

struct p2p_batch {
  struct p2p_batch* next;
  uint64_t mark;   /* the marker the stream passes once the sends are staged */
  uint64_t number; /* the flag value that lets the stream go on */
  size_t n;
  const struct ringo_op** ptrs;
  struct ringo_op ops[];
};

struct ringo_p2p_proxy {
  ringoComm_t comm;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct p2p_batch *head, *tail; /* under mu */
  int stop;                      /* under mu */
  atomic_uint_fast64_t marks;    /* markers the stream passed (a host function counts them) */
  uint64_t marks_issued, issued; /* the launching thread's */
  uint64_t* flag;                /* pinned: batches finished; the stream waits on it */
  void* staging;
  size_t cap;
  atomic_int pending; /* batches issued and not finished */
};

static void mark_reached(void* arg) {
  struct ringo_p2p_proxy* px = arg;
  atomic_fetch_add_explicit(&px->marks, 1, memory_order_release);
}

/* 1 once the stream has staged batch b's sends; 0 when the communicator was aborted first. */
static int wait_marker(struct ringo_p2p_proxy* px, uint64_t mark) {
  long nap = 1000;
  for (int spin = 0; atomic_load_explicit(&px->marks, memory_order_acquire) < mark; spin++) {
    if (atomic_load_explicit(&px->comm->abort_flag, memory_order_relaxed)) return 0;
    if (spin < 64) {
      ringo_yield();
      continue;
    }
    const struct timespec ts = {0, nap};
    nanosleep(&ts, NULL);
    if (nap < MARK_NAP_MAX_NS) nap *= 2;
  }
  return 1;
}

static struct p2p_batch* next_batch(struct ringo_p2p_proxy* px) {
  pthread_mutex_lock(&px->mu);
  while (!px->head && !px->stop) pthread_cond_wait(&px->cv, &px->mu);
  struct p2p_batch* b = px->head;
  if (b) {
    px->head = b->next;
    if (!px->head) px->tail = NULL;
  }
  pthread_mutex_unlock(&px->mu);
  return b;
}

/* The flag always moves on, error or not, so the stream never waits for ever: a failed batch
 * leaves the communicator in error, which the caller learns from ringoCommGetAsyncError. */
static void* proxy_main(void* arg) {
  struct ringo_p2p_proxy* px = arg;
  for (struct p2p_batch* b; (b = next_batch(px)) != NULL;) {
    if (wait_marker(px, b->mark)) (void)ringo_p2p_run_staged(px->comm, b->ptrs, b->n); /* records errors */
    __atomic_store_n(px->flag, b->number, __ATOMIC_RELEASE);
    atomic_fetch_sub_explicit(&px->pending, 1, memory_order_release);
    free(b);
  }
  return NULL;
}

static ringoResult_t proxy_start(ringoComm_t comm, struct ringo_p2p_proxy** out, const struct ringo_stage_ops* ops) {
  struct ringo_p2p_proxy* px = calloc(1, sizeof *px);
  if (!px) return ringo_fail(ringoSystemError, "out of memory for the point-to-point proxy");
  px->comm = comm;
  ringoResult_t res = ops->host_alloc(ops->ctx, (void**)&px->flag, STAGE_ALIGN);
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
    return ringo_fail(ringoSystemError, "rank %d: cannot start the point-to-point proxy thread: %s", comm->rank,
                      strerror(err));
  }
  *out = px;
  return ringoSuccess;
}

static size_t staged_bytes(const struct ringo_p2p_call* c) {
  const size_t bytes = c->count * ringo_type_size(c->type);
  return (bytes + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
}

/* The batch the proxy runs: the calls, with their buffers replaced by slices of the staging. */
static struct p2p_batch* make_batch(ringoComm_t comm, struct ringo_p2p_proxy* px, const struct ringo_p2p_call* calls,
                                    size_t n) {
  struct p2p_batch* b = calloc(1, sizeof *b + n * (sizeof(struct ringo_op) + sizeof(struct ringo_op*)));
  if (!b) return NULL;
  b->n = n;
  b->ptrs = (const struct ringo_op**)(b->ops + n);
  char* at = px->staging;
  for (size_t i = 0; i < n; i++) {
    const struct ringo_p2p_call* c = &calls[i];
    void* host = c->count ? at : NULL;
    b->ops[i] = (struct ringo_op){.kind = c->send ? RINGO_KIND_SEND : RINGO_KIND_RECV, .peer = c->peer,
                                  .sendbuff = c->send ? host : NULL, .recvbuff = c->send ? NULL : host,
                                  .count = c->count, .type = c->type, .comm = comm};
    b->ptrs[i] = &b->ops[i];
    at += staged_bytes(c);
  }
  return b;
}

/* Hands b to the proxy; returns the flag value that says it ran. */
static uint64_t push(struct ringo_p2p_proxy* px, struct p2p_batch* b) {
  pthread_mutex_lock(&px->mu);
  const uint64_t number = b->number = ++px->issued;
  if (px->tail) px->tail->next = b;
  else px->head = b;
  px->tail = b;
  atomic_fetch_add_explicit(&px->pending, 1, memory_order_relaxed);
  pthread_cond_signal(&px->cv);
  pthread_mutex_unlock(&px->mu);
  return number;
}

/* Enqueues the copies of one direction: the sends' bytes to their slices, or the slices to the
 * receives' buffers. */
static ringoResult_t copy_slices(struct ringo_p2p_proxy* px, const struct ringo_p2p_call* calls, size_t n, int sends,
                                 const struct ringo_stage_ops* ops) {
  char* at = px->staging;
  for (size_t i = 0; i < n; i++) {
    const struct ringo_p2p_call* c = &calls[i];
    const size_t bytes = c->count * ringo_type_size(c->type);
    if (bytes && c->send && sends) RINGO_CHECK(ops->to_host(ops->ctx, at, c->buf, bytes));
    if (bytes && !c->send && !sends) RINGO_CHECK(ops->to_device(ops->ctx, c->buf, at, bytes));
    at += staged_bytes(c);
  }
  return ringoSuccess;
}

ringoResult_t ringo_p2p_device_launch(ringoComm_t comm, struct ringo_p2p_proxy** pxp, const struct ringo_p2p_call* calls,
                                      size_t n, const struct ringo_stage_ops* ops) {
  if (!ops->wait_flag) return ringo_fail(ringoInternalError, "device point-to-point needs a stream that can wait on a flag");
  if (!*pxp) RINGO_CHECK(proxy_start(comm, pxp, ops));
  struct ringo_p2p_proxy* px = *pxp;
  size_t need = 0;
  for (size_t i = 0; i < n; i++) need += staged_bytes(&calls[i]);
  RINGO_CHECK(ringo_stage_grow(&px->staging, &px->cap, need, ops));
  struct p2p_batch* b = make_batch(comm, px, calls, n);
  if (!b) return ringo_fail(ringoSystemError, "out of memory for a batch of %zu device sends/receives", n);
  ringoResult_t res = copy_slices(px, calls, n, 1, ops);
  if (res == ringoSuccess) res = ops->host_fn(ops->ctx, mark_reached, px);
  if (res != ringoSuccess) { /* the proxy never saw it: nothing on the stream waits for it */
    free(b);
    return res;
  }
  b->mark = ++px->marks_issued;
  const uint64_t number = push(px, b); /* b is the proxy's now */
  /* The proxy runs the batch whatever happens next; a failure below leaves the receives uncopied,
   * and the caller puts the communicator in error. */
  RINGO_CHECK(ops->wait_flag(ops->ctx, px->flag, number));
  return copy_slices(px, calls, n, 0, ops);
}

int ringo_p2p_device_pending(const struct ringo_p2p_proxy* px) {
  return px ? atomic_load_explicit(&px->pending, memory_order_acquire) : 0;
}

void ringo_p2p_device_free(struct ringo_p2p_proxy* px, const struct ringo_stage_ops* ops) {
  if (!px) return;
  pthread_mutex_lock(&px->mu);
  px->stop = 1;
  pthread_cond_signal(&px->cv);
  pthread_mutex_unlock(&px->mu);
  pthread_join(px->thread, NULL);
  pthread_cond_destroy(&px->cv);
  pthread_mutex_destroy(&px->mu);
  if (px->staging) ops->host_free(ops->ctx, px->staging);
  ops->host_free(ops->ctx, px->flag);
  free(px);
}
