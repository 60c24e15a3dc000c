/* ringo.h — the public API of ringo, a ring all-reduce library shaped like nccl.h.
 * Everything here is declared one to one after NCCL; see README.md for a usage example.
 * Tested by test/test_api.cc and test/test_collectives.cc (make test). */
#ifndef RINGO_H_
#define RINGO_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RINGO_BUILDING_LIBRARY) && defined(__GNUC__)
#define RINGO_API __attribute__((visibility("default")))
#else
#define RINGO_API
#endif

#define RINGO_MAJOR 0
#define RINGO_MINOR 1
#define RINGO_PATCH 0
/* Same arithmetic as NCCL 2.9+: X*10000 + Y*100 + Z. */
#define RINGO_VERSION(X, Y, Z) ((X) * 10000 + (Y) * 100 + (Z))
#define RINGO_VERSION_CODE RINGO_VERSION(RINGO_MAJOR, RINGO_MINOR, RINGO_PATCH)

#define RINGO_UNIQUE_ID_BYTES 128
/** Opaque rendezvous token: made by one rank with ringoGetUniqueId, shared with the others. */
typedef struct { char internal[RINGO_UNIQUE_ID_BYTES]; } ringoUniqueId;
/** Opaque communicator handle. */
typedef struct ringoComm* ringoComm_t;
/** Same type as cudaStream_t; pass NULL for host-memory work. */
typedef struct CUstream_st* ringoStream_t;

/** The result codes, their values and what ringoGetErrorString says of each: one list, which makes
 * both the enum below and the strings (src/core/core.c), so the two cannot drift apart. */
#define RINGO_RESULT_LIST(X)                                                        \
  X(ringoSuccess, 0, "no error")                                                    \
  X(ringoUnhandledCudaError, 1, "unhandled cuda error")                             \
  X(ringoSystemError, 2, "unhandled system error")                                  \
  X(ringoInternalError, 3, "internal error")                                        \
  X(ringoInvalidArgument, 4, "invalid argument")                                    \
  X(ringoInvalidUsage, 5, "invalid usage")                                          \
  X(ringoRemoteError, 6, "remote process exited or there was a network error")      \
  X(ringoInProgress, 7, "operation in progress")                                    \
  X(ringoTimeout, 8, "operation timed out (RINGO_TIMEOUT)")

#define RINGO_RESULT_ENUM_(name, value, text) name = value,
typedef enum { RINGO_RESULT_LIST(RINGO_RESULT_ENUM_) } ringoResult_t;
#undef RINGO_RESULT_ENUM_

typedef enum {
  ringoInt8 = 0, ringoUint8 = 1, ringoInt32 = 2, ringoUint32 = 3, ringoInt64 = 4,
  ringoUint64 = 5, ringoFloat16 = 6, ringoFloat32 = 7, ringoFloat64 = 8, ringoBfloat16 = 9
} ringoDataType_t;
#define RINGO_NUM_TYPES 10

typedef enum { ringoSum = 0, ringoProd = 1, ringoMax = 2, ringoMin = 3, ringoAvg = 4 } ringoRedOp_t;
#define RINGO_NUM_OPS 5

/** Cumulative payload counters of one rank (bytes put on / taken off its links). */
typedef struct { uint64_t bytesSent, bytesReceived, collectives; } ringoCommStats;

/** Library version as RINGO_VERSION_CODE.
 * @return ringoSuccess; ringoInvalidArgument if version is NULL. */
RINGO_API ringoResult_t ringoGetVersion(int* version);

/** Starts a rendezvous root in this process (TCP listener; address from RINGO_COMM_ID or
 * RINGO_SOCKET_IFNAME, else loopback) and packs its address, a random secret and the protocol
 * version into *id. Call it on one rank and share the id with every other rank.
 * @return ringoSuccess; ringoInvalidArgument if id is NULL; ringoSystemError if no socket. */
RINGO_API ringoResult_t ringoGetUniqueId(ringoUniqueId* id);

/** Creates this process's (or thread's) rank of an nranks communicator. Blocks until all nranks
 * ranks have joined, bounded by RINGO_TIMEOUT seconds.
 * @return ringoSuccess; ringoInvalidArgument (NULL comm, nranks not in [1, 65536], rank out of range,
 *         bad id);
 *         ringoRemoteError (the root refused us: wrong secret, version, duplicate rank);
 *         ringoTimeout; ringoSystemError. */
RINGO_API ringoResult_t ringoCommInitRank(ringoComm_t* comm, int nranks, ringoUniqueId id, int rank);

/** Settings of one communicator, for ringoCommInitRankConfig (after NCCL's ncclConfig_t). Start from
 * RINGO_CONFIG_INITIALIZER, which sets size, so a program built against this header keeps working
 * when later versions add fields; a field left 0 takes its environment variable, or its default. */
typedef struct {
  size_t size;           /**< sizeof(ringoConfig_t) as this program knows it */
  double timeoutSeconds; /**< RINGO_TIMEOUT of this communicator, 0.001 .. 1e9; 0: the environment's */
} ringoConfig_t;
#define RINGO_CONFIG_INITIALIZER {sizeof(ringoConfig_t), 0.0}

/** ringoCommInitRank with settings that override the environment's for this communicator alone (as
 * torch's init_process_group(timeout=...) does for its group). config NULL: ringoCommInitRank.
 * @return as ringoCommInitRank; ringoInvalidArgument also for a config whose size is too small for
 *         the fields it claims or whose timeoutSeconds is out of range. Not in NCCL. */
RINGO_API ringoResult_t ringoCommInitRankConfig(ringoComm_t* comm, int nranks, ringoUniqueId id, int rank,
                                                const ringoConfig_t* config);

/** Creates ndev communicators of one clique in this process. devlist NULL: ndev host ranks.
 * @return ringoSuccess; ringoInvalidArgument (NULL comms, ndev not in [1, 65536]);
 *         ringoUnhandledCudaError when devlist names devices and this build has no CUDA; errors of
 *         ringoCommInitRank. */
RINGO_API ringoResult_t ringoCommInitAll(ringoComm_t* comms, int ndev, const int* devlist);

/** Frees a communicator once its work is done: a call another thread is running on it finishes first.
 * Once freed (here or by ringoCommAbort) the handle is gone, as in NCCL: no call may pass it again, a
 * second ringoCommDestroy or ringoCommAbort included; set it to NULL, which the calls refuse with
 * ringoInvalidArgument (NullComm.EveryFunctionRejectsIt in test/test_api.cc).
 * @return ringoSuccess; ringoInvalidArgument if comm is NULL; ringoInvalidUsage (nothing freed) while
 * this thread's open group holds calls on comm, which ringoGroupEnd would run, or while another
 * thread's open group holds comm's ringoCommInitRank or calls on comm (queued, or running at its
 * ringoGroupEnd). */
RINGO_API ringoResult_t ringoCommDestroy(ringoComm_t comm);

/** Marks comm aborted (a collective blocked in another thread returns soon after) and frees it; calls
 * on comm queued in this thread's open group are dropped. Calls on comm in another thread's group
 * fail at once; the abort waits (at most RINGO_TIMEOUT) for that thread's ringoGroupEnd to be done
 * with them before it frees comm.
 * @return ringoSuccess; ringoInvalidArgument if comm is NULL; ringoInvalidUsage (nothing freed) while
 *         another thread's open group holds comm's ringoCommInitRank, or when that wait ran out (comm
 *         stays aborted; ringoCommDestroy frees it after that ringoGroupEnd). */
RINGO_API ringoResult_t ringoCommAbort(ringoComm_t comm);

/** Number of ranks. @return ringoSuccess; ringoInvalidArgument on NULL comm or count. */
RINGO_API ringoResult_t ringoCommCount(const ringoComm_t comm, int* count);
/** This rank. @return ringoSuccess; ringoInvalidArgument on NULL comm or rank. */
RINGO_API ringoResult_t ringoCommUserRank(const ringoComm_t comm, int* rank);
/** CUDA device of comm, -1 for a host communicator.
 * @return ringoSuccess; ringoInvalidArgument on NULL comm or device. */
RINGO_API ringoResult_t ringoCommCuDevice(const ringoComm_t comm, int* device);
/** How many ranks of comm this process drives on comm's CUDA device (1 for one rank per process;
 * 0 for a host communicator or one whose CUDA path is unavailable). A caller sharing streams among
 * them must not use the legacy default stream.
 * @return ringoSuccess; ringoInvalidArgument on NULL comm or nlocal. */
RINGO_API ringoResult_t ringoCommLocalRanks(const ringoComm_t comm, int* nlocal);
/** The error that ended asynchronous work on comm, ringoSuccess if none.
 * @return ringoSuccess; ringoInvalidArgument on NULL comm or asyncError. */
RINGO_API ringoResult_t ringoCommGetAsyncError(ringoComm_t comm, ringoResult_t* asyncError);
/** Cumulative payload bytes this rank put on / took off its links, and collectives completed.
 * @return ringoSuccess; ringoInvalidArgument on NULL comm or stats. */
RINGO_API ringoResult_t ringoCommGetStats(const ringoComm_t comm, ringoCommStats* stats);

/** Static string naming a result code. Never NULL. */
RINGO_API const char* ringoGetErrorString(ringoResult_t result);
/** Human message for the last failure on comm (or, with comm NULL, of this thread). Never NULL. */
RINGO_API const char* ringoGetLastError(ringoComm_t comm);

/** recvbuff[i] = op over ranks of sendbuff[i], i < count, on every rank. In place when
 * recvbuff == sendbuff; buffers that otherwise share bytes are refused (every collective).
 * @return ringoSuccess; ringoInvalidArgument (bad comm, dtype, op, NULL buffer with count > 0,
 *         count overflow, overlap); ringoInvalidUsage (comm in error; another thread is inside a call
 *         on comm: one call at a time per communicator, as in NCCL; the refused call moves nothing);
 *         ringoRemoteError; ringoTimeout. */
RINGO_API ringoResult_t ringoAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       ringoDataType_t datatype, ringoRedOp_t op, ringoComm_t comm,
                                       ringoStream_t stream);
/** recvbuff[i] = op over ranks of sendbuff[rank*recvcount + i]. In place when
 * recvbuff == sendbuff + rank*recvcount. @return as ringoAllReduce. */
RINGO_API ringoResult_t ringoReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ringoDataType_t datatype, ringoRedOp_t op,
                                           ringoComm_t comm, ringoStream_t stream);
/** recvbuff[r*sendcount + i] = sendbuff of rank r [i]. In place when
 * sendbuff == recvbuff + rank*sendcount. @return as ringoAllReduce. */
RINGO_API ringoResult_t ringoAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       ringoDataType_t datatype, ringoComm_t comm,
                                       ringoStream_t stream);
/** recvbuff = sendbuff of root on every rank (sendbuff only read on root).
 * @return as ringoAllReduce; ringoInvalidArgument for root out of range. */
RINGO_API ringoResult_t ringoBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       ringoDataType_t datatype, int root, ringoComm_t comm,
                                       ringoStream_t stream);
/** recvbuff on root = op over ranks of sendbuff (recvbuff only written on root).
 * @return as ringoBroadcast. */
RINGO_API ringoResult_t ringoReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    ringoDataType_t datatype, ringoRedOp_t op, int root,
                                    ringoComm_t comm, ringoStream_t stream);

/** Point-to-point: sends count elements of sendbuff to rank peer, which calls ringoRecv with the
 * same count and datatype. Messages between two ranks are matched in the order they were called.
 * Links to peers that are not ring neighbours are made on first use (shm on one host, MPI across
 * hosts). Outside a group the call returns once every byte is in the link's FIFO (sendbuff may be
 * reused then), even for the first message between two ranks (the sender makes the link); a
 * message larger than the FIFO waits for the receiver. Inside
 * ringoGroupStart/End every send and receive of the group progresses together at ringoGroupEnd,
 * so any exchange pattern (an all-to-all written as a loop) completes. peer may be this rank
 * only inside a group that also holds the matching ringoRecv. count 0 moves nothing.
 * @return ringoSuccess; ringoInvalidArgument (bad comm, dtype, peer out of range, NULL buffer with
 *         count > 0, stream without a CUDA path); ringoInvalidUsage (comm in error or inside a call
 *         of another thread, as for ringoAllReduce; the peer's receive expects another count or
 *         type, self-send without a matching receive; a group of only self sends and receives that
 *         do not pair up is refused and leaves comm usable);
 *         ringoRemoteError; ringoTimeout. */
RINGO_API ringoResult_t ringoSend(const void* sendbuff, size_t count, ringoDataType_t datatype, int peer,
                                  ringoComm_t comm, ringoStream_t stream);
/** Point-to-point: receives count elements from rank peer into recvbuff (see ringoSend).
 * @return as ringoSend. */
RINGO_API ringoResult_t ringoRecv(void* recvbuff, size_t count, ringoDataType_t datatype, int peer,
                                  ringoComm_t comm, ringoStream_t stream);

/** Starts a group: collectives, sends and receives called by this thread until ringoGroupEnd are
 * queued; so is ringoCommInitRank, whose handle is returned at once and becomes usable when the
 * group ends (one thread can so create every rank of a communicator, as with NCCL).
 * @return ringoSuccess. */
RINGO_API ringoResult_t ringoGroupStart(void);
/** Runs the queued work: every queued ringoCommInitRank first (concurrently), then the queued
 * operations, those of different communicators concurrently, and waits for all of it. The operations
 * hold each of their communicators for the whole ringoGroupEnd, as one call does.
 * @return ringoSuccess; ringoInvalidUsage without a matching ringoGroupStart in this thread (groups
 *         are per thread, as in NCCL), or when another thread is inside a call on one of the group's
 *         communicators (the whole group is refused then, and none of its operations moves); the first error (a communicator whose queued init failed
 *         stays allocated and reports the error through ringoCommGetAsyncError and
 *         ringoGetLastError; destroy it). */
RINGO_API ringoResult_t ringoGroupEnd(void);
/** How many ringoGroupStart calls of this thread are open (0 outside a group): what a layer on this
 * API (the DDP layer) checks before calls that must complete before they return. Not in NCCL.
 * @return ringoSuccess; ringoInvalidArgument (depth is NULL). */
RINGO_API ringoResult_t ringoGroupDepth(int* depth);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_H_ */
