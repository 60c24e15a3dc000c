/* shim.h — what the files of ringo's libnccl.so.2 share: the record behind an ncclComm_t, result
 * conversion, the shim's own error messages, the group queue and the CUDA runtime lookup.
 * Internal to nccl/ (public ringo.h only below it). Tested through test/test_nccl_*.cc. */
#ifndef RINGO_NCCL_SHIM_H_
#define RINGO_NCCL_SHIM_H_

#include <pthread.h>
#include <stdatomic.h>

#include "nccl.h"
#include "ringo.h"

/* The library is built with -fvisibility=hidden: only what is marked here is exported. */
#define NCCL_EXPORT __attribute__((visibility("default")))
/* NCCL exports every function twice, as nccl<Name> and as the profiling entry pnccl<Name>; here
 * the second name is an alias of the first (the same code). */
#define NCCL_PROFILING_ALIAS(name) \
  extern __typeof__(name) p##name __attribute__((alias(#name), visibility("default")))

#define SHIM_MSG_BYTES 256

/* One PreMulSum operator: its datatype, and the scalar (a copy for ncclScalarHostImmediate, the
 * caller's pointer for ncclScalarDevice, read when a collective runs). */
struct shim_redop {
  int used;
  ncclDataType_t datatype;
  ncclScalarResidence_t residence;
  const void* scalar_ptr;
  unsigned char scalar[8];
};

/* The configuration fields ringo keeps, so ncclCommSplit can hand them to a child. */
struct shim_config {
  int blocking;     /* 1 unless the user set 0 */
  int splitShare;   /* kept, unused: ringo shares nothing between communicators */
  char name[64];    /* commName, copied */
};

/* What an ncclComm_t points to. `rc` is set once the init has returned (at once for blocking and
 * grouped inits; by the init thread for a non-blocking one, then `pending` drops to 0), and cleared
 * by ncclCommAbort while other threads may be reading it: hence atomic. */
struct ncclComm {
  _Atomic(ringoComm_t) rc;
  struct shim_config config;
  atomic_int pending;             /* 1 while a non-blocking init runs (0 once ncclCommAbort gave it up) */
  ncclResult_t init_result;       /* the init thread's result, read once pending is 0 */
  pthread_t init_thread;
  int init_thread_live;           /* neither joined nor detached yet? guarded by lock */
  int abandoned;                  /* aborted while its init ran: that thread aborts what it made; lock */
  int aborted;                    /* ncclCommAbort took it: the record is the aborted list's, never freed; lock */
  atomic_int grouped;             /* calls on it recorded in threads' open groups, until their ncclGroupEnd */
  pthread_cond_t init_done;       /* signalled, under lock, when pending drops to 0 */
  int finalized;
  pthread_mutex_t lock;           /* init_thread_live, abandoned, the redop table, msg */
  struct shim_redop* redops;
  int nredops;
  char msg[SHIM_MSG_BYTES];       /* the shim's last message about this comm ... */
  int msg_set;                    /* ... newer than ringo's when set */
  char init_msg[SHIM_MSG_BYTES];  /* a failed non-blocking init's message, kept for later calls */
  struct ncclComm* next_aborted;  /* the list of aborted records (shim_comm.c) */
  struct shim_token* tokens;      /* live ncclCommRegister handles, guarded by lock (shim_mem.c) */
  /* The init thread's arguments. */
  int nranks, rank, device;
  ringoUniqueId id;
};

/* ---- results and messages (nccl_shim.c) ---- */

/* ringo's code as NCCL's; a failure also makes ringo's message the current one (thread and comm). */
ncclResult_t shim_result(struct ncclComm* comm, ringoResult_t res);
/* Records a message of the shim's own for ncclGetLastError (this thread's, and comm's when not
 * NULL) and returns code. */
ncclResult_t shim_fail(struct ncclComm* comm, ncclResult_t code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The function that ringo does not provide: ncclInvalidUsage with a message naming it. */
ncclResult_t shim_unsupported(struct ncclComm* comm, const char* function, const char* what);

/* ---- communicators (shim_comm.c) ---- */

/* comm's ringo communicator, after waiting for a non-blocking init; NULL for a NULL comm or a
 * failed init (then ringo's own NULL check reports it). */
ringoComm_t shim_ringo(struct ncclComm* comm);
/* comm's ringo communicator in *rc, or the error a call named function gets on comm: NULL, its
 * non-blocking init failed (that init's result), or it was aborted. */
ncclResult_t shim_ready(struct ncclComm* comm, const char* function, ringoComm_t* rc);
/* Bytes per element of datatype; 0 if out of range. */
size_t shim_type_size(ncclDataType_t datatype);
/* datatype as ringo's: the float8 types travel as bytes, so only data-moving calls may pass them. */
ringoDataType_t shim_move_type(ncclDataType_t datatype);

/* ---- operations and groups (shim_group.c) ---- */

enum shim_kind {
  SHIM_ALLREDUCE, SHIM_REDUCE, SHIM_BROADCAST, SHIM_ALLGATHER, SHIM_REDUCESCATTER,
  SHIM_SEND, SHIM_RECV, SHIM_ALLTOALL, SHIM_GATHER, SHIM_SCATTER
};

/* One call, as recorded in a group or run at once. */
struct shim_op {
  enum shim_kind kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t datatype;
  ncclRedOp_t op;
  int root;                       /* root, or peer for send/receive */
  struct ncclComm* comm;
  cudaStream_t stream;
  void* scratch;                  /* a PreMulSum's scaled copy, freed after the group ran */
  struct shim_redop premul;       /* a PreMulSum op as it was when the call was made (used set) */
};

/* Checks op, then runs it now (outside a group) or queues it until ncclGroupEnd. */
ncclResult_t shim_submit(const struct shim_op* op);
/* How many calls on comm this thread's open group has recorded; with forget, they are dropped too
 * (an abort frees comm's ringo communicator before ncclGroupEnd could run them). */
size_t shim_group_recorded_on(struct ncclComm* comm, int forget);
/* Nonzero while this thread is inside ncclGroupStart/ncclGroupEnd. */
int shim_in_group(void);

/* ---- operations (shim_ops.c) ---- */

/* Argument checks the shim makes before queueing (those ringo cannot make for a queued call); also
 * copies a PreMulSum op into op->premul, since NCCL lets it be destroyed once the call returns. */
ncclResult_t shim_check_op(struct shim_op* op);
/* Runs one op through ringo (inside ringo's group when the caller opened one). */
ncclResult_t shim_run_op(struct shim_op* op);
/* Frees every PreMulSum operator of comm. */
void shim_redops_free(struct ncclComm* comm);
/* Frees every registration handle of comm that was not deregistered (shim_mem.c). */
void shim_tokens_free(struct ncclComm* comm);
/* Model time of op in microseconds (shim_group.c's simulation). */
double shim_op_time_us(const struct shim_op* op);

/* ---- the CUDA runtime the process has loaded, if any (shim_mem.c) ---- */

/* 1 device memory, 0 host memory (also when no CUDA runtime is loaded). */
int shim_is_device_ptr(const void* p);
/* 1 for memory ringo's device path takes (device or managed, as ringo's own check), else 0. */
int shim_ringo_device_ptr(const void* p);
/* The calling thread's CUDA device, -1 without a runtime; and setting it on another thread. */
int shim_current_device(void);
void shim_set_device(int device);
/* Copies bytes from src (host or device memory) to the host buffer dst. @return 0, or -1. */
int shim_read_memory(void* dst, const void* src, size_t bytes);

#endif /* RINGO_NCCL_SHIM_H_ */
