/* board.c — the one-shot board (board.h): one shared-memory segment per single-host communicator,
 * made by rank 0 at init, where ranks post small collectives' inputs and fingerprints.
 * Tested by test/test_oneshot.cc (results, mismatches, timeouts, poison, a dead peer). */
#include <assert.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "comm/board.h"

#include "core/wait.h"
#include "transport/segment.h"

/* The segment (every offset computed here from nranks and the capacity, never read from it):
 *
 *   struct board_header   magic; the bell and its sleepers; the poison
 *   struct board_rank[N]  per rank, on its own cache line: ops posted, ops done
 *   fingerprints          [rank][side], 64 bytes each
 *   data                  [side][rank], capacity bytes each, rounded up to 64
 *
 * posted and done count ops (op b posted: posted >= b + 1), so 0 means none. A waiter that has
 * polled and yielded long enough sleeps on the bell; a rank that moves either counter rings the
 * bell when anyone sleeps (bell_ring).
 *
 * Rotating slots: a rank writes its op's data at an offset into its slot that it publishes before it
 * posts, moving on by the op's size each op and wrapping at a span (rotate_span). A line that a peer
 * read one or two ops ago still sits in that peer's cache, and a store to it waits for the peer's
 * copy to be invalidated: on the 2-core VM a 32 KiB copy into the slot took 3-15x as long as into
 * private memory, while lines last read a span ago (out of the peer's L2) write nearly as fast (the
 * two-phase all-reduce at N = 2, 8-128 KiB: 1.4-2.0x; docs/peers.md). Below
 * RINGO_BOARD_ROTATE_MIN_BYTES the ops stay at offset 0, where small posts are cache-hot, and where
 * ranks outnumber the CPUs they take turns on the cores and it measured no gain. */

#define BOARD_MAGIC 0x52474e42u  /* arbitrary: marks a ringo board */
#define BOARD_LINE 64
#define BOARD_POLLS 100          /* plain loads before a waiter yields (on top of RINGO_SPIN) */
#define BOARD_SLEEP_NS 5000000L  /* one futex sleep: short, so every condition is re-checked */
#define BOARD_NET_SLEEP_NS 20000L /* the same where the wait takes MPI's turns (transport.h) */
#define BOARD_LIVENESS_S 0.1     /* how often a waiter asks whether the awaited process exists */

struct board_header {
  uint32_t magic, nranks;
  uint64_t capacity;
  _Alignas(BOARD_LINE) atomic_uint bell;
  atomic_uint sleepers;
  _Alignas(BOARD_LINE) atomic_uint poisoned; /* 0; 2 while one rank writes the message; 1 once written */
  _Atomic int32_t poison_code;
  char poison_msg[RINGO_POISON_MSG_BYTES];
};

struct board_rank {
  _Alignas(BOARD_LINE) _Atomic uint64_t posted;
  _Atomic uint64_t reduced; /* two-phase ops whose own chunk this rank has reduced into its slot */
  _Atomic uint64_t done;
  _Atomic uint64_t offset[2]; /* where this rank's data of the op on each side begins in its slot */
};

struct ringo_board {
  void* base;
  size_t bytes, capacity, stride; /* stride: a data slot, the capacity rounded up to a cache line */
  size_t oneshot_limit, twophase_limit; /* the largest input per rank of each algorithm (agreed) */
  size_t twophase_round;                /* the most one round of a two-phase all-reduce posts (agreed) */
  int nranks;
  size_t span;   /* the first bytes of each slot that ops rotate through (0: they do not) */
  size_t cursor; /* this rank's next offset in its slots when rotating */
  struct board_header* hdr;
  struct board_rank* ranks;
  unsigned char* fingerprints;
  unsigned char* data;
};

static size_t board_round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

static size_t fingerprints_off(int n) {
  return board_round_up(sizeof(struct board_header), BOARD_LINE) + (size_t)n * sizeof(struct board_rank);
}
static size_t data_off(int n) { return fingerprints_off(n) + (size_t)n * 2 * RINGO_FINGERPRINT_BYTES; }
static size_t board_bytes(int n, size_t capacity) {
  return board_round_up(data_off(n) + 2 * (size_t)n * board_round_up(capacity, BOARD_LINE), 4096);
}

static void lay_out(struct ringo_board* bd, void* base) {
  bd->base = base;
  bd->hdr = base;
  bd->ranks = (struct board_rank*)((char*)base + board_round_up(sizeof(struct board_header), BOARD_LINE));
  bd->fingerprints = (unsigned char*)base + fingerprints_off(bd->nranks);
  bd->data = (unsigned char*)base + data_off(bd->nranks);
}

static unsigned char* fingerprint_slot(const struct ringo_board* bd, int r, uint64_t b) {
  return bd->fingerprints + ((size_t)r * 2 + (size_t)(b % 2)) * RINGO_FINGERPRINT_BYTES;
}
static unsigned char* data_slot(const struct ringo_board* bd, int r, uint64_t b) {
  return bd->data + ((size_t)(b % 2) * (size_t)bd->nranks + (size_t)r) * bd->stride;
}

size_t ringo_board_data_offset(const struct ringo_board* bd, int r, uint64_t b) {
  return (size_t)atomic_load_explicit(&bd->ranks[r].offset[b % 2], memory_order_relaxed);
}

/* Rank r's data of op b: its slot at the offset it published before posting op b (read after the
 * post or reduced mark was seen, whose sequentially consistent store ordered it). */
static const unsigned char* posted_data(const struct ringo_board* bd, int r, uint64_t b) {
  return data_slot(bd, r, b) + ringo_board_data_offset(bd, r, b);
}

/* Posts under BOARD_SMALL_POST rotate through at most BOARD_SMALL_SPAN of the span: the largest
 * span they were measured to gain in (a 2 MiB one made 8 KiB posts 6x slower and 16-128 KiB ones
 * no slower than a 1 MiB one, docs/peers.md). */
#define BOARD_SMALL_POST ((size_t)16 << 10)
#define BOARD_SMALL_SPAN ((size_t)1 << 20)

/* Where this rank writes an op of `bytes` (header comment: rotating slots). */
static size_t next_offset(struct ringo_board* bd, size_t bytes) {
  const size_t span = bytes < BOARD_SMALL_POST && bd->span > BOARD_SMALL_SPAN ? BOARD_SMALL_SPAN : bd->span;
  if (bytes < RINGO_BOARD_ROTATE_MIN_BYTES || bytes > span) return 0;
  size_t off = board_round_up(bd->cursor, BOARD_LINE);
  if (off + bytes > span) off = 0;
  bd->cursor = off + bytes;
  return off;
}

/* The span ops rotate through: RINGO_BOARD_ROTATE, or unset, where this host's ranks (all the
 * board's) fit its online CPUs, the L2's size (the lines a peer read must have left its L2; twice
 * that measured slower at 8 KiB, half of it gained a third as much). At most the capacity. */
static size_t rotate_span(const ringoComm_t comm, size_t capacity) {
  size_t span = comm->env.board_rotate;
  if (span == RINGO_BOARD_ROTATE_AUTO) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    span = cpus > 0 && comm->nranks <= cpus ? (l2 > 0 ? (size_t)l2 : (size_t)1 << 20) : 0;
  }
  return span < capacity ? span : capacity;
}

/* Maps every page of the span of every slot into this process now, writing its own (which makes
 * them), so that the first trips through the span do not take a page fault per page in the middle
 * of a collective (16-64 KiB all-reduces 2-4x slower over the first 25 calls, before this). */
static void prefault_span(const struct ringo_board* bd, int me) {
  const long page = sysconf(_SC_PAGESIZE);
  const size_t step = page > 0 ? (size_t)page : 4096;
  for (uint64_t side = 0; side < 2; side++)
    for (int r = 0; r < bd->nranks; r++) {
      volatile unsigned char* p = data_slot(bd, r, side);
      for (size_t off = 0; off < bd->span; off += step) {
        if (r == me) p[off] = 0;
        else (void)p[off];
      }
    }
}

size_t ringo_board_span_pages_absent(const struct ringo_board* bd) {
  const long page = sysconf(_SC_PAGESIZE);
  const size_t step = page > 0 ? (size_t)page : 4096;
  size_t absent = 0;
  unsigned char in_core = 0;
  for (uint64_t side = 0; side < 2; side++)
    for (int r = 0; r < bd->nranks; r++)
      for (size_t off = 0; off < bd->span; off += step) {
        unsigned char* p = data_slot(bd, r, side) + off;
        void* page_start = (void*)((uintptr_t)p & ~(uintptr_t)(step - 1));
        absent += mincore(page_start, step, &in_core) != 0 || !(in_core & 1);
      }
  return absent;
}

size_t ringo_board_oneshot_limit(const struct ringo_board* board) { return board->oneshot_limit; }
size_t ringo_board_twophase_limit(const struct ringo_board* board) { return board->twophase_limit; }
size_t ringo_board_twophase_round(const struct ringo_board* board) { return board->twophase_round; }
size_t ringo_board_bytes(const struct ringo_board* board) { return board->bytes; }
size_t ringo_board_rotate_span(const struct ringo_board* board) { return board->span; }

/* ---- setup ---- */

/* The largest input every rank allows one of the board's algorithms (the smallest), with a warning
 * where they differ; `what` names the knob. */
static size_t agreed_limit(const ringoComm_t comm, size_t offset, const char* what) {
  uint64_t cap = UINT64_MAX, first = 0;
  for (int r = 0; r < comm->nranks; r++) {
    uint64_t v;
    memcpy(&v, (const char*)&comm->info[r] + offset, sizeof v);
    if (r == 0) first = v;
    if (v < cap) cap = v;
    if (v != first && comm->rank == 0)
      RINGO_WARN("ranks differ in %s (or RINGO_ALGO, RINGO_TRANSPORT): rank %d allows %llu bytes, rank 0 %llu; "
                 "every rank uses the smallest", what, r, (unsigned long long)v, (unsigned long long)first);
  }
  return (size_t)cap;
}

/* The limits every rank allows, or 0 when the board cannot serve this ring (ranks on other hosts);
 * *round: the two-phase slot, the larger of which runs in rounds. */
static int agreed_limits(const ringoComm_t comm, size_t* oneshot, size_t* twophase, size_t* round) {
  *oneshot = *twophase = *round = 0;
  for (int r = 0; r < comm->nranks; r++)
    if (strcmp(comm->info[r].host, comm->info[0].host) != 0) return 0;
  *oneshot = agreed_limit(comm, offsetof(struct ringo_rank_info, oneshot_bytes), "RINGO_ONESHOT_BYTES");
  *twophase = agreed_limit(comm, offsetof(struct ringo_rank_info, twophase_bytes), "RINGO_TWOPHASE_BYTES");
  *round = agreed_limit(comm, offsetof(struct ringo_rank_info, twophase_round_bytes), "RINGO_TWOPHASE_ROUND_BYTES");
  if (*round > *twophase) *round = *twophase;
  return *oneshot > 0 || *twophase > 0;
}

/* Rank 0 makes the segment; "" when it could not (its reason logged). */
static void create_board(const ringoComm_t comm, size_t bytes, size_t cap, char name[64], void** base) {
  if (ringo_segment_create(bytes, name, base) != ringoSuccess) {
    RINGO_WARN("rank 0: no one-shot board, small collectives run on the ring: %s", ringo_thread_last_error());
    ringo_thread_clear_error();
    name[0] = '\0';
    return;
  }
  struct board_header* h = *base;
  h->magic = BOARD_MAGIC;
  h->nranks = (uint32_t)comm->nranks;
  h->capacity = cap;
}

/* Another rank maps rank 0's segment and checks it is this communicator's; 0 when it cannot. */
static int attach_board(const ringoComm_t comm, const char* name, size_t bytes, size_t cap, void** base) {
  if (ringo_segment_attach(name, bytes, base) == ringoSuccess) {
    const struct board_header* h = *base;
    if (h->magic == BOARD_MAGIC && h->nranks == (uint32_t)comm->nranks && h->capacity == cap) return 1;
    ringo_fail(ringoRemoteError, "the segment does not match this communicator");
    munmap(*base, bytes);
    *base = NULL;
  }
  RINGO_WARN("rank %d: no one-shot board, small collectives run on the ring: %s", comm->rank, ringo_thread_last_error());
  ringo_thread_clear_error();
  return 0;
}

/* The board only saves time: when one rank cannot have it (/dev/shm full, say), no rank uses it.
 * Two allgathers: rank 0's segment name, then whether every rank mapped it (after which the name
 * can go: mapped by every rank, or by none). */
ringoResult_t ringo_board_setup(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  size_t oneshot, twophase, round;
  if (comm->nranks < 2 || !agreed_limits(comm, &oneshot, &twophase, &round)) return ringoSuccess;
  const size_t cap = oneshot > round ? oneshot : round;
  const size_t bytes = board_bytes(comm->nranks, cap);
  const size_t n = (size_t)comm->nranks;
  char mine[64] = {0};
  char* names = calloc(n, sizeof mine);
  unsigned char* oks = calloc(n, 1);
  struct ringo_board* bd = calloc(1, sizeof *bd);
  void* base = NULL;
  if (!names || !oks || !bd) { /* the others' rendezvous ends in its timeout */
    free(names);
    free(oks);
    free(bd);
    return ringo_fail(ringoSystemError, "out of memory for the one-shot board");
  }
  if (comm->rank == 0) create_board(comm, bytes, cap, mine, &base);
  ringoResult_t res = rv->allgather(rv->ctx, mine, sizeof mine, names);
  unsigned char ok = res == ringoSuccess && names[0] != '\0';
  if (ok && comm->rank != 0) {
    names[sizeof mine - 1] = '\0';
    ok = (unsigned char)attach_board(comm, names, bytes, cap, &base);
  }
  /* Every rank takes part in the second allgather, even after a failure of its own. */
  const ringoResult_t all = rv->allgather(rv->ctx, &ok, 1, oks);
  if (res == ringoSuccess) res = all;
  if (mine[0]) shm_unlink(mine);
  for (size_t r = 0; res == ringoSuccess && r < n; r++) ok = ok && oks[r];
  if (res == ringoSuccess && !ok && base && comm->rank == 0)
    RINGO_WARN("rank 0: a rank could not map the one-shot board; small collectives run on the ring");
  if (res == ringoSuccess && ok) {
    bd->bytes = bytes;
    bd->capacity = cap;
    bd->oneshot_limit = oneshot;
    bd->twophase_limit = twophase;
    bd->twophase_round = round;
    bd->stride = board_round_up(cap, BOARD_LINE);
    bd->nranks = comm->nranks;
    bd->span = rotate_span(comm, cap);
    lay_out(bd, base);
    prefault_span(bd, comm->rank);
    comm->board = bd;
    bd = NULL;
  } else if (base) {
    munmap(base, bytes);
  }
  free(bd);
  free(names);
  free(oks);
  return res;
}

void ringo_board_free(ringoComm_t comm) {
  if (!comm->board) return;
  if (comm->board->base) munmap(comm->board->base, comm->board->bytes);
  free(comm->board);
  comm->board = NULL;
}

/* ---- waiting ---- */

/* After a counter moved: wakes the sleepers, if any. Shared (not private) futexes: the ranks may
 * live in different processes. The counter's store, the sleepers count and the bell are all
 * sequentially consistent: a ringer that sees no sleeper stored before any waiter announced itself,
 * so that waiter's next look finds the counter moved; a waiter announced before the ringer looked
 * either sees the bell moved (its futex wait returns at once) or is woken. Nobody asleep, nothing
 * shared is written: the fast path leaves the bell's cache line alone. */
static void bell_ring(struct board_header* h) {
  if (atomic_load_explicit(&h->sleepers, memory_order_seq_cst) == 0) return;
  atomic_fetch_add_explicit(&h->bell, 1, memory_order_seq_cst);
  syscall(SYS_futex, (void*)&h->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Which counter of rank r a wait watches, and the value it waits for. */
struct board_wait {
  int r;
  _Atomic uint64_t* word;
  uint64_t target;
  const char* awaited; /* what rank r is to do, before what */
  const struct ringo_op* op; /* named in an error */
};

static int reached(const struct board_wait* w, memory_order order) {
  return atomic_load_explicit(w->word, order) >= w->target;
}

/* The error another rank poisoned the board with. */
static ringoResult_t board_poison_error(struct board_header* h) {
  char msg[RINGO_POISON_MSG_BYTES];
  memcpy(msg, h->poison_msg, sizeof msg);
  msg[sizeof msg - 1] = '\0'; /* another process wrote it: never trust it to be terminated */
  ringoResult_t code = (ringoResult_t)atomic_load_explicit(&h->poison_code, memory_order_relaxed);
  if (code <= ringoSuccess || code > ringoTimeout) code = ringoRemoteError;
  return ringo_fail(code, "%s", msg);
}

/* Everything that ends a wait other than the awaited rank: poison, abort, deadline, a dead process. */
static ringoResult_t board_check_wait(const ringoComm_t comm, const struct board_wait* w, struct ringo_waiter* wt,
                                      double now) {
  struct board_header* h = comm->board->hdr;
  if (atomic_load_explicit(&h->poisoned, memory_order_acquire) == 1) return board_poison_error(h);
  const enum ringo_wait_end end = ringo_waiter_check(wt, now);
  int pid = 0;
  if (end == RINGO_WAIT_GO_ON && ringo_waiter_liveness_due(wt, now)) {
    pid = comm->info[w->r].pid;
    /* It may have moved its counter just before it left: that still counts. */
    if (pid == getpid() || !ringo_wait_pid_gone(pid) || reached(w, memory_order_acquire)) pid = 0;
  }
  if (end == RINGO_WAIT_GO_ON && !pid) return ringoSuccess;
  char what[160];
  ringo_op_describe(w->op, what, sizeof what);
  if (end == RINGO_WAIT_ABORTED)
    return ringo_fail(ringoInvalidUsage, "rank %d: communicator aborted while waiting for rank %d to %s %s", comm->rank,
                      w->r, w->awaited, what);
  if (end == RINGO_WAIT_TIMED_OUT)
    return ringo_fail(ringoTimeout, "rank %d timed out after %.1f s waiting for rank %d to %s %s (one-shot/two-phase board)",
                      comm->rank, comm->env.timeout_s, w->r, w->awaited, what);
  /* A rank that failed poisons the board before it exits: a poison written after the look above
   * names the rank that failed first. */
  if (atomic_load_explicit(&h->poisoned, memory_order_acquire) == 1) return board_poison_error(h);
  return ringo_fail(ringoRemoteError, "rank %d (pid %d) exited while rank %d waited for it to %s %s", w->r, pid,
                    comm->rank, w->awaited, what);
}

/* Polls, yields (RINGO_YIELD_US), then sleeps on the bell (bell_ring says why no wake-up is lost).
 * Unlike a ring link's wait, a board wait polls a little before its first yield: a one-shot call
 * is one hand-off, and ranks that arrive a few hundred ns apart otherwise pay a yield's system
 * call each (docs/performance.md). The loads stay in this core's cache until the counter moves. */
static ringoResult_t wait_for(const ringoComm_t comm, const struct board_wait* w) {
  for (int i = 0; i < BOARD_POLLS + comm->env.spin; i++)
    if (reached(w, memory_order_acquire)) return ringoSuccess;
  struct board_header* h = comm->board->hdr;
  const double begun = ringo_now();
  /* RINGO_TIMEOUT bounds this wait, as it bounds each wait of a ring link. At MPI_THREAD_MULTIPLE
   * another communicator's MPI sends may be what a peer waits for: shared turns. */
  const struct ringo_wait_policy policy = {
      .timeout_s = comm->env.timeout_s, .abort_flag = &comm->abort_flag, .min_yields = 4,
      .yield_s = comm->env.yield_us * 1e-6, .sleep_ns = BOARD_SLEEP_NS, .net_sleep_ns = BOARD_NET_SLEEP_NS,
      .liveness_s = BOARD_LIVENESS_S, .net = RINGO_WAIT_NET_SHARED, .crowded = comm->crowded};
  struct ringo_waiter wt;
  ringo_waiter_start(&wt, &policy, begun);
  for (;;) {
    if (reached(w, memory_order_acquire)) return ringoSuccess;
    const double now = ringo_now();
    RINGO_CHECK(board_check_wait(comm, w, &wt, now));
    if (ringo_waiter_yield(&wt, now)) continue;
    atomic_fetch_add_explicit(&h->sleepers, 1, memory_order_seq_cst);
    const uint32_t v = atomic_load_explicit(&h->bell, memory_order_seq_cst);
    /* Sequentially consistent, as the ringer's store and its look at the sleepers are: an acquire
     * load here could still miss a store the ringer made before it saw no sleeper. */
    if (!reached(w, memory_order_seq_cst) && atomic_load_explicit(&h->poisoned, memory_order_seq_cst) != 1)
      ringo_waiter_futex(&wt, now, &h->bell, v);
    atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_seq_cst);
  }
}

/* ---- ops ---- */

ringoResult_t ringo_board_claim(ringoComm_t comm, uint64_t b, const struct ringo_op* op, size_t bytes, void** slot) {
  struct ringo_board* bd = comm->board;
  assert(bytes <= bd->capacity); /* the algorithms' fits (and the rounds) keep posts within a slot */
  /* A rank that failed stops everyone: also a rank whose peers are all there already. */
  if (atomic_load_explicit(&bd->hdr->poisoned, memory_order_acquire) == 1) return board_poison_error(bd->hdr);
  if (b >= 2) { /* op b - 2 used this side last: every rank must have finished it */
    for (int r = 0; r < comm->nranks; r++) {
      if (r == comm->rank) continue;
      const struct board_wait w = {r, &bd->ranks[r].done, b - 1, "finish the collective two calls before", op};
      RINGO_CHECK(wait_for(comm, &w));
    }
  }
  if (slot) {
    /* Nobody reads this side's offset before the post, nor after this rank's op b - 2 (waited above). */
    const size_t off = next_offset(bd, bytes);
    atomic_store_explicit(&bd->ranks[comm->rank].offset[b % 2], off, memory_order_relaxed);
    *slot = data_slot(bd, comm->rank, b) + off;
  }
  return ringoSuccess;
}

void ringo_board_post(ringoComm_t comm, uint64_t b, const struct ringo_fingerprint* fp) {
  struct ringo_board* bd = comm->board;
  memcpy(fingerprint_slot(bd, comm->rank, b), fp, sizeof *fp);
  atomic_store_explicit(&bd->ranks[comm->rank].posted, b + 1, memory_order_seq_cst);
  bell_ring(bd->hdr);
}

ringoResult_t ringo_board_await(ringoComm_t comm, uint64_t b, int r, const struct ringo_op* op,
                                struct ringo_fingerprint* fp, const void** slot) {
  struct ringo_board* bd = comm->board;
  const struct board_wait w = {r, &bd->ranks[r].posted, b + 1, "join", op};
  RINGO_CHECK(wait_for(comm, &w));
  /* Rank r cannot reuse this side before this rank has finished op b (ringo_board_claim). */
  memcpy(fp, fingerprint_slot(bd, r, b), sizeof *fp);
  *slot = posted_data(bd, r, b);
  return ringoSuccess;
}

ringoResult_t ringo_board_check_peers(ringoComm_t comm) {
  struct ringo_board* bd = comm->board;
  const struct ringo_op* op = comm->board_op;
  if (!bd || !op) return ringoSuccess;
  const uint64_t b = comm->board_op_b;
  const struct ringo_fingerprint mine = ringo_op_fingerprint(op);
  for (int r = 0; r < comm->nranks; r++) {
    if (r == comm->rank || atomic_load_explicit(&bd->ranks[r].posted, memory_order_acquire) < b + 1) continue;
    /* Rank r posted op b; it cannot reuse this side before this rank has finished op b. */
    struct ringo_fingerprint theirs;
    memcpy(&theirs, fingerprint_slot(bd, r, b), sizeof theirs);
    if (memcmp(&theirs, &mine, sizeof mine) != 0) return ringo_op_mismatch(op, &theirs, r);
  }
  return ringoSuccess;
}

void ringo_board_mark_reduced(ringoComm_t comm, uint64_t b) {
  struct ringo_board* bd = comm->board;
  atomic_store_explicit(&bd->ranks[comm->rank].reduced, b + 1, memory_order_seq_cst);
  bell_ring(bd->hdr);
}

ringoResult_t ringo_board_await_reduced(ringoComm_t comm, uint64_t b, int r, const struct ringo_op* op,
                                        const void** slot) {
  struct ringo_board* bd = comm->board;
  const struct board_wait w = {r, &bd->ranks[r].reduced, b + 1, "reduce its chunk of", op};
  RINGO_CHECK(wait_for(comm, &w));
  *slot = posted_data(bd, r, b);
  return ringoSuccess;
}

void ringo_board_done(ringoComm_t comm, uint64_t b) {
  struct ringo_board* bd = comm->board;
  atomic_store_explicit(&bd->ranks[comm->rank].done, b + 1, memory_order_seq_cst);
  bell_ring(bd->hdr);
}

ringoResult_t ringo_board_poisoned(const ringoComm_t comm) {
  const struct ringo_board* bd = comm->board;
  if (!bd || !bd->base || atomic_load_explicit(&bd->hdr->poisoned, memory_order_acquire) != 1) return ringoSuccess;
  return board_poison_error(bd->hdr);
}

void ringo_board_poison(ringoComm_t comm, ringoResult_t code, const char* msg) {
  struct ringo_board* bd = comm->board;
  if (!bd || !bd->base) return;
  unsigned expected = 0;
  if (!atomic_compare_exchange_strong(&bd->hdr->poisoned, &expected, 2)) return; /* the first error stays */
  atomic_store_explicit(&bd->hdr->poison_code, (int32_t)code, memory_order_relaxed);
  snprintf(bd->hdr->poison_msg, sizeof bd->hdr->poison_msg, "%s", msg);
  atomic_store_explicit(&bd->hdr->poisoned, 1, memory_order_seq_cst); /* as a counter's store: see bell_ring */
  bell_ring(bd->hdr);
}
