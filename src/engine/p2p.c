/* p2p.c — ringoSend / ringoRecv: messages between any two ranks over links made on first use, and
 * the engine that progresses every send and receive of a group together so no pattern deadlocks.
 * Tested by test/test_p2p.cc (and through the NCCL shim by test/test_nccl_program.cc). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "comm/comm.h"
#include "device/device.h"
#include "reduce/reduce.h"

/* Every slice of a message starts with this header, so a receiver that expects another count or
 * type, or a slice out of place, is caught instead of reading garbage. 64 bytes, like the
 * collectives' fingerprint, so the payload stays aligned. */
struct p2p_header {
  uint32_t magic, type;
  uint64_t seq, count, offset; /* message number on this link, its elements, this slice's first byte */
};
#define P2P_HEADER 64
#define P2P_MAGIC 0x50325031u /* "P2P1" */
_Static_assert(sizeof(struct p2p_header) <= P2P_HEADER, "p2p header too large");

#define P2P_YIELDS 16       /* idle passes that yield at least, before the engine may nap */
#define P2P_NAP_NS 20000L   /* a nap: short next to a slice's transfer, long next to a poll */
#define P2P_LIVENESS_S 0.1  /* how often a sender waiting for a receiver's link asks if it exists */

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

ringoResult_t ringo_p2p_setup(ringoComm_t comm, const struct ringo_rendezvous* rv) {
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
    res = ringo_shm_segment_create(comm->mailbox_bytes, mine, &comm->mailbox);
  /* Every rank takes part in the allgather and the barrier, even one alone on its host. */
  if (res == ringoSuccess) res = rv->allgather(rv->ctx, mine, sizeof mine, names);
  if (res == ringoSuccess && leader != comm->rank && nlocal > 1) {
    names[(size_t)leader * sizeof mine + sizeof mine - 1] = '\0';
    res = ringo_shm_segment_attach(names + (size_t)leader * sizeof mine, comm->mailbox_bytes, &comm->mailbox);
  }
  if (res == ringoSuccess) res = rv->barrier(rv->ctx);
  if (mine[0]) shm_unlink(mine); /* mapped by every rank of the host now, or never will be */
  free(names);
  return res;
}

void ringo_p2p_free(ringoComm_t comm) {
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
static ringoResult_t open_send_link(ringoComm_t comm, int peer) {
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
static ringoResult_t try_open_recv_link(ringoComm_t comm, int peer, double* next_alive, int* ready) {
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
    *next_alive = now + P2P_LIVENESS_S;
    if (!ringo_shm_pid_gone(comm->info[peer].pid)) return ringoSuccess;
    /* A sender posts its link before its send returns, and shm keeps the link's segment for a
     * receiver that attaches after the sender left: so a sender that posted between the two loads
     * and then exited left its message behind. Only one gone with nothing posted never sent. */
    if (atomic_load_explicit(&e->posted, memory_order_acquire) == 0)
      return ringo_fail(ringoRemoteError, "rank %d (pid %d) exited while rank %d waited for it to send", peer,
                        (int)comm->info[peer].pid, comm->rank);
    *ready = 1;
  }
  memcpy(info, e->info, sizeof info);
  RINGO_CHECK(c->tp->recv_connect(&p, info, &c->link));
  return c->tp->setup_done(c->link);
}

/* ---- messages ---- */

/* One send or receive of a batch, and how far it got. */
struct task {
  const struct ringo_op* op;
  size_t bytes, done;
  uint64_t seq;
  int finished;
  double next_alive;
  struct task* self_recv; /* a send to this rank: the receive it fills (pair_self) */
  int self_paired;        /* a receive from this rank: filled by its send */
};

static const char* kind_name(const struct ringo_op* op) { return op->kind == RINGO_KIND_SEND ? "ringoSend" : "ringoRecv"; }

static ringoResult_t header_mismatch(ringoComm_t comm, const struct task* t, const struct p2p_header* h, size_t got) {
  const struct ringo_op* op = t->op;
  if (got < P2P_HEADER || h->magic != P2P_MAGIC)
    return ringo_fail(ringoRemoteError, "rank %d: ringoRecv from rank %d got a malformed %zu-byte slice", comm->rank,
                      op->peer, got);
  return ringo_fail(ringoInvalidUsage, "point-to-point mismatch: rank %d's ringoRecv #%llu from rank %d expects %zu x %s "
                    "(slice at byte %zu), but rank %d's ringoSend #%llu sent %llu x %s (slice at byte %llu)",
                    comm->rank, (unsigned long long)t->seq, op->peer, op->count, ringo_type_name(op->type), t->done,
                    op->peer, (unsigned long long)h->seq, (unsigned long long)h->count,
                    ringo_type_name((ringoDataType_t)h->type), (unsigned long long)h->offset);
}

/* With phases, a send's bytes [0, limit) are staged: a slice past them waits (not ready). */
static ringoResult_t staged_limit(const ringoComm_t comm, const struct task* t, const struct ringo_p2p_phases* ph,
                                  size_t* limit) {
  *limit = t->bytes;
  if (!ph || t->op->kind != RINGO_KIND_SEND) return ringoSuccess;
  const int staged = ph->staged(ph->ctx);
  if (staged < 0)
    return ringo_fail(ringoInvalidUsage, "rank %d: a device send's bytes never reached host memory (its stream failed, "
                      "or the communicator was aborted, torn down or in error first)", comm->rank);
  if (staged < ph->n && (size_t)staged * ph->piece < *limit) *limit = (size_t)staged * ph->piece;
  return ringoSuccess;
}

/* Tells the stream (ph->done) each phase every receive of the batch now holds, but the last. */
static void report_received(const struct task* tasks, size_t n, const struct ringo_p2p_phases* ph, int* reported) {
  size_t least = SIZE_MAX;
  for (size_t i = 0; i < n; i++)
    if (tasks[i].op->kind == RINGO_KIND_RECV && !tasks[i].finished && tasks[i].done < least) least = tasks[i].done;
  const size_t whole = least == SIZE_MAX ? (size_t)ph->n : least / ph->piece;
  const int held = whole < (size_t)ph->n - 1 ? (int)whole : ph->n - 1;
  while (*reported < held) ph->done(ph->ctx, (*reported)++);
}

/* Moves one slice of t if its link is ready (or waits for it when may_block: the last task left
 * has nobody else to make way for). *moved = 1 when a slice moved. */
static ringoResult_t task_step(ringoComm_t comm, struct task* t, const struct ringo_p2p_phases* ph, int may_block,
                               int* moved) {
  const struct ringo_op* op = t->op;
  const int sending = op->kind == RINGO_KIND_SEND;
  struct ringo_conn* c = sending ? &comm->p2p[op->peer].send : &comm->p2p[op->peer].recv;
  int ready = 1;
  *moved = 0;
  if (sending) RINGO_CHECK(open_send_link(comm, op->peer));
  else RINGO_CHECK(try_open_recv_link(comm, op->peer, &t->next_alive, &ready));
  if (ready && !may_block) RINGO_CHECK(c->tp->poll(c->link, &ready));
  if (!ready) return ringoSuccess;
  /* At most a slot's payload; a send staged in phases stops where the stream has staged so far
   * (a receiver takes any slice up to a slot that continues the message where it stands). */
  size_t n = t->bytes - t->done < comm->slot_bytes - P2P_HEADER ? t->bytes - t->done : comm->slot_bytes - P2P_HEADER;
  size_t limit;
  RINGO_CHECK(staged_limit(comm, t, ph, &limit));
  if (t->done >= limit) return ringoSuccess; /* not staged yet: not ready */
  if (t->done + n > limit) n = limit - t->done;
  const struct p2p_header mine = {P2P_MAGIC, (uint32_t)op->type, t->seq, op->count, t->done};
  if (sending) {
    void* slot;
    RINGO_CHECK(c->tp->send_acquire(c->link, &slot));
    memcpy(slot, &mine, sizeof mine);
    ringo_copy2((char*)slot + P2P_HEADER, NULL, (const char*)op->sendbuff + t->done, n);
    RINGO_CHECK(c->tp->send_post(c->link, n + P2P_HEADER));
    atomic_fetch_add_explicit(&comm->bytes_sent, n, memory_order_relaxed);
  } else {
    const void* slot;
    size_t got;
    struct p2p_header theirs = {0};
    RINGO_CHECK(c->tp->recv_acquire(c->link, &slot, &got));
    if (got >= P2P_HEADER) memcpy(&theirs, slot, sizeof theirs);
    if (got <= P2P_HEADER || got > n + P2P_HEADER || memcmp(&theirs, &mine, sizeof mine) != 0)
      return header_mismatch(comm, t, &theirs, got);
    n = got - P2P_HEADER;
    ringo_copy2((char*)op->recvbuff + t->done, NULL, (const char*)slot + P2P_HEADER, n);
    RINGO_CHECK(c->tp->recv_release(c->link));
    atomic_fetch_add_explicit(&comm->bytes_received, n, memory_order_relaxed);
  }
  t->done += n;
  t->finished = t->done == t->bytes;
  *moved = 1;
  return ringoSuccess;
}

/* Sends and receives to oneself pair up in call order inside the batch; progress copies the data
 * (self_step), as far as it is staged. */
static ringoResult_t pair_self(ringoComm_t comm, struct task* tasks, size_t n) {
  size_t r = 0;
  for (size_t s = 0; s < n; s++) {
    const struct ringo_op* send = tasks[s].op;
    if (send->kind != RINGO_KIND_SEND || send->peer != comm->rank) continue;
    while (r < n && (tasks[r].op->kind != RINGO_KIND_RECV || tasks[r].op->peer != comm->rank)) r++;
    if (r == n)
      return ringo_fail(ringoInvalidUsage, "rank %d: ringoSend to itself needs a matching ringoRecv from itself in the "
                        "same group", comm->rank);
    const struct ringo_op* recv = tasks[r].op;
    if (recv->count != send->count || recv->type != send->type)
      return ringo_fail(ringoInvalidUsage, "point-to-point mismatch: rank %d sends %zu x %s to itself but receives "
                        "%zu x %s", comm->rank, send->count, ringo_type_name(send->type), recv->count,
                        ringo_type_name(recv->type));
    tasks[s].self_recv = &tasks[r];
    tasks[r].self_paired = 1;
    r++;
  }
  for (; r < n; r++)
    if (tasks[r].op->kind == RINGO_KIND_RECV && tasks[r].op->peer == comm->rank && !tasks[r].self_paired)
      return ringo_fail(ringoInvalidUsage, "rank %d: ringoRecv from itself needs a matching ringoSend to itself in "
                        "the same group", comm->rank);
  return ringoSuccess;
}

/* A send to this rank: copies what is staged of it into its receive. */
static ringoResult_t self_step(ringoComm_t comm, struct task* t, const struct ringo_p2p_phases* ph, int* moved) {
  size_t limit;
  *moved = 0;
  RINGO_CHECK(staged_limit(comm, t, ph, &limit));
  if (t->done >= limit) return ringoSuccess;
  memmove((char*)t->self_recv->op->recvbuff + t->done, (const char*)t->op->sendbuff + t->done, limit - t->done);
  t->done = t->self_recv->done = limit;
  t->finished = t->self_recv->finished = limit == t->bytes;
  *moved = 1;
  return ringoSuccess;
}

/* A message waits for the earlier ones on its link: each link is a FIFO. */
static int waits_for_earlier(const struct task* tasks, size_t i) {
  for (size_t j = 0; j < i; j++)
    if (!tasks[j].finished && tasks[j].op->kind == tasks[i].op->kind && tasks[j].op->peer == tasks[i].op->peer)
      return 1;
  return 0;
}

/* Names the first message still moving (a receive from this rank moves with its send), and what it
 * waits for: the sender's link, or (a device send staged in phases) its stream's copies. */
static ringoResult_t stalled(ringoComm_t comm, const struct task* tasks, size_t n, const struct ringo_p2p_phases* ph,
                             int aborted) {
  size_t i = 0;
  while (i < n && (tasks[i].finished || tasks[i].self_paired)) i++;
  const struct task* t = &tasks[i < n ? i : 0];
  size_t limit = t->bytes;
  if (staged_limit(comm, t, ph, &limit) != ringoSuccess) limit = t->done;
  const char* link = t->op->kind == RINGO_KIND_RECV && t->op->peer != comm->rank && !comm->p2p[t->op->peer].recv.link
                         ? " (the sender has not made the link yet)"
                     : t->done >= limit ? " (waiting for its stream to stage the bytes after these)" : "";
  if (aborted)
    return ringo_fail(ringoInvalidUsage, "rank %d: communicator aborted during %s #%llu %s rank %d", comm->rank,
                      kind_name(t->op), (unsigned long long)t->seq, t->op->kind == RINGO_KIND_SEND ? "to" : "from",
                      t->op->peer);
  return ringo_fail(ringoTimeout, "rank %d timed out after %.1f s without progress: %s #%llu %s rank %d moved %zu of "
                    "%zu bytes%s", comm->rank, comm->env.timeout_s, kind_name(t->op), (unsigned long long)t->seq,
                    t->op->kind == RINGO_KIND_SEND ? "to" : "from", t->op->peer, t->done, t->bytes, link);
}

/* Round-robin over the unfinished tasks, moving every slice whose link is ready; when a whole
 * pass moves nothing, yield for RINGO_YIELD_US (and P2P_YIELDS passes) as the shm waits do, then
 * nap — bounded by RINGO_TIMEOUT without progress. A peer that is late or slow to free a slot is
 * usually back within the yields: napping after 16 quick passes made every stall of a 2 MiB group
 * exchange sleep a timer slice — with the peer 150-300 us late it took 1.1-2x as long as now. */
static ringoResult_t progress(ringoComm_t comm, struct task* tasks, size_t n, const struct ringo_p2p_phases* ph) {
  size_t left = 0;
  for (size_t i = 0; i < n; i++) left += !tasks[i].finished;
  const struct timespec nap = {0, P2P_NAP_NS};
  double stall_start = 0;
  int reported = 0; /* phases every receive holds, told to the stream */
  if (ph) report_received(tasks, n, ph, &reported);
  for (int idle = 0; left > 0;) {
    int progressed = 0;
    for (size_t i = 0; i < n; i++) {
      struct task* t = &tasks[i];
      if (t->finished || t->self_paired || waits_for_earlier(tasks, i)) continue;
      for (int moved = 1; moved && !t->finished;) {
        ringoResult_t res = t->self_recv ? self_step(comm, t, ph, &moved) : task_step(comm, t, ph, left == 1, &moved);
        if (res != ringoSuccess)
          return ringo_annotate(res, "%s [in %s #%llu %s rank %d, at byte %zu of %zu]", ringo_thread_last_error(),
                                kind_name(t->op), (unsigned long long)t->seq,
                                t->op->kind == RINGO_KIND_SEND ? "to" : "from", t->op->peer, t->done, t->bytes);
        progressed |= moved;
        if (ph && moved && (t->op->kind == RINGO_KIND_RECV || t->self_recv)) report_received(tasks, n, ph, &reported);
      }
      left -= t->finished + (t->self_recv && t->finished); /* a send to itself finishes its receive too */
    }
    if (progressed) {
      idle = 0;
      continue;
    }
    const double now = ringo_now();
    if (idle++ == 0) stall_start = now;
    /* Waiting for a device stream to stage a send's next phase counts too: its copies take
     * milliseconds, and a stream that never gets there must not hold the proxy for ever. */
    if (atomic_load_explicit(&comm->abort_flag, memory_order_relaxed)) return stalled(comm, tasks, n, ph, 1);
    if (now - stall_start > comm->env.timeout_s) return stalled(comm, tasks, n, ph, 0);
    ringo_net_progress(ringo_comm_net_turns(comm)); /* shm links and the mailbox do not call MPI, which may owe a peer a send */
    const int yielding = idle < P2P_YIELDS || now - stall_start < comm->env.yield_us * 1e-6;
    if (!yielding || !ringo_yield()) nanosleep(&nap, NULL);
  }
  return ringoSuccess;
}

static ringoResult_t run_batch(ringoComm_t comm, struct task* tasks, const struct ringo_op* const* ops, size_t n,
                               const struct ringo_p2p_phases* ph) {
  for (size_t i = 0; i < n; i++) {
    struct ringo_p2p_peer* pp = &comm->p2p[ops[i]->peer];
    tasks[i].op = ops[i];
    tasks[i].bytes = ops[i]->count * ringo_type_size(ops[i]->type);
    tasks[i].finished = tasks[i].bytes == 0; /* both ends skip an empty message */
    if (!tasks[i].finished && ops[i]->peer != comm->rank)
      tasks[i].seq = ops[i]->kind == RINGO_KIND_SEND ? pp->sent++ : pp->received++;
  }
  RINGO_CHECK(pair_self(comm, tasks, n));
  return progress(comm, tasks, n, ph);
}

static ringoResult_t run_p2p(ringoComm_t comm, const struct ringo_op* const* ops, size_t n, int after_device,
                             const struct ringo_p2p_phases* ph) {
  ringoResult_t res = ringo_comm_check_usable(comm, kind_name(ops[0]));
  if (res != ringoSuccess) return ringo_comm_record(comm, res);
  struct task* tasks = calloc(n, sizeof *tasks);
  if (!tasks) return ringo_comm_record(comm, ringo_fail(ringoSystemError, "out of memory for %zu sends/receives", n));
  atomic_fetch_add(&comm->inflight, 1);
  /* The proxy of device sends and receives drives the same links from its own thread. */
  if (after_device) res = ringo_device_quiesce(comm);
  if (res == ringoSuccess) res = run_batch(comm, tasks, ops, n, ph);
  if (res != ringoSuccess) ringo_comm_fail(comm, res);
  free(tasks);
  /* Last touch of comm: once inflight drops, a ringoCommAbort in another thread may free it. */
  atomic_fetch_sub(&comm->inflight, 1);
  return res;
}

ringoResult_t ringo_p2p_run(ringoComm_t comm, const struct ringo_op* const* ops, size_t n) {
  return run_p2p(comm, ops, n, 1, NULL);
}

ringoResult_t ringo_p2p_run_device(ringoComm_t comm, const struct ringo_op* const* ops, size_t n, int join) {
  ringoResult_t res = ringo_comm_check_usable(comm, kind_name(ops[0]));
  if (res != ringoSuccess) return ringo_comm_record(comm, res);
  atomic_fetch_add(&comm->inflight, 1);
  res = ringo_device_p2p_launch(comm, ops, n);
  /* Joined even after a failure: copies already queued may still write the receive buffers. */
  for (size_t i = 0; join && i < n; i++) {
    const ringoResult_t r = ringo_device_join(ops[i]);
    if (res == ringoSuccess) res = r;
  }
  if (res != ringoSuccess) ringo_comm_fail(comm, res); /* a half-enqueued batch leaves the links out of step */
  atomic_fetch_sub(&comm->inflight, 1);
  return res;
}

ringoResult_t ringo_p2p_run_staged(ringoComm_t comm, const struct ringo_op* const* ops, size_t n,
                                   const struct ringo_p2p_phases* phases) {
  return run_p2p(comm, ops, n, 0, phases);
}

/* ---- the public entry points ---- */

static ringoResult_t submit(struct ringo_op op, ringoStream_t stream) {
  op.stream = stream;
  ringo_thread_clear_error();
  const char* name = kind_name(&op);
  const ringoComm_t comm = op.comm;
  if (!comm) return ringo_fail(ringoInvalidArgument, "%s: comm is NULL", name);
  const size_t esize = ringo_type_size(op.type);
  const void* buf = op.kind == RINGO_KIND_SEND ? op.sendbuff : op.recvbuff;
  ringoResult_t res = ringoSuccess;
  if (atomic_load(&comm->abort_flag)) res = ringo_fail(ringoInvalidUsage, "%s: comm was aborted", name);
  else if (esize == 0) res = ringo_fail(ringoInvalidArgument, "%s: invalid datatype %d", name, (int)op.type);
  else if (op.peer < 0 || op.peer >= comm->nranks)
    res = ringo_fail(ringoInvalidArgument, "%s: peer %d out of range [0, %d)", name, op.peer, comm->nranks);
  else if (op.count > SIZE_MAX / esize)
    res = ringo_fail(ringoInvalidArgument, "%s: count %zu of %s overflows the address space", name, op.count,
                     ringo_type_name(op.type));
  else if (op.count > 0 && !buf)
    res = ringo_fail(ringoInvalidArgument, "%s: %s is NULL with count %zu", name,
                     op.kind == RINGO_KIND_SEND ? "sendbuff" : "recvbuff", op.count);
  else if ((op.device = op.count > 0 && ringo_device_is_device_ptr(buf)))
    res = ringo_device_check(&op, stream, ringo_group_active(), name);
  else if (stream && op.count > 0) /* count 0 with a stream is a no-op, as in NCCL */
    res = ringo_fail(ringoInvalidArgument, "%s: a stream was given with a host buffer; point-to-point on host "
                     "memory runs on the calling thread: pass NULL", name);
  if (res != ringoSuccess) return ringo_comm_record(comm, res);
  /* An empty message moves nothing at either end (the engine skips it too): queueing it would
   * only make a group wait, e.g. for the communicator's device work before a host batch. A
   * communicator in error still says so, as a collective of count 0 does. */
  if (op.count == 0 && atomic_load(&comm->error) != ringoSuccess)
    return ringo_comm_record(comm, ringo_comm_check_usable(comm, name));
  if (op.count == 0) return ringoSuccess;
  if (ringo_group_enqueue(&op, &res)) return ringo_comm_record(comm, res);
  /* Caught before anything moves, so the communicator stays usable. */
  if (op.peer == comm->rank)
    return ringo_comm_record(comm, ringo_fail(ringoInvalidUsage, "%s: rank %d %s itself outside a group; put the "
                                              "ringoSend and the ringoRecv in one ringoGroupStart/End", name,
                                              comm->rank, op.kind == RINGO_KIND_SEND ? "sends to" : "receives from"));
  const struct ringo_op* one = &op;
  if (op.device) return ringo_p2p_run_device(comm, &one, 1, 1);
  return ringo_p2p_run(comm, &one, 1);
}

ringoResult_t ringoSend(const void* sendbuff, size_t count, ringoDataType_t datatype, int peer, ringoComm_t comm,
                        ringoStream_t stream) {
  return submit((struct ringo_op){.kind = RINGO_KIND_SEND, .peer = peer, .sendbuff = sendbuff, .count = count,
                                  .type = datatype, .comm = comm},
                stream);
}

ringoResult_t ringoRecv(void* recvbuff, size_t count, ringoDataType_t datatype, int peer, ringoComm_t comm,
                        ringoStream_t stream) {
  return submit((struct ringo_op){.kind = RINGO_KIND_RECV, .peer = peer, .recvbuff = recvbuff, .count = count,
                                  .type = datatype, .comm = comm},
                stream);
}
