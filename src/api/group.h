/* group.h — the one door (group.c): where every public call's op is checked, then queued in the
 * thread's open group or run now as a group of one. Tested by test/test_api.cc, test_collectives.cc
 * (group mode) and test_p2p.cc. */
#ifndef RINGO_API_GROUP_H_
#define RINGO_API_GROUP_H_

#include "comm/comm.h"
#include "comm/op.h"

/* A public collective or point-to-point call (its op built, stream set): checked, then queued when
 * this thread is inside ringoGroupStart/End, else run to completion (host) or enqueued (device).
 * Records any error in the communicator. */
ringoResult_t ringo_group_submit(struct ringo_op op);
/* ringoCommInitRank's init of comm over id: queued inside a group (made at ringoGroupEnd), else
 * made now. */
ringoResult_t ringo_group_submit_init(ringoComm_t comm, const ringoUniqueId* id);
/* How many calls on comm (inits included) this thread's open group holds; with forget, they are
 * dropped as well (an abort frees comm before ringoGroupEnd could run them). */
size_t ringo_group_queued_on(ringoComm_t comm, int forget);
/* How many inits of comm this thread's open group holds. */
size_t ringo_group_inits_on(ringoComm_t comm);

#endif /* RINGO_API_GROUP_H_ */
