/* collectives.h — the host engine's algorithms (collectives.c): the ring, the two-level ring, the
 * gather path, the naive baseline and a communicator of one; each says when it fits and runs one
 * collective to completion on the calling thread. Chosen in one place, select.c. Tested by
 * test/test_collectives.cc, test_naive.cc and test/mpi/ (two-level, gather). */
#ifndef RINGO_ENGINE_COLLECTIVES_H_
#define RINGO_ENGINE_COLLECTIVES_H_

#include <stddef.h>

#include "comm/comm.h"
#include "comm/op.h"

/* A communicator of one rank: the input copied to the output. */
ringoResult_t ringo_single_run(const struct ringo_op* op);
/* RINGO_ALGO=naive's all-reduce: gather to rank 0 over the star and send back. */
ringoResult_t ringo_naive_run(const struct ringo_op* op);
/* The gather path of a communicator that leaves the host: an all-reduce whose input fits its slots. */
int ringo_gather_fits(const struct ringo_op* op);
ringoResult_t ringo_gather_run(const struct ringo_op* op);
/* The two-level ring of hosts with equal rank counts (2+ each): all-reduce, and large reduce-scatter
 * and all-gather blocks. */
int ringo_two_level_fits(const struct ringo_op* op);
ringoResult_t ringo_two_level_run(const struct ringo_op* op);
/* The one ring, which fits every collective. */
ringoResult_t ringo_ring_run(const struct ringo_op* op);
/* The elements of one slice of op on the one ring. */
size_t ringo_ring_slice_elems(const struct ringo_op* op);
/* The rounds the one ring walks for op (round j moves slice j, of *slice_elems elements, of every chunk). */
size_t ringo_ring_rounds(const struct ringo_op* op, size_t* slice_elems);

#endif /* RINGO_ENGINE_COLLECTIVES_H_ */
