/* nccl_shim.c — libnccl.so.2 on ringo, part one: value checks, result codes and messages, version,
 * ids, communicator queries, and the entry points of the collectives and point-to-point calls
 * (each becomes a shim_op: shim_group.c runs or queues it). Other parts: shim_comm.c, shim_group.c,
 * shim_ops.c, shim_mem.c, shim_unsupported.c. Public ringo.h only. Tested by test/test_nccl_*.cc. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

/* ---- the two APIs share every value, so converting is a cast; the compiler proves it ---- */

#define SAME_VALUE(nccl, ringo) _Static_assert((int)(nccl) == (int)(ringo), #nccl " must equal " #ringo)
SAME_VALUE(ncclSuccess, ringoSuccess);
SAME_VALUE(ncclUnhandledCudaError, ringoUnhandledCudaError);
SAME_VALUE(ncclSystemError, ringoSystemError);
SAME_VALUE(ncclInternalError, ringoInternalError);
SAME_VALUE(ncclInvalidArgument, ringoInvalidArgument);
SAME_VALUE(ncclInvalidUsage, ringoInvalidUsage);
SAME_VALUE(ncclRemoteError, ringoRemoteError);
SAME_VALUE(ncclInProgress, ringoInProgress);
SAME_VALUE(ncclTimeout, ringoTimeout);
SAME_VALUE(ncclInt8, ringoInt8);
SAME_VALUE(ncclUint8, ringoUint8);
SAME_VALUE(ncclInt32, ringoInt32);
SAME_VALUE(ncclUint32, ringoUint32);
SAME_VALUE(ncclInt64, ringoInt64);
SAME_VALUE(ncclUint64, ringoUint64);
SAME_VALUE(ncclFloat16, ringoFloat16);
SAME_VALUE(ncclFloat32, ringoFloat32);
SAME_VALUE(ncclFloat64, ringoFloat64);
SAME_VALUE(ncclBfloat16, ringoBfloat16);
SAME_VALUE(ncclFloat8e4m3, RINGO_NUM_TYPES); /* the float8 types are the two beyond ringo's */
SAME_VALUE(ncclSum, ringoSum);
SAME_VALUE(ncclProd, ringoProd);
SAME_VALUE(ncclMax, ringoMax);
SAME_VALUE(ncclMin, ringoMin);
SAME_VALUE(ncclAvg, ringoAvg);
SAME_VALUE(ncclNumOps, RINGO_NUM_OPS);
SAME_VALUE(NCCL_UNIQUE_ID_BYTES, RINGO_UNIQUE_ID_BYTES);
_Static_assert(sizeof(ncclUniqueId) == sizeof(ringoUniqueId), "a unique id must travel unchanged");
_Static_assert(_Generic((cudaStream_t)0, ringoStream_t: 1, default: 0), "cudaStream_t must be ringoStream_t");

/* ---- results and messages ---- */

/* The shim's own message of this thread (ncclGetLastError(NULL)), newer than ringo's when set. */
static __thread char tl_msg[SHIM_MSG_BYTES];
static __thread int tl_msg_set;

/* The switch has no default, so -Wswitch flags a ringo code added later and not mapped here. */
static ncclResult_t to_nccl(ringoResult_t res) {
  switch (res) {
    case ringoSuccess: return ncclSuccess;
    case ringoUnhandledCudaError: return ncclUnhandledCudaError;
    case ringoSystemError: return ncclSystemError;
    case ringoInternalError: return ncclInternalError;
    case ringoInvalidArgument: return ncclInvalidArgument;
    case ringoInvalidUsage: return ncclInvalidUsage;
    case ringoRemoteError: return ncclRemoteError;
    case ringoInProgress: return ncclInProgress;
    case ringoTimeout: return ncclTimeout;
  }
  return ncclInternalError;
}

ncclResult_t shim_result(struct ncclComm* comm, ringoResult_t res) {
  if (res != ringoSuccess) {
    tl_msg_set = 0;
    if (comm) comm->msg_set = 0;
  }
  return to_nccl(res);
}

ncclResult_t shim_fail(struct ncclComm* comm, ncclResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
  va_end(ap);
  tl_msg_set = 1;
  if (comm) {
    pthread_mutex_lock(&comm->lock);
    memcpy(comm->msg, tl_msg, sizeof comm->msg);
    comm->msg_set = 1;
    pthread_mutex_unlock(&comm->lock);
  }
  return code;
}

ncclResult_t shim_unsupported(struct ncclComm* comm, const char* function, const char* what) {
  return shim_fail(comm, ncclInvalidUsage, "%s: ringo does not provide %s (nccl/README.md lists what it provides)",
                   function, what);
}

/* The switch lists every NCCL code so each gets its own string; ringo's strings serve the codes
 * the two share, and anything else (ncclNumResults, garbage) gets one that says so. */
NCCL_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
    case ncclUnhandledCudaError:
    case ncclSystemError:
    case ncclInternalError:
    case ncclInvalidArgument:
    case ncclInvalidUsage:
    case ncclRemoteError:
    case ncclInProgress:
    case ncclTimeout:
      return ringoGetErrorString((ringoResult_t)result);
    case ncclNumResults:
      break;
  }
  return "unknown NCCL result code";
}
NCCL_PROFILING_ALIAS(ncclGetErrorString);

/* The comm's message is read without its lock: a message being replaced while it is read is as
 * good as NCCL's, which makes no promise for concurrent failures either. */
NCCL_EXPORT const char* ncclGetLastError(ncclComm_t comm) {
  if (comm) return comm->msg_set ? comm->msg : ringoGetLastError(comm->rc);
  return tl_msg_set ? tl_msg : ringoGetLastError(NULL);
}
NCCL_PROFILING_ALIAS(ncclGetLastError);

#ifdef NCCL_OS_LINUX
NCCL_EXPORT void ncclResetDebugInit(void) {}
NCCL_PROFILING_ALIAS(ncclResetDebugInit);
#endif

/* ---- version and ids ---- */

NCCL_EXPORT ncclResult_t ncclGetVersion(int* version) {
  if (!version) return shim_fail(NULL, ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclGetVersion);

NCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (!uniqueId) return shim_result(NULL, ringoGetUniqueId(NULL));
  ringoUniqueId id;
  const ringoResult_t res = ringoGetUniqueId(&id);
  if (res == ringoSuccess) memcpy(uniqueId, &id, sizeof id);
  return shim_result(NULL, res);
}
NCCL_PROFILING_ALIAS(ncclGetUniqueId);

NCCL_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  if (!comm) return shim_fail(NULL, ncclInvalidArgument, "ncclCommGetUniqueId: comm is NULL");
  return ncclGetUniqueId(uniqueId);
}
NCCL_PROFILING_ALIAS(ncclCommGetUniqueId);

/* ---- queries ---- */

NCCL_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  ringoComm_t rc;
  const ncclResult_t res = shim_ready(comm, "ncclCommCount", &rc);
  return res != ncclSuccess ? res : shim_result(comm, ringoCommCount(rc, count));
}
NCCL_PROFILING_ALIAS(ncclCommCount);

NCCL_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  ringoComm_t rc;
  const ncclResult_t res = shim_ready(comm, "ncclCommCuDevice", &rc);
  return res != ncclSuccess ? res : shim_result(comm, ringoCommCuDevice(rc, device));
}
NCCL_PROFILING_ALIAS(ncclCommCuDevice);

NCCL_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  ringoComm_t rc;
  const ncclResult_t res = shim_ready(comm, "ncclCommUserRank", &rc);
  return res != ncclSuccess ? res : shim_result(comm, ringoCommUserRank(rc, rank));
}
NCCL_PROFILING_ALIAS(ncclCommUserRank);

/* A non-blocking init still running is ncclInProgress, never a wait: callers poll this. */
NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!comm || !asyncError)
    return shim_fail(comm, ncclInvalidArgument, "ncclCommGetAsyncError: %s is NULL", comm ? "asyncError" : "comm");
  if (atomic_load(&comm->pending)) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  if (comm->init_result != ncclSuccess) {
    *asyncError = comm->init_result;
    return ncclSuccess;
  }
  ringoComm_t rc;
  const ncclResult_t ready = shim_ready(comm, "ncclCommGetAsyncError", &rc); /* an aborted record: says so */
  if (ready != ncclSuccess) return ready;
  ringoResult_t async = ringoSuccess;
  const ringoResult_t res = ringoCommGetAsyncError(rc, &async);
  if (res == ringoSuccess) *asyncError = to_nccl(async);
  return shim_result(comm, res);
}
NCCL_PROFILING_ALIAS(ncclCommGetAsyncError);

/* ---- collectives and point-to-point: each is one shim_op ---- */

static ncclResult_t submit(enum shim_kind kind, const void* send, void* recv, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  const struct shim_op o = {kind, send, recv, count, datatype, op, root, comm, stream, NULL, {0}};
  return shim_submit(&o);
}

NCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit(SHIM_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclAllReduce);

NCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(SHIM_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclBroadcast);

/* The legacy in-place broadcast is a broadcast with sendbuff == recvbuff. */
NCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return submit(SHIM_BROADCAST, buff, buff, count, datatype, ncclSum, root, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclBcast);

NCCL_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(SHIM_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclReduce);

NCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return submit(SHIM_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclAllGather);

NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  return submit(SHIM_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclReduceScatter);

NCCL_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream) {
  return submit(SHIM_ALLTOALL, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclAlltoAll);

NCCL_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(SHIM_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclGather);

NCCL_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(SHIM_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclScatter);

NCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return submit(SHIM_SEND, sendbuff, NULL, count, datatype, ncclSum, peer, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclSend);

NCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return submit(SHIM_RECV, NULL, recvbuff, count, datatype, ncclSum, peer, comm, stream);
}
NCCL_PROFILING_ALIAS(ncclRecv);
