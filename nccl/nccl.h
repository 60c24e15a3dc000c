/* nccl.h — ringo's NCCL compatibility header: the types, values and functions of NCCL 2.10.3, so a
 * program written for NCCL compiles unchanged; libnccl.so.2 (nccl/nccl_shim.c) serves them on ringo.
 * Needs only libc (and the CUDA headers when present). Tested by test/test_nccl_abi.cc and
 * test/test_nccl_program.cc (make test); see nccl/README.md. */
#ifndef NCCL_H_
#define NCCL_H_

#include <stddef.h>

/* The CUDA headers come first when the compiler can see them, as with a real NCCL: clients expect
 * nccl.h to bring cudaStream_t and the half/bfloat16 types. Without them, cudaStream_t is declared
 * exactly as CUDA declares it, so a later #include <cuda_runtime_api.h> agrees with it. */
#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#define RINGO_NCCL_CUDA_HEADERS 1
#endif
#endif
#ifdef RINGO_NCCL_CUDA_HEADERS
#include <cuda_runtime_api.h>
#include <cuda_fp16.h>
#if __has_include(<cuda_bf16.h>)
#include <cuda_bf16.h>
#endif
#else
typedef struct CUstream_st* cudaStream_t;
#endif

/* Marks this nccl.h as ringo's, so a build can check that no real NCCL header was picked up. */
#define RINGO_NCCL_COMPAT 1

#define NCCL_MAJOR 2
#define NCCL_MINOR 10
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""

/* NCCL's two-branch arithmetic: codes before 2.9 are X*1000+Y*100+Z (2.8.4 -> 2804), from 2.9 on
 * X*10000+Y*100+Z (2.10.3 -> 21003). Clients compare NCCL_VERSION_CODE against NCCL_VERSION(...)
 * to switch features on, so both must be exactly NCCL's. */
#define NCCL_VERSION_CODE 21003
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque communicator handle (a ringo communicator underneath). */
typedef struct ncclComm* ncclComm_t;

#define NCCL_UNIQUE_ID_BYTES 128
/** Rendezvous token: made by one rank with ncclGetUniqueId, copied as plain bytes to the others. */
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;

/* Result codes. NCCL 2.10.3 itself stops at ncclInvalidUsage (ncclNumResults 6); ncclRemoteError
 * (NCCL 2.12) and ncclInProgress (NCCL 2.14) are here with later NCCL's values because ringo
 * reports a dead or misbehaving peer as a remote error. ncclInProgress is never returned: every
 * init is blocking. A ringo timeout (RINGO_TIMEOUT), which NCCL has no code for, is returned as
 * ncclRemoteError; ncclGetLastError then says that it was a timeout. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/* Element types, with every alias NCCL has. Real NCCL 2.10.3 declares ncclBfloat16 (and then
 * ncclNumTypes 10) only when the CUDA 11 bfloat16 types exist, else ncclNumTypes is 9; ringo
 * reduces bfloat16 on the host, so here it is always present. */
typedef enum {
  ncclInt8 = 0, ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2, ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6, ncclHalf = 6,
  ncclFloat32 = 7, ncclFloat = 7,
  ncclFloat64 = 8, ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclNumTypes = 10
} ncclDataType_t;

/** Reduction operators; ncclAvg divides the sum by the number of ranks. */
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5 } ncclRedOp_t;

/* Each function is also exported as pnccl<Name> (the same code), the profiling entry points NCCL
 * provides so a tool can interpose nccl<Name> and still reach the library. */

/** Stores NCCL_VERSION_CODE (21003) in *version. @return ncclSuccess; ncclInvalidArgument on NULL. */
ncclResult_t  ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/** Starts a rendezvous root in this process and describes it in *uniqueId; call on one rank and
 * send the bytes to every other rank. @return ncclSuccess; ncclInvalidArgument; ncclSystemError. */
ncclResult_t  ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/** Creates rank `rank` of an nranks communicator; blocks until every rank has joined. Inside
 * ncclGroupStart/ncclGroupEnd it returns the handle at once and completes at ncclGroupEnd, so one
 * thread can create all local ranks. @return ncclSuccess; ncclInvalidArgument; ncclRemoteError
 * (refused, or timed out); ncclSystemError. */
ncclResult_t  ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/** Creates ndev communicators of one clique in this process. On ringo devlist NULL means ndev
 * host ranks (NCCL would use CUDA devices 0..ndev-1); a list names CUDA devices.
 * @return as ncclCommInitRank; ncclUnhandledCudaError for devices in a build without CUDA. */
ncclResult_t  ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/** Frees a communicator once its work is done. @return ncclSuccess (also for NULL, as NCCL). */
ncclResult_t  ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/** Stops work on comm (blocked calls in other threads return) and frees it.
 * @return ncclSuccess (also for NULL, as NCCL). */
ncclResult_t  ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/** Human-readable name of a result code. Never NULL. */
const char*  ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/** Message of the last failure on comm (comm NULL: of this thread). Never NULL. (NCCL 2.13+.) */
const char*  ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/** Error that ended asynchronous work on comm, ncclSuccess while none (also while work is in
 * flight). Cheap and thread-safe, for polling. @return ncclSuccess; ncclInvalidArgument on NULL. */
ncclResult_t  ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

/** Number of ranks in comm. @return ncclSuccess; ncclInvalidArgument on NULL. */
ncclResult_t  ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

/** CUDA device of comm, -1 for a host communicator. @return ncclSuccess; ncclInvalidArgument. */
ncclResult_t  ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

/** Rank of comm. @return ncclSuccess; ncclInvalidArgument on NULL. */
ncclResult_t  ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* Collectives. On ringo, host buffers take stream NULL and the call completes before it returns
 * (or at ncclGroupEnd inside a group); device buffers need ringo's CUDA path. Each returns
 * ncclSuccess; ncclInvalidArgument (bad comm, datatype, op, root, NULL buffer with count > 0);
 * ncclInvalidUsage (communicator in error, calls that do not match across ranks); ncclRemoteError
 * (a peer died, or ringo timed out). */

/** recvbuff on root = op over ranks of sendbuff (recvbuff is only written on root). */
ncclResult_t  ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);

/** In-place broadcast (the legacy form): buff of root is copied to buff of every rank. */
ncclResult_t  ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);

/** recvbuff of every rank = sendbuff of root (sendbuff is only read on root). */
ncclResult_t  ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            int root, ncclComm_t comm, cudaStream_t stream);

/** recvbuff[i] = op over ranks of sendbuff[i] for i < count, on every rank. */
ncclResult_t  ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/** recvbuff[i] = op over ranks of sendbuff[rank*recvcount + i] for i < recvcount. */
ncclResult_t  ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);

/** recvbuff[r*sendcount + i] = sendbuff[i] of rank r, on every rank. */
ncclResult_t  ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/** Sends count elements to rank peer, which calls ncclRecv with the same count and datatype;
 * messages between two ranks match in call order. Put exchanges (all-to-all loops) inside
 * ncclGroupStart/ncclGroupEnd: the group's sends and receives then progress together.
 * @return as the collectives; ncclInvalidArgument for peer out of range. */
ncclResult_t  ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/** Receives count elements from rank peer (see ncclSend). @return as ncclSend. */
ncclResult_t  ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/** Opens a group: the calls this thread makes until ncclGroupEnd (inits, collectives, sends and
 * receives, on any communicators) are queued. Groups nest. @return ncclSuccess. */
ncclResult_t  ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

/** Closes the group: runs the queued inits, then the queued operations, and waits for them.
 * @return ncclSuccess; ncclInvalidUsage without ncclGroupStart; the first error. */
ncclResult_t  ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

#ifdef __cplusplus
}
#endif
#endif /* NCCL_H_ */
