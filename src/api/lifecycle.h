/* lifecycle.h — making and unmaking a whole communicator (links, mailbox, board, device side, trace).
 * Implemented in lifecycle.c; tested by test/test_api.cc and every multi-rank suite. */
#ifndef RINGO_API_LIFECYCLE_H_
#define RINGO_API_LIFECYCLE_H_

#include "comm/comm.h"

/* Creates rank `rank` of an nranks communicator over rv. tctx (may be NULL) becomes the
 * communicator's transport context and is freed with tctx_free when it goes, or here on failure. */
ringoResult_t ringo_lifecycle_create(ringoComm_t* out, int nranks, int rank, const struct ringo_rendezvous* rv,
                                     void* tctx, void (*tctx_free)(void*));
/* The second half of ringoCommInitRank (after ringo_comm_alloc), apart so an init queued in a group
 * can hand out its handle at once: init over the TCP bootstrap. A failed init leaves the
 * communicator allocated, in error, for ringo_lifecycle_free. */
ringoResult_t ringo_lifecycle_init_tcp(ringoComm_t comm, const ringoUniqueId* id);
/* Drains and frees the device side, writes the trace, then frees the communicator. */
void ringo_lifecycle_free(ringoComm_t comm);

#endif /* RINGO_API_LIFECYCLE_H_ */
