/* oneshot.c — small collectives in one hand-off: each rank posts its input on the board (board.h),
 * reads its peers' and combines them in the ring's own order, so the bits equal the ring's.
 * Tested by test/test_oneshot.cc (every collective, dtype and op against the ring, bit for bit). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/oneshot.h"

#include "comm/board.h"
#include "engine/trace.h"
#include "reduce/reduce.h"

/* Below a few KiB the ring's 2(N-1) hand-offs, each a wake-up of the next rank, cost more than the
 * bytes: a one-shot all-reduce reads (N-1)·D instead of moving 2(N-1)/N·D, but waits once. */

/* Bytes rank `rank` posts for op: its whole input (reduce-scatter: N blocks), or nothing (a
 * broadcast's other ranks). */
static size_t posted_bytes(const struct ringo_op* op, int rank) {
  const size_t bytes = op->count * ringo_type_size(op->type);
  switch (op->coll) {
    case RINGO_COLL_REDUCESCATTER: return bytes * (size_t)op->comm->nranks;
    case RINGO_COLL_BROADCAST: return rank == op->root ? bytes : 0;
    default: return bytes;
  }
}

int ringo_oneshot_fits(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  return comm->board && comm->nranks > 1 && op->count > 0 &&
         posted_bytes(op, op->root) <= ringo_board_oneshot_limit(comm->board);
}

ringoResult_t ringo_oneshot_reduce_piece(const struct ringo_op* op, int c, const void* const* in, size_t in_at,
                                         const void* mine, size_t len, void* dst_at, void* also_at) {
  if (len == 0) return ringoSuccess;
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks;
  const int start = ringo_reduce_start(op->coll, n, comm->pos_of[op->root], c);
  const ringoRedOp_t partial = op->op == ringoAvg ? ringoSum : op->op;
  char* const dst = dst_at;
  for (int k = 1; k < n; k++) {
    const int a = comm->ring[start], r = comm->ring[ringo_mod(start + k, n)];
    const char* acc = k > 1 ? dst : a == comm->rank && mine ? (const char*)mine : (const char*)in[a] + in_at;
    const char* next = r == comm->rank && mine ? (const char*)mine : (const char*)in[r] + in_at;
    const int last = k == n - 1;
    RINGO_CHECK(ringo_reduce(dst, last ? also_at : NULL, acc, next, len, op->type, last ? op->op : partial, last ? n : 1));
  }
  return ringoSuccess;
}

ringoResult_t ringo_oneshot_reduce_chunk(const struct ringo_op* op, const void* const* in, int c, void* out_base,
                                         void* also_base) {
  const size_t esize = ringo_type_size(op->type);
  size_t in_off, out_off, len;
  ringo_chunk_geometry(op->coll, op->count, op->comm->nranks, op->comm->ring, c, &in_off, &out_off, &len);
  char* also = also_base ? (char*)also_base + out_off * esize : NULL;
  return ringo_oneshot_reduce_piece(op, c, in, in_off * esize, NULL, len, (char*)out_base + out_off * esize, also);
}

ringoResult_t ringo_oneshot_combine(const struct ringo_op* op, const void* const* in) {
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks, me = comm->rank;
  const size_t bytes = op->count * ringo_type_size(op->type);
  switch (op->coll) {
    case RINGO_COLL_ALLREDUCE:
      for (int c = 0; c < n; c++) RINGO_CHECK(ringo_oneshot_reduce_chunk(op, in, c, op->recvbuff, NULL));
      break;
    case RINGO_COLL_REDUCESCATTER: /* this rank's block is the chunk its ring position owns */
      RINGO_CHECK(ringo_oneshot_reduce_chunk(op, in, ringo_mod(comm->pos + 1, n), op->recvbuff, NULL));
      break;
    case RINGO_COLL_REDUCE:
      if (me == op->root) RINGO_CHECK(ringo_oneshot_reduce_chunk(op, in, 0, op->recvbuff, NULL));
      break;
    case RINGO_COLL_ALLGATHER:
      for (int r = 0; r < n; r++) ringo_copy2((char*)op->recvbuff + (size_t)r * bytes, NULL, in[r], bytes);
      break;
    case RINGO_COLL_BROADCAST:
      ringo_copy2(op->recvbuff, NULL, me == op->root ? op->sendbuff : in[op->root], bytes);
      break;
  }
  return ringoSuccess;
}

void ringo_oneshot_trace(const struct ringo_op* op, const char* name, size_t read, double t0) {
  if (!op->comm->trace) return;
  const struct ringo_trace_event ev = {.coll = op->coll, .seq = op->seq, .step = -1, .chunk = -1, .recv_peer = -1,
                                       .send_peer = -1, .bytes = read, .t0 = t0, .t1 = ringo_now(), .board = name};
  ringo_trace_record(op->comm->trace, &ev);
}

/* Counts the bytes this rank read from its peers' posts and they read from its own, as the links
 * count theirs; returns the former. */
static size_t count_board_bytes(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  const int root = comm->rank == op->root;
  const size_t bytes = op->count * ringo_type_size(op->type), others = (size_t)(comm->nranks - 1);
  size_t sent = others * bytes, received = others * bytes; /* all-reduce, reduce-scatter, all-gather */
  if (op->coll == RINGO_COLL_REDUCE) {
    sent = root ? 0 : bytes;
    received = root ? others * bytes : 0;
  } else if (op->coll == RINGO_COLL_BROADCAST) {
    sent = root ? others * bytes : 0;
    received = root ? 0 : bytes;
  }
  atomic_fetch_add_explicit(&comm->bytes_sent, sent, memory_order_relaxed);
  atomic_fetch_add_explicit(&comm->bytes_received, received, memory_order_relaxed);
  return received;
}

ringoResult_t ringo_oneshot_gather_posts(const struct ringo_op* op, uint64_t b, const void* slot,
                                         const struct ringo_fingerprint* mine, const void** in) {
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks;
  in[comm->rank] = slot;
  for (int i = 1; i < n; i++) { /* the next rank first: on a ring of waiters, the likeliest to be there */
    const int r = (comm->rank + i) % n;
    struct ringo_fingerprint theirs;
    RINGO_CHECK(ringo_board_await(comm, b, r, op, &theirs, &in[r]));
    if (memcmp(&theirs, mine, sizeof *mine) != 0) return ringo_op_mismatch(op, &theirs, r);
  }
  return ringoSuccess;
}

ringoResult_t ringo_oneshot_run(const struct ringo_op* op, uint64_t b) {
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks;
  const double t0 = comm->trace ? ringo_now() : 0;
  void* slot = NULL;
  /* A staged collective is one phase here: its pipeline is cut from ringo_select_rounds, 0 for a
   * one-shot op, so its input is all staged and the proxy ends its only phase. */
  assert(!op->phases || op->phases->n == 1);
  const size_t bytes = posted_bytes(op, comm->rank);
  RINGO_CHECK(ringo_board_claim(comm, b, op, bytes, &slot));
  if (bytes > 0) ringo_copy2(slot, NULL, op->sendbuff, bytes);
  const struct ringo_fingerprint mine = ringo_op_fingerprint(op);
  ringo_board_post(comm, b, &mine);
  const void* on_stack[64]; /* the inputs' addresses; more ranks than that on one host: the heap */
  const void** in = n <= 64 ? on_stack : malloc((size_t)n * sizeof *in);
  if (!in) return ringo_fail(ringoSystemError, "rank %d: out of memory for a one-shot collective", comm->rank);
  ringoResult_t res = ringo_oneshot_gather_posts(op, b, slot, &mine, in);
  if (res == ringoSuccess) res = ringo_oneshot_combine(op, in);
  if (in != on_stack) free(in);
  RINGO_CHECK(res);
  const size_t read = count_board_bytes(op);
  ringo_board_done(comm, b);
  ringo_oneshot_trace(op, "one-shot", read, t0);
  return ringoSuccess;
}

ringoResult_t ringo_oneshot_bracket(const struct ringo_op* op, uint64_t b, ringoResult_t (*run)(const struct ringo_op*)) {
  const ringoComm_t comm = op->comm;
  RINGO_CHECK(ringo_board_claim(comm, b, op, 0, NULL));
  const struct ringo_fingerprint fp = ringo_op_fingerprint(op);
  ringo_board_post(comm, b, &fp);
  comm->board_op = op; /* the ring links' waits compare it with the peers' posts */
  comm->board_op_b = b;
  const ringoResult_t res = run(op);
  comm->board_op = NULL;
  RINGO_CHECK(res);
  ringo_board_done(comm, b);
  return ringoSuccess;
}
