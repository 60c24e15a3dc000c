/* staged.h — device collectives whose ring leaves the host: staged through pinned host memory and
 * run by the host ring (shm and MPI links), in stream order. Tested by test/test_staged.cc. */
#ifndef RINGO_STAGED_H_
#define RINGO_STAGED_H_

#include <stddef.h>
#include <stdint.h>

#include "ringo.h"
#include "sched/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ringo_op; /* comm.h */

/* How bytes and work reach the stream: device.c gives cudaMemcpyAsync, cudaLaunchHostFunc and a
 * wait kernel on ringo's stream and cudaHostAlloc'd buffers; test_staged.cc gives memcpy on a worker
 * thread. Every enqueue runs after the ones before it; the function given to host_fn must not call
 * CUDA nor wait (the proxy's marker only counts). */
struct ringo_stage_ops {
  void* ctx;
  ringoResult_t (*to_host)(void* ctx, void* host, const void* dev, size_t bytes);
  ringoResult_t (*to_device)(void* ctx, void* dev, const void* host, size_t bytes);
  ringoResult_t (*host_fn)(void* ctx, void (*fn)(void*), void* arg);
  ringoResult_t (*host_alloc)(void* ctx, void** p, size_t bytes);
  void (*host_free)(void* ctx, void* p);
  ringoResult_t (*drain)(void* ctx); /* waits until everything enqueued has run */
  /* The stream waits here until *flag (pinned host memory another thread of this process stores
   * to, with release) reaches value, or the communicator is aborted (the proxy's flag). */
  ringoResult_t (*wait_flag)(void* ctx, const uint64_t* flag, uint64_t value);
};

struct ringo_proxy; /* proxy.h */

#define RINGO_STAGE_RETIRED 48

/* One communicator's staging buffers, reused by every staged collective and device send/receive
 * batch (stream order keeps them apart) and replaced when a larger one comes; and its proxy thread,
 * which runs the host side of both (made on first use). */
struct ringo_stage {
  void *in, *out, *p2p;
  size_t in_cap, out_cap, p2p_cap;
  struct ringo_proxy* proxy;
  /* Replaced buffers: work already enqueued may still use them, and waiting for it here would make
   * the caller wait (for peers it may be about to call itself). Freed at teardown. */
  void* retired[RINGO_STAGE_RETIRED];
  int nretired;
};

/* Bytes rank's sendbuff and recvbuff span for a collective of count elements (count as the API
 * takes it) on nranks ranks: 0 where the rank does not touch one. */
void ringo_staged_extent(enum ringo_coll coll, size_t count, ringoDataType_t type, int nranks, int rank, int root,
                         size_t* in_bytes, size_t* out_bytes);

/* Staging pieces start at multiples of this many bytes, so copies stay aligned. */
#define RINGO_STAGE_ALIGN 64
/* Bytes of staging one device send or receive of count elements of type takes in a batch. */
size_t ringo_stage_p2p_bytes(size_t count, ringoDataType_t type);
/* Phases a staged call is pipelined in: as many as RINGO_STAGED_PHASES allows and `most` (a
 * collective's rounds), each at least RINGO_STAGED_PIECE_BYTES of `bytes` (its longest chunk or
 * message); at least 1. */
int ringo_stage_phase_count(ringoComm_t comm, size_t bytes, size_t most);

/* Enqueues op (device buffers, op->seq already taken): sendbuff to the host, the host ring on the
 * staged copies (on the proxy thread, proxy.h), the result back to recvbuff. Returns at once; an
 * error of the host run goes to the communicator (ringoCommGetAsyncError, the next call). */
ringoResult_t ringo_staged_launch(const struct ringo_op* op, struct ringo_stage* st, const struct ringo_stage_ops* ops);

/* Makes *buf (one of st's pinned buffers, *cap bytes) hold at least need bytes, never waiting: the
 * old buffer, which enqueued work may still use, is retired (freed with st). */
ringoResult_t ringo_stage_grow(struct ringo_stage* st, void** buf, size_t* cap, size_t need,
                               const struct ringo_stage_ops* ops);

/* Makes st ready, before anything of a group is launched, for work of these sizes (bytes; 0: none
 * of that kind): its buffers grown and its proxy started. Ranks of one process share the GPU, and a
 * pinned allocation may wait for the device work in flight (CUDA's implicit synchronisation), which
 * can be another rank's wait for work of this rank: so a group allocates for every rank first. */
ringoResult_t ringo_stage_reserve(ringoComm_t comm, struct ringo_stage* st, size_t in, size_t out, size_t p2p,
                                  const struct ringo_stage_ops* ops);

/* What comm's device work among ops[0..nops) (any communicators') needs of its staging, in bytes:
 * need[0] and need[1] the largest input and output extents of its collectives when they are
 * staged (its ring leaves the host), need[2] its sends' and receives' staging together (at least
 * any one batch's). */
void ringo_stage_needs(ringoComm_t comm, int staged, const struct ringo_op* ops, size_t nops, size_t need[3]);

/* Testing hook (test/test_staged.cc, which cannot build a struct ringo_op): the same over calls
 * described here; kind as enum ringo_op_kind (0 collective, 1 send, 2 receive). */
struct ringo_stage_call {
  ringoComm_t comm;
  int device, kind;
  enum ringo_coll coll;
  size_t count;
  ringoDataType_t type;
  int root;
};
void ringo_stage_needs_call(ringoComm_t comm, int staged, const struct ringo_stage_call* calls, size_t n,
                            size_t need[3]);

/* Host runs (collectives and send/receive batches) of st submitted and not finished. */
int ringo_staged_pending(const struct ringo_stage* st);
/* ... of which running now (proxy.h). */
int ringo_staged_running(const struct ringo_stage* st);

/* The stream of st failed: its proxy waits for no more markers (proxy.h). */
void ringo_staged_stream_failed(struct ringo_stage* st);

/* Waits for every host run of st, then stops its proxy and frees its buffers. */
void ringo_staged_free(struct ringo_stage* st, const struct ringo_stage_ops* ops);

/* Testing hook (test/test_staged.cc, which cannot build a struct ringo_op): the op the door (api/group.c)
 * would hand the device path — arguments valid, its sequence number taken here — launched staged. */
ringoResult_t ringo_staged_launch_call(ringoComm_t comm, enum ringo_coll coll, const void* sendbuff, void* recvbuff,
                                       size_t count, ringoDataType_t type, ringoRedOp_t op, int root,
                                       struct ringo_stage* st, const struct ringo_stage_ops* ops);

#ifdef __cplusplus
}
#endif

#endif /* RINGO_STAGED_H_ */
