/* p2p.c — the point-to-point engine: messages between any two ranks over links made on first use
 * (comm/mailbox.c), every send and receive of a batch progressed together so no pattern deadlocks.
 * Tested by test/test_p2p.cc (and through the NCCL shim by test/test_nccl_program.cc). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "engine/p2p.h"

#include "comm/mailbox.h"
#include "core/wait.h"
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

const char* ringo_p2p_name(const struct ringo_op* op) { return op->kind == RINGO_KIND_SEND ? "ringoSend" : "ringoRecv"; }

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
  if (sending) RINGO_CHECK(ringo_mailbox_open_send(comm, op->peer));
  else RINGO_CHECK(ringo_mailbox_try_open_recv(comm, op->peer, &t->next_alive, &ready));
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
                      ringo_p2p_name(t->op), (unsigned long long)t->seq, t->op->kind == RINGO_KIND_SEND ? "to" : "from",
                      t->op->peer);
  return ringo_fail(ringoTimeout, "rank %d timed out after %.1f s without progress: %s #%llu %s rank %d moved %zu of "
                    "%zu bytes%s", comm->rank, comm->env.timeout_s, ringo_p2p_name(t->op), (unsigned long long)t->seq,
                    t->op->kind == RINGO_KIND_SEND ? "to" : "from", t->op->peer, t->done, t->bytes, link);
}

/* Round-robin over the unfinished tasks, moving every slice whose link is ready; when a whole
 * pass moves nothing, yield for RINGO_YIELD_US (and P2P_YIELDS passes) as the shm waits do, then
 * nap — bounded by RINGO_TIMEOUT without progress. A peer that is late or slow to free a slot is
 * usually back within the yields; napping after a few quick passes made every stall sleep a timer
 * slice (docs/performance.md). */
static ringoResult_t progress(ringoComm_t comm, struct task* tasks, size_t n, const struct ringo_p2p_phases* ph) {
  size_t left = 0;
  for (size_t i = 0; i < n; i++) left += !tasks[i].finished;
  /* Waiting for a device stream to stage a send's next phase counts too: its copies take
   * milliseconds, and a stream that never gets there must not hold the proxy for ever. Shm links
   * and the mailbox do not call MPI, which may owe a peer a send: the wait gives it turns. */
  const struct ringo_wait_policy policy = {
      .timeout_s = comm->env.timeout_s, .abort_flag = &comm->abort_flag, .min_yields = P2P_YIELDS,
      .yield_s = comm->env.yield_us * 1e-6, .sleep_ns = P2P_NAP_NS, .crowded = comm->crowded,
      .net = ringo_comm_net_turns(comm) ? RINGO_WAIT_NET_OWN : RINGO_WAIT_NET_SHARED};
  struct ringo_waiter w;
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
          return ringo_say_where(res, "%s #%llu %s rank %d, at byte %zu of %zu", ringo_p2p_name(t->op),
                                 (unsigned long long)t->seq, t->op->kind == RINGO_KIND_SEND ? "to" : "from",
                                 t->op->peer, t->done, t->bytes);
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
    if (idle++ == 0) ringo_waiter_start(&w, &policy, now); /* a stall begins: its own deadline */
    const enum ringo_wait_end end = ringo_waiter_check(&w, now);
    if (end != RINGO_WAIT_GO_ON) return stalled(comm, tasks, n, ph, end == RINGO_WAIT_ABORTED);
    if (!ringo_waiter_yield(&w, now)) ringo_waiter_sleep(&w, now);
  }
  return ringoSuccess;
}

/* Whether any op of the batch names another rank: only then can a refusal leave a peer waiting. */
static int involves_peers(const ringoComm_t comm, const struct ringo_op* const* ops, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (ops[i]->peer != comm->rank) return 1;
  return 0;
}

/* *peers_wait: the error may have left other ranks waiting on this batch (then the communicator is
 * failed, so they learn it); 0 for a batch of self sends and receives that does not pair up, which
 * is refused before anything moved. */
static ringoResult_t run_batch(ringoComm_t comm, struct task* tasks, const struct ringo_op* const* ops, size_t n,
                               const struct ringo_p2p_phases* ph, int* peers_wait) {
  for (size_t i = 0; i < n; i++) {
    tasks[i].op = ops[i];
    tasks[i].bytes = ops[i]->count * ringo_type_size(ops[i]->type);
    tasks[i].finished = tasks[i].bytes == 0; /* both ends skip an empty message */
  }
  *peers_wait = involves_peers(comm, ops, n);
  RINGO_CHECK(pair_self(comm, tasks, n));
  *peers_wait = 1;
  for (size_t i = 0; i < n; i++) {
    struct ringo_p2p_peer* pp = &comm->p2p[ops[i]->peer];
    if (!tasks[i].finished && ops[i]->peer != comm->rank)
      tasks[i].seq = ops[i]->kind == RINGO_KIND_SEND ? pp->sent++ : pp->received++;
  }
  return progress(comm, tasks, n, ph);
}

ringoResult_t ringo_p2p_run(ringoComm_t comm, const struct ringo_op* const* ops, size_t n,
                            const struct ringo_p2p_phases* ph) {
  ringoResult_t res = ringo_comm_check_usable(comm, ringo_p2p_name(ops[0]));
  if (res != ringoSuccess) return ringo_comm_record(comm, res);
  struct task* tasks = calloc(n, sizeof *tasks);
  if (!tasks) return ringo_comm_record(comm, ringo_fail(ringoSystemError, "out of memory for %zu sends/receives", n));
  atomic_fetch_add(&comm->inflight, 1);
  int peers_wait = 1;
  res = run_batch(comm, tasks, ops, n, ph, &peers_wait);
  /* A device batch's stream learns of a failure only from the communicator's error: always failed. */
  if (res != ringoSuccess && (peers_wait || ops[0]->device)) ringo_comm_fail(comm, res);
  else ringo_comm_record(comm, res);
  free(tasks);
  /* Last touch of comm: once inflight drops, a ringoCommAbort in another thread may free it. */
  atomic_fetch_sub(&comm->inflight, 1);
  return res;
}
