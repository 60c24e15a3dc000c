/* bootstrap.h — rendezvous of ranks over TCP through a root started by ringoGetUniqueId, and the
 * small allgather/barrier the communicator setup needs. Tested by test/test_bootstrap.cc. */
#ifndef RINGO_BOOTSTRAP_H_
#define RINGO_BOOTSTRAP_H_

#include <stddef.h>

#include "ringo.h"

#define RINGO_BOOTSTRAP_VERSION 1
#define RINGO_BOOTSTRAP_MAX_BYTES (64 * 1024)  /* largest per-rank allgather payload */

struct ringo_bootstrap;

/* Starts the root listener (a thread of this process) and fills *id. */
ringoResult_t ringo_bootstrap_root_start(ringoUniqueId* id);

/* Joins the rendezvous described by id as rank of nranks; every wait bounded by timeout_s. */
ringoResult_t ringo_bootstrap_init(const ringoUniqueId* id, int nranks, int rank, double timeout_s,
                                   struct ringo_bootstrap** out);

/* all[r*bytes .. (r+1)*bytes) = rank r's mine. Every rank must pass the same bytes. */
ringoResult_t ringo_bootstrap_allgather(struct ringo_bootstrap* bs, const void* mine, size_t bytes, void* all);
ringoResult_t ringo_bootstrap_barrier(struct ringo_bootstrap* bs);

/* Leaves the rendezvous; the root thread ends once every rank has left. */
void ringo_bootstrap_close(struct ringo_bootstrap* bs);

#endif /* RINGO_BOOTSTRAP_H_ */
