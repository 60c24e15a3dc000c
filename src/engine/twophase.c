/* twophase.c — the two-phase all-reduce of ranks on one host: the ring's reduce-scatter and
 * all-gather, each done in one step through the board (comm/board.h) instead of N-1 hand-offs.
 * Tested by test/test_twophase.cc (bits equal to the ring's, every dtype and op, in and out of place,
 * in one round and in several).
 *
 *   phase 1  every rank posts its input on its board slot, waits for all N posts, then reduces the
 *            chunk its ring position owns after the ring's reduce-scatter, (pos + 1) mod N, out of
 *            the N inputs in the ring's order (the one-shot's ringo_oneshot_reduce_piece), into
 *            that chunk's place of its own slot and of its output at once, and marks it reduced;
 *   phase 2  every rank copies each other chunk from the slot of the rank that reduced it.
 *
 * Each rank's input chunk is read by one other rank, and each result chunk by N-1 others: the bytes
 * that cross between ranks are the ring's 2(N-1)/N·D, in two hand-offs instead of 2(N-1). A rank
 * skips posting the chunk it reduces itself (nobody else reads it; it reads its own from sendbuff),
 * so its result can take that place in its slot.
 *
 * An input larger than the board's two-phase slot runs in rounds, one board op each: every ring
 * chunk is cut into as many pieces (ringo_chunk_range), and round k posts piece k of every chunk,
 * side by side in chunk order. Each element is still reduced by its chunk's owner in its chunk's
 * order, so the bits stay the ring's, and consecutive rounds use the board's two sides in turn. */
#include <assert.h>
#include <stdlib.h>

#include "engine/twophase.h"

#include "comm/board.h"
#include "engine/oneshot.h"
#include "reduce/reduce.h"

/* Piece k of `rounds` of chunk c, in bytes: where it lies in the user's buffers and in a slot. */
struct piece {
  size_t at, slot_at, len;
};

static struct piece piece_of(const struct ringo_op* op, uint64_t rounds, uint64_t k, int c) {
  const size_t esize = ringo_type_size(op->type);
  const int n = op->comm->nranks;
  struct piece p = {0, 0, 0};
  for (int i = rounds == 1 ? c : 0; i <= c; i++) { /* one round: the slot is laid out as sendbuff */
    size_t off, len, poff, plen;
    ringo_chunk_range(op->count, n, i, &off, &len);
    ringo_chunk_range(len, (int)rounds, (int)k, &poff, &plen);
    if (i < c) {
      p.slot_at += plen * esize;
    } else {
      p.at = (off + poff) * esize;
      p.len = plen * esize;
      if (rounds == 1) p.slot_at = p.at;
    }
  }
  return p;
}

/* What round k posts: every chunk's piece k, the last one ending the slot's use. */
static size_t round_bytes(const struct ringo_op* op, uint64_t rounds, uint64_t k) {
  const struct piece last = piece_of(op, rounds, k, op->comm->nranks - 1);
  return last.slot_at + last.len;
}

uint64_t ringo_twophase_rounds(const struct ringo_op* op) {
  const size_t bytes = op->count * ringo_type_size(op->type), most = ringo_board_twophase_round(op->comm->board);
  if (bytes <= most) return 1;
  if (most == 0) return RINGO_TWOPHASE_MAX_ROUNDS + 1; /* a peer's word of 0 (env.c allows 4K up): never fits */
  /* ringo_chunk_range gives the first piece of a chunk the extra units, so round 0 is the longest. */
  uint64_t rounds = (bytes + most - 1) / most;
  while (rounds <= RINGO_TWOPHASE_MAX_ROUNDS && round_bytes(op, rounds, 0) > most) rounds++;
  return rounds;
}

int ringo_twophase_fits(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  return comm->board && comm->nranks > 1 && op->coll == RINGO_COLL_ALLREDUCE && op->count >= (size_t)comm->nranks &&
         op->count * ringo_type_size(op->type) <= ringo_board_twophase_limit(comm->board) &&
         ringo_twophase_rounds(op) <= RINGO_TWOPHASE_MAX_ROUNDS;
}

/* Phase 1 of round k: post every piece but the one this rank reduces, then reduce that one into the
 * slot and the output in one pass (the copy out of the slot it saves: 2-6 % at N = 2, docs/peers.md). */
static ringoResult_t reduce_own_piece(const struct ringo_op* op, uint64_t rounds, uint64_t k, uint64_t b, char* slot,
                                      const void** in) {
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks, own = ringo_owned_chunk(n, comm->pos);
  for (int c = 0; c < n; c++) {
    const struct piece p = piece_of(op, rounds, k, c);
    if (c != own) ringo_copy2(slot + p.slot_at, NULL, (const char*)op->sendbuff + p.at, p.len);
  }
  const struct ringo_fingerprint mine = ringo_op_fingerprint(op);
  ringo_board_post(comm, b, &mine);
  RINGO_CHECK(ringo_oneshot_gather_posts(op, b, slot, &mine, in));
  const struct piece p = piece_of(op, rounds, k, own);
  const size_t esize = ringo_type_size(op->type);
  RINGO_CHECK(ringo_oneshot_reduce_piece(op, own, in, p.slot_at, (const char*)op->sendbuff + p.at, p.len / esize,
                                         slot + p.slot_at, (char*)op->recvbuff + p.at));
  ringo_board_mark_reduced(comm, b);
  return ringoSuccess;
}

/* Phase 2 of round k: every other piece from the slot of the rank that reduced it, the next rank's
 * first (the likeliest to be done, as in the one-shot's gather). Its own reduce_own_piece wrote. */
static ringoResult_t gather_pieces(const struct ringo_op* op, uint64_t rounds, uint64_t k, uint64_t b) {
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks;
  for (int i = 1; i < n; i++) {
    const int r = (comm->rank + i) % n;
    const void* theirs;
    RINGO_CHECK(ringo_board_await_reduced(comm, b, r, op, &theirs));
    const struct piece p = piece_of(op, rounds, k, ringo_owned_chunk(n, comm->pos_of[r]));
    ringo_copy2((char*)op->recvbuff + p.at, NULL, (const char*)theirs + p.slot_at, p.len);
  }
  return ringoSuccess;
}

/* Round k: each of its waits has its own RINGO_TIMEOUT, as every wait of a ring link has. */
static ringoResult_t run_round(const struct ringo_op* op, uint64_t rounds, uint64_t k, uint64_t b, const void** in) {
  void* slot = NULL;
  RINGO_CHECK(ringo_board_claim(op->comm, b, op, round_bytes(op, rounds, k), &slot));
  RINGO_CHECK(reduce_own_piece(op, rounds, k, b, slot, in));
  RINGO_CHECK(gather_pieces(op, rounds, k, b));
  ringo_board_done(op->comm, b);
  return ringoSuccess;
}

ringoResult_t ringo_twophase_run(const struct ringo_op* op, uint64_t b) {
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks;
  const double t0 = comm->trace ? ringo_now() : 0;
  assert(!op->phases || op->phases->n == 1); /* a staged collective is one phase here (oneshot.c) */
  const void* on_stack[64];
  const void** in = n <= 64 ? on_stack : malloc((size_t)n * sizeof *in);
  if (!in) return ringo_fail(ringoSystemError, "rank %d: out of memory for a two-phase all-reduce", comm->rank);
  const uint64_t rounds = ringo_twophase_rounds(op);
  ringoResult_t res = ringoSuccess;
  for (uint64_t k = 0; k < rounds && res == ringoSuccess; k++) res = run_round(op, rounds, k, b + k, in);
  if (in != on_stack) free(in);
  RINGO_CHECK(res);
  /* Peers read this rank's input but its own chunk, and its result chunk N-1 times; it reads as
   * much of theirs: D + (N-2)·D/N = 2(N-1)/N·D each way for even chunks, as the ring. */
  size_t own_off, own_len;
  ringo_chunk_range(op->count, n, ringo_owned_chunk(n, comm->pos), &own_off, &own_len);
  const size_t esize = ringo_type_size(op->type);
  const size_t moved = op->count * esize + (size_t)(n - 2) * own_len * esize;
  atomic_fetch_add_explicit(&comm->bytes_sent, moved, memory_order_relaxed);
  atomic_fetch_add_explicit(&comm->bytes_received, moved, memory_order_relaxed);
  ringo_oneshot_trace(op, "two-phase", moved, t0);
  return ringoSuccess;
}
