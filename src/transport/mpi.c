/* mpi.c — the link between hosts: MPI_Isend/MPI_Irecv on the communicator's own duplicated
 * MPI communicator, nslots staging buffers per link so the next slice is in flight while the
 * current one is reduced. Built only when mpicc is found. Tested by test/mpi/test_mpi_ring.cc. */
#ifdef RINGO_HAVE_MPI
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "core/wait.h"
#include "transport/transport.h"

#define MPI_LINK_MAGIC 0x4d474e52u /* "RNGM" */
#define MPI_LINK_TAG 0x52          /* + the link's channel: ring, star and p2p links of one pair stay apart */
#define MPI_POISON_TAG 0x4000      /* + the link's tag: "this end left on an error", never a data tag */
#define MPI_POISON_BYTES (4 + RINGO_POISON_MSG_BYTES) /* int32 code, then the message */
#define MPI_YIELDS 64              /* sched_yield rounds before napping between polls */
#define MPI_NAP_NS 20000L          /* a nap short next to a slice's transfer time, long next to a poll */

/* comm carries the links' data; poison messages go on their own duplicate, where no data message
 * ahead of them (a large send stuck half way after its sender failed) can hold their matching up.
 * tainted: a collective failed on these links, so messages of it may still be in flight. */
struct ringo_mpi_ctx {
  MPI_Comm comm, poison_comm;
  int tainted;
};

struct mpi_info { uint32_t magic; int32_t rank; uint64_t slot_bytes; uint32_t nslots; };
_Static_assert(sizeof(struct mpi_info) <= RINGO_LINK_INFO_BYTES, "mpi info too large");

struct ringo_link {
  struct ringo_mpi_ctx* ctx;
  MPI_Comm comm, poison_comm;
  int is_recv, self_rank, peer_rank, nslots, spin, holding, tag;
  int crowded;    /* the params' (core/wait.h) */
  int ready;      /* receiver: mpi_poll saw the current slot's receive complete (its request is gone) */
  size_t slot_bytes, held_bytes;
  uint64_t count; /* slices posted (sender) or released (receiver) */
  double timeout_s;
  const atomic_int* abort_flag;
  ringoResult_t (*interrupt)(void* ctx); /* the params' */
  void* interrupt_ctx;
  char* bufs;
  MPI_Request* reqs;
  char* poison_out;         /* the poison message this end sent (MPI may still read it) */
  MPI_Request poison_req;
};

/* MPI links alive in this process (links made minus closed): while there are any, waits give MPI
 * turns. thread_multiple: MPI's thread level, read when a link is made (MPI is initialised then;
 * later, MPI_Finalize may have run, after which even MPI_Query_thread aborts the process). */
static atomic_int live_links, thread_multiple;

/* ---- one thread in MPI at a time ----
 * Below MPI_THREAD_MULTIPLE, MPI may be called by one thread at a time. ringo's own threads (one per
 * communicator in ringoGroupEnd, the DDP layer's) can each drive MPI links at once, so below it every
 * MPI call of this file goes through mpi_mu: one call at a time, never held across a wait. (The
 * application's own MPI calls must not overlap ringo's calls, as MPI asks of it anyway.) At
 * MPI_THREAD_MULTIPLE MPI serialises what it must itself. in_mpi/most_in_mpi: below it, how many
 * threads were inside MPI through this file at once, at most, for the tests
 * (ringo_mpi_most_concurrent_calls); counted apart from the lock, so a lock not taken shows, and not
 * at all at MPI_THREAD_MULTIPLE, whose many threads would share their cache line in every poll. */
static pthread_mutex_t mpi_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int in_mpi, most_in_mpi;

/* Returns whether this call is serialised (below MPI_THREAD_MULTIPLE), for mpi_leave. */
static int mpi_enter(void) {
  const int serial = !atomic_load_explicit(&thread_multiple, memory_order_relaxed);
  if (!serial) return 0;
  pthread_mutex_lock(&mpi_mu);
  const int now = atomic_fetch_add_explicit(&in_mpi, 1, memory_order_relaxed) + 1;
  int most = atomic_load_explicit(&most_in_mpi, memory_order_relaxed);
  while (now > most && !atomic_compare_exchange_weak_explicit(&most_in_mpi, &most, now, memory_order_relaxed,
                                                              memory_order_relaxed)) {
  }
  return 1;
}

static void mpi_leave(int serial) {
  if (!serial) return;
  atomic_fetch_sub_explicit(&in_mpi, 1, memory_order_relaxed);
  pthread_mutex_unlock(&mpi_mu);
}

/* Runs one statement that calls MPI (an assignment of its result, or the call alone) under the rule above. */
#define MPI_SERIAL(stmt)              \
  do {                                \
    const int serial_ = mpi_enter();  \
    stmt;                             \
    mpi_leave(serial_);               \
  } while (0)

int ringo_mpi_most_concurrent_calls(int reset) {
  return reset ? atomic_exchange(&most_in_mpi, 0) : atomic_load(&most_in_mpi);
}

static ringoResult_t mpi_fail(int err, const char* what, const struct ringo_link* l) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_SERIAL(MPI_Error_string(err, text, &len));
  return ringo_fail(ringoRemoteError, "mpi link %d->%d: %s failed: %s", l->is_recv ? l->peer_rank : l->self_rank,
                    l->is_recv ? l->self_rank : l->peer_rank, what, text);
}
#define MPI_CHECK(call, what, l)                             \
  do {                                                       \
    int mpi_err_;                                            \
    MPI_SERIAL(mpi_err_ = (call));                           \
    if (mpi_err_ != MPI_SUCCESS) return mpi_fail(mpi_err_, (what), (l)); \
  } while (0)

ringoResult_t ringo_mpi_ctx_create(const void* user_mpi_comm, void** out) {
  struct ringo_mpi_ctx* ctx = calloc(1, sizeof *ctx);
  if (!ctx) return ringo_fail(ringoSystemError, "out of memory for the MPI context");
  ctx->comm = ctx->poison_comm = MPI_COMM_NULL;
  int err;
  MPI_SERIAL(err = MPI_Comm_dup(*(const MPI_Comm*)user_mpi_comm, &ctx->comm));
  if (err == MPI_SUCCESS) MPI_SERIAL(err = MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN));
  if (err == MPI_SUCCESS) MPI_SERIAL(err = MPI_Comm_dup(ctx->comm, &ctx->poison_comm));
  if (err != MPI_SUCCESS) {
    if (ctx->comm != MPI_COMM_NULL) MPI_SERIAL(MPI_Comm_free(&ctx->comm));
    free(ctx);
    return ringo_fail(ringoSystemError, "MPI_Comm_dup of the user's communicator failed (MPI error %d)", err);
  }
  *out = ctx;
  return ringoSuccess;
}

static int net_waiting(int own) {
  if (atomic_load_explicit(&live_links, memory_order_relaxed) == 0) return 0;
  return own || atomic_load_explicit(&thread_multiple, memory_order_relaxed);
}

static void net_progress(int own) {
  if (!net_waiting(own)) return;
  int finalized = 0, flag = 0;
  MPI_Finalized(&finalized);
  /* Nothing is received: a probe on MPI_COMM_SELF, where ringo sends nothing, only lets MPI move
   * whatever this process has in flight, on any communicator. */
  if (!finalized) MPI_SERIAL((void)MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE));
}

static const struct ringo_net_hook mpi_net_hook = {net_waiting, net_progress};

int ringo_mpi_links_thread_safe(void) {
  int initialized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  if (!initialized) return 1; /* no MPI link can exist (fake hosts on shm links, say) */
  return MPI_Query_thread(&provided) == MPI_SUCCESS && provided == MPI_THREAD_MULTIPLE;
}

void ringo_mpi_ctx_free(void* p) {
  struct ringo_mpi_ctx* ctx = p;
  if (!ctx) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  /* A failed collective's messages may still arrive. Freed, the two context ids could go to the next
   * communicator, whose receives would match them (seen: a ring made right after a failed one
   * timed out on stale slices), so a tainted pair is left allocated: one leak per failure. */
  if (!finalized && !ctx->tainted) {
    MPI_SERIAL(MPI_Comm_free(&ctx->comm));
    MPI_SERIAL(MPI_Comm_free(&ctx->poison_comm));
  }
  free(ctx);
}

static ringoResult_t mpi_link_new(const struct ringo_link_params* p, int is_recv, struct ringo_link** out) {
  if (!p->ctx) return ringo_fail(ringoInvalidUsage, "the mpi transport needs a communicator made by ringoCommInitMPI");
  struct ringo_link* l = calloc(1, sizeof *l);
  if (l) {
    l->bufs = malloc((size_t)p->nslots * p->slot_bytes);
    l->reqs = malloc((size_t)p->nslots * sizeof *l->reqs);
  }
  if (!l || !l->bufs || !l->reqs) {
    if (l) free(l->bufs), free(l->reqs);
    free(l);
    return ringo_fail(ringoSystemError, "out of memory for %d mpi staging slots of %zu bytes", p->nslots, p->slot_bytes);
  }
  l->ctx = p->ctx;
  l->comm = l->ctx->comm;
  l->poison_comm = l->ctx->poison_comm;
  l->is_recv = is_recv;
  l->self_rank = p->self_rank;
  l->peer_rank = p->peer_rank;
  l->nslots = p->nslots;
  l->spin = p->spin;
  l->crowded = p->crowded;
  l->slot_bytes = p->slot_bytes;
  l->timeout_s = p->timeout_s;
  l->abort_flag = p->abort_flag;
  l->interrupt = p->interrupt;
  l->interrupt_ctx = p->interrupt_ctx;
  l->tag = MPI_LINK_TAG + p->channel;
  for (int i = 0; i < p->nslots; i++) l->reqs[i] = MPI_REQUEST_NULL;
  l->poison_req = MPI_REQUEST_NULL;
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  atomic_store_explicit(&thread_multiple, provided == MPI_THREAD_MULTIPLE, memory_order_relaxed);
  atomic_fetch_add_explicit(&live_links, 1, memory_order_relaxed);
  ringo_wait_register_net(&mpi_net_hook); /* every wait of the process now gives MPI its turns */
  *out = l;
  return ringoSuccess;
}

/* ---- buffers MPI may still read ----
 * A send still pending when its link closes (after an error) may complete later or never; MPI
 * may read its buffer until then. Such buffers are parked here with their requests, reachable,
 * and freed once MPI_Test says every one of their sends is done: checked whenever a link closes. */
struct parked {
  struct parked* next;
  void* buf;
  int n;
  MPI_Request reqs[];
};
static struct parked* parked_list;
static pthread_mutex_t parked_mu = PTHREAD_MUTEX_INITIALIZER;

static void park(void* buf, const MPI_Request* reqs, int n) {
  struct parked* e = malloc(sizeof *e + (size_t)n * sizeof(MPI_Request));
  if (!e) return; /* out of memory: the buffer stays allocated, unreferenced, rather than freed under MPI */
  e->buf = buf;
  e->n = n;
  memcpy(e->reqs, reqs, (size_t)n * sizeof(MPI_Request));
  pthread_mutex_lock(&parked_mu);
  e->next = parked_list;
  parked_list = e;
  pthread_mutex_unlock(&parked_mu);
}

static void sweep_parked(void) {
  pthread_mutex_lock(&parked_mu);
  for (struct parked** p = &parked_list; *p;) {
    struct parked* e = *p;
    int all = 1;
    for (int i = 0; i < e->n; i++) {
      int done = 1;
      if (e->reqs[i] != MPI_REQUEST_NULL) MPI_SERIAL(MPI_Test(&e->reqs[i], &done, MPI_STATUS_IGNORE));
      all &= done;
    }
    if (all) {
      *p = e->next;
      free(e->buf);
      free(e);
    } else {
      p = &e->next;
    }
  }
  pthread_mutex_unlock(&parked_mu);
}

static void mpi_close(struct ringo_link* l) {
  if (!l) return;
  atomic_fetch_sub_explicit(&live_links, 1, memory_order_relaxed);
  int finalized = 0, pending = 0;
  MPI_Finalized(&finalized);
  if (finalized) { /* no MPI call is allowed: what MPI held is the exiting process's */
    free(l->reqs);
    free(l);
    return;
  }
  for (int i = 0; i < l->nslots; i++) {
    if (l->reqs[i] == MPI_REQUEST_NULL) continue;
    int done = 0;
    if (l->is_recv) MPI_SERIAL(MPI_Cancel(&l->reqs[i])); /* a posted receive nobody will match */
    MPI_SERIAL(MPI_Test(&l->reqs[i], &done, MPI_STATUS_IGNORE));
    if (!done && l->is_recv) MPI_SERIAL(MPI_Wait(&l->reqs[i], MPI_STATUS_IGNORE)); /* cancelled: completes */
    pending |= !done && !l->is_recv;
  }
  if (pending) park(l->bufs, l->reqs, l->nslots);
  else free(l->bufs);
  int done = 1;
  if (l->poison_req != MPI_REQUEST_NULL) MPI_SERIAL(MPI_Test(&l->poison_req, &done, MPI_STATUS_IGNORE));
  if (!done) park(l->poison_out, &l->poison_req, 1);
  else free(l->poison_out);
  free(l->reqs);
  free(l);
  sweep_parked();
}

/* ---- poison ----
 * A rank that fails mid-collective sends each link's peer a small message on the link's poison
 * tag (once, non-blocking); a waiting end probes for it, so its neighbours fail within one poll
 * with the original error instead of waiting out RINGO_TIMEOUT. Both ends of a link use the same
 * tag, so the message reaches whichever of the peer's links with this rank waits. */
static void mpi_poison(struct ringo_link* l, ringoResult_t code, const char* msg) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!l || l->poison_out || finalized) return;
  l->ctx->tainted = 1; /* called on every link when the communicator fails */
  l->poison_out = calloc(1, MPI_POISON_BYTES);
  if (!l->poison_out) return;
  const int32_t c = (int32_t)code;
  memcpy(l->poison_out, &c, sizeof c);
  snprintf(l->poison_out + 4, RINGO_POISON_MSG_BYTES, "%s", msg);
  int err;
  MPI_SERIAL(err = MPI_Isend(l->poison_out, MPI_POISON_BYTES, MPI_BYTE, l->peer_rank, MPI_POISON_TAG + l->tag,
                             l->poison_comm, &l->poison_req));
  if (err != MPI_SUCCESS) l->poison_req = MPI_REQUEST_NULL; /* best effort: the peer then times out */
}

/* The peer's poison message, if it sent one: its error, with its message. */
static ringoResult_t check_poisoned(const struct ringo_link* l) {
  int flag = 0, err;
  MPI_Message m; /* matched probe: the message is this thread's, whoever else probes */
  MPI_SERIAL(err = MPI_Improbe(l->peer_rank, MPI_POISON_TAG + l->tag, l->poison_comm, &flag, &m, MPI_STATUS_IGNORE));
  if (err != MPI_SUCCESS || !flag) return ringoSuccess;
  char in[MPI_POISON_BYTES] = {0};
  MPI_SERIAL(MPI_Mrecv(in, MPI_POISON_BYTES, MPI_BYTE, &m, MPI_STATUS_IGNORE));
  int32_t code = 0;
  memcpy(&code, in, sizeof code);
  in[MPI_POISON_BYTES - 1] = '\0'; /* the peer wrote it: never trust it to be terminated */
  if (code <= ringoSuccess || code > ringoTimeout) code = ringoRemoteError;
  return ringo_fail((ringoResult_t)code, "%s", in + 4);
}

static ringoResult_t post_recv(struct ringo_link* l, int idx) {
  MPI_CHECK(MPI_Irecv(l->bufs + (size_t)idx * l->slot_bytes, (int)l->slot_bytes, MPI_BYTE, l->peer_rank,
                      l->tag, l->comm, &l->reqs[idx]), "MPI_Irecv", l);
  return ringoSuccess;
}

static ringoResult_t mpi_recv_setup(const struct ringo_link_params* p, struct ringo_link** link, void* info) {
  if (p->slot_bytes > (size_t)INT32_MAX) return ringo_fail(ringoInvalidArgument, "mpi slots are limited to 2 GiB");
  RINGO_CHECK(mpi_link_new(p, 1, link));
  for (int i = 0; i < p->nslots; i++) {
    ringoResult_t res = post_recv(*link, i);
    if (res != ringoSuccess) {
      mpi_close(*link);
      *link = NULL;
      return res;
    }
  }
  struct mpi_info mine = {MPI_LINK_MAGIC, p->self_rank, p->slot_bytes, (uint32_t)p->nslots};
  memcpy(info, &mine, sizeof mine);
  return ringoSuccess;
}

static ringoResult_t mpi_send_connect(const struct ringo_link_params* p, const void* info, struct ringo_link** link) {
  struct mpi_info in;
  memcpy(&in, info, sizeof in);
  if (in.magic != MPI_LINK_MAGIC || in.rank != p->peer_rank || in.slot_bytes != p->slot_bytes ||
      in.nslots != (uint32_t)p->nslots)
    return ringo_fail(ringoRemoteError, "mpi link %d->%d: the receiver described a different link (magic %#x, "
                      "rank %d, %llu-byte slots x %u)", p->self_rank, p->peer_rank, in.magic, in.rank,
                      (unsigned long long)in.slot_bytes, in.nslots);
  return mpi_link_new(p, 0, link);
}

static ringoResult_t mpi_setup_done(struct ringo_link* l) {
  (void)l;
  return ringoSuccess;
}

/* Polls one request to completion: MPI_Test drives MPI's progress engine; between polls the rank
 * yields and then naps, so oversubscribed ranks leave the cores to whoever has work. */
static ringoResult_t wait_request(struct ringo_link* l, int idx, MPI_Status* status) {
  /* MPI_Test is MPI's own turn: this wait gives no other. */
  const struct ringo_wait_policy policy = {.timeout_s = l->timeout_s, .abort_flag = l->abort_flag,
                                           .min_yields = MPI_YIELDS, .sleep_ns = MPI_NAP_NS,
                                           .net = RINGO_WAIT_NET_NONE, .crowded = l->crowded};
  struct ringo_waiter w;
  for (long i = 0;; i++) {
    int done = 0;
    MPI_CHECK(MPI_Test(&l->reqs[idx], &done, status), l->is_recv ? "MPI_Test of a receive" : "MPI_Test of a send", l);
    if (done) return ringoSuccess;
    if (i < l->spin) continue;
    if (i == l->spin) ringo_waiter_start(&w, &policy, ringo_now());
    RINGO_CHECK(check_poisoned(l));
    if (l->interrupt) RINGO_CHECK(l->interrupt(l->interrupt_ctx));
    /* The clock is read one poll in 64 (MPI_Test is cheap next to it); the abort flag every poll. */
    const double now = (i & 63) == 0 ? ringo_now() : w.start;
    const enum ringo_wait_end end = ringo_waiter_check(&w, now);
    if (end == RINGO_WAIT_ABORTED)
      return ringo_fail(ringoRemoteError, "rank %d: communicator aborted while waiting on the mpi link with rank %d",
                        l->self_rank, l->peer_rank);
    if (end == RINGO_WAIT_TIMED_OUT)
      return ringo_fail(ringoTimeout, "rank %d timed out after %.1f s waiting for rank %d to %s on mpi link %d->%d",
                        l->self_rank, l->timeout_s, l->peer_rank, l->is_recv ? "send data" : "receive a slice",
                        l->is_recv ? l->peer_rank : l->self_rank, l->is_recv ? l->self_rank : l->peer_rank);
    if (!ringo_waiter_yield(&w, now)) ringo_waiter_sleep(&w, now);
  }
}

static ringoResult_t mpi_send_acquire(struct ringo_link* l, void** slot) {
  const int idx = (int)(l->count % (uint64_t)l->nslots);
  if (!l->holding) {
    RINGO_CHECK(wait_request(l, idx, MPI_STATUS_IGNORE)); /* the slot's previous send has left */
    l->holding = 1;
  }
  *slot = l->bufs + (size_t)idx * l->slot_bytes;
  return ringoSuccess;
}

static ringoResult_t mpi_send_post(struct ringo_link* l, size_t bytes) {
  const int idx = (int)(l->count % (uint64_t)l->nslots);
  if (!l->holding || bytes > l->slot_bytes) return ringo_fail(ringoInvalidUsage, "mpi send_post without a slot or too large");
  MPI_CHECK(MPI_Isend(l->bufs + (size_t)idx * l->slot_bytes, (int)bytes, MPI_BYTE, l->peer_rank, l->tag,
                      l->comm, &l->reqs[idx]), "MPI_Isend", l);
  l->holding = 0;
  l->count++;
  return ringoSuccess;
}

static ringoResult_t mpi_recv_acquire(struct ringo_link* l, const void** slot, size_t* bytes) {
  const int idx = (int)(l->count % (uint64_t)l->nslots);
  if (!l->holding) {
    if (!l->ready) {
      MPI_Status status;
      RINGO_CHECK(wait_request(l, idx, &status));
      int n = 0;
      MPI_SERIAL(MPI_Get_count(&status, MPI_BYTE, &n));
      l->held_bytes = (size_t)n;
    }
    l->ready = 0;
    l->holding = 1;
  }
  *slot = l->bufs + (size_t)idx * l->slot_bytes;
  *bytes = l->held_bytes;
  return ringoSuccess;
}

/* One MPI_Test of the current slot's request, which also drives MPI's progress. A completed
 * receive leaves no request behind, so its length is kept for recv_acquire. */
static ringoResult_t mpi_poll(struct ringo_link* l, int* ready) {
  const int idx = (int)(l->count % (uint64_t)l->nslots);
  *ready = 1;
  if (l->holding || l->ready) return ringoSuccess;
  MPI_Status status;
  int done = 0;
  MPI_CHECK(MPI_Test(&l->reqs[idx], &done, &status), "MPI_Test", l);
  if (done && l->is_recv) {
    int n = 0;
    MPI_SERIAL(MPI_Get_count(&status, MPI_BYTE, &n));
    l->held_bytes = (size_t)n;
    l->ready = 1;
  }
  *ready = done;
  if (!done) RINGO_CHECK(check_poisoned(l));
  if (!done && l->abort_flag && atomic_load_explicit(l->abort_flag, memory_order_relaxed))
    return ringo_fail(ringoInvalidUsage, "rank %d: communicator aborted while waiting on the mpi link with rank %d",
                      l->self_rank, l->peer_rank);
  return ringoSuccess;
}

/* The receiver's description holds nothing the sender does not know already. */
static void mpi_local_info(const struct ringo_link_params* p, void* info) {
  const struct mpi_info in = {MPI_LINK_MAGIC, p->peer_rank, p->slot_bytes, (uint32_t)p->nslots};
  memset(info, 0, RINGO_LINK_INFO_BYTES);
  memcpy(info, &in, sizeof in);
}

static ringoResult_t mpi_recv_release(struct ringo_link* l) {
  const int idx = (int)(l->count % (uint64_t)l->nslots);
  if (!l->holding) return ringo_fail(ringoInvalidUsage, "mpi recv_release without a slot from recv_acquire");
  l->holding = 0;
  l->count++;
  return post_recv(l, idx); /* MPI matches receives in posting order: the FIFO order is kept */
}

static ringoResult_t mpi_flush(struct ringo_link* l) {
  for (int i = 0; i < l->nslots; i++) RINGO_CHECK(wait_request(l, i, MPI_STATUS_IGNORE));
  return ringoSuccess;
}

/* MPI joins any two ranks of a communicator made over MPI (it has the MPI context). */
static int mpi_can_connect(const struct ringo_link_ends* e) { return e->has_net; }

const struct ringo_transport ringo_transport_mpi = {
    .name = "mpi",
    .can_connect = mpi_can_connect,
    .sends_need_turns = 1,
    .recv_setup = mpi_recv_setup,
    .send_connect = mpi_send_connect,
    .setup_done = mpi_setup_done,
    .local_info = mpi_local_info,
    .send_acquire = mpi_send_acquire,
    .send_post = mpi_send_post,
    .recv_acquire = mpi_recv_acquire,
    .recv_release = mpi_recv_release,
    .poll = mpi_poll,
    .flush = mpi_flush,
    .poison = mpi_poison,
    .peer_poisoned = check_poisoned,
    .close = mpi_close,
};
#endif /* RINGO_HAVE_MPI */
