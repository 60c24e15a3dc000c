/* p2p_device.c — device ringoSend/ringoRecv: each batch is staged through pinned host memory in
 * stream order and run by the host point-to-point engine (p2p.c) on the communicator's proxy thread
 * (proxy.c), so the caller's thread never waits and every link kind (shm, MPI) serves device buffers.
 * Tested without a GPU by test/test_p2p_device.cc; on a GPU through test/test_device.cc.
 *
 *   ringo's stream:  [sends -> staging] [proxy: host engine runs the batch] [staging -> receives]
 */
#include "p2p_device.h"

#include <stdlib.h>

#include "comm.h"
#include "core.h"
#include "proxy.h"

#define STAGE_ALIGN 64

/* The proxy's work: the calls, with their buffers replaced by slices of the staging. */
struct p2p_batch {
  ringoComm_t comm;
  size_t n;
  const struct ringo_op** ptrs;
  struct ringo_op ops[];
};

static void run_batch(void* arg, int run, struct ringo_proxy_task* task) {
  (void)task; /* one phase: the proxy ends it */
  struct p2p_batch* b = arg;
  if (run) (void)ringo_p2p_run_staged(b->comm, b->ptrs, b->n); /* records its errors */
  free(b);
}

size_t ringo_p2p_device_stage_bytes(size_t count, ringoDataType_t type) {
  const size_t bytes = count * ringo_type_size(type);
  return (bytes + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
}

static size_t staged_bytes(const struct ringo_p2p_call* c) { return ringo_p2p_device_stage_bytes(c->count, c->type); }

static struct p2p_batch* make_batch(ringoComm_t comm, char* staging, const struct ringo_p2p_call* calls, size_t n) {
  struct p2p_batch* b = calloc(1, sizeof *b + n * (sizeof(struct ringo_op) + sizeof(struct ringo_op*)));
  if (!b) return NULL;
  b->comm = comm;
  b->n = n;
  b->ptrs = (const struct ringo_op**)(b->ops + n);
  for (size_t i = 0; i < n; i++) {
    const struct ringo_p2p_call* c = &calls[i];
    void* host = c->count ? staging : NULL;
    b->ops[i] = (struct ringo_op){.kind = c->send ? RINGO_KIND_SEND : RINGO_KIND_RECV, .peer = c->peer,
                                  .sendbuff = c->send ? host : NULL, .recvbuff = c->send ? NULL : host,
                                  .count = c->count, .type = c->type, .comm = comm};
    b->ptrs[i] = &b->ops[i];
    staging += staged_bytes(c);
  }
  return b;
}

/* Enqueues the copies of one direction: the sends' bytes to their slices, or the slices to the
 * receives' buffers. */
static ringoResult_t copy_slices(char* staging, const struct ringo_p2p_call* calls, size_t n, int sends,
                                 const struct ringo_stage_ops* ops) {
  for (size_t i = 0; i < n; i++) {
    const struct ringo_p2p_call* c = &calls[i];
    const size_t bytes = c->count * ringo_type_size(c->type);
    if (bytes && c->send && sends) RINGO_CHECK(ops->to_host(ops->ctx, staging, c->buf, bytes));
    if (bytes && !c->send && !sends) RINGO_CHECK(ops->to_device(ops->ctx, c->buf, staging, bytes));
    staging += staged_bytes(c);
  }
  return ringoSuccess;
}

ringoResult_t ringo_p2p_device_launch(ringoComm_t comm, struct ringo_stage* st, const struct ringo_p2p_call* calls,
                                      size_t n, const struct ringo_stage_ops* ops) {
  size_t need = 0;
  for (size_t i = 0; i < n; i++) need += staged_bytes(&calls[i]);
  RINGO_CHECK(ringo_stage_grow(st, &st->p2p, &st->p2p_cap, need, ops));
  struct p2p_batch* b = make_batch(comm, st->p2p, calls, n);
  if (!b) return ringo_fail(ringoSystemError, "out of memory for a batch of %zu device sends/receives", n);
  int handed = 0;
  ringoResult_t res = copy_slices(st->p2p, calls, n, 1, ops);
  if (res == ringoSuccess) res = ringo_proxy_mark(comm, &st->proxy, ops);
  if (res == ringoSuccess) res = ringo_proxy_submit(comm, &st->proxy, run_batch, b, 1, ops, &handed);
  if (!handed) free(b);
  /* After a failure the receives stay uncopied and the caller puts the communicator in error; a
   * batch whose stream wait could not be enqueued is cancelled by the proxy (proxy.c). */
  return res == ringoSuccess ? copy_slices(st->p2p, calls, n, 0, ops) : res;
}
