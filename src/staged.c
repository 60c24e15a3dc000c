/* staged.c — device collectives whose ring leaves the host (MPI links): each is enqueued in stream
 * order — sendbuff to pinned host memory, the host ring on the staged copies (on the
 * communicator's proxy thread, proxy.c), the result back to recvbuff — so the caller never waits.
 * Needs comm.h, proxy.h and the host engine (ringo_coll_run_staged); how bytes reach the stream
 * comes from the caller (staged.h).
 * Tested without a GPU by test/test_staged.cc (memcpy on a worker thread stands in for CUDA). */
#include "staged.h"

#include <stdint.h>
#include <stdlib.h>

#include "comm.h"
#include "core.h"
#include "proxy.h"

void ringo_staged_extent(enum ringo_coll coll, size_t count, ringoDataType_t type, int nranks, int rank, int root,
                         size_t* in_bytes, size_t* out_bytes) {
  const size_t n = (size_t)nranks, bytes = count * ringo_type_size(type);
  const int is_root = rank == root;
  switch (coll) {
    case RINGO_COLL_REDUCESCATTER: *in_bytes = n * bytes, *out_bytes = bytes; break;
    case RINGO_COLL_ALLGATHER: *in_bytes = bytes, *out_bytes = n * bytes; break;
    case RINGO_COLL_BROADCAST: *in_bytes = is_root ? bytes : 0, *out_bytes = bytes; break;
    case RINGO_COLL_REDUCE: *in_bytes = bytes, *out_bytes = is_root ? bytes : 0; break;
    default: *in_bytes = *out_bytes = bytes; break;
  }
}

/* The proxy's work: the collective on the staged copies. */
static void run_on_host(void* arg, int run) {
  if (run) (void)ringo_coll_run_staged(arg); /* an error stays with the communicator */
  free(arg);
}

static void free_retired(struct ringo_stage* st, const struct ringo_stage_ops* ops) {
  for (int k = 0; k < st->nretired; k++) ops->host_free(ops->ctx, st->retired[k]);
  st->nretired = 0;
}

ringoResult_t ringo_stage_grow(struct ringo_stage* st, void** buf, size_t* cap, size_t need,
                               const struct ringo_stage_ops* ops) {
  if (need <= *cap) return ringoSuccess;
  if (*buf) {
    if (st->nretired == RINGO_STAGE_RETIRED) { /* a last resort, after dozens of doublings */
      RINGO_CHECK(ops->drain(ops->ctx));
      free_retired(st, ops);
    }
    st->retired[st->nretired++] = *buf;
  }
  /* At least doubling, so the retired buffers together stay smaller than the live one. */
  const size_t size = need > 2 * *cap ? need : 2 * *cap;
  *buf = NULL;
  *cap = 0;
  RINGO_CHECK(ops->host_alloc(ops->ctx, buf, size));
  *cap = size;
  return ringoSuccess;
}

ringoResult_t ringo_staged_launch(const struct ringo_op* op, struct ringo_stage* st, const struct ringo_stage_ops* ops) {
  size_t in_bytes = 0, out_bytes = 0;
  ringo_staged_extent(op->coll, op->count, op->type, op->comm->nranks, op->comm->rank, op->root, &in_bytes, &out_bytes);
  RINGO_CHECK(ringo_stage_grow(st, &st->in, &st->in_cap, in_bytes, ops));
  RINGO_CHECK(ringo_stage_grow(st, &st->out, &st->out_cap, out_bytes, ops));
  struct ringo_op* r = malloc(sizeof *r);
  if (!r) return ringo_fail(ringoSystemError, "out of memory for a staged collective");
  *r = *op;
  r->device = 0;
  r->stream = NULL;
  /* Separate input and output copies: the host ring runs out of place even when the caller's call
   * is in place, and the copy back then writes the same bytes NCCL's in-place call would. */
  r->sendbuff = in_bytes ? st->in : NULL;
  r->recvbuff = out_bytes ? st->out : NULL;
  ringoResult_t res = in_bytes ? ops->to_host(ops->ctx, st->in, op->sendbuff, in_bytes) : ringoSuccess;
  int handed = 0;
  if (res == ringoSuccess) res = ringo_proxy_submit(op->comm, &st->proxy, run_on_host, r, ops, &handed);
  if (!handed) free(r);
  if (res != ringoSuccess) return res;
  return out_bytes ? ops->to_device(ops->ctx, op->recvbuff, st->out, out_bytes) : ringoSuccess;
}

int ringo_staged_pending(const struct ringo_stage* st) { return ringo_proxy_pending(st->proxy); }
int ringo_staged_running(const struct ringo_stage* st) { return ringo_proxy_running(st->proxy); }

void ringo_staged_free(struct ringo_stage* st, const struct ringo_stage_ops* ops) {
  if (ringo_staged_pending(st) > 0) (void)ops->drain(ops->ctx);
  ringo_proxy_free(st->proxy, ops);
  free_retired(st, ops);
  void* bufs[3] = {st->in, st->out, st->p2p};
  for (int k = 0; k < 3; k++)
    if (bufs[k]) ops->host_free(ops->ctx, bufs[k]);
  *st = (struct ringo_stage){0};
}

ringoResult_t ringo_staged_launch_call(ringoComm_t comm, enum ringo_coll coll, const void* sendbuff, void* recvbuff,
                                       size_t count, ringoDataType_t type, ringoRedOp_t op, int root,
                                       struct ringo_stage* st, const struct ringo_stage_ops* ops) {
  const struct ringo_op o = {.kind = RINGO_KIND_COLL, .device = 1, .coll = coll, .sendbuff = sendbuff,
                             .recvbuff = recvbuff, .count = count, .type = type, .op = op, .root = root,
                             .comm = comm, .seq = comm->seq++};
  return ringo_staged_launch(&o, st, ops);
}
