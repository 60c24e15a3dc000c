/* links.c — how a link of a communicator is made: which transport joins this rank to a peer, the
 * parameters every link gets (slots, timeout, abort flag, liveness, interrupt), and whom to blame
 * when a peer's segment is gone during setup. Used by comm.c at init and by mailbox.c for links made
 * on first use; tested by test/test_api.cc (RINGO_TRANSPORT) and the chaos test. */
#include <stdio.h>
#include <string.h>

#include "comm/links.h"

#include "comm/board.h"

/* The one place a link's transport is chosen, from the transports' table (transport.h): the first
 * that can connect the two ranks (shm on one host, MPI across hosts); RINGO_TRANSPORT=name forces
 * one for every link. */
ringoResult_t ringo_comm_pick_transport(const ringoComm_t comm, int peer, const struct ringo_transport** tp) {
  const struct ringo_rank_info *self = &comm->info[comm->rank], *other = &comm->info[peer];
  const char* forced = comm->env.transport;
  struct ringo_link_ends ends = {.same_host = strcmp(self->host, other->host) == 0, .has_net = comm->tctx != NULL,
                                 .forced = forced[0] != 0};
  if (forced[0]) {
    char names[64];
    *tp = ringo_transport_by_name(forced, names, sizeof names);
    if (!*tp) return ringo_fail(ringoInvalidArgument, "RINGO_TRANSPORT=%s: expected one of: %s", forced, names);
  } else {
    *tp = ringo_transport_pick(&ends);
  }
  if (*tp && (*tp)->can_connect(&ends)) return ringoSuccess;
  return ringo_fail(ringoInvalidUsage, "rank %d (host %s) and rank %d (host %s) need an MPI link, but this "
                    "communicator has no MPI: create it with ringoCommInitMPI (library built with MPI)",
                    self->rank, self->host, other->rank, other->host);
}

/* A two-level collective posts a mark on the ring link to the next rank (collectives.c, run_two_level_marked):
 * a next rank that called another collective names the mismatch there and poisons its links, but
 * this rank waits on its two-level links, whose peers may be blocked on it and fail no one. So those
 * waits also watch the ring link to the next rank (only the collective's thread waits on them). */
static ringoResult_t ring_next_poisoned(void* ctx) {
  const ringoComm_t comm = ctx;
  const struct ringo_conn* next = &comm->send;
  if (!next->link || !next->tp->peer_poisoned) return ringoSuccess;
  const ringoResult_t res = next->tp->peer_poisoned(next->link);
  if (res == ringoSuccess) return res;
  return ringo_annotate(res, "%s [seen by rank %d on its ring link to rank %d while on the two-level ring]",
                        ringo_thread_last_error(), comm->rank, next->peer);
}

/* A wait on the ring whose communicator has a board: a peer that posted another collective, count,
 * type, op or root for this op ends it (ringo_board_check_peers), even where the two ranks' slices
 * never meet (different roots, broadcast against reduce). */
static ringoResult_t board_mismatch(void* ctx) { return ringo_board_check_peers(ctx); }

void ringo_comm_link_params(const ringoComm_t comm, int peer, int channel, struct ringo_link_params* p) {
  /* A gather link carries one message per collective, and a rank runs at most one collective ahead
   * of a peer before it waits for it: two slots (connect_gather sizes them for their round). */
  const int gather = channel == RINGO_CHANNEL_GATHER;
  *p = (struct ringo_link_params){.slot_bytes = comm->slot_bytes, .nslots = gather ? 2 : comm->env.nslots,
                                  .timeout_s = comm->env.timeout_s, .abort_flag = &comm->abort_flag,
                                  .spin = comm->env.spin, .yield_s = comm->env.yield_us * 1e-6, .crowded = comm->crowded,
                                  .self_rank = comm->rank, .peer_rank = peer,
                                  .ctx = comm->tctx, .channel = channel, .net_turns = ringo_comm_net_turns(comm),
                                  .peer_pid = comm->info && strcmp(comm->info[peer].host, comm->info[comm->rank].host) == 0
                                                  ? comm->info[peer].pid : 0};
  if (channel == RINGO_CHANNEL_HOST_RING || channel == RINGO_CHANNEL_NET_RING) {
    p->interrupt = ring_next_poisoned;
    p->interrupt_ctx = comm;
  } else if (channel == RINGO_CHANNEL_RING) {
    p->interrupt = board_mismatch;
    p->interrupt_ctx = comm;
  }
}

ringoResult_t ringo_comm_setup_verdict(const struct ringo_rendezvous* rv, ringoResult_t res) {
  char why[RINGO_ERROR_BYTES];
  snprintf(why, sizeof why, "%s", ringo_thread_last_error());
  const ringoResult_t heard = rv->barrier(rv->ctx);
  return heard != ringoSuccess ? heard : ringo_fail(res, "%s", why);
}
