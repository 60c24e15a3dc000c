/* device.c — the CUDA path of the public API: tells device buffers from host ones, gives a communicator
 * bound to a GPU its device FIFO region (exchanged at init: the pointer within a process, a CUDA IPC
 * handle across processes) and enqueues the ring kernel (cuda/ring.cu) on the caller's stream.
 * Tested on a GPU by test/test_device.cc; without one, by the CPU emulation (test/test_cuda_ring.cc). */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda_ring.h"

#define DEV_NSLOTS 4

struct ringo_device {
  int dev;
  int nchannels;
  size_t slot_bytes;
  char* region;           /* this rank's FIFO region; the previous rank writes into it */
  char* next_region;      /* the next rank's region */
  int next_opened;        /* next_region came from cudaIpcOpenMemHandle */
  uint64_t* counters;     /* 2 per channel, device memory */
  int32_t* error_host;    /* mapped: the kernel's RINGO_DEV_* code */
  int32_t* error_dev;
  int32_t* abort_host;    /* mapped: ringoCommAbort sets it, every kernel wait watches it */
  int32_t* abort_dev;
  cudaStream_t stream;    /* ringo's own: kernels of ranks sharing a GPU must never queue behind each other */
  cudaEvent_t ready, done;
  int usable;             /* every rank made its region and reached its next rank's */
  char why[256];          /* why not, when !usable */
};

/* What each rank tells the others about its device side. */
struct dev_info {
  int32_t ok, dev, pid, pad;
  uint64_t ptr;
  cudaIpcMemHandle_t handle;
};

static ringoResult_t cuda_fail(cudaError_t err, const char* what) {
  return ringo_fail(ringoUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
}
#define CU_CHECK(call, what)                                       \
  do {                                                             \
    cudaError_t cu_err_ = (call);                                  \
    if (cu_err_ != cudaSuccess) return cuda_fail(cu_err_, (what)); \
  } while (0)

/* Whether this process sees a GPU at all; asked once (the answer does not change). */
static int have_devices(void) {
  static int cached = -1;
  if (cached < 0) {
    int n = 0;
    cached = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    (void)cudaGetLastError();
  }
  return cached;
}

int ringo_device_is_device_ptr(const void* p) {
  if (!p || !have_devices()) return 0;
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* an unregistered host pointer on older runtimes */
    return 0;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

int ringo_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

ringoResult_t ringo_device_select(int dev) {
  CU_CHECK(cudaSetDevice(dev), "cudaSetDevice");
  return ringoSuccess;
}

static ringoResult_t alloc_own(struct ringo_device* d, struct dev_info* mine) {
  const size_t bytes = ringo_dev_region_bytes(d->nchannels, DEV_NSLOTS, d->slot_bytes);
  CU_CHECK(cudaMalloc((void**)&d->region, bytes), "cudaMalloc of the device FIFO region");
  CU_CHECK(cudaMemset(d->region, 0, bytes), "cudaMemset of the device FIFO region");
  CU_CHECK(cudaMalloc((void**)&d->counters, 2 * sizeof(uint64_t) * (size_t)d->nchannels), "cudaMalloc of counters");
  CU_CHECK(cudaMemset(d->counters, 0, 2 * sizeof(uint64_t) * (size_t)d->nchannels), "cudaMemset of counters");
  CU_CHECK(cudaHostAlloc((void**)&d->error_host, 2 * sizeof(int32_t), cudaHostAllocMapped), "cudaHostAlloc");
  d->abort_host = d->error_host + 1;
  d->error_host[0] = d->abort_host[0] = 0;
  CU_CHECK(cudaHostGetDevicePointer((void**)&d->error_dev, d->error_host, 0), "cudaHostGetDevicePointer");
  d->abort_dev = d->error_dev + 1;
  CU_CHECK(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  CU_CHECK(cudaEventCreateWithFlags(&d->ready, cudaEventDisableTiming), "cudaEventCreate");
  CU_CHECK(cudaEventCreateWithFlags(&d->done, cudaEventDisableTiming), "cudaEventCreate");
  CU_CHECK(cudaIpcGetMemHandle(&mine->handle, d->region), "cudaIpcGetMemHandle");
  CU_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the memsets"); /* zeroed before any peer sees it */
  mine->ptr = (uint64_t)(uintptr_t)d->region;
  return ringoSuccess;
}

/* The next rank's region: its pointer when it lives in this process, else its IPC handle. */
static ringoResult_t open_next(struct ringo_device* d, const struct dev_info* next, int same_host) {
  if (!same_host) return ringo_fail(ringoInvalidUsage, "the next rank is on another host: device memory across hosts "
                                    "(MPI staging) is not implemented yet");
  if (next->pid == (int32_t)getpid()) {
    if (next->dev != d->dev) {
      int can = 0;
      CU_CHECK(cudaDeviceCanAccessPeer(&can, d->dev, next->dev), "cudaDeviceCanAccessPeer");
      if (!can) return ringo_fail(ringoUnhandledCudaError, "device %d cannot access device %d (no peer access)", d->dev,
                                  next->dev);
      cudaError_t err = cudaDeviceEnablePeerAccess(next->dev, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else if (err != cudaSuccess) return cuda_fail(err, "cudaDeviceEnablePeerAccess");
    }
    d->next_region = (char*)(uintptr_t)next->ptr;
    return ringoSuccess;
  }
  CU_CHECK(cudaIpcOpenMemHandle((void**)&d->next_region, next->handle, cudaIpcMemLazyEnablePeerAccess),
           "cudaIpcOpenMemHandle of the next rank's FIFO region");
  d->next_opened = 1;
  return ringoSuccess;
}

void ringo_device_free(ringoComm_t comm) {
  struct ringo_device* d = comm->device;
  if (!d) return;
  (void)cudaSetDevice(d->dev);
  if (d->stream) (void)cudaStreamSynchronize(d->stream); /* kernels still running use what goes below */
  if (d->next_opened) (void)cudaIpcCloseMemHandle(d->next_region);
  if (d->region) (void)cudaFree(d->region);
  if (d->counters) (void)cudaFree(d->counters);
  if (d->error_host) (void)cudaFreeHost(d->error_host);
  if (d->ready) (void)cudaEventDestroy(d->ready);
  if (d->done) (void)cudaEventDestroy(d->done);
  if (d->stream) (void)cudaStreamDestroy(d->stream);
  (void)cudaGetLastError();
  free(d);
  comm->device = NULL;
}

/* Every rank takes part in both allgathers, with or without a GPU, so they stay in step. A rank
 * that cannot make its side (no GPU, no IPC) leaves the device path off on every rank, with the
 * reason kept for the first device call; host collectives are not affected. */
ringoResult_t ringo_device_setup(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  struct ringo_device* d = calloc(1, sizeof *d);
  if (!d) return ringo_fail(ringoSystemError, "out of memory for the device state");
  comm->device = d;
  d->nchannels = comm->env.cuda_channels;
  d->slot_bytes = comm->env.cuda_slice_bytes;
  struct dev_info mine = {.pid = (int32_t)getpid(), .dev = -1};
  ringoResult_t res = ringoSuccess;
  if (!have_devices()) {
    snprintf(d->why, sizeof d->why, "no CUDA device in this process");
  } else if (cudaGetDevice(&d->dev) != cudaSuccess) {
    snprintf(d->why, sizeof d->why, "cudaGetDevice failed");
  } else {
    comm->cuda_dev = mine.dev = d->dev;
    res = comm->nranks > 1 ? alloc_own(d, &mine) : ringoSuccess;
    if (res != ringoSuccess) snprintf(d->why, sizeof d->why, "rank %d: %s", comm->rank, ringo_thread_last_error());
    mine.ok = res == ringoSuccess;
  }
  (void)cudaGetLastError();
  if (comm->nranks == 1) {
    d->usable = mine.dev >= 0;
    return ringoSuccess;
  }
  struct dev_info* all = calloc((size_t)comm->nranks, sizeof *all);
  int32_t* linked = calloc((size_t)comm->nranks, sizeof *linked);
  if (!all || !linked) res = ringo_fail(ringoSystemError, "out of memory for device infos");
  else res = rv->allgather(rv->ctx, &mine, sizeof mine, all);
  const int next = comm->ring[(comm->pos + 1) % comm->nranks];
  int32_t ok = res == ringoSuccess && mine.ok && all[next].ok;
  if (ok) {
    const int same_host = strcmp(comm->info[next].host, comm->info[comm->rank].host) == 0;
    ok = open_next(d, &all[next], same_host) == ringoSuccess;
    if (!ok) snprintf(d->why, sizeof d->why, "rank %d: %s", comm->rank, ringo_thread_last_error());
  } else if (res == ringoSuccess && mine.ok) {
    snprintf(d->why, sizeof d->why, "rank %d has no device FIFO region (no GPU, or its setup failed)", next);
  }
  if (res == ringoSuccess) res = rv->allgather(rv->ctx, &ok, sizeof ok, linked);
  d->usable = res == ringoSuccess;
  for (int r = 0; d->usable && r < comm->nranks; r++)
    if (!linked[r]) {
      d->usable = 0;
      if (ok) snprintf(d->why, sizeof d->why, "rank %d could not reach its next rank's device FIFO", r);
    }
  (void)cudaGetLastError();
  free(all);
  free(linked);
  if (d->usable)
    RINGO_INFO(RINGO_LOG_INIT, "rank %d: device path on: device %d, %d channels x %d slots x %zu bytes", comm->rank,
               d->dev, d->nchannels, DEV_NSLOTS, d->slot_bytes);
  else
    RINGO_INFO(RINGO_LOG_INIT, "rank %d: device path off: %s", comm->rank, d->why);
  return res;
}

static ringoResult_t dev_code_result(int32_t code) {
  switch (code) {
    case RINGO_DEV_TIMEOUT: return ringoTimeout;
    case RINGO_DEV_POISONED: return ringoRemoteError;
    case RINGO_DEV_ABORTED: return ringoInvalidUsage;
    default: return ringoInternalError;
  }
}

ringoResult_t ringo_device_async_error(ringoComm_t comm) {
  struct ringo_device* d = comm->device;
  const int32_t code = d && d->error_host ? __atomic_load_n(d->error_host, __ATOMIC_ACQUIRE) : 0;
  if (code == 0) return ringoSuccess;
  const ringoResult_t res = dev_code_result(code);
  if (atomic_load(&comm->error) == ringoSuccess) {
    ringo_fail(res, "rank %d: the ring kernel on device %d stopped: %s", comm->rank, d->dev,
               code == RINGO_DEV_TIMEOUT ? "a wait passed RINGO_TIMEOUT" : code == RINGO_DEV_POISONED
                   ? "a neighbour left on an error" : "the communicator was aborted");
    ringo_comm_fail(comm, res);
  }
  return res;
}

void ringo_device_abort(ringoComm_t comm) {
  struct ringo_device* d = comm->device;
  if (d && d->abort_host) __atomic_store_n(d->abort_host, 1, __ATOMIC_RELEASE);
}

/* Bytes one rank's kernel puts on and takes off its links, counted as the host path counts them. */
static void count_bytes(ringoComm_t comm, const struct ringo_dev_ring* r, size_t esize) {
  uint64_t sent = 0, received = 0;
  for (int t = 0; t < r->nsteps; t++) {
    const int prim = r->step[t].prim;
    const uint64_t bytes = r->chunk[r->step[t].chunk].len * esize;
    if (prim != RINGO_PRIM_RECV && prim != RINGO_PRIM_RECV_REDUCE_COPY) sent += bytes;
    if (prim != RINGO_PRIM_SEND && prim != RINGO_PRIM_COPY_SEND) received += bytes;
  }
  atomic_fetch_add_explicit(&comm->bytes_sent, sent, memory_order_relaxed);
  atomic_fetch_add_explicit(&comm->bytes_received, received, memory_order_relaxed);
}

ringoResult_t ringo_device_run(const struct ringo_op* op, ringoStream_t stream) {
  const ringoComm_t comm = op->comm;
  struct ringo_device* d = comm->device;
  if (!d || !d->usable)
    return ringo_fail(ringoInvalidUsage, "rank %d: device buffers, but this communicator has no device path: %s",
                      comm->rank, d ? d->why : "no CUDA");
  RINGO_CHECK(ringo_device_async_error(comm));
  CU_CHECK(cudaSetDevice(d->dev), "cudaSetDevice");
  const size_t esize = ringo_type_size(op->type);
  if (comm->nranks == 1) { /* the result is the input; the device does the copy in stream order */
    const size_t bytes = op->count * esize;
    if (bytes && op->recvbuff && op->recvbuff != op->sendbuff)
      CU_CHECK(cudaMemcpyAsync(op->recvbuff, op->sendbuff, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream),
               "cudaMemcpyAsync");
    return ringoSuccess;
  }
  struct ringo_dev_ring r;
  const struct ringo_dev_coll c = {(int)op->coll, op->type, op->op, op->count, comm->nranks, comm->pos,
                                   comm->pos_of[op->root], comm->ring, op->sendbuff, op->recvbuff,
                                   d->nchannels, DEV_NSLOTS, d->slot_bytes};
  RINGO_CHECK(ringo_dev_ring_describe(&c, &r));
  r.recv_region = d->region;
  r.send_region = d->next_region;
  r.counters = d->counters;
  r.error = d->error_dev;
  r.abort_flag = d->abort_dev;
  r.timeout_ns = (uint64_t)(comm->env.timeout_s * 1e9);
  /* The caller's stream waits for nothing of ringo's, and ringo's kernel waits for the caller's
   * earlier work: two events hand the order over. */
  CU_CHECK(cudaEventRecord(d->ready, (cudaStream_t)stream), "cudaEventRecord on the caller's stream");
  CU_CHECK(cudaStreamWaitEvent(d->stream, d->ready, 0), "cudaStreamWaitEvent");
  if (ringo_cuda_ring_launch(&r, d->stream) != ringoSuccess)
    return ringo_fail(ringoUnhandledCudaError, "rank %d: ring kernel launch failed: %s", comm->rank,
                      ringo_cuda_ring_last_error());
  CU_CHECK(cudaEventRecord(d->done, d->stream), "cudaEventRecord");
  CU_CHECK(cudaStreamWaitEvent((cudaStream_t)stream, d->done, 0), "cudaStreamWaitEvent on the caller's stream");
  count_bytes(comm, &r, esize);
  return ringoSuccess;
}

#else /* !RINGO_HAVE_CUDA: host memory only */

int ringo_device_is_device_ptr(const void* p) {
  (void)p;
  return 0;
}
int ringo_device_count(void) { return 0; }
ringoResult_t ringo_device_select(int dev) {
  return ringo_fail(ringoUnhandledCudaError, "device %d: this build has no CUDA path", dev);
}
ringoResult_t ringo_device_setup(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  (void)comm, (void)rv;
  return ringoSuccess;
}
void ringo_device_free(ringoComm_t comm) { (void)comm; }
ringoResult_t ringo_device_async_error(ringoComm_t comm) {
  (void)comm;
  return ringoSuccess;
}
void ringo_device_abort(ringoComm_t comm) { (void)comm; }
ringoResult_t ringo_device_run(const struct ringo_op* op, ringoStream_t stream) {
  (void)stream;
  return ringo_fail(ringoInvalidUsage, "rank %d: device buffers need ringo's CUDA path; this build has none",
                    op->comm->rank);
}

#endif
