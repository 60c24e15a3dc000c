/* op.c — what a call is called and how ranks compare calls: collective names, fingerprints, the
 * description and the mismatch error that name both sides. Tested by test/test_failures.cc. */
#include "comm/op.h"

#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "core/core.h"

static const char* const coll_names[] = {"ringoAllReduce", "ringoReduceScatter", "ringoAllGather",
                                         "ringoBroadcast", "ringoReduce"};

struct ringo_fingerprint ringo_op_fingerprint(const struct ringo_op* op) {
  struct ringo_fingerprint fp;
  memset(&fp, 0, sizeof fp); /* padding too: fingerprints are compared as bytes */
  fp.seq = op->seq;
  fp.count = op->count;
  fp.coll = (uint32_t)op->coll;
  fp.op = (uint32_t)op->op;
  fp.type = (uint32_t)op->type;
  fp.root = op->root;
  return fp;
}

const char* ringo_op_coll_name(enum ringo_coll coll) {
  return (unsigned)coll < sizeof coll_names / sizeof coll_names[0] ? coll_names[coll] : "an unknown collective";
}

static void describe(const struct ringo_fingerprint* fp, char* buf, size_t cap) {
  snprintf(buf, cap, "%s #%llu (count %llu, %s, %s, root %d)",
           ringo_op_coll_name((enum ringo_coll)fp->coll), (unsigned long long)fp->seq,
           (unsigned long long)fp->count, ringo_type_name((ringoDataType_t)fp->type),
           ringo_op_name((ringoRedOp_t)fp->op), fp->root);
}

void ringo_op_describe(const struct ringo_op* op, char* buf, size_t cap) {
  const struct ringo_fingerprint fp = ringo_op_fingerprint(op);
  describe(&fp, buf, cap);
}

ringoResult_t ringo_op_mismatch(const struct ringo_op* op, const struct ringo_fingerprint* theirs, int peer) {
  const struct ringo_fingerprint mine = ringo_op_fingerprint(op);
  char a[160], b[160];
  describe(&mine, a, sizeof a);
  describe(theirs, b, sizeof b);
  return ringo_fail(ringoInvalidUsage, "collective mismatch: rank %d called %s but rank %d called %s",
                    op->comm->rank, a, peer, b);
}

