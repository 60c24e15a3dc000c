/* nccl.h — ringo's NCCL compatibility header at NCCL 2.30.7's ABI: the same types, layouts, values
 * and functions, so a program written for NCCL compiles unchanged and a prebuilt one (PyTorch,
 * CuPy) loads libnccl.so.2 (nccl/nccl_shim.c and its siblings), which serves them on ringo.
 * Needs only libc (and the CUDA headers when present). Tested by test/test_nccl_abi.cc,
 * test/test_nccl_calls.cc and test/test_nccl_program.cc (make test); see nccl/README.md. */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

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
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""

/* NCCL's two-branch arithmetic: codes before 2.9 are X*1000+Y*100+Z (2.8.4 -> 2804), from 2.9 on
 * X*10000+Y*100+Z (2.30.7 -> 23007). Clients compare NCCL_VERSION_CODE against NCCL_VERSION(...)
 * to switch features on, so both must be exactly NCCL's. */
#define NCCL_VERSION_CODE 23007
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque communicator handle (the shim's record around a ringo communicator). */
typedef struct ncclComm* ncclComm_t;
/** Opaque handle of a registered memory window (ringo registers none: see ncclCommWindowRegister). */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/** Rendezvous token: made by one rank with ncclGetUniqueId, copied as plain bytes to the others. */
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;

/* Result codes with NCCL 2.30's values. A ringo timeout (RINGO_TIMEOUT seconds without progress)
 * is ncclTimeout, which NCCL 2.30 has too; ncclGetLastError says what timed out. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

/* Markers of a config field left to the library, and of "no communicator" in ncclCommSplit. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* The magic number a config must carry (NCCL_CONFIG_INITIALIZER writes it); a config without it
 * was never initialised and is refused. */
#define NCCL_API_MAGIC 0xcafebeef

/* Flags of APIs ringo declares but does not provide (windows, policies, shrink, revoke): kept
 * with NCCL's values so code that names them compiles. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_REVOKE_DEFAULT 0x00
#define NCCL_SUSPEND_MEM 0x01

/* Communicator configuration, laid out field for field as NCCL 2.30's (96 bytes on LP64). The
 * first three fields describe the struct itself, so the library can read a smaller config from a
 * program built against an older NCCL (2.28's ends after nvlinkCentricSched, 80 bytes): ringo
 * reads only the fields that `size` covers. ringo acts on `blocking` (0: non-blocking init) and
 * keeps the rest for ncclCommSplit's children; the tuning fields mean nothing to ringo. */
typedef struct ncclConfig_v23000 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
} ncclConfig_t;

/* Every field the user may set starts undefined; a config must be initialised with this. */
#define NCCL_CONFIG_INITIALIZER                                                              \
  {                                                                                          \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT,          \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                 \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                 \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                 \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                 \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                 \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                         \
  }

/* What ncclGroupSimulateEnd reports (24 bytes on LP64); estimatedTime is in microseconds. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define RINGO_NCCL_SIM_INFO_MAGIC 0x74685283
#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), RINGO_NCCL_SIM_INFO_MAGIC, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

/* Reduction operators. Values from ncclNumOps up name operators made by ncclRedOpCreatePreMulSum;
 * ncclMaxRedOp is the largest value an ncclRedOp_t may hold (it stays int-sized). */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types, with every alias NCCL has. ringo moves the two float8 types (as bytes) but does
 * not reduce them: a reduction on them is ncclInvalidArgument. */
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
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives and when it is read. */
typedef enum {
  ncclScalarDevice = 0,        /* read when each collective runs (on ringo: see that function) */
  ncclScalarHostImmediate = 1  /* read once, before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* Queries of ncclCommMemStats (which ringo does not provide). */
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;

/* One entry of ncclWaitSignal's list (which ringo does not provide). */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

/** Opaque handle of NCCL's parameter API (which ringo does not provide). */
typedef struct ncclParamHandle* ncclParamHandle_t;

/* Each function is also exported as pnccl<Name> (the same code), the profiling entry points NCCL
 * provides so a tool can interpose nccl<Name> and still reach the library. */
#define RINGO_NCCL_DECLARE(ret, name, args) \
  ret name args;                            \
  ret p##name args

/* ---- version, ids, memory ---- */

/** Stores NCCL_VERSION_CODE (23007) in *version. @return ncclSuccess; ncclInvalidArgument on NULL. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclGetVersion, (int* version));

/** Starts a rendezvous root in this process and describes it in *uniqueId; call on one rank and
 * send the bytes to every other rank. @return ncclSuccess; ncclInvalidArgument; ncclSystemError. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId* uniqueId));

/** Allocates size bytes of device memory (cudaMalloc of the CUDA runtime the process has loaded)
 * that any communicator may use. @return ncclSuccess; ncclInvalidArgument (NULL ptr, size 0);
 * ncclUnhandledCudaError (no CUDA runtime, no device, out of memory). */
RINGO_NCCL_DECLARE(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size));
/** Frees memory from ncclMemAlloc (NULL: nothing). @return ncclSuccess; ncclUnhandledCudaError. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclMemFree, (void* ptr));

/* ---- communicators ---- */

/** Creates rank `rank` of an nranks communicator; blocks until every rank has joined. Inside
 * ncclGroupStart/ncclGroupEnd it returns the handle at once and completes at ncclGroupEnd, so one
 * thread can create all local ranks. @return ncclSuccess; ncclInvalidArgument; ncclRemoteError
 * (refused); ncclTimeout; ncclSystemError. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommInitRank, (ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank));

/** ncclCommInitRank with a configuration (NULL: the defaults). With config->blocking == 0 the init
 * runs on a thread of its own: the call returns ncclInProgress with *comm set, and
 * ncclCommGetAsyncError(*comm) reports ncclInProgress until the communicator is ready.
 * @return as ncclCommInitRank; ncclInProgress; ncclInvalidArgument for a config without
 * NCCL_API_MAGIC. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommInitRankConfig,
                   (ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config));

/** ncclCommInitRankConfig given nId ids (the same list, in the same order, on every rank). NCCL
 * spreads its bootstrap over them; ringo's rendezvous needs one and uses commIds[0].
 * @return as ncclCommInitRankConfig; ncclInvalidArgument for nId < 1 or NULL commIds. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommInitRankScalable,
                   (ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                    ncclConfig_t* config));

/** Creates ndev communicators of one clique in this process. On ringo devlist NULL means ndev
 * host ranks (NCCL would use CUDA devices 0..ndev-1); a list names CUDA devices.
 * @return as ncclCommInitRank; ncclUnhandledCudaError for devices in a build without CUDA. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommInitAll, (ncclComm_t* comm, int ndev, const int* devlist));

/** Finishes the communicator's work; on ringo every operation has completed (host memory) or is
 * ordered on its stream (device memory) when its call returns, so this only marks comm finalised.
 * @return ncclSuccess; ncclInvalidArgument on NULL. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));

/** Frees a communicator once its work is done. @return ncclSuccess (also for NULL, as NCCL). */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));

/** Stops work on comm (blocked calls in other threads return with an error) and frees it.
 * @return ncclSuccess (also for NULL, as NCCL). */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommAbort, (ncclComm_t comm));

/** Not provided by ringo. @return ncclInvalidUsage, with a message in ncclGetLastError. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));

/** Collective over comm's ranks: those passing one color form a new communicator, ordered by key
 * (ties by rank in comm); NCCL_SPLIT_NOCOLOR gives *newcomm NULL. config NULL: the child takes
 * comm's configuration (non-blocking included: then the child's init returns ncclInProgress).
 * Not inside a group on ringo. @return ncclSuccess; ncclInProgress; ncclInvalidArgument (color
 * below NCCL_SPLIT_NOCOLOR, NULL newcomm); ncclInvalidUsage (inside a group); errors of the
 * exchange and of ncclCommInitRank. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommSplit,
                   (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config));

/** Not provided by ringo. @return ncclInvalidUsage, with a message in ncclGetLastError. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommShrink,
                   (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                    ncclConfig_t* config, int shrinkFlags));

/** A fresh unique id (as ncclGetUniqueId) for comm. NCCL makes it for ncclCommGrow, which ringo
 * does not provide. @return ncclSuccess; ncclInvalidArgument; ncclSystemError. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId* uniqueId));

/** Not provided by ringo. @return ncclInvalidUsage, with a message in ncclGetLastError. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommGrow,
                   (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                    ncclConfig_t* config));

/** Human-readable name of a result code. Never NULL. */
RINGO_NCCL_DECLARE(const char*, ncclGetErrorString, (ncclResult_t result));

/** Message of the last failure: on comm, or with comm NULL of this thread. Never NULL. */
RINGO_NCCL_DECLARE(const char*, ncclGetLastError, (ncclComm_t comm));

/* NCCL declares ncclResetDebugInit only when NCCL_OS_LINUX is defined; ringo follows. It is a
 * no-op on ringo, whose logging reads RINGO_DEBUG once. */
#ifdef NCCL_OS_LINUX
void ncclResetDebugInit(void);
void pncclResetDebugInit(void);
#else
#define ncclResetDebugInit()
#define pncclResetDebugInit()
#endif

/** Error that ended asynchronous work on comm; ncclInProgress while a non-blocking init is under
 * way; else ncclSuccess (also while work is in flight). Cheap and thread-safe, for polling.
 * @return ncclSuccess; ncclInvalidArgument on NULL. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError));

/** Number of ranks in comm. @return ncclSuccess; ncclInvalidArgument on NULL. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count));

/** CUDA device of comm, -1 for a host communicator. @return ncclSuccess; ncclInvalidArgument. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device));

/** Rank of comm. @return ncclSuccess; ncclInvalidArgument on NULL. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank));

/** Registration is a hint ringo takes nowhere: *handle is a token that ncclCommDeregister frees;
 * any buffer works with or without it. @return ncclSuccess; ncclInvalidArgument (NULL comm, buff
 * or handle); ncclSystemError. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle));
/** Frees a token of ncclCommRegister. @return ncclSuccess; ncclInvalidArgument (not comm's token). */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle));

/* Not provided by ringo (suspend/resume, memory statistics, windows): each returns
 * ncclInvalidUsage with a message in ncclGetLastError. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags));
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommResume, (ncclComm_t comm));
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value));
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommWindowRegister,
                   (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags));
RINGO_NCCL_DECLARE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
RINGO_NCCL_DECLARE(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr));

/* ---- reduction operators ---- */

/** Creates an operator for collectives on comm and datatype that multiplies each rank's input by
 * *scalar (of type datatype) before summing: out = sum over ranks r of scalar * in_r, each product
 * rounded to datatype. ncclScalarHostImmediate reads *scalar now; ncclScalarDevice keeps the
 * pointer and reads it each time a collective runs (on a host buffer ringo reads it as host
 * memory). Only host buffers: on device buffers the collective is ncclInvalidUsage (the shim
 * runs no kernel of its own). @return ncclSuccess; ncclInvalidArgument (NULL op or scalar,
 * datatype ringo cannot reduce, unknown residence, bad comm). */
RINGO_NCCL_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum,
                   (ncclRedOp_t* op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                    ncclComm_t comm));
/** Destroys an operator of ncclRedOpCreatePreMulSum made on comm. @return ncclSuccess;
 * ncclInvalidArgument (a built-in op, or not one of comm's). */
RINGO_NCCL_DECLARE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));

/* ---- collectives ----
 * Host buffers take stream NULL and the call completes before it returns (or at ncclGroupEnd
 * inside a group); device buffers go to ringo's CUDA path, ordered on stream. Each returns
 * ncclSuccess; ncclInvalidArgument (bad comm, datatype, op, root, NULL buffer with count > 0);
 * ncclInvalidUsage (communicator in error, calls that do not match across ranks); ncclRemoteError
 * (a peer died); ncclTimeout. */

/** recvbuff on root = op over ranks of sendbuff (recvbuff is only written on root). */
RINGO_NCCL_DECLARE(ncclResult_t, ncclReduce,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                    int root, ncclComm_t comm, cudaStream_t stream));

/** In-place broadcast (the legacy form): buff of root is copied to buff of every rank. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclBcast,
                   (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                    cudaStream_t stream));

/** recvbuff of every rank = sendbuff of root (sendbuff is only read on root). */
RINGO_NCCL_DECLARE(ncclResult_t, ncclBroadcast,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream));

/** recvbuff[i] = op over ranks of sendbuff[i] for i < count, on every rank. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclAllReduce,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                    ncclComm_t comm, cudaStream_t stream));

/** recvbuff[i] = op over ranks of sendbuff[rank*recvcount + i] for i < recvcount. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclReduceScatter,
                   (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream));

/** recvbuff[r*sendcount + i] = sendbuff[i] of rank r, on every rank. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclAllGather,
                   (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                    ncclComm_t comm, cudaStream_t stream));

/** recvbuff[i*count ..] = the block sendbuff[r*count ..] of rank i, where r is this rank; done as
 * one group of sends and receives. sendbuff and recvbuff must not overlap. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclAlltoAll,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                    ncclComm_t comm, cudaStream_t stream));

/** On root, recvbuff[i*count ..] = sendbuff of rank i (recvbuff is unused elsewhere). In place
 * when sendbuff == recvbuff + root*count on root. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclGather,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream));

/** recvbuff of rank i = root's sendbuff[i*count ..] (sendbuff is unused off root). In place when
 * recvbuff == sendbuff + root*count on root. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclScatter,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream));

/** Sends count elements to rank peer, which calls ncclRecv with the same count and datatype;
 * messages between two ranks match in call order. Put exchanges (all-to-all loops) inside
 * ncclGroupStart/ncclGroupEnd: the group's sends and receives then progress together.
 * @return as the collectives; ncclInvalidArgument for peer out of range. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclSend,
                   (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                    cudaStream_t stream));

/** Receives count elements from rank peer (see ncclSend). @return as ncclSend. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclRecv,
                   (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                    cudaStream_t stream));

/* One-sided operations and signals on windows: not provided by ringo (ncclInvalidUsage). */
RINGO_NCCL_DECLARE(ncclResult_t, ncclPutSignal,
                   (const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                    size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                    cudaStream_t stream));
RINGO_NCCL_DECLARE(ncclResult_t, ncclSignal,
                   (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream));
RINGO_NCCL_DECLARE(ncclResult_t, ncclWaitSignal,
                   (int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream));

/* ---- groups ---- */

/** Opens a group: the calls this thread makes until ncclGroupEnd (inits, collectives, sends and
 * receives, on any communicators) are queued. Groups nest. @return ncclSuccess. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclGroupStart, (void));

/** Closes the group: runs the queued inits, then the queued operations, and waits for them.
 * @return ncclSuccess; ncclInvalidUsage without ncclGroupStart; the first error. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclGroupEnd, (void));

/** Closes the group like ncclGroupEnd but runs none of its operations: simInfo->estimatedTime
 * gets their time in microseconds from an alpha-beta model of ringo's rings (nccl/README.md).
 * Queued inits still run. @return ncclSuccess; ncclInvalidArgument (NULL simInfo, or not made
 * with NCCL_SIM_INFO_INITIALIZER); ncclInvalidUsage without ncclGroupStart. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t* simInfo));

/* ---- NCCL's parameter API: not provided by ringo, which reads its own RINGO_* variables ----
 * Each returns ncclInvalidUsage with a message; ncclParamDumpAll does nothing. */
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamBind, (ncclParamHandle_t* out, const char* key));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t* out));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t* out));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t* out));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t* out));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t* out));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t* out));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t* out));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t* out));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char** out));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void* out, int maxLen, int* len));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetParameter, (const char* key, const char** value, int* valueLen));
RINGO_NCCL_DECLARE(ncclResult_t, ncclParamGetAllParameterKeys, (const char*** table, int* tableLen));
RINGO_NCCL_DECLARE(void, ncclParamDumpAll, (void));

#ifdef __cplusplus
}
#endif
#endif /* NCCL_H_ */
