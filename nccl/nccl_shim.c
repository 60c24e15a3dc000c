/* nccl_shim.c — libnccl.so.2 on ringo: each function of nccl/nccl.h forwards to its ringo twin in
 * include/ringo.h. Links libringo.so; built by `make` into $(BUILD)/lib/ringo-nccl/.
 * Tested by test/test_nccl_abi.cc and test/test_nccl_program.cc (make test). */
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "ringo.h"

/* The library is built with -fvisibility=hidden: only what is marked here is exported. */
#define NCCL_EXPORT __attribute__((visibility("default")))
/* NCCL exports every function twice, as nccl<Name> and as the profiling entry pnccl<Name>; here
 * the second name is an alias of the first (the same code). */
#define NCCL_PROFILING_ALIAS(name) \
  extern __typeof__(name) p##name __attribute__((alias(#name), visibility("default")))

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
SAME_VALUE(ncclInt8, ringoInt8);
SAME_VALUE(ncclChar, ringoInt8);
SAME_VALUE(ncclUint8, ringoUint8);
SAME_VALUE(ncclInt32, ringoInt32);
SAME_VALUE(ncclInt, ringoInt32);
SAME_VALUE(ncclUint32, ringoUint32);
SAME_VALUE(ncclInt64, ringoInt64);
SAME_VALUE(ncclUint64, ringoUint64);
SAME_VALUE(ncclFloat16, ringoFloat16);
SAME_VALUE(ncclHalf, ringoFloat16);
SAME_VALUE(ncclFloat32, ringoFloat32);
SAME_VALUE(ncclFloat, ringoFloat32);
SAME_VALUE(ncclFloat64, ringoFloat64);
SAME_VALUE(ncclDouble, ringoFloat64);
SAME_VALUE(ncclBfloat16, ringoBfloat16);
SAME_VALUE(ncclNumTypes, RINGO_NUM_TYPES);
SAME_VALUE(ncclSum, ringoSum);
SAME_VALUE(ncclProd, ringoProd);
SAME_VALUE(ncclMax, ringoMax);
SAME_VALUE(ncclMin, ringoMin);
SAME_VALUE(ncclAvg, ringoAvg);
SAME_VALUE(ncclNumOps, RINGO_NUM_OPS);
SAME_VALUE(NCCL_UNIQUE_ID_BYTES, RINGO_UNIQUE_ID_BYTES);
_Static_assert(sizeof(ncclUniqueId) == sizeof(ringoUniqueId), "a unique id must travel unchanged");
_Static_assert(sizeof(ncclComm_t) == sizeof(ringoComm_t), "an ncclComm_t holds a ringoComm_t");
_Static_assert(_Generic((cudaStream_t)0, ringoStream_t: 1, default: 0), "cudaStream_t must be ringoStream_t");

/* NCCL has no timeout code: a ringo timeout (a peer that stopped answering) is reported as the
 * remote error it most likely is, and ncclGetLastError keeps ringo's message naming the timeout.
 * The switch has no default, so -Wswitch flags a ringo code added later and not mapped here. */
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
    case ringoTimeout: return ncclRemoteError;
  }
  return ncclInternalError;
}

/* Datatypes and ops are passed on unchanged, out-of-range values too: ringo validates every
 * argument and records a message for ncclGetLastError, which the shim could not. */
static ringoDataType_t type_of(ncclDataType_t datatype) { return (ringoDataType_t)datatype; }
static ringoRedOp_t op_of(ncclRedOp_t op) { return (ringoRedOp_t)op; }
static ringoComm_t comm_of(ncclComm_t comm) { return (ringoComm_t)comm; }

/* ---- version, ids, communicators ---- */

NCCL_EXPORT ncclResult_t ncclGetVersion(int* version) {
  if (!version) return to_nccl(ringoGetVersion(NULL)); /* ringo's argument check and message */
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclGetVersion);

NCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (!uniqueId) return to_nccl(ringoGetUniqueId(NULL));
  ringoUniqueId id;
  const ringoResult_t res = ringoGetUniqueId(&id);
  if (res == ringoSuccess) memcpy(uniqueId, &id, sizeof id);
  return to_nccl(res);
}
NCCL_PROFILING_ALIAS(ncclGetUniqueId);

/* The handle goes through a ringoComm_t local (ringo returns it before this call returns, even
 * for an init queued in a group), so no object is written through a pointer of another type. */
NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  ringoUniqueId id;
  memcpy(&id, &commId, sizeof id);
  if (!comm) return to_nccl(ringoCommInitRank(NULL, nranks, id, rank));
  ringoComm_t handle = NULL;
  const ringoResult_t res = ringoCommInitRank(&handle, nranks, id, rank);
  *comm = (ncclComm_t)handle;
  return to_nccl(res);
}
NCCL_PROFILING_ALIAS(ncclCommInitRank);

/* devlist is passed on as is: NULL means host ranks on ringo, where NCCL would take CUDA devices
 * 0..ndev-1 (ringo has no device to pick for a host buffer). */
NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (!comm || ndev < 1) {
    ringoComm_t unused;
    return to_nccl(ringoCommInitAll(comm ? &unused : NULL, ndev, devlist));
  }
  ringoComm_t* handles = calloc((size_t)ndev, sizeof *handles);
  if (!handles) return ncclSystemError;
  const ringoResult_t res = ringoCommInitAll(handles, ndev, devlist);
  for (int i = 0; i < ndev; i++) comm[i] = (ncclComm_t)handles[i];
  free(handles);
  return to_nccl(res);
}
NCCL_PROFILING_ALIAS(ncclCommInitAll);

/* NCCL accepts NULL in ncclCommDestroy and ncclCommAbort as a no-op (cleanup paths rely on it);
 * ringo calls it an invalid argument, so NULL stops here. */
NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return comm ? to_nccl(ringoCommDestroy(comm_of(comm))) : ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommDestroy);

NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return comm ? to_nccl(ringoCommAbort(comm_of(comm))) : ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommAbort);

NCCL_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return to_nccl(ringoCommCount(comm_of(comm), count));
}
NCCL_PROFILING_ALIAS(ncclCommCount);

NCCL_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return to_nccl(ringoCommCuDevice(comm_of(comm), device));
}
NCCL_PROFILING_ALIAS(ncclCommCuDevice);

NCCL_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return to_nccl(ringoCommUserRank(comm_of(comm), rank));
}
NCCL_PROFILING_ALIAS(ncclCommUserRank);

NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!asyncError) return to_nccl(ringoCommGetAsyncError(comm_of(comm), NULL));
  ringoResult_t async = ringoSuccess;
  const ringoResult_t res = ringoCommGetAsyncError(comm_of(comm), &async);
  if (res == ringoSuccess) *asyncError = to_nccl(async);
  return to_nccl(res);
}
NCCL_PROFILING_ALIAS(ncclCommGetAsyncError);

/* ---- errors ---- */

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
      return ringoGetErrorString((ringoResult_t)result);
    case ncclNumResults:
      break;
  }
  return "unknown NCCL result code";
}
NCCL_PROFILING_ALIAS(ncclGetErrorString);

NCCL_EXPORT const char* ncclGetLastError(ncclComm_t comm) { return ringoGetLastError(comm_of(comm)); }
NCCL_PROFILING_ALIAS(ncclGetLastError);

/* ---- groups ---- */

NCCL_EXPORT ncclResult_t ncclGroupStart(void) { return to_nccl(ringoGroupStart()); }
NCCL_PROFILING_ALIAS(ncclGroupStart);

NCCL_EXPORT ncclResult_t ncclGroupEnd(void) { return to_nccl(ringoGroupEnd()); }
NCCL_PROFILING_ALIAS(ncclGroupEnd);

/* ---- collectives and point-to-point ---- */

NCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return to_nccl(ringoAllReduce(sendbuff, recvbuff, count, type_of(datatype), op_of(op), comm_of(comm), stream));
}
NCCL_PROFILING_ALIAS(ncclAllReduce);

NCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  return to_nccl(ringoBroadcast(sendbuff, recvbuff, count, type_of(datatype), root, comm_of(comm), stream));
}
NCCL_PROFILING_ALIAS(ncclBroadcast);

/* The legacy in-place broadcast is ringo's broadcast with sendbuff == recvbuff. */
NCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return to_nccl(ringoBroadcast(buff, buff, count, type_of(datatype), root, comm_of(comm), stream));
}
NCCL_PROFILING_ALIAS(ncclBcast);

NCCL_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return to_nccl(ringoReduce(sendbuff, recvbuff, count, type_of(datatype), op_of(op), root, comm_of(comm), stream));
}
NCCL_PROFILING_ALIAS(ncclReduce);

NCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return to_nccl(ringoAllGather(sendbuff, recvbuff, sendcount, type_of(datatype), comm_of(comm), stream));
}
NCCL_PROFILING_ALIAS(ncclAllGather);

NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  return to_nccl(
      ringoReduceScatter(sendbuff, recvbuff, recvcount, type_of(datatype), op_of(op), comm_of(comm), stream));
}
NCCL_PROFILING_ALIAS(ncclReduceScatter);

NCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return to_nccl(ringoSend(sendbuff, count, type_of(datatype), peer, comm_of(comm), stream));
}
NCCL_PROFILING_ALIAS(ncclSend);

NCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return to_nccl(ringoRecv(recvbuff, count, type_of(datatype), peer, comm_of(comm), stream));
}
NCCL_PROFILING_ALIAS(ncclRecv);
