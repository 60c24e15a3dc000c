/* ddp_device.h — how the DDP layer (src/ddp.c) reaches a GPU: a small vtable over ready events, a side
 * stream, copies and the scale kernel, with no CUDA types, so ddp.c stays on the public API and tests
 * swap in a fake stream. Real ops: src/ddp_device.c; fake: test/test_ddp_device.cc, which tests both. */
#ifndef RINGO_DDP_DEVICE_H_
#define RINGO_DDP_DEVICE_H_

#include <stddef.h>

#include "ringo.h"
#include "ringo_ddp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything ddp.c asks of the device. The real ops own one non-blocking side stream on the
 * communicator's GPU, one ready event per bucket and a join event; every call first makes that GPU
 * current on the calling thread (and puts the old one back). Calls that enqueue return at once.
 * Each int-returning call gives 0, or an error code that error_string names (a cudaError_t). */
struct ringo_ddp_device_ops {
  void* ctx;
  /* BroadcastParams: one ready event for each of nbuckets buckets (replacing any older ones). */
  int (*prepare)(void* ctx, int nbuckets);
  /* RegisterMem: 0 when [p, p + bytes) is device memory this context's GPU can use. */
  int (*check_ptr)(void* ctx, const void* p, size_t bytes);
  /* Caller thread, when bucket's last gradient is marked ready: records its ready event on compute,
   * so the bucket waits for exactly the work enqueued there before the mark. */
  int (*record_ready)(void* ctx, int bucket, ringoStream_t compute);
  /* Communication thread: the side stream waits for bucket's ready event. */
  int (*side_wait)(void* ctx, int bucket);
  /* The side stream waits for everything enqueued on compute so far (BroadcastParams). */
  int (*side_after)(void* ctx, ringoStream_t compute);
  /* On the side stream: dst[i] = w * src[i] (dst is src, or does not overlap it); a D2D copy. */
  int (*scale)(void* ctx, void* dst, const void* src, size_t count, ringoDataType_t type, double w);
  int (*copy)(void* ctx, void* dst, const void* src, size_t bytes);
  /* The stream ringo's collectives on this context's buffers go to. A fake returns NULL after
   * running what it had queued, so that ringo's host path then does the collective in order. */
  ringoStream_t (*side_stream)(void* ctx);
  /* compute waits (on the device) for everything enqueued on the side stream so far. */
  int (*join)(void* ctx, ringoStream_t compute);
  /* The host waits for the side stream (BroadcastParams, a one-time blocking setup call). */
  int (*sync_side)(void* ctx);
  /* Device staging buffer; free waits for the side stream first. */
  int (*alloc)(void* ctx, void** p, size_t bytes);
  void (*free)(void* ctx, void* p);
  /* Static text for an error code of the calls above. Never NULL. */
  const char* (*error_string)(int code);
  /* Waits for the side stream and frees ctx (events, stream); NULL when the installer owns ctx. */
  void (*close)(void* ctx);
  /* May be NULL. The communication thread, before its first device work: makes the GPU current on
   * it for good (a thread of ringo's; putting device 0 back would make a context there). */
  void (*bind)(void* ctx);
  /* May be NULL. 1 when compute is a stream every rank of this process on the GPU shares (the
   * legacy or per-thread default) while several do: their Finish joins would queue each rank's
   * backward behind a collective that waits for the others. */
  int (*stream_shared)(void* ctx, ringoStream_t compute);
};

/* Fills *ops for comm's GPU (ringoCommCuDevice). Fails, with a sentence in msg (cap bytes), when this
 * build has no CUDA or comm is a host communicator (ringoInvalidUsage), or CUDA refuses to make the
 * stream (ringoUnhandledCudaError). */
ringoResult_t ringo_ddp_device_open(ringoComm_t comm, struct ringo_ddp_device_ops* ops, char* msg, size_t cap);

/* The scale kernel's per-element code (src/include/cuda_scale.h) run on the CPU, with the launcher's
 * w == 0 / w == 1 cases: the tests' reference for the kernel and the fake's scale. */
void ringo_ddp_scale_emulate(void* dst, const void* src, size_t count, ringoDataType_t type, double w);

/* ---- in src/ddp.c ---- */

/* Testing hook: the context uses *ops (copied) for its device memory instead of opening the real
 * ones. Only before the first ringoMemDevice registration. ops->close, if set, runs at Destroy.
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp or ops); ringoInvalidUsage (too late). */
ringoResult_t ringo_ddp_set_device_ops(ringoDdp_t ddp, const struct ringo_ddp_device_ops* ops);

/* The host pre-scale (ddp_scale.c: dst = w * src, dst may be src) of host buckets, and the
 * reference the kernel must equal bit for bit. */
void ringo_ddp_host_scale(void* dst, const void* src, size_t count, ringoDataType_t type, double w);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_DDP_DEVICE_H_ */
