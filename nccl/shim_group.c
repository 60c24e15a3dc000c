/* shim_group.c — libnccl.so.2 on ringo: groups. Calls made inside ncclGroupStart/ncclGroupEnd are
 * checked and recorded by the shim, then handed to ringo's group at the outermost ncclGroupEnd, so
 * ncclGroupSimulateEnd can drop them and report their model time instead. Public ringo.h only.
 * Tested by test/test_nccl_calls.cc and test/nccl/nccl_program.c (make test). */
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* This thread's group: its depth and the calls recorded since the outermost ncclGroupStart. */
static __thread int tl_depth;
static __thread struct shim_op* tl_ops;
static __thread size_t tl_nops, tl_capacity;

int shim_in_group(void) { return tl_depth > 0; }

static ncclResult_t record(const struct shim_op* op) {
  if (tl_nops == tl_capacity) {
    const size_t cap = tl_capacity ? 2 * tl_capacity : 16;
    struct shim_op* grown = realloc(tl_ops, cap * sizeof *grown);
    if (!grown) return shim_fail(op->comm, ncclSystemError, "ncclGroupEnd: out of memory recording a call");
    tl_ops = grown;
    tl_capacity = cap;
  }
  tl_ops[tl_nops++] = *op;
  atomic_fetch_add(&op->comm->grouped, 1); /* ncclCommDestroy in another thread refuses it meanwhile */
  return ncclSuccess;
}

size_t shim_group_recorded_on(struct ncclComm* comm, int forget) {
  size_t found = 0, kept = 0;
  for (size_t i = 0; i < tl_nops; i++) {
    if (tl_ops[i].comm != comm) {
      if (forget) tl_ops[kept++] = tl_ops[i];
      continue;
    }
    found++;
    if (forget) free(tl_ops[i].scratch);
  }
  if (forget) {
    tl_nops = kept;
    atomic_fetch_sub(&comm->grouped, (int)found);
  }
  return found;
}

/* Outside a group ringo runs the call before it returns (host memory), so its scratch copy may go. */
ncclResult_t shim_submit(const struct shim_op* op) {
  struct shim_op checked = *op;
  ncclResult_t res = shim_check_op(&checked);
  if (res != ncclSuccess) return res;
  if (tl_depth > 0) return record(&checked);
  res = shim_run_op(&checked);
  free(checked.scratch);
  return res;
}

NCCL_EXPORT ncclResult_t ncclGroupStart(void) {
  const ringoResult_t res = ringoGroupStart();
  if (res == ringoSuccess) tl_depth++;
  return shim_result(NULL, res);
}
NCCL_PROFILING_ALIAS(ncclGroupStart);

/* Closes one level; the outermost hands the recorded calls to ringo's still open group (run
 * false: drops them) and then lets ringo run it, with any inits queued in it. */
static ncclResult_t group_close(int run, const char* function) {
  if (tl_depth == 0) return shim_fail(NULL, ncclInvalidUsage, "%s: no ncclGroupStart to match", function);
  ncclResult_t first = ncclSuccess;
  if (--tl_depth == 0) {
    for (size_t i = 0; run && i < tl_nops; i++) {
      const ncclResult_t res = shim_run_op(&tl_ops[i]);
      if (first == ncclSuccess) first = res;
    }
  }
  const ncclResult_t res = shim_result(NULL, ringoGroupEnd());
  if (tl_depth == 0) { /* the record goes too: a thread may end after its last group */
    for (size_t i = 0; i < tl_nops; i++) {
      free(tl_ops[i].scratch);
      atomic_fetch_sub(&tl_ops[i].comm->grouped, 1); /* the last touch of its communicator */
    }
    free(tl_ops);
    tl_ops = NULL;
    tl_nops = tl_capacity = 0;
  }
  return first != ncclSuccess ? first : res;
}

NCCL_EXPORT ncclResult_t ncclGroupEnd(void) { return group_close(1, "ncclGroupEnd"); }
NCCL_PROFILING_ALIAS(ncclGroupEnd);

/* As NCCL: a NULL simInfo, or any at an inner level, is a plain ncclGroupEnd; one not made with
 * NCCL_SIM_INFO_INITIALIZER still closes the outermost group (dropping its calls) and is refused. */
NCCL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (tl_depth == 0) return shim_fail(NULL, ncclInvalidUsage, "ncclGroupSimulateEnd: no ncclGroupStart to match");
  if (!simInfo || tl_depth > 1) return group_close(1, "ncclGroupSimulateEnd"); /* NCCL checks the outermost only */
  if (simInfo->magic != RINGO_NCCL_SIM_INFO_MAGIC || simInfo->size < offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float)) {
    group_close(0, "ncclGroupSimulateEnd");
    return shim_fail(NULL, ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo was not made with "
                     "NCCL_SIM_INFO_INITIALIZER; the group's calls were dropped");
  }
  double us = 0;
  if (tl_depth == 1)
    for (size_t i = 0; i < tl_nops; i++) us += shim_op_time_us(&tl_ops[i]);
  const ncclResult_t res = group_close(0, "ncclGroupSimulateEnd");
  simInfo->estimatedTime = (float)us;
  return res;
}
NCCL_PROFILING_ALIAS(ncclGroupSimulateEnd);
