/* mailbox.c — point-to-point links made on first use: the per-host mailbox through which a sender
 * tells its receiver where the link it made lives, and both ends' opening of such a link.
 * Used by the point-to-point engine (engine/p2p.c); tested by test/test_p2p.cc. */
#include "comm/mailbox.h"

#include "comm/board.h"
#include "comm/links.h"
#include "core/wait.h"
#include "transport/segment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAILBOX_LIVENESS_S 0.1 /* how often a receiver waiting for a sender's link asks if it exists */

/* ---- the mailbox: how a sender tells its receiver where a link made on first use lives ----
 * One shared-memory table per host, made at init by the host's lowest rank, with one entry per
 * ordered pair of the host's ranks. The sender makes the link, writes its description into entry
 * (receiver, sender) and marks it posted; the receiver polls it. An MPI link needs no description
 * (its transport has local_info), so only ranks of one host ever use the table. */
struct mailbox_entry {
  _Atomic uint32_t posted;
  uint32_t pad;
  unsigned char info[RINGO_LINK_INFO_BYTES];
};

static int same_host(const ringoComm_t comm, int a, int b) {
  return strcmp(comm->info[a].host, comm->info[b].host) == 0;
}

/* Rank r's index among the ranks of its host (in rank order); *nlocal = how many there are. */
static int host_index(const ringoComm_t comm, int r, int* nlocal) {
  int index = 0, n = 0;
  for (int q = 0; q < comm->nranks; q++) {
    if (!same_host(comm, q, r)) continue;
    if (q < r) index++;
    n++;
  }
  *nlocal = n;
  return index;
}

static struct mailbox_entry* mailbox_entry(const ringoComm_t comm, int to, int from) {
  int nlocal;
  const int t = host_index(comm, to, &nlocal), f = host_index(comm, from, &nlocal);
  return (struct mailbox_entry*)comm->mailbox + (size_t)t * (size_t)nlocal + (size_t)f;
}

ringoResult_t ringo_mailbox_setup(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  comm->p2p = calloc((size_t)comm->nranks, sizeof *comm->p2p);
  if (!comm->p2p) return ringo_fail(ringoSystemError, "out of memory for point-to-point state");
  if (comm->nranks == 1) return ringoSuccess;
  int nlocal, leader = 0;
  while (!same_host(comm, leader, comm->rank)) leader++;
  host_index(comm, comm->rank, &nlocal);
  comm->mailbox_bytes = ((size_t)nlocal * (size_t)nlocal * sizeof(struct mailbox_entry) + 4095) / 4096 * 4096;
  char mine[64] = {0};
  char* names = calloc((size_t)comm->nranks, sizeof mine);
  ringoResult_t res = names ? ringoSuccess : ringo_fail(ringoSystemError, "out of memory for mailbox names");
  if (res == ringoSuccess && leader == comm->rank && nlocal > 1)
    res = ringo_segment_create(comm->mailbox_bytes, mine, &comm->mailbox);
  /* Every rank takes part in the allgather and the barrier, even one alone on its host. */
  if (res == ringoSuccess) res = rv->allgather(rv->ctx, mine, sizeof mine, names);
  if (res == ringoSuccess && leader != comm->rank && nlocal > 1) {
    names[(size_t)leader * sizeof mine + sizeof mine - 1] = '\0';
    res = ringo_segment_attach(names + (size_t)leader * sizeof mine, comm->mailbox_bytes, &comm->mailbox);
    if (res != ringoSuccess) {
      char why[RINGO_ERROR_BYTES]; /* a copy: ringo_fail writes where the last error is */
      snprintf(why, sizeof why, "%s", ringo_thread_last_error());
      ringo_fail(res, "rank %d: the point-to-point mailbox that rank %d made: %s", comm->rank, leader, why);
      free(names);
      return ringo_comm_setup_verdict(rv, res);
    }
  }
  if (res == ringoSuccess) res = rv->barrier(rv->ctx);
  if (mine[0]) shm_unlink(mine); /* mapped by every rank of the host now, or never will be */
  free(names);
  return res;
}

void ringo_mailbox_free(ringoComm_t comm) {
  /* Links senders made for this rank that it never attached to: nobody else would free them. */
  for (int r = 0; comm->p2p && comm->mailbox && r < comm->nranks; r++) {
    if (comm->p2p[r].recv.link || r == comm->rank || !same_host(comm, r, comm->rank)) continue;
    struct mailbox_entry* e = mailbox_entry(comm, comm->rank, r);
    if (atomic_load_explicit(&e->posted, memory_order_acquire) && ringo_transport_shm.discard)
      ringo_transport_shm.discard(e->info);
  }
  for (int r = 0; comm->p2p && r < comm->nranks; r++) {
    struct ringo_conn* c[2] = {&comm->p2p[r].send, &comm->p2p[r].recv};
    for (int k = 0; k < 2; k++)
      if (c[k]->link) c[k]->tp->close(c[k]->link);
  }
  free(comm->p2p);
  comm->p2p = NULL;
  if (comm->mailbox) munmap(comm->mailbox, comm->mailbox_bytes);
  comm->mailbox = NULL;
}

/* ---- links made on first use ----
 * The sender makes a link, so its first message never waits for the receiver (a small message
 * outside a group is buffered like any other); the receiver attaches when the description is
 * there. */

static ringoResult_t check_same_host(const ringoComm_t comm, int peer, const struct ringo_transport* tp) {
  if (same_host(comm, comm->rank, peer)) return ringoSuccess;
  return ringo_fail(ringoInvalidUsage, "rank %d (host %s) and rank %d (host %s): a %s link needs both on one host",
                    comm->rank, comm->info[comm->rank].host, peer, comm->info[peer].host, tp->name);
}

/* The sender's end. Never waits. */
ringoResult_t ringo_mailbox_open_send(ringoComm_t comm, int peer) {
  struct ringo_conn* c = &comm->p2p[peer].send;
  if (c->link) return ringoSuccess;
  struct ringo_link_params p;
  ringo_comm_link_params(comm, peer, RINGO_CHANNEL_P2P, &p);
  RINGO_CHECK(ringo_comm_pick_transport(comm, peer, &c->tp));
  unsigned char info[RINGO_LINK_INFO_BYTES];
  c->peer = peer;
  if (c->tp->local_info) {
    c->tp->local_info(&p, info);
    return c->tp->send_connect(&p, info, &c->link);
  }
  RINGO_CHECK(check_same_host(comm, peer, c->tp));
  RINGO_CHECK(c->tp->send_setup(&p, &c->link, info));
  struct mailbox_entry* e = mailbox_entry(comm, peer, comm->rank);
  memcpy(e->info, info, sizeof info);
  atomic_store_explicit(&e->posted, 1, memory_order_release);
  return ringoSuccess;
}

/* The receiver's end: attach once the sender has posted its link. *ready = 0: not yet. */
ringoResult_t ringo_mailbox_try_open_recv(ringoComm_t comm, int peer, double* next_alive, int* ready) {
  struct ringo_conn* c = &comm->p2p[peer].recv;
  *ready = 1;
  if (c->link) return ringoSuccess;
  struct ringo_link_params p;
  ringo_comm_link_params(comm, peer, RINGO_CHANNEL_P2P, &p);
  RINGO_CHECK(ringo_comm_pick_transport(comm, peer, &c->tp));
  c->peer = peer;
  unsigned char info[RINGO_LINK_INFO_BYTES];
  if (c->tp->local_info) return c->tp->recv_setup(&p, &c->link, info);
  RINGO_CHECK(check_same_host(comm, peer, c->tp));
  struct mailbox_entry* e = mailbox_entry(comm, comm->rank, peer);
  if (atomic_load_explicit(&e->posted, memory_order_acquire) == 0) {
    *ready = 0;
    const double now = ringo_now();
    if (now < *next_alive) return ringoSuccess;
    *next_alive = now + MAILBOX_LIVENESS_S;
    /* A rank of this host whose communicator failed (a peer was killed, say) will not send: say why. */
    RINGO_CHECK(ringo_board_poisoned(comm));
    if (!ringo_wait_pid_gone(comm->info[peer].pid)) return ringoSuccess;
    /* A sender posts its link before its send returns, and shm keeps the link's segment for a
     * receiver that attaches after the sender left: so a sender that posted between the two loads
     * and then exited left its message behind. Only one gone with nothing posted never sent. */
    if (atomic_load_explicit(&e->posted, memory_order_acquire) == 0) {
      RINGO_CHECK(ringo_board_poisoned(comm)); /* it failed after the look above, then exited */
      return ringo_fail(ringoRemoteError, "rank %d (pid %d) exited while rank %d waited for it to send", peer,
                        (int)comm->info[peer].pid, comm->rank);
    }
    *ready = 1;
  }
  memcpy(info, e->info, sizeof info);
  RINGO_CHECK(c->tp->recv_connect(&p, info, &c->link));
  return c->tp->setup_done(c->link);
}

