/* staged.c — device collectives whose ring leaves the host (MPI links): each is enqueued in stream
 * order — sendbuff to pinned host memory, the host ring on the staged copies (on the
 * communicator's proxy thread, proxy.c), the result back to recvbuff — so the caller never waits.
 * Large collectives are pipelined in phases of the ring's rounds: phase p's input is copied while
 * the ring runs phase p - 1, its output goes back while the ring runs phase p + 1.
 * Needs comm.h, proxy.h and the host engine (ringo_select_run_staged); how bytes reach the stream
 * comes from the caller (staged.h).
 * Tested without a GPU by test/test_staged.cc (memcpy on a worker thread stands in for CUDA). */
#include "device/staged.h"

#include <stdint.h>
#include <stdlib.h>

#include "comm/comm.h"
#include "engine/select.h"
#include "core/core.h"
#include "device/proxy.h"

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

/* The proxy's work: the collective on the staged copies, its phases tied to the proxy's. */
struct staged_run {
  struct ringo_op op;
  struct ringo_phases phases;
  struct ringo_proxy_task* task;
};

static int await_phase(void* ctx, int p) { return ringo_proxy_phase_await(((struct staged_run*)ctx)->task, p); }
static void staged_phase_done(void* ctx, int p) { ringo_proxy_phase_done(((struct staged_run*)ctx)->task, p); }

static void run_on_host(void* arg, int run, struct ringo_proxy_task* task) {
  struct staged_run* r = arg;
  r->task = task;
  if (run) (void)ringo_select_run_staged(&r->op); /* an error stays with the communicator */
  free(r);
}

/* How the copies follow the ring: phase p of the pipeline is rounds [first, end) of the host ring,
 * which move elements [first, end) * slice of every chunk (schedule.h). */
struct pipeline {
  int nphases;
  size_t rounds, slice;
  size_t in_bytes, out_bytes; /* what this rank stages each way (0: nothing) */
};

size_t ringo_stage_p2p_bytes(size_t count, ringoDataType_t type) {
  const size_t bytes = count * ringo_type_size(type);
  return (bytes + RINGO_STAGE_ALIGN - 1) / RINGO_STAGE_ALIGN * RINGO_STAGE_ALIGN;
}

int ringo_stage_phase_count(ringoComm_t comm, size_t bytes, size_t most) {
  size_t n = (size_t)comm->env.staged_phases;
  if (n > most) n = most;
  if (n > bytes / comm->env.staged_piece_bytes) n = bytes / comm->env.staged_piece_bytes;
  return n > 1 ? (int)n : 1;
}

/* Each phase moves at least one round, and the longest chunk is the first (ringo_chunk_range). */
static int staged_choose_phases(const struct ringo_op* op, size_t rounds) {
  const ringoComm_t comm = op->comm;
  size_t in_off, out_off, len;
  ringo_chunk_geometry(op->coll, op->count, comm->nranks, comm->ring, 0, &in_off, &out_off, &len);
  return ringo_stage_phase_count(comm, len * ringo_type_size(op->type), rounds);
}

/* Enqueues one copy: bytes at offset `at` of the staging and of the caller's buffer, one way. */
static ringoResult_t copy_one_way(const struct ringo_op* op, const struct ringo_stage* st, size_t at, size_t bytes,
                                  int input, const struct ringo_stage_ops* ops) {
  if (input) return ops->to_host(ops->ctx, (char*)st->in + at, (const char*)op->sendbuff + at, bytes);
  return ops->to_device(ops->ctx, (char*)op->recvbuff + at, (const char*)st->out + at, bytes);
}

/* Enqueues phase p's copies one way: each chunk's part to the staging (input) or from it back to
 * the caller's buffer (output); a single phase is the whole extent in one copy. Where every chunk
 * has the same bytes one way (an all-gather reads only the rank's block, a reduce-scatter writes
 * only the rank's block) they are copied once. */
static ringoResult_t copy_phase(const struct ringo_op* op, const struct ringo_stage* st, const struct pipeline* pl,
                                int p, int input, const struct ringo_stage_ops* ops) {
  const ringoComm_t comm = op->comm;
  const size_t extent = input ? pl->in_bytes : pl->out_bytes;
  if (extent == 0) return ringoSuccess;
  if (pl->nphases == 1) return copy_one_way(op, st, 0, extent, input, ops);
  const size_t esize = ringo_type_size(op->type);
  const enum ringo_coll shared = input ? RINGO_COLL_ALLGATHER : RINGO_COLL_REDUCESCATTER;
  const int one_chunk = op->coll == shared || op->coll == RINGO_COLL_BROADCAST || op->coll == RINGO_COLL_REDUCE;
  size_t first, end;
  ringo_phase_rounds(pl->rounds, pl->nphases, p, &first, &end);
  for (int c = 0; c < (one_chunk ? 1 : comm->nranks); c++) {
    size_t in_off, out_off, len;
    ringo_chunk_geometry(op->coll, op->count, comm->nranks, comm->ring, c, &in_off, &out_off, &len);
    const size_t a = first * pl->slice < len ? first * pl->slice : len;
    const size_t b = end * pl->slice < len ? end * pl->slice : len;
    if (a == b) continue;
    RINGO_CHECK(copy_one_way(op, st, ((input ? in_off : out_off) + a) * esize, (b - a) * esize, input, ops));
  }
  return ringoSuccess;
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

void ringo_stage_needs(ringoComm_t comm, int staged, const struct ringo_op* ops, size_t nops, size_t need[3]) {
  need[0] = need[1] = need[2] = 0;
  for (size_t i = 0; i < nops; i++) {
    const struct ringo_op* op = &ops[i];
    if (op->comm != comm || !op->device) continue;
    if (op->kind != RINGO_KIND_COLL) {
      need[2] += ringo_stage_p2p_bytes(op->count, op->type);
    } else if (staged) {
      size_t in, out;
      ringo_staged_extent(op->coll, op->count, op->type, comm->nranks, comm->rank, op->root, &in, &out);
      if (in > need[0]) need[0] = in;
      if (out > need[1]) need[1] = out;
    }
  }
}

void ringo_stage_needs_call(ringoComm_t comm, int staged, const struct ringo_stage_call* calls, size_t n,
                            size_t need[3]) {
  struct ringo_op* ops = calloc(n ? n : 1, sizeof *ops);
  need[0] = need[1] = need[2] = 0;
  if (!ops) return;
  for (size_t i = 0; i < n; i++)
    ops[i] = (struct ringo_op){.kind = (enum ringo_op_kind)calls[i].kind, .device = calls[i].device,
                               .coll = calls[i].coll, .count = calls[i].count, .type = calls[i].type,
                               .root = calls[i].root, .comm = calls[i].comm};
  ringo_stage_needs(comm, staged, ops, n, need);
  free(ops);
}

ringoResult_t ringo_stage_reserve(ringoComm_t comm, struct ringo_stage* st, size_t in, size_t out, size_t p2p,
                                  const struct ringo_stage_ops* ops) {
  if (in + out + p2p == 0) return ringoSuccess;
  RINGO_CHECK(ringo_proxy_ensure(comm, &st->proxy, ops));
  RINGO_CHECK(ringo_stage_grow(st, &st->in, &st->in_cap, in, ops));
  RINGO_CHECK(ringo_stage_grow(st, &st->out, &st->out_cap, out, ops));
  return ringo_stage_grow(st, &st->p2p, &st->p2p_cap, p2p, ops);
}

ringoResult_t ringo_staged_launch(const struct ringo_op* op, struct ringo_stage* st, const struct ringo_stage_ops* ops) {
  struct pipeline pl = {0};
  ringo_staged_extent(op->coll, op->count, op->type, op->comm->nranks, op->comm->rank, op->root, &pl.in_bytes,
                      &pl.out_bytes);
  pl.rounds = ringo_select_rounds(op, &pl.slice);
  pl.nphases = staged_choose_phases(op, pl.rounds);
  RINGO_CHECK(ringo_stage_grow(st, &st->in, &st->in_cap, pl.in_bytes, ops));
  RINGO_CHECK(ringo_stage_grow(st, &st->out, &st->out_cap, pl.out_bytes, ops));
  struct staged_run* r = malloc(sizeof *r);
  if (!r) return ringo_fail(ringoSystemError, "out of memory for a staged collective");
  r->op = *op;
  r->op.device = 0;
  r->op.stream = NULL;
  /* Separate input and output copies: the host ring runs out of place even when the caller's call
   * is in place, and the copy back then writes the same bytes NCCL's in-place call would (every
   * input copy is enqueued before the first copy back). */
  r->op.sendbuff = pl.in_bytes ? st->in : NULL;
  r->op.recvbuff = pl.out_bytes ? st->out : NULL;
  r->phases = (struct ringo_phases){pl.nphases, r, await_phase, staged_phase_done};
  r->op.phases = pl.nphases > 1 ? &r->phases : NULL; /* one phase: the proxy ends it */
  ringoResult_t res = ringoSuccess;
  for (int p = 0; p < pl.nphases && res == ringoSuccess; p++) {
    res = copy_phase(op, st, &pl, p, 1, ops);
    if (res == ringoSuccess) res = ringo_proxy_mark(op->comm, &st->proxy, ops);
  }
  int handed = 0;
  if (res == ringoSuccess) res = ringo_proxy_submit(op->comm, &st->proxy, run_on_host, r, pl.nphases, ops, &handed);
  if (!handed) free(r);
  for (int p = 0; p < pl.nphases && res == ringoSuccess; p++) {
    if (p > 0) res = ringo_proxy_wait_phase(st->proxy, p, ops);
    if (res == ringoSuccess) res = copy_phase(op, st, &pl, p, 0, ops);
  }
  return res;
}

int ringo_staged_pending(const struct ringo_stage* st) { return ringo_proxy_pending(st->proxy); }
int ringo_staged_running(const struct ringo_stage* st) { return ringo_proxy_running(st->proxy); }
void ringo_staged_stream_failed(struct ringo_stage* st) { ringo_proxy_stream_failed(st->proxy); }

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
