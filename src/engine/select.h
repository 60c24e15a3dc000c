/* select.h — the one table of the host engine's algorithms (select.c): which runs a collective,
 * the links each makes at init, and the engine's entry points. Tested by test/test_collectives.cc,
 * test_oneshot.cc, test_naive.cc, test_staged.cc and test/mpi/. */
#ifndef RINGO_ENGINE_SELECT_H_
#define RINGO_ENGINE_SELECT_H_

#include <stddef.h>

#include "comm/comm.h"
#include "comm/op.h"

/* Collective over rv at init, after ringo_comm_setup: every algorithm's links (and the board). */
ringoResult_t ringo_select_setup(ringoComm_t comm, const struct ringo_rendezvous* rv);
/* The name of the algorithm that runs host collective op ("ring", "two-level", "gather", "one-shot",
 * "naive", "one rank"): what RINGO_DEBUG=INFO logs and the tests ask. */
const char* ringo_select_name(const struct ringo_op* op);
/* Runs host collective op (its seq already taken) on the calling thread with the algorithm the
 * table picks. Does not put the communicator in error: the caller does that on failure. */
ringoResult_t ringo_select_run(const struct ringo_op* op);
/* The host ring on op as given (its seq taken at launch), from a staged device collective's host
 * function (device/staged.c): a failure puts the communicator in error; nothing runs once it is. */
ringoResult_t ringo_select_run_staged(const struct ringo_op* op);
/* The rounds the host ring walks for op, or 0 when another algorithm runs it (one rank, one-shot,
 * gather, two-level, naive): what a staged collective may cut into phases. */
size_t ringo_select_rounds(const struct ringo_op* op, size_t* slice_elems);

#endif /* RINGO_ENGINE_SELECT_H_ */
