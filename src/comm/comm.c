/* comm.c — the communicator: what ranks agree on at init (ring order, slot sizes, algorithm), its
 * links (one transport each), the mailbox and board beside them, failure and poison, last errors. Tested by test/test_api.cc and
 * every multi-rank suite (test/test_collectives.cc). */
#include "comm/comm.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "comm/board.h"
#include "comm/mailbox.h"
#include "comm/links.h"
#include "boot/bootstrap.h"
#include "transport/segment.h"

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

/* The lowest CPU a rank may run on; a rank whose CPUs are unknown (none set) sorts first, as CPU -1. */
static int lowest_cpu(const struct ringo_rank_info* info) {
  for (int w = 0; w < RINGO_CPU_WORDS; w++)
    if (info->cpus[w]) return w * 64 + __builtin_ctzll(info->cpus[w]);
  return -1;
}

/* Whether the m ranks of one host at ring[0..m-1] outnumber the CPUs they may run on
 * (ringo_comm_cpus_fit says 0), from their infos alone, so every rank decides alike; masks holds m. */
static int host_crowded(const struct ringo_rank_info* info, const int* ring, int m, uint64_t (*masks)[RINGO_CPU_WORDS]) {
  for (int i = 0; i < m; i++) memcpy(masks[i], info[ring[i]].cpus, sizeof *masks);
  return ringo_comm_cpus_fit(masks, m) == 0;
}

/* Ranks of one host sit next to each other (hosts in order of their lowest rank), so only two links
 * per host leave it. Within a host whose ranks outnumber its CPUs, ranks that share a CPU sit next
 * to each other for the same reason: a hand-off within one CPU stays in its caches, one between
 * CPUs moves every line of the slice (docs/performance.md, "The ring's order"). Elsewhere rank
 * order stands, as mpirun's binding or a GPU's place may be what it follows. */
void ringo_comm_order_ring(const struct ringo_rank_info* info, int n, int* ring, uint64_t (*masks)[RINGO_CPU_WORDS]) {
  int by_cpu = 1, p = 0;
  for (int r = 0; r < n; r++) by_cpu &= info[r].ring_by_cpu == 1;
  for (int r = 0; r < n; r++) {
    int first = 1; /* is r the lowest rank on its host? */
    for (int q = 0; q < r && first; q++) first = strcmp(info[q].host, info[r].host) != 0;
    if (!first) continue;
    const int start = p;
    for (int q = r; q < n; q++)
      if (strcmp(info[q].host, info[r].host) == 0) ring[p++] = q;
    if (!by_cpu || !host_crowded(info, ring + start, p - start, masks)) continue;
    for (int i = start + 1; i < p; i++) { /* insertion sort, stable: a host has few ranks */
      const int q = ring[i];
      int at = i;
      for (; at > start && lowest_cpu(&info[ring[at - 1]]) > lowest_cpu(&info[q]); at--) ring[at] = ring[at - 1];
      ring[at] = q;
    }
  }
}

/* masks: scratch for n ranks' CPU masks, made before the exchange, so nothing here can fail on one
 * rank alone and leave it with a ring the others do not have. */
static void order_ring(ringoComm_t comm, const struct ringo_rank_info* info, uint64_t (*masks)[RINGO_CPU_WORDS]) {
  ringo_comm_order_ring(info, comm->nranks, comm->ring, masks);
  for (int p = 0; p < comm->nranks; p++) comm->pos_of[comm->ring[p]] = p;
  comm->pos = comm->pos_of[comm->rank];
  int asked = 0;
  for (int r = 0; r < comm->nranks; r++) asked += info[r].ring_by_cpu == 1;
  if (asked != 0 && asked != comm->nranks && comm->rank == 0)
    RINGO_WARN("RINGO_RING_ORDER is cpu on %d of the %d ranks and rank elsewhere: the ring goes by rank", asked,
               comm->nranks);
}

/* 1 when the ranks of comm's rank infos are on more than one host. */
static int spans_hosts(const ringoComm_t comm) {
  for (int r = 1; r < comm->nranks; r++)
    if (strcmp(comm->info[r].host, comm->info[0].host) != 0) return 1;
  return 0;
}

static int cpu_count(const uint64_t* cpus) {
  int c = 0;
  for (int w = 0; w < RINGO_CPU_WORDS; w++) c += __builtin_popcountll(cpus[w]);
  return c;
}

int ringo_comm_cpus_fit(uint64_t (*cpus)[RINGO_CPU_WORDS], int n) {
  for (int i = 0; i < n; i++)
    if (cpu_count(cpus[i]) == 0) return -1; /* a rank whose kernel would not say */
  for (int i = 1; i < n; i++) { /* by CPU count, insertion sort in place (no allocation to fail) */
    uint64_t mine[RINGO_CPU_WORDS];
    memcpy(mine, cpus[i], sizeof mine);
    int j = i;
    for (; j > 0 && cpu_count(mine) < cpu_count(cpus[j - 1]); j--) memcpy(cpus[j], cpus[j - 1], sizeof mine);
    memcpy(cpus[j], mine, sizeof mine);
  }
  uint64_t taken[RINGO_CPU_WORDS] = {0};
  for (int i = 0; i < n; i++) {
    const uint64_t* mine = cpus[i];
    int w = 0;
    while (w < RINGO_CPU_WORDS && !(mine[w] & ~taken[w])) w++;
    if (w == RINGO_CPU_WORDS) return 0;
    taken[w] |= (mine[w] & ~taken[w]) & -(mine[w] & ~taken[w]); /* its lowest free CPU */
  }
  return 1;
}

/* Whether this host's ranks of the communicator can each have a CPU of its own among those they may
 * run on (masks: scratch for their CPU masks): ranks that share one CPU set as many CPUs as ranks, or ranks pinned to distinct cores, as
 * mpirun binds them (1), or not (0). -1: not known. Hosts named by RINGO_HOSTNAME may be pretended
 * on one machine (bench/hosts.sh), whose CPUs the other "hosts" share. It decides two defaults:
 * unset RINGO_SPIN polls before yielding only where they fit (core.h says why), and waits keep
 * yielding, however slow a yield, only where they are known not to (ringo_yield, core.h). */
static int host_ranks_fit(const ringoComm_t comm, uint64_t (*masks)[RINGO_CPU_WORDS]) {
  char real[sizeof comm->info[0].host] = "";
  if (gethostname(real, sizeof real - 1) != 0 || strcmp(real, comm->info[comm->rank].host) != 0) return -1;
  int here = 0;
  for (int r = 0; r < comm->nranks; r++)
    if (strcmp(comm->info[r].host, comm->info[comm->rank].host) == 0)
      memcpy(masks[here++], comm->info[r].cpus, sizeof *masks);
  return ringo_comm_cpus_fit(masks, here);
}

/* This process's allowed CPUs as bits; all zero (fits nothing) where the kernel will not say. */
static void own_cpus(uint64_t* cpus) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return;
  for (int c = 0; c < CPU_SETSIZE && c < 64 * RINGO_CPU_WORDS; c++)
    if (CPU_ISSET(c, &set)) cpus[c / 64] |= 1ULL << (c % 64);
}

static void log_ring(ringoComm_t comm, const struct ringo_rank_info* info) {
  if (!ringo_log_enabled(RINGO_LEVEL_INFO, RINGO_LOG_INIT) || comm->rank != 0) return;
  char line[1024];
  size_t used = 0;
  for (int p = 0; p < comm->nranks && used < sizeof line - 64; p++) {
    const struct ringo_rank_info* at = &info[comm->ring[p]];
    char cpu[24] = ""; /* where the rank is bound to one CPU, which (the order's reason) */
    if (cpu_count(at->cpus) == 1) snprintf(cpu, sizeof cpu, ", CPU %d", lowest_cpu(at));
    used += (size_t)snprintf(line + used, sizeof line - used, "%s%d(%s%s)", p ? " -> " : "", comm->ring[p], at->host, cpu);
  }
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
    if (res == ringoRemoteError) res = ringo_comm_setup_verdict(rv, res); /* blame the first to fail */
  }
  if (res == ringoSuccess) res = rv->barrier(rv->ctx);
  for (int i = 0; res == ringoSuccess && i < nplans; i++) res = plans[i].conn->tp->setup_done(plans[i].conn->link);
  free(mine);
  free(all);
  return res;
}

/* The ring: a link from the previous position and one to the next. */
ringoResult_t ringo_comm_connect_ring(ringoComm_t comm, const struct ringo_rendezvous* rv) {
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
ringoResult_t ringo_comm_connect_star(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  if (comm->algo != RINGO_ALGO_NAIVE) return ringoSuccess; /* only RINGO_ALGO=naive runs over the star */
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
ringoResult_t ringo_comm_connect_gather(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  const int n = comm->nranks;
  uint64_t allowed = UINT64_MAX;
  for (int r = 0; r < n; r++) allowed = comm->info[r].oneshot_bytes < allowed ? comm->info[r].oneshot_bytes : allowed;
  const size_t cap = RINGO_SLICE_ACROSS_HOSTS / (size_t)ringo_gather_max_blocks(n) & ~(size_t)63;
  comm->gather_bytes = allowed < cap ? (size_t)allowed : cap;
  if (comm->gather_bytes == 0 || !ringo_comm_net_turns(comm) || comm->algo == RINGO_ALGO_NAIVE) {
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
ringoResult_t ringo_comm_connect_two_level(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  const size_t host_slot = comm->host_slot_bytes;
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
  const int failed = atomic_load(&comm->error) != ringoSuccess || !comm->ready;
  each_coll_link(comm, conn_close, NULL);
  ringo_mailbox_free(comm);
  ringo_board_free(comm);
  /* A peer that was killed may have left a segment only it knew the name of. */
  if (failed && comm->nranks > 1) ringo_segment_sweep_stale();
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
void ringo_comm_set_error(ringoComm_t comm, ringoResult_t res) {
  ringo_comm_record(comm, res);
  int first = 0;
  if (!atomic_compare_exchange_strong(&comm->failing, &first, 1)) return;
  snprintf(comm->fail_error, sizeof comm->fail_error, "%s", ringo_thread_last_error());
  atomic_store_explicit(&comm->error, res, memory_order_release);
}

void ringo_comm_fail(ringoComm_t comm, ringoResult_t res) {
  ringo_comm_set_error(comm, res);
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

/* The board's algorithms need RINGO_ALGO=auto and shared memory (not every link forced over MPI). */
static int board_algos_allowed(const ringoComm_t comm) {
  const int shm_ok = !comm->env.transport[0] || strcmp(comm->env.transport, "shm") == 0;
  return comm->algo == RINGO_ALGO_AUTO && shm_ok;
}

/* The largest input this rank lets small collectives post on the one-shot board. */
static uint64_t oneshot_allowed(const ringoComm_t comm) {
  if (!board_algos_allowed(comm)) return 0;
  if (comm->env.oneshot_bytes != RINGO_ONESHOT_PER_PEER) return comm->env.oneshot_bytes;
  /* At most 64 KiB, where the ring wins from 8 ranks on (docs/performance.md): the board is 2·N times it. */
  const uint64_t per_peer = (uint64_t)4096 * (uint64_t)(comm->nranks - 1);
  return per_peer < (64u << 10) ? per_peer : (64u << 10);
}

uint64_t ringo_comm_twophase_round_default(int nranks) {
  const uint64_t share = RINGO_TWOPHASE_BOARD_BYTES / (2 * (uint64_t)nranks) & ~(uint64_t)4095;
  return share > 4096 ? share : 4096;
}

uint64_t ringo_comm_twophase_default(int nranks) {
  const uint64_t share = ringo_comm_twophase_round_default(nranks);
  const uint64_t most = nranks == 3 ? RINGO_TWOPHASE_N3_BYTES : RINGO_TWOPHASE_MAX_BYTES;
  const uint64_t total = RINGO_TWOPHASE_TOTAL_BYTES / (uint64_t)nranks & ~(uint64_t)4095;
  const uint64_t least = share < most ? share : most;
  return total < least ? total : least;
}

/* The largest all-reduce input this rank lets run in two phases on the board, under the same rules
 * as the one-shot's. */
static uint64_t twophase_allowed(const ringoComm_t comm) {
  if (!board_algos_allowed(comm)) return 0;
  if (comm->env.twophase_bytes != RINGO_TWOPHASE_DEFAULT) return comm->env.twophase_bytes;
  return ringo_comm_twophase_default(comm->nranks);
}

static uint64_t twophase_round_allowed(const ringoComm_t comm) {
  if (comm->env.twophase_round_bytes != RINGO_TWOPHASE_DEFAULT) return comm->env.twophase_round_bytes;
  return ringo_comm_twophase_round_default(comm->nranks);
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

/* RINGO_ALGO and RINGO_RING_ORDER, checked once the ranks have exchanged their infos, so a value
 * unknown on some ranks fails every rank by name instead of leaving the others waiting on them; a
 * code no ringo sends is the peer's word (ringoRemoteError). */
static ringoResult_t known_settings(const ringoComm_t comm) {
  if (comm->algo < 0)
    return ringo_fail(ringoInvalidArgument, "RINGO_ALGO=%s: expected auto, ring or naive", comm->env.algo);
  if (comm->ring_by_cpu < 0)
    return ringo_fail(ringoInvalidArgument, "RINGO_RING_ORDER=%s: expected cpu or rank", comm->env.ring_order);
  for (int r = 0; r < comm->nranks; r++) {
    const int32_t a = comm->info[r].algo;
    if (a == -1)
      return ringo_fail(ringoInvalidArgument, "rank %d has RINGO_ALGO set to a value other than auto, ring or naive", r);
    if (a != RINGO_ALGO_AUTO && a != RINGO_ALGO_RING && a != RINGO_ALGO_NAIVE)
      return ringo_fail(ringoRemoteError, "rank %d reports RINGO_ALGO code %d (expected 0..2)", r, (int)a);
    if (comm->info[r].ring_by_cpu == -1)
      return ringo_fail(ringoInvalidArgument, "rank %d has RINGO_RING_ORDER set to a value other than cpu or rank", r);
    if (comm->info[r].ring_by_cpu != 0 && comm->info[r].ring_by_cpu != 1)
      return ringo_fail(ringoRemoteError, "rank %d reports RINGO_RING_ORDER code %d (expected 0 or 1)", r,
                        (int)comm->info[r].ring_by_cpu);
  }
  return ringoSuccess;
}

/* RINGO_ALGO=naive makes links the others must make too: every rank or none. Every rank decides
 * from the same rank infos, so all fail alike, before any link is made. */
static ringoResult_t agreed_naive(const ringoComm_t comm) {
  int naive = 0; /* every code is known here (known_settings) */
  for (int r = 0; r < comm->nranks; r++) naive += comm->info[r].algo == RINGO_ALGO_NAIVE;
  if (naive != 0 && naive != comm->nranks)
    return ringo_fail(ringoInvalidUsage, "RINGO_ALGO=naive is set on %d of the %d ranks: set it on every rank or on "
                      "none (this rank: %s)", naive, comm->nranks, comm->env.algo);
  return ringoSuccess;
}

ringoResult_t ringo_comm_setup(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  const int32_t algo = comm->algo;
  struct ringo_rank_info mine = {.pid = (int32_t)getpid(), .rank = comm->rank, .oneshot_bytes = oneshot_allowed(comm),
                                 .twophase_bytes = twophase_allowed(comm), .twophase_round_bytes = twophase_round_allowed(comm),
                                 .slice_bytes = comm->env.slice_bytes, .algo = algo,
                                 .ring_by_cpu = comm->ring_by_cpu};
  snprintf(mine.host, sizeof mine.host, "%s", comm->env.hostname);
  own_cpus(mine.cpus);
  comm->info = calloc((size_t)comm->nranks, sizeof *comm->info);
  comm->ring = calloc((size_t)comm->nranks, sizeof(int));
  comm->pos_of = calloc((size_t)comm->nranks, sizeof(int));
  /* Scratch for the CPU masks of order_ring and host_ranks_fit, made before the exchange. */
  uint64_t(*masks)[RINGO_CPU_WORDS] = malloc((size_t)comm->nranks * sizeof *masks);
  if (!comm->info || !comm->ring || !comm->pos_of || !masks) {
    free(masks);
    return ringo_fail(ringoSystemError, "out of memory creating a communicator of %d ranks", comm->nranks);
  }
  if (comm->nranks > 1) ringo_segment_sweep_stale(); /* what killed jobs of this user left */
  ringoResult_t res = rv->allgather(rv->ctx, &mine, sizeof mine, comm->info);
  for (int r = 0; res == ringoSuccess && r < comm->nranks; r++) comm->info[r].host[sizeof comm->info[r].host - 1] = '\0';
  if (res == ringoSuccess) res = known_settings(comm);
  int fit = -1;
  if (res == ringoSuccess) {
    order_ring(comm, comm->info, masks);
    fit = host_ranks_fit(comm, masks);
  }
  free(masks);
  RINGO_CHECK(res);
  comm->spans_hosts = spans_hosts(comm);
  if (comm->env.spin < 0) comm->env.spin = fit == 1 ? RINGO_SPIN_FIT : 0;
  comm->crowded = fit == 0;
  RINGO_CHECK(agreed_naive(comm));
  RINGO_CHECK(agreed_slice_bytes(comm, &comm->slot_bytes, &comm->host_slot_bytes));
  /* The algorithms' links come next, from engine/select.c's table. */
  return ringo_mailbox_setup(comm, rv);
}

void ringo_comm_log_ring(const ringoComm_t comm) { log_ring(comm, comm->info); }

ringoComm_t ringo_comm_alloc(int nranks, int rank) {
  ringoComm_t comm = calloc(1, sizeof *comm);
  if (!comm) return NULL;
  comm->nranks = nranks;
  comm->rank = rank;
  comm->cuda_dev = -1;
  ringo_env_read(&comm->env);
  /* Until the ranks agree on it in comm_setup: what this rank asked for, or the one-host default. */
  comm->slot_bytes = comm->env.slice_bytes ? comm->env.slice_bytes : RINGO_SLICE_ONE_HOST;
  /* RINGO_ALGO's one reading: what the ranks agree on at init and the engine's table obeys. */
  comm->algo = strcmp(comm->env.algo, "auto") == 0    ? RINGO_ALGO_AUTO
               : strcmp(comm->env.algo, "ring") == 0  ? RINGO_ALGO_RING
               : strcmp(comm->env.algo, "naive") == 0 ? RINGO_ALGO_NAIVE
                                                      : -1;
  comm->ring_by_cpu = strcmp(comm->env.ring_order, "cpu") == 0 ? 1 : strcmp(comm->env.ring_order, "rank") == 0 ? 0 : -1;
  return comm;
}

