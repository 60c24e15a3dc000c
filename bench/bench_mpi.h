/* bench_mpi.h — ringo-bench's --compare mpi side: ringo's dtypes and ops as MPI's, and MPI's
 * counterpart of each collective run on the very buffers ringo uses. Header-only, needs bench.h;
 * empty without RINGO_HAVE_MPI. Run: mpirun -np 4 build/bin/ringo-bench --compare mpi -b 1K -e 64M. */
#ifndef RINGO_BENCH_MPI_H_
#define RINGO_BENCH_MPI_H_

#include <limits.h>
#include <sched.h>

#include "bench.h"

#ifdef RINGO_HAVE_MPI
/* float16 and bfloat16 have no standard MPI datatype: MPI_DATATYPE_NULL, and the row is skipped. */
static MPI_Datatype mpi_type(int t) {
  switch (t) {
    case ringoInt8: return MPI_INT8_T;
    case ringoUint8: return MPI_UINT8_T;
    case ringoInt32: return MPI_INT32_T;
    case ringoUint32: return MPI_UINT32_T;
    case ringoInt64: return MPI_INT64_T;
    case ringoUint64: return MPI_UINT64_T;
    case ringoFloat32: return MPI_FLOAT;
    case ringoFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

/* MPI has no average; MPI_OP_NULL, and the row is skipped. OP_NONE (copies) never reaches MPI's op. */
static MPI_Op mpi_op(int op) {
  switch (op) {
    case ringoSum: return MPI_SUM;
    case ringoProd: return MPI_PROD;
    case ringoMax: return MPI_MAX;
    case ringoMin: return MPI_MIN;
    default: return MPI_OP_NULL;
  }
}

/* Why MPI cannot run this row as ringo does, or NULL when it can. */
static const char* mpi_skip_reason(const struct row* w) {
  if (mpi_type(w->type) == MPI_DATATYPE_NULL) return "no standard MPI datatype";
  if (w->op >= 0 && mpi_op(w->op) == MPI_OP_NULL) return "MPI has no avg op";
  return w->count > (size_t)INT_MAX ? "count above INT_MAX" : NULL;
}

/* MPI's counterpart of coll_run(): same buffers, same placement. Where MPI's in-place convention
 * differs from ringo's, check_result() is told (mpi = 1): MPI_Reduce_scatter_block in place leaves
 * the rank's block at the start of recvbuff, and MPI_Bcast has one buffer, so out-of-place the root
 * broadcasts straight from sendbuff and its recvbuff is not written. In-place sendrecv is MPI's
 * Sendrecv_replace (unchecked, like ringo's in-place row). */
static int mpi_coll_run(const struct bench* b, const struct row* w, int inplace) {
  const size_t per = w->count / (size_t)b->nranks;
  unsigned char *s = inplace ? b->rbuf : b->sbuf, *r = b->rbuf;
  const MPI_Datatype t = mpi_type(w->type);
  const MPI_Op op = w->op >= 0 ? mpi_op(w->op) : MPI_OP_NULL;
  const int n = (int)w->count, np = (int)per, root = w->root, me = b->rank;
  const MPI_Comm c = MPI_COMM_WORLD;
  const int next = (me + 1) % b->nranks, prev = (me + b->nranks - 1) % b->nranks;
  switch (b->o->coll) {
    case COLL_SENDRECV:
      if (inplace) return MPI_Sendrecv_replace(r, n, t, next, 0, prev, 0, c, MPI_STATUS_IGNORE);
      return MPI_Sendrecv(s, n, t, next, 0, r, n, t, prev, 0, c, MPI_STATUS_IGNORE);
    case COLL_ALL_REDUCE: return MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, n, t, op, c);
    case COLL_REDUCE_SCATTER: return MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : s, r, np, t, op, c);
    case COLL_ALL_GATHER:
      if (inplace) return MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, np, t, c);
      return MPI_Allgather(s, np, t, r, np, t, c);
    case COLL_BROADCAST: return MPI_Bcast(me == root ? s : r, n, t, root, c);
    default: return MPI_Reduce(inplace && me == root ? MPI_IN_PLACE : s, r, n, t, op, root, c);
  }
}

static void mpi_coll_checked(const struct bench* b, const struct row* w, int inplace) {
  int err = mpi_coll_run(b, w, inplace);
  if (err == MPI_SUCCESS) return;
  char what[160];
  snprintf(what, sizeof what, "MPI's %s of %zu bytes (%s, %s)", coll_names[b->o->coll], w->bytes,
           type_names[w->type], inplace ? "in-place" : "out-of-place");
  mpi_die(what, err);
}

/* A barrier whose waiters yield the CPU instead of spinning. Between a ringo call and an MPI call
 * (A B A B) each library's stragglers would otherwise share their cores with the other library's
 * early finishers: Open MPI's spinning waiters steal the CPU from ringo's stragglers, ringo's
 * yielding ones give it to MPI's — a bias against ringo whenever ranks outnumber cores
 * (measured: docs/performance.md, "The benchmark"). */
static void mpi_quiet_barrier(void) {
  MPI_Request req;
  MB_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  for (int done = 0;;) {
    MB_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    sched_yield();
  }
}
#endif /* RINGO_HAVE_MPI */

#endif /* RINGO_BENCH_MPI_H_ */
