/* comm.c — communicator life cycle: rendezvous, ring order, links, queries, last-error messages.
 * Uses bootstrap.c for the rendezvous and one transport per link. Tested by test/test_api.cc and
 * every multi-rank suite (test/test_collectives.cc). */
#include "comm/comm.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "comm/board.h"
#include "boot/bootstrap.h"
#include "device/device.h"
#include "engine/trace.h"

ringoResult_t ringo_comm_record(ringoComm_t comm, ringoResult_t res) {
  if (res == ringoSuccess || !comm) return res;
  while (atomic_flag_test_and_set_explicit(&comm->last_lock, memory_order_acquire)) sched_yield();
  const int next = 1 - atomic_load_explicit(&comm->last_slot, memory_order_relaxed);
  snprintf(comm->last_error[next], sizeof comm->last_error[next], "%s", ringo_thread_last_error());
  atomic_store_explicit(&comm->last_slot, next, memory_order_release);
  atomic_flag_clear_explicit(&comm->last_lock, memory_order_release);
  return res;
}

const char* ringo_comm_last_error(ringoComm_t comm) {
  return comm->last_error[atomic_load_explicit(&comm->last_slot, memory_order_acquire)];
}

ringoResult_t ringoGetVersion(int* version) {
  if (!version) return ringo_fail(ringoInvalidArgument, "ringoGetVersion: version is NULL");
  *version = RINGO_VERSION_CODE;
  return ringoSuccess;
}

ringoResult_t ringoGetUniqueId(ringoUniqueId* id) {
  if (!id) return ringo_fail(ringoInvalidArgument, "ringoGetUniqueId: id is NULL");
  return ringo_bootstrap_root_start(id);
}

/* Ranks of one host sit next to each other (hosts in order of their lowest rank, ranks in order
 * within a host), so only two links per host leave it. On one host this is the identity. */
static void order_ring(ringoComm_t comm, const struct ringo_rank_info* info) {
  int p = 0;
  for (int r = 0; r < comm->nranks; r++) {
    int first = 1; /* is r the lowest rank on its host? */
    for (int q = 0; q < r && first; q++) first = strcmp(info[q].host, info[r].host) != 0;
    if (!first) continue;
    for (int q = r; q < comm->nranks; q++)
      if (strcmp(info[q].host, info[r].host) == 0) comm->ring[p++] = q;
  }
  for (p = 0; p < comm->nranks; p++) comm->pos_of[comm->ring[p]] = p;
  comm->pos = comm->pos_of[comm->rank];
}

/* The one place a link's transport is chosen: peers on one host share memory (shm), peers on
 * different hosts talk MPI; RINGO_TRANSPORT=shm|mpi forces one kind for every link. */
ringoResult_t ringo_comm_pick_transport(const ringoComm_t comm, int peer, const struct ringo_transport** tp) {
  const struct ringo_rank_info *self = &comm->info[comm->rank], *other = &comm->info[peer];
  const char* forced = comm->env.transport;
  int same_host = strcmp(self->host, other->host) == 0;
  if (forced[0] && strcmp(forced, "shm") != 0 && strcmp(forced, "mpi") != 0)
    return ringo_fail(ringoInvalidArgument, "RINGO_TRANSPORT=%s: expected shm or mpi", forced);
  int want_mpi = forced[0] ? strcmp(forced, "mpi") == 0 : !same_host;
  if (!want_mpi) {
    *tp = &ringo_transport_shm;
    return ringoSuccess;
  }
#ifdef RINGO_HAVE_MPI
  if (comm->tctx) {
    *tp = &ringo_transport_mpi;
    return ringoSuccess;
  }
#endif
  return ringo_fail(ringoInvalidUsage, "rank %d (host %s) and rank %d (host %s) need an MPI link, but this "
                    "communicator has no MPI: create it with ringoCommInitMPI (library built with MPI)",
                    self->rank, self->host, other->rank, other->host);
}

/* 1 when the ranks of comm's rank infos are on more than one host. */
static int spans_hosts(const ringoComm_t comm) {
  for (int r = 1; r < comm->nranks; r++)
    if (strcmp(comm->info[r].host, comm->info[0].host) != 0) return 1;
  return 0;
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

void ringo_comm_link_params(const ringoComm_t comm, int peer, int channel, struct ringo_link_params* p) {
  /* A gather link carries one message per collective, and a rank runs at most one collective ahead
   * of a peer before it waits for it: two slots (connect_gather sizes them for their round). */
  const int gather = channel == RINGO_CHANNEL_GATHER;
  *p = (struct ringo_link_params){.slot_bytes = comm->slot_bytes, .nslots = gather ? 2 : comm->env.nslots,
                                  .timeout_s = comm->env.timeout_s, .abort_flag = &comm->abort_flag,
                                  .spin = comm->env.spin, .yield_s = comm->env.yield_us * 1e-6,
                                  .self_rank = comm->rank, .peer_rank = peer,
                                  .ctx = comm->tctx, .channel = channel, .net_turns = ringo_comm_net_turns(comm),
                                  .peer_pid = comm->info && strcmp(comm->info[peer].host, comm->info[comm->rank].host) == 0
                                                  ? comm->info[peer].pid : 0};
  if (channel == RINGO_CHANNEL_HOST_RING || channel == RINGO_CHANNEL_NET_RING) {
    p->interrupt = ring_next_poisoned;
    p->interrupt_ctx = comm;
  }
}

static void log_ring(ringoComm_t comm, const struct ringo_rank_info* info) {
  if (!ringo_log_enabled(RINGO_LEVEL_INFO, RINGO_LOG_INIT) || comm->rank != 0) return;
  char line[1024];
  size_t used = 0;
  for (int p = 0; p < comm->nranks && used < sizeof line - 64; p++)
    used += (size_t)snprintf(line + used, sizeof line - used, "%s%d(%s)", p ? " -> " : "", comm->ring[p],
                             info[comm->ring[p]].host);
  RINGO_INFO(RINGO_LOG_INIT, "ring of %d: %s -> back to %d; %zu-byte slots x %d", comm->nranks, line,
             comm->ring[0], comm->slot_bytes, comm->env.nslots);
}

/* The slot of a gather link of round k (its plan's slot): the fingerprint and the inputs that
 * cross in that round. */
static size_t gather_slot_bytes(const ringoComm_t comm, int k) {
  return RINGO_FINGERPRINT_BYTES + (size_t)ringo_gather_round_blocks(comm->nranks, k) * comm->gather_bytes;
}

/* The slot size of a link of channel whose plan has slot `slot`. */
static size_t plan_slot_bytes(const ringoComm_t comm, int channel, int slot) {
  if (channel == RINGO_CHANNEL_GATHER) return gather_slot_bytes(comm, slot);
  if (channel == RINGO_CHANNEL_HOST_RING) return comm->host_ring.slot_bytes;
  return comm->slot_bytes;
}

/* One directed link this rank is an end of: data flows from rank `from` to rank `to`. The
 * receiver allocates it and publishes its description in slot `slot` of its allgather block. */
struct link_plan {
  int from, to, slot;
  struct ringo_conn* conn;
};

/* Sets up every planned link: receivers allocate, one allgather spreads the descriptions
 * (slots_per_rank of them per rank), senders attach, and after a barrier names can go (nothing
 * is left in /dev/shm once the communicator exists). */
static ringoResult_t connect_plans(ringoComm_t comm, const struct ringo_rendezvous* rv, int channel,
                                   const struct link_plan* plans, int nplans, int slots_per_rank) {
  const size_t block = (size_t)slots_per_rank * RINGO_LINK_INFO_BYTES;
  char* mine = calloc(1, block);
  char* all = calloc((size_t)comm->nranks, block);
  ringoResult_t res = mine && all ? ringoSuccess : ringo_fail(ringoSystemError, "out of memory for link info");
  struct ringo_link_params p;
  for (int i = 0; res == ringoSuccess && i < nplans; i++) {
    const struct link_plan* l = &plans[i];
    const int peer = l->to == comm->rank ? l->from : l->to;
    res = ringo_comm_pick_transport(comm, peer, &l->conn->tp);
    l->conn->peer = peer;
    ringo_comm_link_params(comm, peer, channel, &p);
    p.slot_bytes = plan_slot_bytes(comm, channel, l->slot);
    if (res == ringoSuccess && l->to == comm->rank)
      res = l->conn->tp->recv_setup(&p, &l->conn->link, mine + (size_t)l->slot * RINGO_LINK_INFO_BYTES);
  }
  if (res == ringoSuccess) res = rv->allgather(rv->ctx, mine, block, all);
  for (int i = 0; res == ringoSuccess && i < nplans; i++) {
    const struct link_plan* l = &plans[i];
    ringo_comm_link_params(comm, l->to, channel, &p);
    p.slot_bytes = plan_slot_bytes(comm, channel, l->slot);
    if (l->from == comm->rank)
      res = l->conn->tp->send_connect(&p, all + (size_t)l->to * block + (size_t)l->slot * RINGO_LINK_INFO_BYTES,
                                      &l->conn->link);
  }
  if (res == ringoSuccess) res = rv->barrier(rv->ctx);
  for (int i = 0; res == ringoSuccess && i < nplans; i++) res = plans[i].conn->tp->setup_done(plans[i].conn->link);
  free(mine);
  free(all);
  return res;
}

/* The ring: a link from the previous position and one to the next. */
static ringoResult_t connect_ring(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  const int next = comm->ring[(comm->pos + 1) % comm->nranks];
  const int prev = comm->ring[(comm->pos + comm->nranks - 1) % comm->nranks];
  const struct link_plan plans[2] = {{prev, comm->rank, 0, &comm->recv}, {comm->rank, next, 0, &comm->send}};
  RINGO_CHECK(connect_plans(comm, rv, RINGO_CHANNEL_RING, plans, 2, 1));
  RINGO_INFO(RINGO_LOG_INIT, "rank %d: link from rank %d over %s, link to rank %d over %s", comm->rank, prev,
             comm->recv.tp->name, next, comm->send.tp->name);
  return ringoSuccess;
}

/* RINGO_ALGO=naive: the star a gather-to-root-and-broadcast baseline needs, rank 0 in the middle.
 * Rank 0 publishes the link from rank r in its slot r; rank r publishes the link from 0 in slot 0. */
static ringoResult_t connect_star(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  const int n = comm->nranks, me = comm->rank;
  if ((size_t)n * RINGO_LINK_INFO_BYTES > RINGO_BOOTSTRAP_MAX_BYTES)
    return ringo_fail(ringoInvalidUsage, "RINGO_ALGO=naive supports at most %d ranks",
                      (int)(RINGO_BOOTSTRAP_MAX_BYTES / RINGO_LINK_INFO_BYTES));
  comm->star_to = calloc((size_t)n, sizeof *comm->star_to);
  comm->star_from = calloc((size_t)n, sizeof *comm->star_from);
  struct link_plan* plans = calloc(2 * (size_t)n, sizeof *plans);
  ringoResult_t res = ringoSuccess;
  if (!comm->star_to || !comm->star_from || !plans) res = ringo_fail(ringoSystemError, "out of memory for the star");
  int np = 0;
  for (int r = 1; res == ringoSuccess && r < n; r++) {
    if (me != 0 && me != r) continue;
    const int peer = me == 0 ? r : 0;
    plans[np++] = (struct link_plan){r, 0, r, me == 0 ? &comm->star_from[peer] : &comm->star_to[peer]};
    plans[np++] = (struct link_plan){0, r, 0, me == 0 ? &comm->star_to[peer] : &comm->star_from[peer]};
  }
  if (res == ringoSuccess) res = connect_plans(comm, rv, RINGO_CHANNEL_STAR, plans, np, n);
  free(plans);
  return res;
}

/* Under RINGO_ALGO=auto, a communicator that leaves the host runs its small all-reduces on the gather
 * path: links to the ring positions 2^k away, made here. Its threshold is the smallest any rank allows
 * (as the board's), cut so one message stays within RINGO_SLICE_ACROSS_HOSTS and the links small. */
static ringoResult_t connect_gather(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  const int n = comm->nranks;
  uint64_t allowed = UINT64_MAX;
  for (int r = 0; r < n; r++) allowed = comm->info[r].oneshot_bytes < allowed ? comm->info[r].oneshot_bytes : allowed;
  const size_t cap = RINGO_SLICE_ACROSS_HOSTS / (size_t)ringo_gather_max_blocks(n) & ~(size_t)63;
  comm->gather_bytes = allowed < cap ? (size_t)allowed : cap;
  if (comm->gather_bytes == 0 || !ringo_comm_net_turns(comm) || comm->algo_naive) {
    comm->gather_bytes = 0;
    return ringoSuccess;
  }
  for (int d = 1; d < n; d <<= 1) comm->gather_rounds++;
  const int k = comm->gather_rounds;
  comm->gather_to = calloc((size_t)k, sizeof *comm->gather_to);
  comm->gather_from = calloc((size_t)k, sizeof *comm->gather_from);
  comm->gather_buf = malloc((size_t)n * comm->gather_bytes);
  struct link_plan* plans = calloc(2 * (size_t)k, sizeof *plans);
  ringoResult_t res = ringoSuccess;
  if (!comm->gather_to || !comm->gather_from || !comm->gather_buf || !plans)
    res = ringo_fail(ringoSystemError, "out of memory for the gather path's links");
  for (int i = 0, d = 1; res == ringoSuccess && i < k; i++, d <<= 1) {
    const int to = comm->ring[ringo_mod(comm->pos - d, n)], from = comm->ring[ringo_mod(comm->pos + d, n)];
    plans[2 * i] = (struct link_plan){comm->rank, to, i, &comm->gather_to[i]};
    plans[2 * i + 1] = (struct link_plan){from, comm->rank, i, &comm->gather_from[i]};
  }
  if (res == ringoSuccess) res = connect_plans(comm, rv, RINGO_CHANNEL_GATHER, plans, 2 * k, k);
  free(plans);
  if (res == ringoSuccess)
    RINGO_INFO(RINGO_LOG_INIT, "rank %d: gather path for all-reduces of up to %zu bytes, %d rounds", comm->rank,
               comm->gather_bytes, k);
  return res;
}

/* How many ranks each host holds where every host holds as many (ranks of one host are next to
 * each other in the ring, order_ring): 0 where they differ. */
static int ranks_per_host(const ringoComm_t comm) {
  const int n = comm->nranks;
  int per = 1;
  while (per < n && strcmp(comm->info[comm->ring[per]].host, comm->info[comm->ring[0]].host) == 0) per++;
  if (n % per != 0) return 0;
  for (int p = per; p < n; p++) {
    const char* host = comm->info[comm->ring[p]].host;
    if (strcmp(host, comm->info[comm->ring[p - p % per]].host) != 0) return 0; /* a block holds two hosts */
    if (p % per == 0 && strcmp(host, comm->info[comm->ring[p - 1]].host) == 0) return 0; /* a host, two blocks */
  }
  return per;
}

/* The two-level ring's links (comm.h): around the host, from and to the ring's neighbours within the
 * host block; across hosts, from and to the rank at the same place of the previous and next block. */
static ringoResult_t connect_two_level(ringoComm_t comm, const struct ringo_rendezvous* rv, size_t host_slot) {
  const int n = comm->nranks, per = ranks_per_host(comm);
  int every_auto = 1; /* from the rank infos, so every rank makes the same links */
  for (int r = 0; r < n; r++) every_auto &= comm->info[r].algo == RINGO_ALGO_AUTO;
  if (!every_auto || !comm->spans_hosts || per < 2 || per == n) return ringoSuccess;
  const int hosts = n / per, h = comm->pos / per, i = comm->pos % per;
  comm->host_ring = (struct ringo_ring_links){.n = per, .pos = i, .slot_bytes = host_slot};
  comm->net_ring = (struct ringo_ring_links){.n = hosts, .pos = h, .slot_bytes = comm->slot_bytes};
  const struct link_plan around[2] = {
      {comm->ring[h * per + ringo_mod(i - 1, per)], comm->rank, 0, &comm->host_ring.recv},
      {comm->rank, comm->ring[h * per + (i + 1) % per], 0, &comm->host_ring.send}};
  const struct link_plan across[2] = {
      {comm->ring[ringo_mod(h - 1, hosts) * per + i], comm->rank, 0, &comm->net_ring.recv},
      {comm->rank, comm->ring[(h + 1) % hosts * per + i], 0, &comm->net_ring.send}};
  RINGO_CHECK(connect_plans(comm, rv, RINGO_CHANNEL_HOST_RING, around, 2, 1));
  RINGO_CHECK(connect_plans(comm, rv, RINGO_CHANNEL_NET_RING, across, 2, 1));
  RINGO_INFO(RINGO_LOG_INIT, "rank %d: two-level ring, place %d of %d on host %d of %d: host ring over %s, "
             "across hosts from rank %d to rank %d over %s", comm->rank, i, per, h, hosts, comm->host_ring.send.tp->name,
             comm->net_ring.recv.peer, comm->net_ring.send.peer, comm->net_ring.send.tp->name);
  return ringoSuccess;
}

/* Calls fn on every link of comm's collectives: the ring, the two-level ring, the star and the
 * gather path (the point-to-point links are p2p.c's). The one list the close and the poison walk. */
static void each_coll_link(ringoComm_t comm, void (*fn)(struct ringo_conn*, void*), void* arg) {
  struct ringo_conn* rings[] = {&comm->send, &comm->recv, &comm->host_ring.send, &comm->host_ring.recv,
                                &comm->net_ring.send, &comm->net_ring.recv};
  for (size_t i = 0; i < sizeof rings / sizeof rings[0]; i++) fn(rings[i], arg);
  for (int r = 0; r < comm->nranks; r++) {
    if (comm->star_to) fn(&comm->star_to[r], arg);
    if (comm->star_from) fn(&comm->star_from[r], arg);
  }
  for (int k = 0; k < comm->gather_rounds; k++) {
    if (comm->gather_to) fn(&comm->gather_to[k], arg);
    if (comm->gather_from) fn(&comm->gather_from[k], arg);
  }
}

static void conn_close(struct ringo_conn* c, void* unused) {
  (void)unused;
  if (c->link) c->tp->close(c->link);
  c->link = NULL;
}

void ringo_comm_free(ringoComm_t comm) {
  if (!comm) return;
  /* The proxy runs host work over the links for queued device work: nothing may close under it. */
  if (!ringo_device_drain(comm)) {
    RINGO_WARN("rank %d: device work still queued after %.0f s without progress; the communicator is left "
               "allocated", comm->rank, comm->env.timeout_s);
    return;
  }
  /* The proxy goes first (device.c): it may be running host work over the links closed below. */
  if (!ringo_device_free(comm)) return;
  if (comm->trace && ringo_trace_close(comm->trace) != ringoSuccess)
    RINGO_WARN("rank %d: could not write RINGO_TRACE=%s: %s", comm->rank, comm->env.trace_path, ringo_thread_last_error());
  each_coll_link(comm, conn_close, NULL);
  ringo_p2p_free(comm);
  ringo_board_free(comm);
  free(comm->star_to);
  free(comm->star_from);
  free(comm->gather_to);
  free(comm->gather_from);
  free(comm->gather_buf);
  free(comm->scratch);
  if (comm->tctx_free) comm->tctx_free(comm->tctx);
  free(comm->info);
  free(comm->ring);
  free(comm->pos_of);
  free(comm);
}

struct poison { ringoResult_t res; const char* msg; };

static void conn_poison(struct ringo_conn* c, void* arg) {
  const struct poison* why = arg;
  if (c->link && c->tp->poison) c->tp->poison(c->link, why->res, why->msg);
}

/* Puts comm in error for good, keeping the message that says why. Failures can come from several
 * threads at once (the caller's, the proxy of staged collectives and device sends):
 * the first one's code and message stay, written before the code is published. */
static void set_error(ringoComm_t comm, ringoResult_t res) {
  ringo_comm_record(comm, res);
  int first = 0;
  if (!atomic_compare_exchange_strong(&comm->failing, &first, 1)) return;
  snprintf(comm->fail_error, sizeof comm->fail_error, "%s", ringo_thread_last_error());
  atomic_store_explicit(&comm->error, res, memory_order_release);
}

void ringo_comm_fail(ringoComm_t comm, ringoResult_t res) {
  set_error(comm, res);
  char msg[RINGO_POISON_MSG_BYTES];
  snprintf(msg, sizeof msg, "%s", ringo_thread_last_error());
  struct poison why = {res, msg};
  each_coll_link(comm, conn_poison, &why);
  ringo_board_poison(comm, res, msg);
  for (int r = 0; comm->p2p && r < comm->nranks; r++) {
    conn_poison(&comm->p2p[r].send, &why);
    conn_poison(&comm->p2p[r].recv, &why);
  }
}

ringoResult_t ringo_comm_scratch(ringoComm_t comm, size_t bytes, void** out) {
  if (bytes > comm->scratch_bytes) {
    void* grown = malloc(bytes); /* not realloc: nothing in it needs keeping */
    if (!grown)
      return ringo_fail(ringoSystemError, "rank %d: out of memory for %zu bytes of scratch (a two-level "
                        "reduce-scatter keeps one block per host)", comm->rank, bytes);
    free(comm->scratch);
    comm->scratch = grown;
    comm->scratch_bytes = bytes;
  }
  *out = comm->scratch;
  return ringoSuccess;
}

ringoResult_t ringo_comm_check_usable(ringoComm_t comm, const char* what) {
  if (!comm->ready && atomic_load(&comm->error) == ringoSuccess)
    return ringo_fail(ringoInvalidUsage, "%s: rank %d's communicator is still being created (its ringoCommInitRank "
                      "is queued in a group that has not ended)", what, comm->rank);
  ringoResult_t res = atomic_load(&comm->error);
  if (res == ringoSuccess) return ringoSuccess;
  return ringo_fail(ringoInvalidUsage, "%s: rank %d: communicator unusable after an earlier error (%s): %s; destroy "
                    "it and create a new one", what, comm->rank, ringoGetErrorString(res), comm->fail_error);
}

/* The largest input this rank lets small collectives post on the one-shot board: none when the
 * algorithm is forced or every link must go over MPI. */
static uint64_t oneshot_allowed(const ringoComm_t comm) {
  const int shm_ok = !comm->env.transport[0] || strcmp(comm->env.transport, "shm") == 0;
  if (strcmp(comm->env.algo, "auto") != 0 || !shm_ok) return 0;
  if (comm->env.oneshot_bytes != RINGO_ONESHOT_PER_PEER) return comm->env.oneshot_bytes;
  /* At most 64 KiB, where the ring wins from 8 ranks on (README): the board is 2·N times it. */
  const uint64_t per_peer = (uint64_t)4096 * (uint64_t)(comm->nranks - 1);
  return per_peer < (64u << 10) ? per_peer : (64u << 10);
}

/* The slot size every rank uses (the schedule slices chunks by it, so the ranks must agree): the
 * smallest RINGO_SLICE_BYTES any rank set, with a warning where they differ; unset everywhere, the
 * default for where the ring goes. Every rank computes it from the same rank infos. */
static ringoResult_t agreed_slice_bytes(const ringoComm_t comm, size_t* out, size_t* host_out) {
  uint64_t least = 0, most = 0;
  int unset = 0;
  for (int r = 0; r < comm->nranks; r++) {
    const uint64_t s = comm->info[r].slice_bytes;
    /* What env.c lets through: another process's word, never trusted to be a slice size. */
    if (s != 0 && (s % 64 != 0 || s < 256 || s > ((uint64_t)64 << 20)))
      return ringo_fail(ringoRemoteError, "rank %d reports a slice of %llu bytes (expected a multiple of 64 in "
                        "[256, 64M])", r, (unsigned long long)s);
    if (s && (!least || s < least)) least = s;
    if (s > most) most = s;
    unset += s == 0;
  }
  if (least && (least != most || unset) && comm->rank == 0)
    RINGO_WARN("ranks set RINGO_SLICE_BYTES differently (%llu .. %llu bytes%s): every rank uses %llu",
               (unsigned long long)least, (unsigned long long)most, unset ? ", or unset" : "", (unsigned long long)least);
  *out = least ? (size_t)least : ringo_comm_net_turns(comm) ? RINGO_SLICE_ACROSS_HOSTS : RINGO_SLICE_ONE_HOST;
  *host_out = least ? (size_t)least : RINGO_SLICE_ONE_HOST; /* a ring that stays on the host */
  return ringoSuccess;
}

/* RINGO_ALGO=naive makes links the others must make too: every rank or none. Every rank decides
 * from the same rank infos, so all fail alike, before any link is made. */
static ringoResult_t agreed_naive(const ringoComm_t comm) {
  int naive = 0;
  for (int r = 0; r < comm->nranks; r++) {
    const int32_t a = comm->info[r].algo;
    if (a != RINGO_ALGO_AUTO && a != RINGO_ALGO_RING && a != RINGO_ALGO_NAIVE)
      return ringo_fail(ringoRemoteError, "rank %d reports RINGO_ALGO code %d (expected 0..2)", r, (int)a);
    naive += a == RINGO_ALGO_NAIVE;
  }
  if (naive != 0 && naive != comm->nranks)
    return ringo_fail(ringoInvalidUsage, "RINGO_ALGO=naive is set on %d of the %d ranks: set it on every rank or on "
                      "none (this rank: %s)", naive, comm->nranks, comm->env.algo);
  return ringoSuccess;
}

static ringoResult_t comm_setup(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  const int32_t algo = comm->algo_naive ? RINGO_ALGO_NAIVE
                       : strcmp(comm->env.algo, "ring") == 0 ? RINGO_ALGO_RING : RINGO_ALGO_AUTO;
  struct ringo_rank_info mine = {.pid = (int32_t)getpid(), .rank = comm->rank, .oneshot_bytes = oneshot_allowed(comm),
                                 .slice_bytes = comm->env.slice_bytes, .algo = algo};
  snprintf(mine.host, sizeof mine.host, "%s", comm->env.hostname);
  comm->info = calloc((size_t)comm->nranks, sizeof *comm->info);
  comm->ring = calloc((size_t)comm->nranks, sizeof(int));
  comm->pos_of = calloc((size_t)comm->nranks, sizeof(int));
  if (!comm->info || !comm->ring || !comm->pos_of)
    return ringo_fail(ringoSystemError, "out of memory creating a communicator of %d ranks", comm->nranks);
  RINGO_CHECK(rv->allgather(rv->ctx, &mine, sizeof mine, comm->info));
  for (int r = 0; r < comm->nranks; r++) comm->info[r].host[sizeof comm->info[r].host - 1] = '\0';
  order_ring(comm, comm->info);
  comm->spans_hosts = spans_hosts(comm);
  RINGO_CHECK(agreed_naive(comm));
  size_t host_slot = 0;
  RINGO_CHECK(agreed_slice_bytes(comm, &comm->slot_bytes, &host_slot));
  if (comm->nranks > 1) RINGO_CHECK(connect_ring(comm, rv));
  if (comm->nranks > 1 && comm->algo_naive) RINGO_CHECK(connect_star(comm, rv));
  if (comm->nranks > 1) RINGO_CHECK(connect_gather(comm, rv));
  if (comm->nranks > 1) RINGO_CHECK(connect_two_level(comm, rv, host_slot));
  RINGO_CHECK(ringo_p2p_setup(comm, rv));
  RINGO_CHECK(ringo_board_setup(comm, rv));
  RINGO_CHECK(ringo_device_setup(comm, rv));
  log_ring(comm, comm->info);
  return ringoSuccess;
}

ringoComm_t ringo_comm_alloc(int nranks, int rank) {
  ringoComm_t comm = calloc(1, sizeof *comm);
  if (!comm) return NULL;
  comm->nranks = nranks;
  comm->rank = rank;
  comm->cuda_dev = -1;
  ringo_env_read(&comm->env);
  /* Until the ranks agree on it in comm_setup: what this rank asked for, or the one-host default. */
  comm->slot_bytes = comm->env.slice_bytes ? comm->env.slice_bytes : RINGO_SLICE_ONE_HOST;
  comm->algo_naive = strcmp(comm->env.algo, "naive") == 0;
  return comm;
}

/* Everything after the rendezvous is up: links, mailbox, trace. On failure the communicator is
 * left in error with what was made, for ringo_comm_free. */
static ringoResult_t comm_init(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  const int known = strcmp(comm->env.algo, "auto") == 0 || strcmp(comm->env.algo, "ring") == 0 || comm->algo_naive;
  ringoResult_t res = known ? ringoSuccess
                            : ringo_fail(ringoInvalidArgument, "RINGO_ALGO=%s: expected auto, ring or naive", comm->env.algo);
  if (res == ringoSuccess) res = comm_setup(comm, rv);
  if (res == ringoSuccess && comm->env.trace_path[0])
    res = ringo_trace_open(&comm->trace, comm->env.trace_path, comm->rank);
  if (res != ringoSuccess) {
    set_error(comm, res);
    return res;
  }
  comm->ready = 1;
  RINGO_INFO(RINGO_LOG_INIT, "rank %d of %d ready at ring position %d", comm->rank, comm->nranks, comm->pos);
  return ringoSuccess;
}

ringoResult_t ringo_comm_create(ringoComm_t* out, int nranks, int rank, const struct ringo_rendezvous* rv,
                                void* tctx, void (*tctx_free)(void*)) {
  ringoComm_t comm = ringo_comm_alloc(nranks, rank);
  if (!comm) {
    if (tctx_free) tctx_free(tctx);
    return ringo_fail(ringoSystemError, "out of memory creating a communicator");
  }
  comm->tctx = tctx;
  comm->tctx_free = tctx_free;
  ringoResult_t res = comm_init(comm, rv);
  if (res != ringoSuccess) {
    ringo_comm_free(comm);
    return res;
  }
  *out = comm;
  return ringoSuccess;
}

static ringoResult_t tcp_allgather(void* bs, const void* mine, size_t bytes, void* all) {
  return ringo_bootstrap_allgather(bs, mine, bytes, all);
}
static ringoResult_t tcp_barrier(void* bs) { return ringo_bootstrap_barrier(bs); }

ringoResult_t ringo_comm_init_tcp(ringoComm_t comm, const ringoUniqueId* id) {
  struct ringo_bootstrap* bs = NULL;
  ringoResult_t res = ringo_bootstrap_init(id, comm->nranks, comm->rank, comm->env.timeout_s, &bs);
  if (res != ringoSuccess) {
    set_error(comm, res);
    return res;
  }
  const struct ringo_rendezvous rv = {bs, tcp_allgather, tcp_barrier};
  res = comm_init(comm, &rv);
  ringo_bootstrap_close(bs);
  return res;
}

ringoResult_t ringoCommInitRank(ringoComm_t* out, int nranks, ringoUniqueId id, int rank) {
  ringo_thread_clear_error();
  if (!out) return ringo_fail(ringoInvalidArgument, "ringoCommInitRank: comm is NULL");
  *out = NULL;
  if (nranks < 1) return ringo_fail(ringoInvalidArgument, "ringoCommInitRank: nranks %d < 1", nranks);
  if (rank < 0 || rank >= nranks)
    return ringo_fail(ringoInvalidArgument, "ringoCommInitRank: rank %d out of range [0, %d)", rank, nranks);
  ringoComm_t comm = ringo_comm_alloc(nranks, rank);
  if (!comm) return ringo_fail(ringoSystemError, "ringoCommInitRank: out of memory");
  ringoResult_t res;
  if (ringo_group_enqueue_init(comm, &id, &res)) { /* inside a group: created at ringoGroupEnd */
    if (res == ringoSuccess) *out = comm;
    else ringo_comm_free(comm);
    return res;
  }
  res = ringo_comm_init_tcp(comm, &id);
  if (res != ringoSuccess) {
    ringo_comm_free(comm);
    return res;
  }
  *out = comm;
  return ringoSuccess;
}

struct init_job {
  ringoComm_t* comm;
  int nranks, rank;
  int dev; /* CUDA device to bind, or -1 */
  ringoUniqueId id;
  ringoResult_t res;
  char error[RINGO_ERROR_BYTES];
};

static void* init_thread(void* arg) {
  struct init_job* job = arg;
  job->res = job->dev >= 0 ? ringo_device_select(job->dev) : ringoSuccess;
  if (job->res == ringoSuccess) job->res = ringoCommInitRank(job->comm, job->nranks, job->id, job->rank);
  snprintf(job->error, sizeof job->error, "%s", ringo_thread_last_error());
  return NULL;
}

ringoResult_t ringoCommInitAll(ringoComm_t* comms, int ndev, const int* devlist) {
  ringo_thread_clear_error();
  if (!comms) return ringo_fail(ringoInvalidArgument, "ringoCommInitAll: comms is NULL");
  if (ndev < 1) return ringo_fail(ringoInvalidArgument, "ringoCommInitAll: ndev %d < 1", ndev);
  const int ndevices = devlist ? ringo_device_count() : 0;
  if (devlist && ndevices == 0)
    return ringo_fail(ringoUnhandledCudaError, "ringoCommInitAll: devlist names CUDA devices, but %s; pass "
                      "devlist = NULL for host ranks", ringo_device_count() == 0 ? "this process sees no CUDA device"
                                                                                 : "the CUDA path is unavailable");
  for (int i = 0; devlist && i < ndev; i++)
    if (devlist[i] < 0 || devlist[i] >= ndevices)
      return ringo_fail(ringoInvalidArgument, "ringoCommInitAll: devlist[%d] = %d, but the devices are 0..%d", i,
                        devlist[i], ndevices - 1);
  ringoUniqueId id;
  RINGO_CHECK(ringoGetUniqueId(&id));
  struct init_job* jobs = calloc((size_t)ndev, sizeof *jobs);
  pthread_t* threads = calloc((size_t)ndev, sizeof *threads);
  if (!jobs || !threads) {
    free(jobs);
    free(threads);
    return ringo_fail(ringoSystemError, "ringoCommInitAll: out of memory");
  }
  int started = 0;
  for (; started < ndev; started++) {
    jobs[started] = (struct init_job){.comm = &comms[started], .nranks = ndev, .rank = started, .id = id,
                                      .dev = devlist ? devlist[started] : -1};
    if (pthread_create(&threads[started], NULL, init_thread, &jobs[started]) != 0) break;
  }
  ringoResult_t res = started == ndev ? ringoSuccess : ringo_fail(ringoSystemError, "ringoCommInitAll: pthread_create failed");
  for (int i = 0; i < started; i++) {
    pthread_join(threads[i], NULL);
    if (res == ringoSuccess && jobs[i].res != ringoSuccess) res = ringo_annotate(jobs[i].res, "ringoCommInitAll: rank %d: %s", i, jobs[i].error);
  }
  /* One failed rank fails them all: the ring is incomplete without it. */
  for (int i = 0; res != ringoSuccess && i < started; i++) {
    ringo_comm_free(comms[i]);
    comms[i] = NULL;
  }
  free(jobs);
  free(threads);
  return res;
}

ringoResult_t ringoCommDestroy(ringoComm_t comm) {
  if (!comm) return ringo_fail(ringoInvalidArgument, "ringoCommDestroy: comm is NULL");
  ringo_comm_free(comm);
  return ringoSuccess;
}

ringoResult_t ringoCommAbort(ringoComm_t comm) {
  if (!comm) return ringo_fail(ringoInvalidArgument, "ringoCommAbort: comm is NULL");
  atomic_store(&comm->abort_flag, 1);
  ringo_device_abort(comm);
  /* A collective in another thread notices the flag within one sleep of its wait loop; it must
   * leave before the memory it uses goes away. */
  const struct timespec ms = {0, 1000000};
  while (atomic_load(&comm->inflight) > 0) nanosleep(&ms, NULL);
  ringo_comm_free(comm);
  return ringoSuccess;
}

#define QUERY(fn, type, what, expr)                                                          \
  ringoResult_t fn(const ringoComm_t comm, type* what) {                                     \
    if (!comm) return ringo_fail(ringoInvalidArgument, #fn ": comm is NULL");                \
    if (!what) return ringo_comm_record(comm, ringo_fail(ringoInvalidArgument, #fn ": " #what " is NULL")); \
    *what = (expr);                                                                          \
    return ringoSuccess;                                                                     \
  }
QUERY(ringoCommCount, int, count, comm->nranks)
QUERY(ringoCommUserRank, int, rank, comm->rank)
QUERY(ringoCommCuDevice, int, device, comm->cuda_dev)
/* Cheap and thread-safe: two loads (the device's error word is host memory the kernel writes). */
QUERY(ringoCommGetAsyncError, ringoResult_t, asyncError,
      atomic_load(&comm->error) != ringoSuccess ? atomic_load(&comm->error) : ringo_device_async_error(comm))
QUERY(ringoCommGetStats, ringoCommStats, stats,
      ((ringoCommStats){atomic_load_explicit(&comm->bytes_sent, memory_order_relaxed),
                        atomic_load_explicit(&comm->bytes_received, memory_order_relaxed),
                        atomic_load_explicit(&comm->collectives, memory_order_relaxed)}))

const char* ringoGetLastError(ringoComm_t comm) {
  return comm ? ringo_comm_last_error(comm) : ringo_thread_last_error();
}
