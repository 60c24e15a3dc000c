/* ddp_device.c — the DDP layer's device ops (ddp_device.h) on the CUDA runtime: a non-blocking side
 * stream, per-bucket ready events, the scale kernel (cuda/ddp_scale.cu); without CUDA, a refusal.
 * Also the kernel's CPU emulation. Asks ringoCommLocalRanks how many ranks share the GPU. Tested by test/test_ddp_device.cc (the GPU part skips without a GPU). */
#include "ddp/ddp_device.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/cuda_scale.h"

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

void ringo_ddp_scale_emulate(void* dst, const void* src, size_t count, ringoDataType_t type, double w) {
  const size_t esize = type == ringoFloat64 ? 8 : type == ringoFloat32 ? 4 : 2;
  if (count == 0) return;
  if (w == 1.0) { /* the launcher's copy */
    if (dst != src) memmove(dst, src, count * esize);
    return;
  }
  if (w == 0.0) { /* the launcher's memset */
    memset(dst, 0, count * esize);
    return;
  }
  size_t i;
  switch (type) {
    case ringoFloat64:
      for (i = 0; i < count; i++) ((double*)dst)[i] = ringo_scale_f64(((const double*)src)[i], w);
      break;
    case ringoFloat32:
      for (i = 0; i < count; i++) ((float*)dst)[i] = ringo_scale_f32(((const float*)src)[i], w);
      break;
    case ringoFloat16:
      for (i = 0; i < count; i++) ((uint16_t*)dst)[i] = ringo_scale_f16(((const uint16_t*)src)[i], w);
      break;
    default:
      for (i = 0; i < count; i++) ((uint16_t*)dst)[i] = ringo_scale_bf16(((const uint16_t*)src)[i], w);
      break;
  }
}

#ifdef RINGO_HAVE_CUDA

struct dev_ctx {
  int dev;
  int local_ranks; /* ranks of this process on the GPU */
  cudaStream_t side;
  cudaEvent_t join_ev, after_ev;
  cudaEvent_t* ready; /* one per bucket */
  int nready;
};

/* Every call runs with the context's GPU current (the legacy stream and cudaMalloc depend on it)
 * and gives the caller's thread its own device back: MarkReady runs on the training thread. */
static int enter(const struct dev_ctx* c, int* old) {
  if (cudaGetDevice(old) != cudaSuccess) *old = -1;
  return *old == c->dev ? 0 : (int)cudaSetDevice(c->dev);
}

static int leave(const struct dev_ctx* c, int old, int err) {
  if (old >= 0 && old != c->dev) (void)cudaSetDevice(old);
  return err;
}

static void destroy_ready(struct dev_ctx* c) {
  for (int b = 0; b < c->nready; b++) (void)cudaEventDestroy(c->ready[b]);
  free(c->ready);
  c->ready = NULL;
  c->nready = 0;
}

static int op_prepare(void* ctx, int nbuckets) {
  struct dev_ctx* c = ctx;
  int old, err = enter(c, &old);
  if (!err) destroy_ready(c);
  if (!err && nbuckets > 0 && !(c->ready = calloc((size_t)nbuckets, sizeof(cudaEvent_t))))
    err = (int)cudaErrorMemoryAllocation;
  for (; !err && c->nready < nbuckets; c->nready++)
    err = (int)cudaEventCreateWithFlags(&c->ready[c->nready], cudaEventDisableTiming);
  return leave(c, old, err);
}

/* Device memory (or managed memory) of this context's GPU, at both ends of the range. */
static int op_check_ptr(void* ctx, const void* p, size_t bytes) {
  const struct dev_ctx* c = ctx;
  int old, err = enter(c, &old);
  for (int end = 0; !err && end < 2 && bytes > 0; end++) {
    struct cudaPointerAttributes a;
    err = (int)cudaPointerGetAttributes(&a, end ? (const char*)p + bytes - 1 : p);
    if (!err && ((a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) || a.device != c->dev))
      err = (int)cudaErrorInvalidDevicePointer;
  }
  (void)cudaGetLastError(); /* a refused pointer must not be blamed on a later launch */
  return leave(c, old, err);
}

static int op_record_ready(void* ctx, int bucket, ringoStream_t compute) {
  const struct dev_ctx* c = ctx;
  int old, err = enter(c, &old);
  if (!err) err = bucket >= 0 && bucket < c->nready ? (int)cudaEventRecord(c->ready[bucket], (cudaStream_t)compute)
                                                    : (int)cudaErrorInvalidResourceHandle;
  return leave(c, old, err);
}

static int op_side_wait(void* ctx, int bucket) {
  const struct dev_ctx* c = ctx;
  int old, err = enter(c, &old);
  if (!err) err = bucket >= 0 && bucket < c->nready ? (int)cudaStreamWaitEvent(c->side, c->ready[bucket], 0)
                                                    : (int)cudaErrorInvalidResourceHandle;
  return leave(c, old, err);
}

static int op_side_after(void* ctx, ringoStream_t compute) {
  const struct dev_ctx* c = ctx;
  int old, err = enter(c, &old);
  if (!err) err = (int)cudaEventRecord(c->after_ev, (cudaStream_t)compute);
  if (!err) err = (int)cudaStreamWaitEvent(c->side, c->after_ev, 0);
  return leave(c, old, err);
}

static int op_scale(void* ctx, void* dst, const void* src, size_t count, ringoDataType_t type, double w) {
  const struct dev_ctx* c = ctx;
  int old, err = enter(c, &old);
  if (!err) err = ringo_cuda_ddp_scale(dst, src, count, type, w, c->side);
  return leave(c, old, err);
}

static int op_copy(void* ctx, void* dst, const void* src, size_t bytes) {
  const struct dev_ctx* c = ctx;
  int old, err = enter(c, &old);
  if (!err && bytes) err = (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->side);
  return leave(c, old, err);
}

static ringoStream_t op_side_stream(void* ctx) { return (ringoStream_t)((const struct dev_ctx*)ctx)->side; }

static int op_join(void* ctx, ringoStream_t compute) {
  const struct dev_ctx* c = ctx;
  int old, err = enter(c, &old);
  if (!err) err = (int)cudaEventRecord(c->join_ev, c->side);
  if (!err) err = (int)cudaStreamWaitEvent((cudaStream_t)compute, c->join_ev, 0);
  return leave(c, old, err);
}

static int op_sync_side(void* ctx) {
  const struct dev_ctx* c = ctx;
  int old, err = enter(c, &old);
  if (!err) err = (int)cudaStreamSynchronize(c->side);
  return leave(c, old, err);
}

static int op_alloc(void* ctx, void** p, size_t bytes) {
  const struct dev_ctx* c = ctx;
  int old, err = enter(c, &old);
  if (!err) err = (int)cudaMalloc(p, bytes);
  return leave(c, old, err);
}

/* The side stream may still read the buffer: wait for it before handing the memory back. */
static void op_free(void* ctx, void* p) {
  const struct dev_ctx* c = ctx;
  int old;
  if (!enter(c, &old)) {
    (void)cudaStreamSynchronize(c->side);
    (void)cudaFree(p);
  }
  (void)leave(c, old, 0);
}

static void op_bind(void* ctx) { (void)cudaSetDevice(((const struct dev_ctx*)ctx)->dev); }

static int op_stream_shared(void* ctx, ringoStream_t compute) {
  const struct dev_ctx* c = ctx;
  const int shared = !compute || compute == (ringoStream_t)cudaStreamLegacy || compute == (ringoStream_t)cudaStreamPerThread;
  return shared && c->local_ranks > 1;
}

static const char* op_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }

static void op_close(void* ctx) {
  struct dev_ctx* c = ctx;
  int old;
  if (!enter(c, &old)) {
    if (c->side) (void)cudaStreamSynchronize(c->side);
    destroy_ready(c);
    if (c->join_ev) (void)cudaEventDestroy(c->join_ev);
    if (c->after_ev) (void)cudaEventDestroy(c->after_ev);
    if (c->side) (void)cudaStreamDestroy(c->side);
  }
  (void)leave(c, old, 0);
  free(c);
}

ringoResult_t ringo_ddp_device_open(ringoComm_t comm, struct ringo_ddp_device_ops* ops, char* msg, size_t cap) {
  int dev = -1;
  if (ringoCommCuDevice(comm, &dev) != ringoSuccess || dev < 0) {
    snprintf(msg, cap, "the communicator is a host communicator (ringoCommCuDevice gives -1); device memory needs "
             "one bound to a GPU (ringoCommInitAll with a devlist, or a GPU current at ringoCommInitRank)");
    return ringoInvalidUsage;
  }
  struct dev_ctx* c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(msg, cap, "out of memory");
    return ringoSystemError;
  }
  c->dev = dev;
  if (ringoCommLocalRanks(comm, &c->local_ranks) != ringoSuccess) c->local_ranks = 0;
  int old, err = enter(c, &old);
  if (!err) err = (int)cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking);
  if (!err) err = ringo_cuda_ddp_scale_preload(); /* loaded lazily, it could wait behind a spinning ring kernel */
  if (!err) err = (int)cudaEventCreateWithFlags(&c->join_ev, cudaEventDisableTiming);
  if (!err) err = (int)cudaEventCreateWithFlags(&c->after_ev, cudaEventDisableTiming);
  (void)leave(c, old, err);
  if (err) {
    snprintf(msg, cap, "cannot create the side stream and its events on device %d: %s", dev,
             cudaGetErrorString((cudaError_t)err));
    op_close(c);
    return ringoUnhandledCudaError;
  }
  *ops = (struct ringo_ddp_device_ops){c, op_prepare, op_check_ptr, op_record_ready, op_side_wait, op_side_after,
                                       op_scale, op_copy, op_side_stream, op_join, op_sync_side, op_alloc, op_free,
                                       op_error_string, op_close, op_bind, op_stream_shared};
  return ringoSuccess;
}

#else /* no CUDA: device memory is refused at registration, with the reason */

ringoResult_t ringo_ddp_device_open(ringoComm_t comm, struct ringo_ddp_device_ops* ops, char* msg, size_t cap) {
  (void)comm, (void)ops;
  snprintf(msg, cap, "device memory needs ringo's CUDA part, which this build does not have (nvcc not found, or "
           "CUDA=0); register host memory (ringoMemHost)");
  return ringoInvalidUsage;
}

#endif
