/* oneshot.h — the one-shot path for small collectives on a communicator with a board (comm/board.h):
 * every rank posts its input and combines all of them in the ring's own order, so the bits equal the
 * ring's. Implemented in oneshot.c; tested by test/test_oneshot.cc. */
#ifndef RINGO_ENGINE_ONESHOT_H_
#define RINGO_ENGINE_ONESHOT_H_

#include <stddef.h>
#include <stdint.h>

#include "comm/op.h"

/* 1 when op's input fits the board, which every rank decides alike from the fingerprint; then op
 * runs as board op b. */
int ringo_oneshot_fits(const struct ringo_op* op);
ringoResult_t ringo_oneshot_run(const struct ringo_op* op, uint64_t b);
/* Waits for every peer's post of op b and checks its fingerprint against mine; in[r] = rank r's
 * posted input (in[this rank] = slot). */
ringoResult_t ringo_oneshot_gather_posts(const struct ringo_op* op, uint64_t b, const void* slot,
                                         const struct ringo_fingerprint* mine, const void** in);
/* Chunk c of every input (in[r], laid out as sendbuff) combined as the ring combines it:
 * op(op(x_start, x_start+1), ...), partial steps with the partial op, the last with the final one
 * (avg's division fused there); written where chunk c lives in a buffer laid out as recvbuff, and
 * in also_base (laid out the same) too where it is not NULL, in the same pass. */
ringoResult_t ringo_oneshot_reduce_chunk(const struct ringo_op* op, const void* const* in, int c, void* out_base,
                                         void* also_base);
/* The same for len elements of chunk c (c sets the order): rank r's are at (char*)in[r] + in_at, but
 * this rank's at mine where that is not NULL; written to dst_at, and also_at too where not NULL. */
ringoResult_t ringo_oneshot_reduce_piece(const struct ringo_op* op, int c, const void* const* in, size_t in_at,
                                         const void* mine, size_t len, void* dst_at, void* also_at);
/* This rank's result of op from every rank's input (in[rank]), combined in the ring's own order, so
 * the bits equal the ring's; shared by the board and the gather path (collectives.c). */
ringoResult_t ringo_oneshot_combine(const struct ringo_op* op, const void* const* in);
/* Op b of a board that runs elsewhere (run: the algorithm chosen): it still claims its side of the
 * board and posts its fingerprint, so a peer in a one-shot op finds by it that this rank runs
 * another collective instead of waiting for it (comm/board.h); then runs, then marks b done. */
ringoResult_t ringo_oneshot_bracket(const struct ringo_op* op, uint64_t b, ringoResult_t (*run)(const struct ringo_op*));
/* RINGO_TRACE's one event for a collective of one or two hand-offs (board or gather path), named
 * name ("one-shot", "two-phase"): `read` bytes from peers since t0. */
void ringo_oneshot_trace(const struct ringo_op* op, const char* name, size_t read, double t0);

#endif /* RINGO_ENGINE_ONESHOT_H_ */
