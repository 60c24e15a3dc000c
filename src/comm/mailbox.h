/* mailbox.h — links made on first use (point-to-point): the host's mailbox, made at init, and
 * opening either end of a link to a peer. Implemented in mailbox.c; tested by test/test_p2p.cc. */
#ifndef RINGO_MAILBOX_H_
#define RINGO_MAILBOX_H_

#include "comm/comm.h"

/* The point-to-point state and this host's mailbox, made at init through rv (collective). */
ringoResult_t ringo_mailbox_setup(ringoComm_t comm, const struct ringo_rendezvous* rv);
/* Closes every point-to-point link and unmaps the mailbox. */
void ringo_mailbox_free(ringoComm_t comm);
/* The sender's end of the link to peer, made and posted if it is not yet. Never waits. */
ringoResult_t ringo_mailbox_open_send(ringoComm_t comm, int peer);
/* The receiver's end from peer: attaches once the sender has posted it (*ready = 0: not yet).
 * *next_alive is when next to ask whether the sender still exists. */
ringoResult_t ringo_mailbox_try_open_recv(ringoComm_t comm, int peer, double* next_alive, int* ready);

#endif /* RINGO_MAILBOX_H_ */
