/* op.h — one call as the public API received it (a collective, or one side of a point-to-point
 * message), and the fingerprint every rank compares to catch a mismatched call. Built by src/api/,
 * run by src/engine/ and src/device/; tested through test/test_failures.cc (mismatches). */
#ifndef RINGO_OP_H_
#define RINGO_OP_H_

#include <stddef.h>
#include <stdint.h>

#include "ringo.h"
#include "sched/schedule.h"

/* One call, as the public API received it (already validated): a collective, or one side of a
 * point-to-point message (kind SEND/RECV: peer, sendbuff or recvbuff, count, type). */
enum ringo_op_kind { RINGO_KIND_COLL = 0, RINGO_KIND_SEND, RINGO_KIND_RECV };

/* A staged collective's pipeline (staged.c): the host ring's rounds cut into n phases
 * (ringo_phase_rounds). The ring calls await(ctx, p) before the first round of phase p > 0 — its
 * input must be staged — and done(ctx, p) after the last round of phase p < n - 1 — its output
 * may go back to the device — so copies overlap the transfer (the last phase ends with the run).
 * 1 <= n <= the rounds (ringo_select_rounds). await returns 0 when the input never will be there
 * (the stream failed, or the communicator was aborted, is in error or is being torn down). */
struct ringo_phases {
  int n;
  void* ctx;
  int (*await)(void* ctx, int p);
  void (*done)(void* ctx, int p);
};

struct ringo_op {
  enum ringo_op_kind kind;
  int peer;
  int device;            /* the buffers are CUDA device memory: enqueue on stream (device.c) */
  int defer_join;        /* device op in a group: the caller's stream waits for it after every launch */
  int held;              /* its ringoGroupEnd holds the communicator's one-call guard for the whole group */
  ringoStream_t stream;
  enum ringo_coll coll;
  const void* sendbuff;
  void* recvbuff;
  size_t count;  /* AllReduce/Broadcast/Reduce: elements; ReduceScatter: recvcount; AllGather: sendcount */
  ringoDataType_t type;
  ringoRedOp_t op;
  int root;
  ringoComm_t comm;
  uint64_t seq; /* set when it runs: the communicator's collective number */
  const struct ringo_phases* phases; /* host ring of a staged collective only, or NULL */
};

/* What every slice of a collective (and its one-shot post, oneshot.c) says it belongs to; ranks
 * compare them as bytes, so a mismatched or skipped call is named instead of hanging. */
struct ringo_fingerprint {
  uint64_t seq, count;
  uint32_t coll, op, type;
  int32_t root;
};
#define RINGO_FINGERPRINT_BYTES 64 /* room kept for one before a payload: keeps it aligned */
_Static_assert(sizeof(struct ringo_fingerprint) <= RINGO_FINGERPRINT_BYTES, "fingerprint too large");
struct ringo_fingerprint ringo_op_fingerprint(const struct ringo_op* op);
/* The public name of a collective: "ringoAllReduce". */
const char* ringo_op_coll_name(enum ringo_coll coll);
/* "ringoAllReduce #3 (count 4, float32, sum, root 0)" */
void ringo_op_describe(const struct ringo_op* op, char* buf, size_t cap);
/* The error for a rank whose fingerprint differs from op's. */
ringoResult_t ringo_op_mismatch(const struct ringo_op* op, const struct ringo_fingerprint* theirs, int peer);

#endif /* RINGO_OP_H_ */
