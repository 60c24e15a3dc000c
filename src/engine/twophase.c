/* twophase.c — the two-phase all-reduce of ranks on one host: the ring's reduce-scatter and
 * all-gather, each done in one step through the board (comm/board.h) instead of N-1 hand-offs.
 * Tested by test/test_twophase.cc (bits equal to the ring's, every dtype and op, in and out of place).
 *
 *   phase 1  every rank posts its input on its board slot, waits for all N posts, then reduces the
 *            chunk its ring position owns after the ring's reduce-scatter, (pos + 1) mod N, out of
 *            the N inputs in the ring's order (the one-shot's ringo_oneshot_reduce_chunk), into
 *            that chunk's place of its own slot and of its output at once, and marks it reduced;
 *   phase 2  every rank copies each other chunk from the slot of the rank that reduced it.
 *
 * Each rank's input chunk is read by one other rank, and each result chunk by N-1 others: the bytes
 * that cross between ranks are the ring's 2(N-1)/N·D, in two hand-offs instead of 2(N-1). A rank
 * skips posting the chunk it reduces itself (nobody else reads it; it reads its own from sendbuff),
 * so its result can take that place in its slot. */
#include <assert.h>
#include <stdlib.h>

#include "engine/twophase.h"

#include "comm/board.h"
#include "engine/oneshot.h"
#include "reduce/reduce.h"

int ringo_twophase_fits(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  return comm->board && comm->nranks > 1 && op->coll == RINGO_COLL_ALLREDUCE && op->count >= (size_t)comm->nranks &&
         op->count * ringo_type_size(op->type) <= ringo_board_twophase_limit(comm->board);
}

/* Chunk c of the all-reduce: its offset and length in bytes. */
static void chunk_bytes(const struct ringo_op* op, int c, size_t* off, size_t* len) {
  const size_t esize = ringo_type_size(op->type);
  ringo_chunk_range(op->count, op->comm->nranks, c, off, len);
  *off *= esize;
  *len *= esize;
}

/* Phase 1: post everything but the chunk this rank reduces, then reduce that chunk into the slot
 * and the output in one pass (the copy out of the slot it saves: 2-6 % at N = 2, docs/peers.md). */
static ringoResult_t reduce_own_chunk(const struct ringo_op* op, uint64_t b, char* slot, const void** in,
                                      double* since) {
  const ringoComm_t comm = op->comm;
  const size_t bytes = op->count * ringo_type_size(op->type);
  size_t off, len;
  chunk_bytes(op, ringo_owned_chunk(comm->nranks, comm->pos), &off, &len);
  ringo_copy2(slot, NULL, op->sendbuff, off);
  ringo_copy2(slot + off + len, NULL, (const char*)op->sendbuff + off + len, bytes - off - len);
  const struct ringo_fingerprint mine = ringo_op_fingerprint(op);
  ringo_board_post(comm, b, &mine);
  RINGO_CHECK(ringo_oneshot_gather_posts(op, b, slot, &mine, in, since));
  in[comm->rank] = op->sendbuff; /* this rank's own chunk was not posted */
  RINGO_CHECK(ringo_oneshot_reduce_chunk(op, in, ringo_owned_chunk(comm->nranks, comm->pos), slot, op->recvbuff));
  ringo_board_mark_reduced(comm, b);
  return ringoSuccess;
}

/* Phase 2: every other chunk from the slot of the rank that reduced it, the next rank's first (the
 * likeliest to be done, as in the one-shot's gather). Its own chunk reduce_own_chunk wrote. */
static ringoResult_t gather_chunks(const struct ringo_op* op, uint64_t b, double* since) {
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks;
  for (int i = 1; i < n; i++) {
    const int r = (comm->rank + i) % n;
    const void* theirs;
    RINGO_CHECK(ringo_board_await_reduced(comm, b, r, op, &theirs, since));
    size_t off, len;
    chunk_bytes(op, ringo_owned_chunk(n, comm->pos_of[r]), &off, &len);
    ringo_copy2((char*)op->recvbuff + off, NULL, (const char*)theirs + off, len);
  }
  return ringoSuccess;
}

ringoResult_t ringo_twophase_run(const struct ringo_op* op, uint64_t b) {
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks;
  const double t0 = comm->trace ? ringo_now() : 0;
  void* slot = NULL;
  double since = 0;
  assert(!op->phases || op->phases->n == 1); /* a staged collective is one phase here (oneshot.c) */
  RINGO_CHECK(ringo_board_claim(comm, b, op, op->count * ringo_type_size(op->type), &slot, &since));
  const void* on_stack[64];
  const void** in = n <= 64 ? on_stack : malloc((size_t)n * sizeof *in);
  if (!in) return ringo_fail(ringoSystemError, "rank %d: out of memory for a two-phase all-reduce", comm->rank);
  ringoResult_t res = reduce_own_chunk(op, b, slot, in, &since);
  if (in != on_stack) free(in);
  if (res == ringoSuccess) res = gather_chunks(op, b, &since);
  RINGO_CHECK(res);
  /* Peers read this rank's input but its own chunk, and its result chunk N-1 times; it reads as
   * much of theirs: D + (N-2)·D/N = 2(N-1)/N·D each way for even chunks, as the ring. */
  size_t own_off, own_len;
  chunk_bytes(op, ringo_owned_chunk(n, comm->pos), &own_off, &own_len);
  const size_t moved = op->count * ringo_type_size(op->type) + (size_t)(n - 2) * own_len;
  atomic_fetch_add_explicit(&comm->bytes_sent, moved, memory_order_relaxed);
  atomic_fetch_add_explicit(&comm->bytes_received, moved, memory_order_relaxed);
  ringo_board_done(comm, b);
  ringo_oneshot_trace(op, "two-phase", moved, t0);
  return ringoSuccess;
}
