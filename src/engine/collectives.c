/* collectives.c — the host engine of AllReduce, ReduceScatter, AllGather, Broadcast, Reduce: walk the
 * schedule of sched/schedule.c and move each chunk as slices over the links, reducing with reduce.c.
 * Tested by test/test_collectives.cc (all collectives, dtypes, ops, N, counts) and test_api.cc. */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/collectives.h"

#include "comm/board.h"
#include "engine/oneshot.h"
#include "engine/trace.h"
#include "reduce/reduce.h"

/* One walk of the host engine: a schedule around one ring's two links, over a region of the buffers
 * that it cuts into that ring's chunks. The flat ring is one walk over the whole call (ringo_ring_run);
 * the two-level ring is three (run_two_level, from ringo_two_level_run). */
struct walk {
  enum ringo_walk_level level;
  struct ringo_conn *send, *recv;
  int n, pos;                     /* the ring's size and this rank's place in it */
  enum ringo_coll coll;           /* whose chunk geometry (schedule.h): the call's, or all-reduce over the region */
  size_t count;                   /* the region's elements (the call's count on the flat ring) */
  const char* in;                 /* the region in the input and the output (NULL where this rank has none) */
  char* out;
  size_t slice;                   /* elements per slice */
  ringoRedOp_t last_op;           /* op of a step that keeps its value: the call's, or a partial one */
  const struct ringo_step* steps;
  int nsteps;
  const int* blocks;              /* reduce-scatter, all-gather: the block of ring position q (schedule.h) */
  int part;                       /* which of a two-level collective's host walks (the host it serves), for the trace */
};

/* Where chunk c of a walk lives (schedule.h). */
struct chunk_geom { size_t in_off, out_off, len; };

static struct chunk_geom chunk_at(const struct walk* w, int c) {
  struct chunk_geom g;
  ringo_chunk_geometry(w->coll, w->count, w->n, w->blocks, c, &g.in_off, &g.out_off, &g.len);
  return g;
}

/* Every slice starts with the fingerprint of the collective it belongs to (comm.h), so a rank that
 * called another collective, count, type, op or root — or skipped one — is caught at its first
 * slice instead of hanging or computing garbage. The payload starts 64 bytes in, still aligned. */
#define SLICE_HEADER RINGO_FINGERPRINT_BYTES

/* Link helpers: fingerprints are written and checked, and every payload byte that crosses a link
 * is counted, here and only here. */
static ringoResult_t conn_recv(const struct ringo_op* op, struct ringo_conn* c, size_t bytes, const void** payload) {
  const void* slot = NULL;
  size_t got = 0;
  RINGO_CHECK(c->tp->recv_acquire(c->link, &slot, &got));
  struct ringo_fingerprint theirs = {0}, mine = ringo_op_fingerprint(op);
  if (got >= SLICE_HEADER) memcpy(&theirs, slot, sizeof theirs);
  if (got < SLICE_HEADER || memcmp(&theirs, &mine, sizeof mine) != 0) return ringo_op_mismatch(op, &theirs, c->peer);
  if (got != bytes + SLICE_HEADER)
    return ringo_fail(ringoInternalError, "rank %d received a %zu-byte slice from rank %d where %zu were due",
                      op->comm->rank, got - SLICE_HEADER, c->peer, bytes);
  *payload = (const char*)slot + SLICE_HEADER;
  return ringoSuccess;
}

static ringoResult_t conn_release(const ringoComm_t comm, struct ringo_conn* c, size_t bytes) {
  RINGO_CHECK(c->tp->recv_release(c->link));
  atomic_fetch_add_explicit(&comm->bytes_received, bytes, memory_order_relaxed);
  return ringoSuccess;
}

static ringoResult_t conn_send(const struct ringo_op* op, struct ringo_conn* c, void** payload) {
  void* slot = NULL;
  RINGO_CHECK(c->tp->send_acquire(c->link, &slot));
  const struct ringo_fingerprint fp = ringo_op_fingerprint(op);
  memcpy(slot, &fp, sizeof fp);
  *payload = (char*)slot + SLICE_HEADER;
  return ringoSuccess;
}

static ringoResult_t conn_post(const ringoComm_t comm, struct ringo_conn* c, size_t bytes) {
  RINGO_CHECK(c->tp->send_post(c->link, bytes + SLICE_HEADER));
  atomic_fetch_add_explicit(&comm->bytes_sent, bytes, memory_order_relaxed);
  return ringoSuccess;
}

/* Elements of one slice: what a slot of slot_bytes holds after its header. */
static size_t slot_elems(size_t slot_bytes, ringoDataType_t type) {
  return (slot_bytes - SLICE_HEADER) / ringo_type_size(type);
}

static size_t slice_elems(const ringoComm_t comm, ringoDataType_t type) { return slot_elems(comm->slot_bytes, type); }

/* The op of a step that passes a value on: avg sums until the step that keeps the result. */
static ringoRedOp_t partial_op(ringoRedOp_t op) { return op == ringoAvg ? ringoSum : op; }

/* One slice of one step: receive (maybe), combine with the local input, write the output
 * (maybe), and pass the result to the next rank (maybe) — in one pass over the bytes. */
static ringoResult_t run_prim(const struct ringo_op* op, const struct walk* w, enum ringo_prim prim, const char* in,
                              char* out, size_t n) {
  const ringoComm_t comm = op->comm;
  const size_t bytes = n * ringo_type_size(op->type);
  const int receives = ringo_prim_receives(prim), sends = ringo_prim_sends(prim);
  const ringoRedOp_t partial = partial_op(op->op);
  const void* rslot = NULL;
  void* sslot = NULL;
  if (receives) RINGO_CHECK(conn_recv(op, w->recv, bytes, &rslot));
  if (sends) RINGO_CHECK(conn_send(op, w->send, &sslot));
  switch (prim) {
    case RINGO_PRIM_SEND: ringo_copy2(sslot, NULL, in, bytes); break;
    case RINGO_PRIM_COPY_SEND: ringo_copy2(sslot, out, in, bytes); break;
    case RINGO_PRIM_RECV_COPY_SEND: ringo_copy2(out, sslot, rslot, bytes); break;
    case RINGO_PRIM_RECV: ringo_copy2(out, NULL, rslot, bytes); break;
    case RINGO_PRIM_RECV_REDUCE_SEND:
      RINGO_CHECK(ringo_reduce(NULL, sslot, rslot, in, n, op->type, partial, 1));
      break;
    case RINGO_PRIM_RECV_REDUCE_COPY_SEND:
      RINGO_CHECK(ringo_reduce(out, sslot, rslot, in, n, op->type, w->last_op, comm->nranks));
      break;
    case RINGO_PRIM_RECV_REDUCE_COPY:
      RINGO_CHECK(ringo_reduce(out, NULL, rslot, in, n, op->type, w->last_op, comm->nranks));
      break;
  }
  if (sends) RINGO_CHECK(conn_post(comm, w->send, bytes));
  if (receives) RINGO_CHECK(conn_release(comm, w->recv, bytes));
  return ringoSuccess;
}

/* RINGO_ALGO=naive, the baseline the seed compares the ring with: every rank sends its whole
 * buffer to rank 0, which reduces and sends the result back to each — rank 0 moves (N-1)·D each
 * way, against the ring's 2(N-1)/N·D. Slice by slice, so it is pipelined as far as it can be. */
static ringoResult_t naive_slice(const struct ringo_op* op, const char* in, char* out, size_t n) {
  const ringoComm_t comm = op->comm;
  const size_t bytes = n * ringo_type_size(op->type);
  const void* rslot;
  void* sslot;
  if (comm->rank != 0) {
    RINGO_CHECK(conn_send(op, &comm->star_to[0], &sslot));
    ringo_copy2(sslot, NULL, in, bytes);
    RINGO_CHECK(conn_post(comm, &comm->star_to[0], bytes));
    RINGO_CHECK(conn_recv(op, &comm->star_from[0], bytes, &rslot));
    ringo_copy2(out, NULL, rslot, bytes);
    return conn_release(comm, &comm->star_from[0], bytes);
  }
  for (int r = 1; r < comm->nranks; r++) { /* fixed order: the same bits every run */
    const int last = r == comm->nranks - 1;
    RINGO_CHECK(conn_recv(op, &comm->star_from[r], bytes, &rslot));
    RINGO_CHECK(ringo_reduce(out, NULL, rslot, r == 1 ? in : out, n, op->type,
                             last || op->op != ringoAvg ? op->op : ringoSum, comm->nranks));
    RINGO_CHECK(conn_release(comm, &comm->star_from[r], bytes));
  }
  for (int r = 1; r < comm->nranks; r++) {
    RINGO_CHECK(conn_send(op, &comm->star_to[r], &sslot));
    ringo_copy2(sslot, NULL, out, bytes);
    RINGO_CHECK(conn_post(comm, &comm->star_to[r], bytes));
  }
  return ringoSuccess;
}

/* The gather path: below a few KiB a ring that leaves the host is hand-offs, not bytes — 2(N-1) in
 * a row, some over the network. Here every rank gathers every input in ceil(log2 N) rounds (in round
 * k it passes the min(2^k, N - 2^k) inputs it holds from ring position pos on to pos - 2^k and takes
 * as many from pos + 2^k: Bruck's all-gather), then combines them in the ring's own order as the
 * one-shot board does, so the bits equal the ring's. Each rank sends and receives (N-1)·D, the
 * board's law. Every message carries the fingerprint, so a rank on another collective, count or op
 * is named at the first hop. */
/* Finishes the sends of c before a call returns where its transport moves them only in this rank's
 * calls (MPI): see the end of ringo_ring_run. */
static ringoResult_t finish_sends(const struct ringo_conn* c) {
  return c->link && c->tp->sends_need_turns ? c->tp->flush(c->link) : ringoSuccess;
}

int ringo_gather_fits(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  return comm->gather_bytes > 0 && op->coll == RINGO_COLL_ALLREDUCE && op->count > 0 &&
         op->count * ringo_type_size(op->type) <= comm->gather_bytes;
}

/* Adds to the message of an error which collective this rank was in and where (`where`: its step
 * or round), so a log line tells which rank waited on whom; said once (ringo_say_where). */
static ringoResult_t failed_at(const struct ringo_op* op, ringoResult_t res, const char* where) {
  char fp[160];
  ringo_op_describe(op, fp, sizeof fp);
  return ringo_say_where(res, "%s, %s", fp, where);
}

static ringoResult_t gather_failed(const struct ringo_op* op, ringoResult_t res, int round) {
  char where[96];
  snprintf(where, sizeof where, "gather path round %d of rank %d (ring position %d)", round, op->comm->rank,
           op->comm->pos);
  return failed_at(op, res, where);
}

/* One round of the gather path: pass m inputs from ring position pos on to pos - d, take as many
 * from pos + d. */
static ringoResult_t gather_round(const struct ringo_op* op, int k, int d, int m, size_t bytes) {
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks, pos = comm->pos;
  char* blocks = comm->gather_buf; /* input of ring position p at p·bytes */
  void* out;
  const void* got;
  RINGO_CHECK(conn_send(op, &comm->gather_to[k], &out));
  for (int i = 0; i < m; i++) memcpy((char*)out + (size_t)i * bytes, blocks + (size_t)ringo_mod(pos + i, n) * bytes, bytes);
  RINGO_CHECK(conn_post(comm, &comm->gather_to[k], (size_t)m * bytes));
  RINGO_CHECK(conn_recv(op, &comm->gather_from[k], (size_t)m * bytes, &got));
  for (int i = 0; i < m; i++)
    memcpy(blocks + (size_t)ringo_mod(pos + d + i, n) * bytes, (const char*)got + (size_t)i * bytes, bytes);
  return conn_release(comm, &comm->gather_from[k], (size_t)m * bytes);
}

ringoResult_t ringo_gather_run(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  const int n = comm->nranks, pos = comm->pos;
  const size_t bytes = op->count * ringo_type_size(op->type);
  const double t0 = comm->trace ? ringo_now() : 0;
  char* blocks = comm->gather_buf;
  memcpy(blocks + (size_t)pos * bytes, op->sendbuff, bytes);
  size_t read = 0;
  for (int k = 0; k < comm->gather_rounds; k++) {
    const int m = ringo_gather_round_blocks(n, k);
    const ringoResult_t res = gather_round(op, k, 1 << k, m, bytes);
    if (res != ringoSuccess) return gather_failed(op, res, k);
    read += (size_t)m * bytes;
  }
  for (int k = 0; k < comm->gather_rounds; k++) {
    const ringoResult_t res = finish_sends(&comm->gather_to[k]);
    if (res != ringoSuccess) return gather_failed(op, res, k);
  }
  const void* on_stack[64];
  const void** in = n <= 64 ? on_stack : malloc((size_t)n * sizeof *in);
  if (!in) return ringo_fail(ringoSystemError, "rank %d: out of memory for a gathered all-reduce", comm->rank);
  for (int r = 0; r < n; r++) in[r] = blocks + (size_t)comm->pos_of[r] * bytes;
  const ringoResult_t res = ringo_oneshot_combine(op, in);
  if (in != on_stack) free(in);
  if (res == ringoSuccess) ringo_oneshot_trace(op, "one-shot", read, t0);
  return res;
}

ringoResult_t ringo_naive_run(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  const size_t esize = ringo_type_size(op->type), slice = slice_elems(comm, op->type);
  for (size_t j = 0; j < ringo_num_rounds(op->count, slice); j++) {
    size_t off, n;
    ringo_slice_range(op->count, slice, j, &off, &n);
    RINGO_CHECK(naive_slice(op, (const char*)op->sendbuff + off * esize, (char*)op->recvbuff + off * esize, n));
  }
  for (int r = 0; r < comm->nranks; r++) RINGO_CHECK(finish_sends(&comm->star_to[r]));
  return ringoSuccess;
}

/* A ring of one: the result is the input (avg over one rank is the value itself). */
ringoResult_t ringo_single_run(const struct ringo_op* op) {
  const size_t bytes = op->count * ringo_type_size(op->type);
  if (op->recvbuff) ringo_copy2(op->recvbuff, NULL, op->sendbuff, bytes);
  return ringoSuccess;
}

static void trace_slice(const struct ringo_op* op, const struct walk* w, int t, size_t round, size_t bytes,
                        double t0) {
  const struct ringo_step* st = &w->steps[t];
  const int receives = ringo_prim_receives(st->prim), sends = ringo_prim_sends(st->prim);
  const struct ringo_trace_event ev = {
      .coll = op->coll, .prim = st->prim, .seq = op->seq, /* its own number, also when the proxy runs it later */
      .step = t, .chunk = st->chunk, .level = w->level, .ring_size = w->n, .part = w->part,
      .recv_peer = receives ? w->recv->peer : -1, .send_peer = sends ? w->send->peer : -1,
      .round = round, .bytes = bytes, .t0 = t0, .t1 = ringo_now()};
  ringo_trace_record(op->comm->trace, &ev);
}

/* Names fused all-reduce step t of N ranks with the seed's steps: it receives what the previous
 * step sent and sends the next step's chunk (see schedule.h). */
static void allreduce_step_name(int n, int t, char* buf, size_t cap) {
  char rx[48] = "", tx[48] = "";
  if (t >= 1 && t <= n - 1) snprintf(rx, sizeof rx, "reduce-scatter step %d receive", t - 1);
  if (t >= n) snprintf(rx, sizeof rx, "all-gather step %d receive", t - n);
  if (t <= n - 2) snprintf(tx, sizeof tx, "reduce-scatter step %d send", t);
  if (t >= n - 1 && t <= 2 * n - 3) snprintf(tx, sizeof tx, "all-gather step %d send", t - n + 1);
  snprintf(buf, cap, "%s%s%s", rx, rx[0] && tx[0] ? " / " : "", tx);
}

static ringoResult_t step_failed(const struct ringo_op* op, const struct walk* w, ringoResult_t res, int t,
                                 size_t round) {
  static const char* const rings[] = {"ring", "host ring", "ring across hosts", "host ring"};
  char step[112], where[256];
  if (w->level == RINGO_WALK_HOST_RS) snprintf(step, sizeof step, "reduce-scatter step %d", t);
  else if (w->level == RINGO_WALK_HOST_AG) snprintf(step, sizeof step, "all-gather step %d", t);
  else if (w->coll == RINGO_COLL_ALLREDUCE) allreduce_step_name(w->n, t, step, sizeof step);
  else snprintf(step, sizeof step, "step %d", t);
  char walk[48] = "";
  if (w->level != RINGO_WALK_FLAT && w->level != RINGO_WALK_ACROSS && w->coll != RINGO_COLL_ALLREDUCE)
    snprintf(walk, sizeof walk, ", the walk for host %d's blocks", w->part);
  snprintf(where, sizeof where, "%s of rank %d (%s position %d%s), chunk %d, slice %zu", step, op->comm->rank,
           rings[w->level], w->pos, walk, w->steps[t].chunk, round);
  return failed_at(op, res, where);
}

/* Rounds of a walk: slices of its longest chunk, the first (ringo_chunk_range; an aligned cut's first
 * chunk may be longer than count / N rounded up). */
static size_t walk_rounds(const struct walk* w) {
  return ringo_num_rounds(chunk_at(w, 0).len, w->slice);
}

/* The flat ring: the call's schedule around the communicator's ring, over the whole buffers. */
static struct walk flat_walk(const struct ringo_op* op, const struct ringo_step* steps, int nsteps) {
  const ringoComm_t comm = op->comm;
  return (struct walk){RINGO_WALK_FLAT, &comm->send, &comm->recv, comm->nranks, comm->pos, op->coll, op->count,
                       op->sendbuff, op->recvbuff, slice_elems(comm, op->type), op->op, steps, nsteps, comm->ring, 0};
}

/* A reduce-scatter's or all-gather's block per rank from which the two-level ring beats the one ring.
 * Below it the host walks, one per host, cost more hand-offs than the network bytes they save
 * (bench/hosts.sh; the figures are in docs/multi-host.md). */
#define TWO_LEVEL_MIN_BLOCK (64 * 1024)

/* The two-level ring takes an all-reduce (above the gather path), and a reduce-scatter or all-gather
 * of blocks of TWO_LEVEL_MIN_BLOCK or more, where the communicator has one (comm.h). What it takes
 * depends only on what every rank agrees on, so every rank takes the same. */
int ringo_two_level_fits(const struct ringo_op* op) {
  if (op->comm->host_ring.n < 2) return 0;
  if (op->coll == RINGO_COLL_ALLREDUCE) return !ringo_gather_fits(op);
  return (op->coll == RINGO_COLL_REDUCESCATTER || op->coll == RINGO_COLL_ALLGATHER) &&
         op->count * ringo_type_size(op->type) >= TWO_LEVEL_MIN_BLOCK;
}

size_t ringo_ring_slice_elems(const struct ringo_op* op) { return slice_elems(op->comm, op->type); }

size_t ringo_ring_rounds(const struct ringo_op* op, size_t* slice) {
  *slice = slice_elems(op->comm, op->type);
  const struct walk w = flat_walk(op, NULL, 0);
  return walk_rounds(&w);
}

/* A staged collective's pipeline (comm.h): before the first round of phase p > 0, wait until its
 * input is staged. Returns the round that ends phase *p. */
static ringoResult_t phase_begin(const struct ringo_op* op, size_t rounds, int p, size_t* end) {
  size_t first;
  ringo_phase_rounds(rounds, op->phases->n, p, &first, end);
  if (p > 0 && !op->phases->await(op->phases->ctx, p))
    return ringo_fail(ringoInvalidUsage, "rank %d: phase %d of %d of a staged collective never reached host memory "
                      "(its stream failed, or the communicator was aborted, torn down or in error first)",
                      op->comm->rank, p, op->phases->n);
  return ringoSuccess;
}

/* Round j moves slice j of every chunk through every step, so one step never waits for more
 * than one slice and the FIFO (>= 4 slots) lets a rank run ahead of its neighbours. A staged
 * collective's phases (op->phases) are the flat ring's only. */
static ringoResult_t walk_run(const struct ringo_op* op, const struct walk* w) {
  const ringoComm_t comm = op->comm;
  const size_t esize = ringo_type_size(op->type);
  const size_t rounds = walk_rounds(w);
  int phase = -1;
  size_t phase_end = 0;
  for (size_t j = 0; j < rounds; j++) {
    if (op->phases && j == phase_end) RINGO_CHECK(phase_begin(op, rounds, ++phase, &phase_end));
    for (int t = 0; t < w->nsteps; t++) {
      const struct chunk_geom g = chunk_at(w, w->steps[t].chunk);
      size_t off, n;
      ringo_slice_range(g.len, w->slice, j, &off, &n);
      if (n == 0) continue; /* both ends of the link skip the same empty slice */
      const double t0 = comm->trace ? ringo_now() : 0;
      ringoResult_t res = run_prim(op, w, w->steps[t].prim, w->in ? w->in + (g.in_off + off) * esize : NULL,
                                   w->out ? w->out + (g.out_off + off) * esize : NULL, n);
      if (res != ringoSuccess) return step_failed(op, w, res, t, j);
      if (comm->trace) trace_slice(op, w, t, j, n * esize, t0);
    }
    /* Output slice j of every chunk is final once round j is done on this rank. The last phase
     * is left to the proxy, which ends it once the ring has returned: a stream that went on
     * sooner could let host work onto the links while the flush below still uses them. */
    if (op->phases && j + 1 == phase_end && phase + 1 < op->phases->n) op->phases->done(op->phases->ctx, phase);
  }
  /* A rank whose last step only sends (the head of a broadcast or reduce chain) waits until the
   * next rank has taken everything, so it sees the error if that rank refused the data. Over a link
   * whose sends move only while this rank calls into it (MPI), every collective does, so that no
   * rank on another host waits for this one's next call. */
  if (rounds == 0 || w->nsteps == 0) return ringoSuccess;
  if (ringo_prim_sends(w->steps[w->nsteps - 1].prim)) return w->send->tp->flush(w->send->link);
  return finish_sends(w->send);
}

ringoResult_t ringo_ring_run(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  struct ringo_step steps[RINGO_MAX_STEPS(comm->nranks)];
  const int nsteps = ringo_schedule(op->coll, comm->nranks, comm->pos, comm->pos_of[op->root], steps);
  const struct walk w = flat_walk(op, steps, nsteps);
  return walk_run(op, &w);
}

/* The two-level ring (comm.h), for an all-reduce across hosts that each hold L ranks: the
 * reduce-scatter half around the host ring leaves place i with chunk ringo_owned_chunk(L, i) of its
 * host's inputs (partial: avg sums); the ranks at place i on every host all-reduce that chunk in
 * place around the ring across hosts (avg divides by N there); the all-gather half around the host
 * ring hands every chunk to the host's others. Each rank still sends and receives 2(N-1)/N·D, but
 * only 2(H-1)/H·D/L of it across hosts (the flat ring: 2(N-1)/N·D on one link per host), and a host's
 * links carry 2(H-1)/H·D between them where the flat ring's one link out carries 2(N-1)/N·D. The
 * bits differ from the flat ring's (the sums are grouped by host) but are the same on every rank. */
static ringoResult_t run_two_level(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  struct ringo_ring_links *host = &comm->host_ring, *net = &comm->net_ring;
  if (op->count == 0) return ringoSuccess; /* the marks were all there is */
  const size_t esize = ringo_type_size(op->type);
  struct ringo_step rs[RINGO_MAX_STEPS(host->n)], ag[RINGO_MAX_STEPS(host->n)], across[RINGO_MAX_STEPS(net->n)];
  size_t off, len;
  ringo_chunk_range(op->count, host->n, ringo_owned_chunk(host->n, host->pos), &off, &len);
  char* mine = (char*)op->recvbuff + off * esize;
  const size_t host_slice = slot_elems(host->slot_bytes, op->type), net_slice = slot_elems(net->slot_bytes, op->type);
  const struct walk walks[3] = {
      {RINGO_WALK_HOST_RS, &host->send, &host->recv, host->n, host->pos, RINGO_COLL_ALLREDUCE, op->count, op->sendbuff,
       op->recvbuff, host_slice, partial_op(op->op), rs, ringo_schedule_half(RINGO_HALF_REDUCE_SCATTER, host->n, host->pos, rs),
       NULL, 0},
      {RINGO_WALK_ACROSS, &net->send, &net->recv, net->n, net->pos, RINGO_COLL_ALLREDUCE, len, mine, mine, net_slice, op->op,
       across, ringo_schedule(RINGO_COLL_ALLREDUCE, net->n, net->pos, 0, across), NULL, 0},
      {RINGO_WALK_HOST_AG, &host->send, &host->recv, host->n, host->pos, RINGO_COLL_ALLREDUCE, op->count, op->recvbuff,
       op->recvbuff, host_slice, op->op, ag, ringo_schedule_half(RINGO_HALF_ALL_GATHER, host->n, host->pos, ag), NULL, 0}};
  for (int k = 0; k < 3; k++) RINGO_CHECK(walk_run(op, &walks[k]));
  return ringoSuccess;
}

/* Posts op's fingerprint without payload (a mark) on c, toward its peer. */
static ringoResult_t post_mark(const struct ringo_op* op, struct ringo_conn* c) {
  void* slot;
  RINGO_CHECK(conn_send(op, c, &slot));
  return conn_post(op->comm, c, 0);
}

/* Takes the mark c's peer posted; a mark of another collective is named as the mismatch. */
static ringoResult_t take_mark(const struct ringo_op* op, struct ringo_conn* c, const char* ring) {
  const void* theirs;
  const ringoResult_t res = conn_recv(op, c, 0, &theirs);
  if (res != ringoSuccess) {
    char where[96];
    snprintf(where, sizeof where, "the mark from rank %d to rank %d on the %s", c->peer, op->comm->rank, ring);
    return failed_at(op, res, where);
  }
  return conn_release(op->comm, c, 0);
}

/* The two-level ring for a reduce-scatter or an all-gather of `count` elements per rank. The ring is
 * laid out host by host (comm->ring[h * L + i] is the rank at place i of host h), so rank
 * (h', i)'s block sits at sendbuff/recvbuff block ring[h' * L + i]. Each rank sends (N-1)·count, as
 * on the one ring, but only (H-1)·count of it across hosts, from every rank of a host (the one
 * ring: (N-1)·count through one rank per host).
 * - reduce-scatter: for each host h', the reduce-scatter of the L blocks of h''s ranks around the
 *   host ring leaves place i with its host's partial sum of block (h', i), kept in scratch slot h';
 *   then the ranks at place i reduce-scatter the H slots around the ring across hosts, so (h, i)
 *   ends with the whole sum of its own block (avg divides by N there).
 * - all-gather: the ranks at place i all-gather their blocks across hosts first, then for each host
 *   h' place i hands block (h', i) around the host ring.
 * The host walks run one per host, one after another; the sums are grouped by host, so the bits
 * differ from the one ring's but are the same on every rank. */
static ringoResult_t run_two_level_scatter_gather(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  struct ringo_ring_links *host = &comm->host_ring, *net = &comm->net_ring;
  const int per = host->n, hosts = net->n, rs_call = op->coll == RINGO_COLL_REDUCESCATTER;
  const size_t esize = ringo_type_size(op->type), block = op->count * esize;
  const size_t host_slice = slot_elems(host->slot_bytes, op->type), net_slice = slot_elems(net->slot_bytes, op->type);
  struct ringo_step hs[RINGO_MAX_STEPS(per)], xs[RINGO_MAX_STEPS(hosts)];
  int place[hosts], slot_of[hosts]; /* the ranks at this place, by host; scratch slot q holds host q's block */
  for (int q = 0; q < hosts; q++) place[q] = comm->ring[q * per + host->pos], slot_of[q] = q;
  const int nh = ringo_schedule(op->coll, per, host->pos, 0, hs), nx = ringo_schedule(op->coll, hosts, net->pos, 0, xs);
  char* scratch = NULL;
  if (rs_call) RINGO_CHECK(ringo_comm_scratch(comm, (size_t)hosts * block, (void**)&scratch));
  struct walk hw = {rs_call ? RINGO_WALK_HOST_RS : RINGO_WALK_HOST_AG, &host->send, &host->recv, per, host->pos, op->coll,
                    op->count, NULL, NULL, host_slice, rs_call ? partial_op(op->op) : op->op, hs, nh, NULL, 0};
  const struct walk across = {RINGO_WALK_ACROSS, &net->send, &net->recv, hosts, net->pos, op->coll, op->count,
                              rs_call ? scratch : op->sendbuff, op->recvbuff, net_slice, op->op, xs, nx,
                              rs_call ? slot_of : place, 0};
  if (!rs_call) RINGO_CHECK(walk_run(op, &across));
  if (!rs_call) RINGO_CHECK(take_mark(op, &host->recv, "host ring")); /* posted by run_two_level_marked */
  for (int q = 0; q < hosts; q++) {
    hw.blocks = comm->ring + q * per; /* host q's ranks, by place */
    hw.part = q;
    hw.in = rs_call ? op->sendbuff : (const char*)op->recvbuff + (size_t)comm->ring[q * per + host->pos] * block;
    hw.out = rs_call ? scratch + (size_t)q * block : op->recvbuff;
    RINGO_CHECK(walk_run(op, &hw));
  }
  if (rs_call) RINGO_CHECK(walk_run(op, &across));
  return ringoSuccess;
}

/* A collective on the two-level ring leaves the ring's own links idle, and a rank that called
 * another collective (so took the ring) would wait on links its neighbours never use, until
 * RINGO_TIMEOUT. So it first posts its fingerprint, without payload, on the ring link to the next
 * rank, and takes the previous rank's once it is done. A neighbour on the ring takes the mark where
 * its first slice is due, names the mismatch (the fingerprints differ) and poisons every link it
 * has; this rank's two-level waits watch that link too (comm.c), since the rank before it may be
 * blocked on it. An all-gather starts across hosts, the others on the host ring, so ranks of a host
 * on an all-gather and on another two-level collective could each wait on the link the other does
 * not use yet, in a cycle through the hosts: an all-gather also posts a mark on the host ring before
 * it starts, which the host's next rank takes where its first slice is due (an all-gather takes it
 * before its host walks, when it is long there). The marks cost a message each per collective
 * (docs/multi-host.md),
 * so the gather path, all latency, goes without: there a rank on another path is caught by
 * RINGO_TIMEOUT, as is a two-level rank against a gathering one, or one whose next rank on the ring
 * never receives (a broadcast's root, a reduce's first rank). A staged collective on the two-level
 * ring is one phase (ringo_select_rounds gives it no rounds to split). */
ringoResult_t ringo_two_level_run(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  if (op->phases) return ringo_fail(ringoInternalError, "rank %d: a staged two-level collective in phases", comm->rank);
  RINGO_CHECK(post_mark(op, &comm->send));
  if (op->coll == RINGO_COLL_ALLGATHER) RINGO_CHECK(post_mark(op, &comm->host_ring.send));
  RINGO_CHECK(op->coll == RINGO_COLL_ALLREDUCE ? run_two_level(op) : run_two_level_scatter_gather(op));
  RINGO_CHECK(take_mark(op, &comm->recv, "ring"));
  return finish_sends(&comm->send);
}

