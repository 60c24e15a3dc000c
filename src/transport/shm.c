/* shm.c — the same-host link: a one-direction FIFO of slots in a POSIX shared-memory segment.
 * Depends on core.h (errors, logging, clock) and transport.h (the vtable it fills in).
 * Tested by test/test_shm.cc (make test runs it). */
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/wait.h"
#include "transport/segment.h"
#include "transport/transport.h"

/* The segment:
 *
 *   page 0..   struct shm_header: immutable description, then head, the receiver's sleep flag,
 *              tail and the sender's sleep flag on four separate cache lines, then one payload
 *              length per slot
 *   data_off   slot 0 | slot 1 | ... | slot nslots-1, each slot_bytes rounded up to a page
 *
 * head counts slots the sender has posted, tail slots the receiver has released. Both are
 * 32-bit and wrap, so head - tail (unsigned) is the number of filled slots and each counter can
 * be the word a futex sleeps on. Each side keeps its own counter in private memory and only
 * reads the other's from the segment, so a corrupted segment can never steer an index. */

#define SHM_MAGIC 0x52474e53u /* arbitrary: marks a ringo shm segment and its info */
#define SHM_VERSION 1u
#define SHM_CACHE_LINE 64
#define SHM_PAGE 4096
#define SHM_NAME_BYTES RINGO_SEGMENT_NAME_BYTES
#define SHM_MAX_SLOTS 65536
#define SHM_MAX_SLOT_BYTES ((uint64_t)1 << 32)
#define SHM_YIELDS 4           /* sched_yield rounds between spinning and sleeping */
#define SHM_SLEEP_NS 5000000L   /* one futex sleep: short, so every condition is re-checked */
#define SHM_NET_SLEEP_NS 20000L /* the same where the wait takes MPI's turns (transport.h) */
#define SHM_LIVENESS_S 0.1      /* how often a sleeper asks whether its peer still exists */

_Static_assert(sizeof(atomic_uint) == 4, "futex words are 32 bits");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "shared-memory atomics must be lock-free to work across processes");

struct shm_header {
  /* Written by the receiver before the name leaves the process, read-only afterwards. */
  uint32_t magic, version;
  uint64_t check;         /* random; must equal the info's, so a stale name is caught */
  uint64_t slot_bytes;
  uint32_t nslots;
  int32_t creator_pid;          /* the end that made the segment: the receiver of a ring link, the
                                   sender of a point-to-point link */
  _Atomic int32_t attacher_pid; /* stored once by the other end when it maps the segment */

  _Alignas(SHM_CACHE_LINE) atomic_uint head;          /* sender's counter */
  _Alignas(SHM_CACHE_LINE) atomic_uint recv_sleeping; /* receiver announces a futex wait on head */
  _Alignas(SHM_CACHE_LINE) atomic_uint tail;          /* receiver's counter */
  _Alignas(SHM_CACHE_LINE) atomic_uint send_sleeping; /* sender announces a futex wait on tail */
  /* Either end may poison the link when it leaves a collective on an error, so the other end
   * stops waiting at once and reports the same error instead of timing out. */
  _Alignas(SHM_CACHE_LINE) atomic_uint poisoned;       /* 0, or 1 once code and msg are written */
  _Atomic int32_t poison_code;
  char poison_msg[RINGO_POISON_MSG_BYTES];
  _Alignas(SHM_CACHE_LINE) _Atomic uint64_t len[];    /* payload bytes of each slot */
};

/* What recv_setup hands the sender through the bootstrap (fits RINGO_LINK_INFO_BYTES). */
struct shm_info {
  uint32_t magic, version;
  uint64_t check;
  uint64_t slot_bytes;
  uint32_t nslots;
  int32_t creator_pid;
  char name[SHM_NAME_BYTES];
};
_Static_assert(sizeof(struct shm_info) <= RINGO_LINK_INFO_BYTES, "shm info too large");

struct ringo_link {
  struct shm_header* hdr;
  size_t map_bytes;
  unsigned char* slots;
  size_t stride;          /* distance between slots */
  size_t slot_bytes;
  uint32_t nslots;
  uint32_t count;         /* this end's counter: head for the sender, tail for the receiver */
  int is_recv;
  int created;            /* this end made the segment (the other end attached) */
  int holding;            /* a slot was acquired and not yet posted / released */
  int draining;           /* sender inside shm_flush: waiting for the FIFO to empty */
  size_t held_bytes;      /* receiver: payload length of the held slot */
  int name_live;          /* receiver: the name still exists in /dev/shm */
  double next_alive;      /* shm_poll: when to ask next whether the peer still exists */
  double timeout_s;
  double yield_s;         /* how long a waiter yields before it sleeps */
  int crowded;            /* the host's ranks outnumber its CPUs (core/wait.h) */
  int spin;
  const atomic_int* abort_flag;
  ringoResult_t (*interrupt)(void* ctx); /* the params' */
  void* interrupt_ctx;
  int net_turns;          /* from the params: this rank's calls on the link's communicator call MPI */
  int self_rank, peer_rank;
  int peer_pid;           /* from the params: whom to ask before the peer has attached (0: nobody) */
  char name[SHM_NAME_BYTES];
};

static void shm_close(struct ringo_link* l);

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Shared (not PRIVATE) futexes: the two ends may live in different processes. */
static void futex_wake(atomic_uint* word) { syscall(SYS_futex, (void*)word, FUTEX_WAKE, 1, NULL, NULL, 0); }

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* Byte offset of slot 0 and total segment size; 0 if the sizes are out of range. */
static size_t segment_layout(uint64_t slot_bytes, uint64_t nslots, size_t* data_off, size_t* stride) {
  if (slot_bytes < 1 || slot_bytes > SHM_MAX_SLOT_BYTES || nslots < 1 || nslots > SHM_MAX_SLOTS) return 0;
  *stride = round_up((size_t)slot_bytes, SHM_PAGE);
  *data_off = round_up(sizeof(struct shm_header) + (size_t)nslots * sizeof(uint64_t), SHM_PAGE);
  size_t total;
  if (__builtin_mul_overflow(*stride, (size_t)nslots, &total) || __builtin_add_overflow(total, *data_off, &total))
    return 0;
  return total;
}

static ringoResult_t check_params(const struct ringo_link_params* p) {
  if (p == NULL) return ringo_fail(ringoInvalidArgument, "shm link: NULL params");
  if (p->slot_bytes < 1 || p->slot_bytes > SHM_MAX_SLOT_BYTES || p->nslots < 1 || p->nslots > SHM_MAX_SLOTS)
    return ringo_fail(ringoInvalidArgument, "shm link %d<->%d: slot_bytes %zu / nslots %d out of range",
                      p->self_rank, p->peer_rank, p->slot_bytes, p->nslots);
  if (!(p->timeout_s > 0))
    return ringo_fail(ringoInvalidArgument, "shm link %d<->%d: timeout %g s must be positive",
                      p->self_rank, p->peer_rank, p->timeout_s);
  return ringoSuccess;
}

static struct ringo_link* shm_link_new(const struct ringo_link_params* p, int is_recv) {
  struct ringo_link* l = calloc(1, sizeof *l);
  if (l == NULL) return NULL;
  l->is_recv = is_recv;
  l->slot_bytes = p->slot_bytes;
  l->nslots = (uint32_t)p->nslots;
  l->timeout_s = p->timeout_s;
  l->spin = p->spin > 0 ? p->spin : 0;
  l->yield_s = p->yield_s > 0 ? p->yield_s : 0;
  l->crowded = p->crowded;
  l->abort_flag = p->abort_flag;
  l->interrupt = p->interrupt;
  l->interrupt_ctx = p->interrupt_ctx;
  l->net_turns = p->net_turns;
  l->self_rank = p->self_rank;
  l->peer_rank = p->peer_rank;
  l->peer_pid = p->peer_pid;
  return l;
}

static int sender_rank(const struct ringo_link* l) { return l->is_recv ? l->peer_rank : l->self_rank; }
static int receiver_rank(const struct ringo_link* l) { return l->is_recv ? l->self_rank : l->peer_rank; }

/* Maps fd and points the link at the header and slots. */
static ringoResult_t link_map(struct ringo_link* l, int fd, size_t total, size_t data_off, size_t stride) {
  void* base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED)
    return ringo_fail(ringoSystemError, "mmap of shm segment %s (%zu bytes) failed: %s", l->name, total,
                      strerror(errno));
  l->hdr = base;
  l->map_bytes = total;
  l->slots = (unsigned char*)base + data_off;
  l->stride = stride;
  return ringoSuccess;
}

static ringoResult_t create_segment(struct ringo_link* l, size_t total, int* fd_out) {
  RINGO_CHECK(ringo_segment_create_named(l->name, total, fd_out));
  l->name_live = 1;
  return ringoSuccess;
}

/* Describes a fresh segment in its header (pages start zeroed, so counters, flags and
 * attacher_pid are already 0) and in the info the sender will receive; no uninitialised byte leaves. */
static ringoResult_t describe_segment(struct ringo_link* l, void* info) {
  struct shm_header* h = l->hdr;
  h->magic = SHM_MAGIC;
  h->version = SHM_VERSION;
  if (getrandom(&h->check, sizeof h->check, 0) != (ssize_t)sizeof h->check)
    return ringo_fail(ringoSystemError, "getrandom failed: %s", strerror(errno));
  h->slot_bytes = l->slot_bytes;
  h->nslots = l->nslots;
  h->creator_pid = (int32_t)getpid();

  struct shm_info in;
  memset(&in, 0, sizeof in);
  in.magic = SHM_MAGIC;
  in.version = SHM_VERSION;
  in.check = h->check;
  in.slot_bytes = h->slot_bytes;
  in.nslots = h->nslots;
  in.creator_pid = h->creator_pid;
  memcpy(in.name, l->name, sizeof in.name);
  memset(info, 0, RINGO_LINK_INFO_BYTES);
  memcpy(info, &in, sizeof in);
  return ringoSuccess;
}

/* The end that makes the segment: the receiver of a ring link (recv_setup), the sender of a link
 * made on first use (send_setup). */
static ringoResult_t create_end(const struct ringo_link_params* p, int is_recv, struct ringo_link** link, void* info) {
  if (link == NULL || info == NULL) return ringo_fail(ringoInvalidArgument, "shm link setup: NULL link or info");
  *link = NULL;
  RINGO_CHECK(check_params(p));
  size_t data_off, stride, total = segment_layout(p->slot_bytes, (uint64_t)p->nslots, &data_off, &stride);
  if (total == 0) return ringo_fail(ringoInvalidArgument, "shm link: segment size overflows");
  struct ringo_link* l = shm_link_new(p, is_recv);
  if (l == NULL) return ringo_fail(ringoSystemError, "shm link: out of memory");
  l->created = 1;
  int fd = -1;
  ringoResult_t res;
  RINGO_CHECK_GOTO(create_segment(l, total, &fd), res, fail);
  res = link_map(l, fd, total, data_off, stride);
  close(fd); /* the mapping keeps the segment alive */
  if (res != ringoSuccess) goto fail;
  RINGO_CHECK_GOTO(describe_segment(l, info), res, fail);
  RINGO_INFO(RINGO_LOG_SHM, "shm link %d->%d: created %s (%d x %zu bytes)", sender_rank(l), receiver_rank(l),
             l->name, p->nslots, p->slot_bytes);
  *link = l;
  return ringoSuccess;
fail:
  shm_close(l);
  return res;
}

static ringoResult_t shm_recv_setup(const struct ringo_link_params* p, struct ringo_link** link, void* info) {
  return create_end(p, 1, link, info);
}
static ringoResult_t shm_send_setup(const struct ringo_link_params* p, struct ringo_link** link, void* info) {
  return create_end(p, 0, link, info);
}

static ringoResult_t check_info(const struct ringo_link_params* p, const struct shm_info* in) {
  if (in->magic != SHM_MAGIC || in->version != SHM_VERSION)
    return ringo_fail(ringoRemoteError, "shm link %d->%d: link info from rank %d is not a ringo shm v%u description",
                      p->self_rank, p->peer_rank, p->peer_rank, SHM_VERSION);
  if (!ringo_segment_valid_name(in->name))
    return ringo_fail(ringoRemoteError, "shm link %d->%d: rank %d sent a malformed segment name",
                      p->self_rank, p->peer_rank, p->peer_rank);
  if (in->slot_bytes != p->slot_bytes || in->nslots != (uint32_t)p->nslots)
    return ringo_fail(ringoInvalidUsage,
                      "shm link %d->%d: rank %d uses %u slots of %llu bytes, this rank %d of %zu "
                      "(RINGO_NSLOTS / RINGO_SLICE_BYTES must match on every rank)",
                      p->self_rank, p->peer_rank, p->peer_rank, in->nslots, (unsigned long long)in->slot_bytes,
                      p->nslots, p->slot_bytes);
  return ringoSuccess;
}

static ringoResult_t check_segment_file(const struct ringo_link* l, int fd, size_t total) {
  ringoResult_t res = ringo_segment_check_object(l->name, fd, total);
  if (res != ringoSuccess) return ringo_annotate(res, "shm link %d->%d: %s", l->self_rank, l->peer_rank,
                                                 ringo_thread_last_error());
  return ringoSuccess;
}

static ringoResult_t check_header(const struct ringo_link* l, const struct shm_info* in) {
  const struct shm_header* h = l->hdr;
  if (h->magic != SHM_MAGIC || h->version != SHM_VERSION || h->check != in->check ||
      h->slot_bytes != in->slot_bytes || h->nslots != in->nslots || h->creator_pid != in->creator_pid)
    return ringo_fail(ringoRemoteError, "shm link %d->%d: segment %s does not match the link info of rank %d",
                      l->self_rank, l->peer_rank, l->name, l->peer_rank);
  return ringoSuccess;
}

/* The other end: attach to the segment the creator described in info. */
static ringoResult_t attach_end(const struct ringo_link_params* p, int is_recv, const void* info,
                                struct ringo_link** link) {
  if (link == NULL || info == NULL) return ringo_fail(ringoInvalidArgument, "shm link connect: NULL link or info");
  *link = NULL;
  RINGO_CHECK(check_params(p));
  struct shm_info in;
  memcpy(&in, info, sizeof in); /* a private copy: the caller's buffer may be unaligned or change */
  RINGO_CHECK(check_info(p, &in));
  size_t data_off, stride, total = segment_layout(in.slot_bytes, in.nslots, &data_off, &stride);
  if (total == 0) return ringo_fail(ringoInvalidArgument, "shm link: segment size overflows");
  struct ringo_link* l = shm_link_new(p, is_recv);
  if (l == NULL) return ringo_fail(ringoSystemError, "shm link: out of memory");
  memcpy(l->name, in.name, sizeof l->name);
  ringoResult_t res;
  int fd = shm_open(l->name, O_RDWR, 0);
  if (fd < 0) {
    const int maker = is_recv ? sender_rank(l) : receiver_rank(l); /* the other end made the segment */
    res = errno == ENOENT
              ? ringo_fail(ringoRemoteError, "shm link %d->%d: the segment %s that rank %d made is gone: that rank "
                           "exited or failed", sender_rank(l), receiver_rank(l), l->name, maker)
              : ringo_fail(ringoSystemError, "shm link %d->%d: shm_open(%s) failed: %s", sender_rank(l), receiver_rank(l),
                           l->name, strerror(errno));
    goto fail;
  }
  res = check_segment_file(l, fd, total);
  if (res == ringoSuccess) res = link_map(l, fd, total, data_off, stride);
  close(fd);
  if (res != ringoSuccess) goto fail;
  RINGO_CHECK_GOTO(check_header(l, &in), res, fail);
  atomic_store_explicit(&l->hdr->attacher_pid, (int32_t)getpid(), memory_order_release);
  RINGO_INFO(RINGO_LOG_SHM, "shm link %d->%d: attached to %s", sender_rank(l), receiver_rank(l), l->name);
  *link = l;
  return ringoSuccess;
fail:
  shm_close(l);
  return res;
}

static ringoResult_t shm_send_connect(const struct ringo_link_params* p, const void* info, struct ringo_link** link) {
  return attach_end(p, 0, info, link);
}
static ringoResult_t shm_recv_connect(const struct ringo_link_params* p, const void* info, struct ringo_link** link) {
  return attach_end(p, 1, info, link);
}

/* Called once the sender has mapped the segment (after a bootstrap barrier by both ends, or by
 * the sender alone right after it attached to a link made on first use): from here on a killed
 * job leaves nothing behind in /dev/shm, since the mappings die with the processes. Either end
 * may come first, so a name already gone is not an error. */
static ringoResult_t shm_setup_done(struct ringo_link* l) {
  if (l == NULL) return ringo_fail(ringoInvalidArgument, "shm setup_done: NULL link");
  if (!l->created || l->name_live) {
    l->name_live = 0;
    if (shm_unlink(l->name) != 0 && errno != ENOENT)
      return ringo_fail(ringoSystemError, "shm_unlink(%s) failed: %s", l->name, strerror(errno));
  }
  return ringoSuccess;
}

static void shm_close(struct ringo_link* l) {
  if (l == NULL) return;
  /* A sender that made a link and leaves before its receiver attached keeps the name, so the
   * messages it already handed off can still be received; the receiver unlinks it when it
   * attaches, or drops it unread at its own end (shm_discard). A poisoned link (the sender left
   * on an error) has nothing worth receiving. */
  const int undelivered = l->created && !l->is_recv && l->hdr != NULL &&
                          atomic_load_explicit(&l->hdr->attacher_pid, memory_order_acquire) == 0 &&
                          atomic_load_explicit(&l->hdr->head, memory_order_acquire) != 0 &&
                          atomic_load_explicit(&l->hdr->poisoned, memory_order_acquire) == 0;
  if (l->hdr != NULL) munmap(l->hdr, l->map_bytes);
  if (l->name_live && !undelivered) shm_unlink(l->name);
  free(l);
}

static void shm_discard(const void* info) {
  struct shm_info in;
  memcpy(&in, info, sizeof in);
  if (in.magic == SHM_MAGIC && ringo_segment_valid_name(in.name)) shm_unlink(in.name);
}

/* ---- waiting ----
 * The receiver waits for head to move past its tail, the sender for tail to free a slot. A
 * waiter polls `spin` times, then yields the CPU for yield_s (RINGO_YIELD_US) and at least
 * SHM_YIELDS times (ranks may outnumber cores; a slice's wait is usually shorter than that) —
 * unless ringo_yield finds that yielding hands the core to a stranger for a whole slice —
 * then sleeps on the peer's counter word in short futex waits. Where this wait takes MPI's turns
 * (transport.h: MPI links live, and this communicator has some or MPI runs at MPI_THREAD_MULTIPLE),
 * every round gives MPI one and the sleeps are 20 us.
 * Before sleeping it raises its
 * flag and re-reads the counter; the peer stores its counter and then reads the flag. All four
 * accesses are sequentially consistent, so they fall in one total order and at least one side
 * sees the other's store: either the waiter does not sleep or the peer wakes it, and no wake-up
 * is lost. (Fences would do the same but ThreadSanitizer cannot check them.) */

/* 1: the awaited condition holds for the peer's counter value v; 0: not yet; -1: v is impossible. */
static int peer_ready(const struct ringo_link* l, uint32_t v) {
  uint32_t filled = l->is_recv ? v - l->count : l->count - v;
  if (filled > l->nslots) return -1;
  if (l->draining) return filled == 0; /* sender flushing: every posted slot released */
  return l->is_recv ? filled != 0 : filled < l->nslots;
}

static const char* awaited(const struct ringo_link* l) { return l->is_recv ? "post data" : "release a slot"; }

/* The peer's pid when its process is gone, else 0. */
static pid_t peer_gone(const struct ringo_link* l) {
  const struct shm_header* h = l->hdr;
  pid_t pid = l->created ? atomic_load_explicit(&h->attacher_pid, memory_order_acquire) : h->creator_pid;
  if (pid <= 0) pid = l->peer_pid; /* not attached yet: the process init said the peer runs in */
  return pid > 0 && ringo_wait_pid_gone(pid) ? pid : 0;
}

/* The error the link was poisoned with (by either end: a rank that poisons its links waits on
 * none of them any more), or ringoSuccess. */
static ringoResult_t shm_poison_error(const struct ringo_link* l) {
  if (atomic_load_explicit(&l->hdr->poisoned, memory_order_acquire) != 1) return ringoSuccess;
  char msg[RINGO_POISON_MSG_BYTES];
  memcpy(msg, l->hdr->poison_msg, sizeof msg);
  msg[sizeof msg - 1] = '\0'; /* the peer wrote it: never trust it to be terminated */
  ringoResult_t code = (ringoResult_t)atomic_load_explicit(&l->hdr->poison_code, memory_order_relaxed);
  if (code <= ringoSuccess || code > ringoTimeout) code = ringoRemoteError;
  return ringo_fail(code, "%s", msg);
}

/* Everything that ends a wait other than the peer: poison, the caller's interrupt, abort, deadline,
 * a dead peer. */
static ringoResult_t shm_check_wait(const struct ringo_link* l, struct ringo_waiter* w, double now) {
  RINGO_CHECK(shm_poison_error(l));
  if (l->interrupt) RINGO_CHECK(l->interrupt(l->interrupt_ctx));
  switch (ringo_waiter_check(w, now)) {
    case RINGO_WAIT_ABORTED:
      return ringo_fail(ringoInvalidUsage, "rank %d: communicator aborted while waiting for rank %d to %s on shm link %d->%d",
                        l->self_rank, l->peer_rank, awaited(l), sender_rank(l), receiver_rank(l));
    case RINGO_WAIT_TIMED_OUT:
      return ringo_fail(ringoTimeout, "rank %d timed out after %.1f s waiting for rank %d to %s on shm link %d->%d",
                        l->self_rank, l->timeout_s, l->peer_rank, awaited(l), sender_rank(l), receiver_rank(l));
    case RINGO_WAIT_GO_ON:
      break;
  }
  if (ringo_waiter_liveness_due(w, now)) {
    const pid_t pid = peer_gone(l);
    /* The peer may have moved its counter just before it left, after the caller last looked: that
     * move still counts (the caller looks again, and a dead peer moves it no more). */
    atomic_uint* word = l->is_recv ? &l->hdr->head : &l->hdr->tail;
    if (pid && peer_ready(l, atomic_load_explicit(word, memory_order_acquire)) == 0) {
      /* A peer that failed poisons its links before it exits: a poison written after the look
       * above names the rank that failed first, which "exited" would hide. */
      RINGO_CHECK(shm_poison_error(l));
      return ringo_fail(ringoRemoteError, "rank %d (pid %d) exited while rank %d waited for it to %s on shm link %d->%d",
                        l->peer_rank, (int)pid, l->self_rank, awaited(l), sender_rank(l), receiver_rank(l));
    }
  }
  return ringoSuccess;
}

static ringoResult_t corrupt(const struct ringo_link* l, uint32_t v) {
  return ringo_fail(ringoRemoteError, "shm link %d->%d: counters are inconsistent (%s %u, %s %u, %u slots); "
                    "rank %d corrupted the segment", sender_rank(l), receiver_rank(l), l->is_recv ? "head" : "tail",
                    v, l->is_recv ? "tail" : "head", l->count, l->nslots, l->peer_rank);
}

static ringoResult_t wait_slow(struct ringo_link* l, atomic_uint* word, atomic_uint* my_flag) {
  const struct ringo_wait_policy policy = {
      .timeout_s = l->timeout_s, .abort_flag = l->abort_flag, .min_yields = SHM_YIELDS, .yield_s = l->yield_s, .crowded = l->crowded,
      .sleep_ns = SHM_SLEEP_NS, .net_sleep_ns = SHM_NET_SLEEP_NS, .liveness_s = SHM_LIVENESS_S,
      .net = l->net_turns ? RINGO_WAIT_NET_OWN : RINGO_WAIT_NET_SHARED};
  struct ringo_waiter w;
  ringo_waiter_start(&w, &policy, ringo_now());
  for (;;) {
    uint32_t v = atomic_load_explicit(word, memory_order_acquire);
    int ready = peer_ready(l, v);
    if (ready != 0) return ready > 0 ? ringoSuccess : corrupt(l, v);
    double now = ringo_now();
    RINGO_CHECK(shm_check_wait(l, &w, now));
    if (ringo_waiter_yield(&w, now)) continue;
    atomic_store_explicit(my_flag, 1, memory_order_seq_cst);
    v = atomic_load_explicit(word, memory_order_seq_cst);
    if (peer_ready(l, v) == 0) ringo_waiter_futex(&w, now, word, v);
    atomic_store_explicit(my_flag, 0, memory_order_relaxed);
  }
}

/* Fast path: no system call and no clock read while the peer keeps up. */
static ringoResult_t link_wait(struct ringo_link* l) {
  struct shm_header* h = l->hdr;
  atomic_uint* word = l->is_recv ? &h->head : &h->tail;
  for (int i = 0;; i++) {
    uint32_t v = atomic_load_explicit(word, memory_order_acquire);
    int ready = peer_ready(l, v);
    if (ready != 0) return ready > 0 ? ringoSuccess : corrupt(l, v);
    if (i >= l->spin) break;
    cpu_relax();
  }
  return wait_slow(l, word, l->is_recv ? &h->recv_sleeping : &h->send_sleeping);
}

/* Publishes this end's counter and wakes the peer only if it announced that it sleeps. */
static void publish(struct ringo_link* l) {
  struct shm_header* h = l->hdr;
  atomic_uint* mine = l->is_recv ? &h->tail : &h->head;
  atomic_uint* peer_flag = l->is_recv ? &h->send_sleeping : &h->recv_sleeping;
  l->count++;
  atomic_store_explicit(mine, l->count, memory_order_seq_cst);
  if (atomic_load_explicit(peer_flag, memory_order_seq_cst) != 0) futex_wake(mine);
}

/* ---- data path ---- */

static ringoResult_t shm_send_acquire(struct ringo_link* l, void** slot) {
  if (l == NULL || slot == NULL || l->is_recv)
    return ringo_fail(ringoInvalidUsage, "shm send_acquire: NULL argument or not the sending end");
  if (!l->holding) {
    RINGO_CHECK(link_wait(l));
    l->holding = 1;
  }
  *slot = l->slots + (size_t)(l->count % l->nslots) * l->stride;
  return ringoSuccess;
}

static ringoResult_t shm_send_post(struct ringo_link* l, size_t bytes) {
  if (l == NULL || l->is_recv || !l->holding)
    return ringo_fail(ringoInvalidUsage, "shm send_post without a slot from send_acquire");
  if (bytes > l->slot_bytes)
    return ringo_fail(ringoInvalidArgument, "shm send_post: %zu bytes exceed the slot size %zu", bytes, l->slot_bytes);
  atomic_store_explicit(&l->hdr->len[l->count % l->nslots], (uint64_t)bytes, memory_order_relaxed);
  l->holding = 0;
  publish(l);
  return ringoSuccess;
}

static ringoResult_t shm_recv_acquire(struct ringo_link* l, const void** slot, size_t* bytes) {
  if (l == NULL || slot == NULL || bytes == NULL || !l->is_recv)
    return ringo_fail(ringoInvalidUsage, "shm recv_acquire: NULL argument or not the receiving end");
  uint32_t idx = l->count % l->nslots;
  if (!l->holding) {
    RINGO_CHECK(link_wait(l));
    uint64_t n = atomic_load_explicit(&l->hdr->len[idx], memory_order_relaxed);
    if (n > l->slot_bytes)
      return ringo_fail(ringoRemoteError, "shm link %d->%d: rank %d posted %llu bytes into a %zu-byte slot",
                        l->peer_rank, l->self_rank, l->peer_rank, (unsigned long long)n, l->slot_bytes);
    l->held_bytes = (size_t)n;
    l->holding = 1;
  }
  *slot = l->slots + (size_t)idx * l->stride;
  *bytes = l->held_bytes;
  return ringoSuccess;
}

static ringoResult_t shm_recv_release(struct ringo_link* l) {
  if (l == NULL || !l->is_recv || !l->holding)
    return ringo_fail(ringoInvalidUsage, "shm recv_release without a slot from recv_acquire");
  l->holding = 0;
  publish(l);
  return ringoSuccess;
}

static ringoResult_t shm_poll(struct ringo_link* l, int* ready) {
  if (l == NULL || ready == NULL) return ringo_fail(ringoInvalidUsage, "shm poll: NULL argument");
  *ready = 1;
  if (l->holding) return ringoSuccess;
  uint32_t v = atomic_load_explicit(l->is_recv ? &l->hdr->head : &l->hdr->tail, memory_order_acquire);
  int r = peer_ready(l, v);
  if (r < 0) return corrupt(l, v);
  *ready = r;
  if (r) return ringoSuccess;
  /* The caller owns the deadline: a poll looks at poison, interrupt, abort and liveness. */
  const double now = ringo_now();
  const struct ringo_wait_policy policy = {.timeout_s = l->timeout_s, .abort_flag = l->abort_flag,
                                           .liveness_s = SHM_LIVENESS_S};
  struct ringo_waiter w;
  ringo_waiter_start(&w, &policy, now);
  w.next_alive = l->next_alive;
  const ringoResult_t res = shm_check_wait(l, &w, now);
  l->next_alive = w.next_alive;
  return res;
}

static ringoResult_t shm_flush(struct ringo_link* l) {
  if (l == NULL || l->is_recv) return ringo_fail(ringoInvalidUsage, "shm flush: not the sending end");
  l->draining = 1;
  ringoResult_t res = link_wait(l);
  l->draining = 0;
  return res;
}

static void shm_poison(struct ringo_link* l, ringoResult_t code, const char* msg) {
  if (l == NULL) return;
  struct shm_header* h = l->hdr;
  unsigned expected = 0;
  /* The first error wins; a neighbour passing it on around the ring leaves it as it is. */
  if (!atomic_compare_exchange_strong(&h->poisoned, &expected, 2)) return;
  snprintf(h->poison_msg, sizeof h->poison_msg, "%s", msg);
  atomic_store_explicit(&h->poison_code, (int32_t)code, memory_order_relaxed);
  atomic_store_explicit(&h->poisoned, 1, memory_order_seq_cst);
  futex_wake(&h->head);
  futex_wake(&h->tail);
}

/* Shared memory joins ranks of one host; forced, it joins any (ranks of fake hosts on one machine). */
static int shm_can_connect(const struct ringo_link_ends* e) { return e->same_host || e->forced; }

const struct ringo_transport ringo_transport_shm = {
    .name = "shm",
    .can_connect = shm_can_connect,
    .recv_setup = shm_recv_setup,
    .send_connect = shm_send_connect,
    .setup_done = shm_setup_done,
    .send_setup = shm_send_setup,
    .recv_connect = shm_recv_connect,
    .discard = shm_discard,
    .local_info = NULL, /* the sender needs the segment's name from the receiver */
    .send_acquire = shm_send_acquire,
    .send_post = shm_send_post,
    .recv_acquire = shm_recv_acquire,
    .recv_release = shm_recv_release,
    .poll = shm_poll,
    .flush = shm_flush,
    .poison = shm_poison,
    .peer_poisoned = shm_poison_error,
    .close = shm_close,
};
