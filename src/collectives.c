/* collectives.c — AllReduce, ReduceScatter, AllGather, Broadcast, Reduce: walk the schedule of
 * schedule.c and move each chunk as slices over the two links, reducing with reduce.c.
 * Tested by test/test_collectives.cc (all collectives, dtypes, ops, N, counts) and test_api.cc. */
#include <stdio.h>
#include <stdint.h>

#include "comm.h"
#include "reduce.h"
#include "trace.h"

/* Where chunk c of a collective lives: its element offset in sendbuff and in recvbuff, and its
 * length. All-reduce cuts the buffer into N chunks; reduce-scatter and all-gather have one block
 * per rank, and chunk c is the block of the rank at ring position c - 1 — the position that owns
 * chunk c after reduce-scatter — so every rank ends with its own block. */
struct chunk_geom { size_t in_off, out_off, len; };

static struct chunk_geom chunk_at(const struct ringo_op* op, int c) {
  const ringoComm_t comm = op->comm;
  struct chunk_geom g = {0, 0, op->count};
  size_t off;
  switch (op->coll) {
    case RINGO_COLL_ALLREDUCE:
      ringo_chunk_range(op->count, comm->nranks, c, &off, &g.len);
      g.in_off = g.out_off = off;
      break;
    case RINGO_COLL_REDUCESCATTER: /* reads every block, writes only its own into recvbuff */
      g.in_off = (size_t)comm->ring[ringo_mod(c - 1, comm->nranks)] * op->count;
      break;
    case RINGO_COLL_ALLGATHER: /* reads only its own block from sendbuff, writes every block */
      g.out_off = (size_t)comm->ring[ringo_mod(c - 1, comm->nranks)] * op->count;
      break;
    default: /* broadcast, reduce: one chunk, the whole buffer */
      break;
  }
  return g;
}

/* Link helpers: every byte that crosses a link is counted here, once. */
static ringoResult_t conn_recv(const ringoComm_t comm, struct ringo_conn* c, size_t bytes, const void** slot) {
  size_t got = 0;
  RINGO_CHECK(c->tp->recv_acquire(c->link, slot, &got));
  if (got != bytes)
    return ringo_fail(ringoInvalidUsage, "rank %d received a %zu-byte slice where %zu were due: the ranks "
                      "called different collectives, counts or types", comm->rank, got, bytes);
  return ringoSuccess;
}

static ringoResult_t conn_release(const ringoComm_t comm, struct ringo_conn* c, size_t bytes) {
  RINGO_CHECK(c->tp->recv_release(c->link));
  atomic_fetch_add_explicit(&comm->bytes_received, bytes, memory_order_relaxed);
  return ringoSuccess;
}

static ringoResult_t conn_post(const ringoComm_t comm, struct ringo_conn* c, size_t bytes) {
  RINGO_CHECK(c->tp->send_post(c->link, bytes));
  atomic_fetch_add_explicit(&comm->bytes_sent, bytes, memory_order_relaxed);
  return ringoSuccess;
}

/* One slice of one step: receive (maybe), combine with the local input, write the output
 * (maybe), and pass the result to the next rank (maybe) — in one pass over the bytes. */
static ringoResult_t run_prim(const struct ringo_op* op, enum ringo_prim prim, const char* in, char* out,
                              size_t n) {
  const ringoComm_t comm = op->comm;
  const size_t bytes = n * ringo_type_size(op->type);
  const int receives = prim != RINGO_PRIM_SEND && prim != RINGO_PRIM_COPY_SEND;
  const int sends = prim != RINGO_PRIM_RECV && prim != RINGO_PRIM_RECV_REDUCE_COPY;
  const ringoRedOp_t partial = op->op == ringoAvg ? ringoSum : op->op;
  const void* rslot = NULL;
  void* sslot = NULL;
  if (receives) RINGO_CHECK(conn_recv(comm, &comm->recv, bytes, &rslot));
  if (sends) RINGO_CHECK(comm->send.tp->send_acquire(comm->send.link, &sslot));
  switch (prim) {
    case RINGO_PRIM_SEND: ringo_copy2(sslot, NULL, in, bytes); break;
    case RINGO_PRIM_COPY_SEND: ringo_copy2(sslot, out, in, bytes); break;
    case RINGO_PRIM_RECV_COPY_SEND: ringo_copy2(out, sslot, rslot, bytes); break;
    case RINGO_PRIM_RECV: ringo_copy2(out, NULL, rslot, bytes); break;
    case RINGO_PRIM_RECV_REDUCE_SEND:
      RINGO_CHECK(ringo_reduce(sslot, NULL, rslot, in, n, op->type, partial, 1));
      break;
    case RINGO_PRIM_RECV_REDUCE_COPY_SEND:
      RINGO_CHECK(ringo_reduce(out, sslot, rslot, in, n, op->type, op->op, comm->nranks));
      break;
    case RINGO_PRIM_RECV_REDUCE_COPY:
      RINGO_CHECK(ringo_reduce(out, NULL, rslot, in, n, op->type, op->op, comm->nranks));
      break;
  }
  if (sends) RINGO_CHECK(conn_post(comm, &comm->send, bytes));
  if (receives) RINGO_CHECK(conn_release(comm, &comm->recv, bytes));
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
    RINGO_CHECK(comm->star_to[0].tp->send_acquire(comm->star_to[0].link, &sslot));
    ringo_copy2(sslot, NULL, in, bytes);
    RINGO_CHECK(conn_post(comm, &comm->star_to[0], bytes));
    RINGO_CHECK(conn_recv(comm, &comm->star_from[0], bytes, &rslot));
    ringo_copy2(out, NULL, rslot, bytes);
    return conn_release(comm, &comm->star_from[0], bytes);
  }
  for (int r = 1; r < comm->nranks; r++) { /* fixed order: the same bits every run */
    const int last = r == comm->nranks - 1;
    RINGO_CHECK(conn_recv(comm, &comm->star_from[r], bytes, &rslot));
    RINGO_CHECK(ringo_reduce(out, NULL, rslot, r == 1 ? in : out, n, op->type,
                             last || op->op != ringoAvg ? op->op : ringoSum, comm->nranks));
    RINGO_CHECK(conn_release(comm, &comm->star_from[r], bytes));
  }
  for (int r = 1; r < comm->nranks; r++) {
    RINGO_CHECK(comm->star_to[r].tp->send_acquire(comm->star_to[r].link, &sslot));
    ringo_copy2(sslot, NULL, out, bytes);
    RINGO_CHECK(conn_post(comm, &comm->star_to[r], bytes));
  }
  return ringoSuccess;
}

static ringoResult_t run_naive(const struct ringo_op* op) {
  const size_t esize = ringo_type_size(op->type), slice = op->comm->slot_bytes / esize;
  for (size_t j = 0; j < ringo_num_rounds(op->count, slice); j++) {
    size_t off, n;
    ringo_slice_range(op->count, slice, j, &off, &n);
    RINGO_CHECK(naive_slice(op, (const char*)op->sendbuff + off * esize, (char*)op->recvbuff + off * esize, n));
  }
  return ringoSuccess;
}

/* A ring of one: the result is the input (avg over one rank is the value itself). */
static void run_single(const struct ringo_op* op) {
  const size_t bytes = op->count * ringo_type_size(op->type);
  if (op->recvbuff) ringo_copy2(op->recvbuff, NULL, op->sendbuff, bytes);
}

static void trace_slice(const struct ringo_op* op, int t, const struct ringo_step* st, size_t round, size_t bytes,
                        double t0) {
  const ringoComm_t comm = op->comm;
  const int receives = st->prim != RINGO_PRIM_SEND && st->prim != RINGO_PRIM_COPY_SEND;
  const int sends = st->prim != RINGO_PRIM_RECV && st->prim != RINGO_PRIM_RECV_REDUCE_COPY;
  const struct ringo_trace_event ev = {
      .coll = op->coll, .prim = st->prim, .seq = atomic_load_explicit(&comm->collectives, memory_order_relaxed),
      .step = t, .chunk = st->chunk,
      .recv_peer = receives ? comm->ring[ringo_mod(comm->pos - 1, comm->nranks)] : -1,
      .send_peer = sends ? comm->ring[ringo_mod(comm->pos + 1, comm->nranks)] : -1,
      .round = round, .bytes = bytes, .t0 = t0, .t1 = ringo_now()};
  ringo_trace_record(comm->trace, &ev);
}

/* Round j moves slice j of every chunk through every step, so one step never waits for more
 * than one slice and the FIFO (>= 4 slots) lets a rank run ahead of its neighbours. */
static ringoResult_t run_ring(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  const size_t esize = ringo_type_size(op->type);
  const size_t slice = comm->slot_bytes / esize;
  struct ringo_step steps[RINGO_MAX_STEPS(comm->nranks)];
  const int root_pos = comm->pos_of[op->root];
  const int nsteps = ringo_schedule(op->coll, comm->nranks, comm->pos, root_pos, steps);
  const size_t max_len = op->coll == RINGO_COLL_ALLREDUCE ? (op->count + (size_t)comm->nranks - 1) / (size_t)comm->nranks
                                                          : op->count;
  const size_t rounds = ringo_num_rounds(max_len, slice);
  const char* in = op->sendbuff;
  char* out = op->recvbuff;
  for (size_t j = 0; j < rounds; j++) {
    for (int t = 0; t < nsteps; t++) {
      const struct chunk_geom g = chunk_at(op, steps[t].chunk);
      size_t off, n;
      ringo_slice_range(g.len, slice, j, &off, &n);
      if (n == 0) continue; /* both ends of the link skip the same empty slice */
      const double t0 = comm->trace ? ringo_now() : 0;
      RINGO_CHECK(run_prim(op, steps[t].prim, in ? in + (g.in_off + off) * esize : NULL,
                           out ? out + (g.out_off + off) * esize : NULL, n));
      if (comm->trace) trace_slice(op, t, &steps[t], j, n * esize, t0);
    }
  }
  return ringoSuccess;
}

ringoResult_t ringo_coll_run(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  ringoResult_t res = atomic_load(&comm->error);
  if (res != ringoSuccess)
    return ringo_fail(ringoInvalidUsage, "rank %d: communicator unusable after an earlier error (%s): %s; "
                      "destroy it and create a new one", comm->rank, ringoGetErrorString(res), comm->last_error);
  atomic_fetch_add(&comm->inflight, 1);
  if (comm->nranks == 1) run_single(op);
  else if (comm->algo_naive && op->coll == RINGO_COLL_ALLREDUCE) res = run_naive(op);
  else res = run_ring(op);
  if (res == ringoSuccess) atomic_fetch_add_explicit(&comm->collectives, 1, memory_order_relaxed);
  else atomic_store(&comm->error, res); /* the FIFOs are out of step now: no further collective */
  atomic_fetch_sub(&comm->inflight, 1);
  return res;
}

/* ---- the public entry points: validate, then run now or queue in the open group ---- */

static const char* const coll_names[] = {"ringoAllReduce", "ringoReduceScatter", "ringoAllGather",
                                         "ringoBroadcast", "ringoReduce"};

/* Everything a call can get wrong is caught here, before any byte moves, so a rejected call
 * leaves the communicator usable. */
static ringoResult_t check_op(const struct ringo_op* op, ringoStream_t stream) {
  const char* name = coll_names[op->coll];
  const ringoComm_t comm = op->comm;
  if (!comm) return ringo_fail(ringoInvalidArgument, "%s: comm is NULL", name);
  if (atomic_load(&comm->abort_flag)) return ringo_fail(ringoInvalidUsage, "%s: comm was aborted", name);
  const size_t esize = ringo_type_size(op->type);
  if (esize == 0) return ringo_fail(ringoInvalidArgument, "%s: invalid datatype %d", name, (int)op->type);
  if ((unsigned)op->op >= RINGO_NUM_OPS) return ringo_fail(ringoInvalidArgument, "%s: invalid op %d", name, (int)op->op);
  if (op->root < 0 || op->root >= comm->nranks)
    return ringo_fail(ringoInvalidArgument, "%s: root %d out of range [0, %d)", name, op->root, comm->nranks);
  if (op->count > SIZE_MAX / (size_t)comm->nranks / esize)
    return ringo_fail(ringoInvalidArgument, "%s: count %zu of %s on %d ranks overflows the address space", name,
                      op->count, ringo_type_name(op->type), comm->nranks);
  /* Which buffers this rank touches: broadcast reads sendbuff only on the root, reduce writes
   * recvbuff only on the root. */
  const int is_root = comm->rank == op->root;
  const int reads = op->coll != RINGO_COLL_BROADCAST || is_root;
  const int writes = op->coll != RINGO_COLL_REDUCE || is_root;
  if (op->count > 0 && reads && !op->sendbuff)
    return ringo_fail(ringoInvalidArgument, "%s: sendbuff is NULL with count %zu", name, op->count);
  if (op->count > 0 && writes && !op->recvbuff)
    return ringo_fail(ringoInvalidArgument, "%s: recvbuff is NULL with count %zu", name, op->count);
  if (stream)
    return ringo_fail(ringoInvalidArgument, "%s: a stream was given, but this build has no CUDA path; pass "
                      "NULL for host buffers", name);
  return ringoSuccess;
}

static ringoResult_t submit(struct ringo_op op, ringoStream_t stream) {
  ringo_thread_clear_error();
  ringoResult_t res = check_op(&op, stream);
  if (res != ringoSuccess) return ringo_comm_record(op.comm, res);
  if (ringo_group_enqueue(&op, &res)) return ringo_comm_record(op.comm, res);
  return ringo_comm_record(op.comm, ringo_coll_run(&op));
}

ringoResult_t ringoAllReduce(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype,
                             ringoRedOp_t op, ringoComm_t comm, ringoStream_t stream) {
  return submit((struct ringo_op){RINGO_COLL_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm}, stream);
}

ringoResult_t ringoReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ringoDataType_t datatype,
                                 ringoRedOp_t op, ringoComm_t comm, ringoStream_t stream) {
  return submit((struct ringo_op){RINGO_COLL_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm},
                stream);
}

ringoResult_t ringoAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ringoDataType_t datatype,
                             ringoComm_t comm, ringoStream_t stream) {
  return submit((struct ringo_op){RINGO_COLL_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ringoSum, 0, comm},
                stream);
}

ringoResult_t ringoBroadcast(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype, int root,
                             ringoComm_t comm, ringoStream_t stream) {
  return submit((struct ringo_op){RINGO_COLL_BROADCAST, sendbuff, recvbuff, count, datatype, ringoSum, root, comm},
                stream);
}

ringoResult_t ringoReduce(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype,
                          ringoRedOp_t op, int root, ringoComm_t comm, ringoStream_t stream) {
  return submit((struct ringo_op){RINGO_COLL_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm}, stream);
}
