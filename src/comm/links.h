/* links.h — making a communicator's links (links.c): the transport for a peer and the parameters
 * of a link to or from it. Tested by test/test_api.cc and test/test_p2p.cc. */
#ifndef RINGO_LINKS_H_
#define RINGO_LINKS_H_

#include "comm/comm.h"

/* The parameters of a link of channel (transport.h's RINGO_CHANNEL_*) to or from peer. */
void ringo_comm_link_params(const ringoComm_t comm, int peer, int channel, struct ringo_link_params* p);
/* The transport that joins this rank to peer (RINGO_TRANSPORT may force one). */
ringoResult_t ringo_comm_pick_transport(const ringoComm_t comm, int peer, const struct ringo_transport** tp);
/* A peer's segment gone during setup (res, this thread's last error): its maker failed, most often
 * on another rank's failure, which the rendezvous names. Joins rv's barrier and returns its verdict
 * when it has one, else res with the last error as it was. */
ringoResult_t ringo_comm_setup_verdict(const struct ringo_rendezvous* rv, ringoResult_t res);

#endif /* RINGO_LINKS_H_ */
