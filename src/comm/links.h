/* links.h — making a communicator's links (links.c): the transport for a peer and the parameters
 * of a link to or from it. Tested by test/test_api.cc and test/test_p2p.cc. */
#ifndef RINGO_LINKS_H_
#define RINGO_LINKS_H_

#include "comm/comm.h"

/* The parameters of a link of channel (transport.h's RINGO_CHANNEL_*) to or from peer. */
void ringo_comm_link_params(const ringoComm_t comm, int peer, int channel, struct ringo_link_params* p);
/* The transport that joins this rank to peer (RINGO_TRANSPORT may force one). */
ringoResult_t ringo_comm_pick_transport(const ringoComm_t comm, int peer, const struct ringo_transport** tp);

#endif /* RINGO_LINKS_H_ */
