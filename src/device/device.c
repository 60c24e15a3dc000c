/* device.c — the CUDA path of the public API: tells device buffers from host ones, gives a communicator
 * bound to a GPU its device FIFO region (exchanged at init: the pointer within a process, a CUDA IPC
 * handle across processes) and enqueues the ring kernel (cuda/ring.cu) on the caller's stream; a ring
 * that leaves the host is staged through pinned host memory instead (staged.c).
 * Tested on a GPU by test/test_device.cc; without one, by the CPU emulation (test/test_cuda_ring.cc). */
#include "device/device.h"

#include "core/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "include/cuda_ring.h"
#include "include/cuda_wait.h"
#include "device/p2p_device.h"
#include "device/proxy.h"
#include "device/staged.h"
#include "transport/transport.h"

#define DEV_NSLOTS 4
#define DEV_FREE_POLL_NS 1000000L /* teardown: how often to ask whether ringo's stream is idle */

struct ringo_device {
  int dev;
  int nchannels;
  int local_ranks;        /* ranks of this process on this device (a shared legacy stream deadlocks them) */
  size_t slot_bytes;
  double timeout_s;
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
  int staged;             /* the ring leaves the host: collectives go through the host ring (staged.c) */
  size_t min_slice_bytes; /* RINGO_CUDA_MIN_SLICE_BYTES, as every rank has it (agree_knobs) */
  int window;             /* RINGO_CUDA_WINDOW, likewise */
  int gpu_scope;          /* the kernel syncs at GPU scope (ringo_dev_flag_scope) */
  struct ringo_stage stage;
  int usable;             /* every rank made its region and reached its next rank's */
  char why[256];          /* why not, when !usable */
};

/* What each rank tells the others about its device side, in the first round of setup. */
struct dev_probe {
  int32_t ok, dev, pid, nchannels; /* nchannels: the most this rank's device can hold */
  uint64_t nonce;                  /* tells processes apart where pids repeat (pid namespaces) */
  /* This rank's settings of what both ends of every link must agree on (agree_knobs). */
  int32_t cap_channels, window;    /* RINGO_CUDA_CHANNELS (0: none), RINGO_CUDA_WINDOW */
  uint64_t slot_bytes, min_slice;  /* RINGO_CUDA_SLICE_BYTES, RINGO_CUDA_MIN_SLICE_BYTES */
  char pci[24];                    /* the GPU's PCI bus id: device numbers differ between processes */
};
/* ... and in the second, once every rank allocated its region for the agreed channel count. */
struct dev_region {
  int32_t ok, ipc; /* ipc: handle holds a CUDA IPC handle of the region */
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
  static atomic_int cached = -1;
  if (atomic_load(&cached) < 0) {
    int n = 0;
    const int yes = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    (void)cudaGetLastError();
    atomic_store(&cached, yes);
  }
  return atomic_load(&cached);
}

static uint64_t process_nonce(void) {
  static _Atomic uint64_t nonce;
  uint64_t v = atomic_load(&nonce);
  if (v == 0) {
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v || v == 0) v = ((uint64_t)getpid() << 32) | 1u;
    uint64_t expected = 0;
    if (!atomic_compare_exchange_strong(&nonce, &expected, v)) v = expected;
  }
  return v;
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

int ringo_device_current(void) {
  int dev = -1;
  if (!have_devices() || cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return dev;
}

ringoResult_t ringo_device_select(int dev) {
  CU_CHECK(cudaSetDevice(dev), "cudaSetDevice");
  return ringoSuccess;
}

/* Round 1: is there a device, which, and how many channels it can hold for the ranks it serves
 * (all of them resident at once: they wait for each other). */
static ringoResult_t probe(ringoComm_t comm, struct ringo_device* d, struct dev_probe* mine) {
  CU_CHECK(cudaGetDevice(&d->dev), "cudaGetDevice");
  mine->dev = comm->cuda_dev = d->dev;
  int sms = 0, per_sm = 0;
  CU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d->dev), "cudaDeviceGetAttribute");
  if (ringo_cuda_ring_preload(&per_sm) != ringoSuccess)
    return ringo_fail(ringoUnhandledCudaError, "loading the ring kernels: %s", ringo_cuda_ring_last_error());
  CU_CHECK((cudaError_t)ringo_cuda_wait_preload(), "loading the wait kernel");
  CU_CHECK(cudaDeviceGetPCIBusId(mine->pci, (int)sizeof mine->pci, d->dev), "cudaDeviceGetPCIBusId");
  mine->nchannels = sms * per_sm;
  return ringoSuccess;
}

/* Round 2: this rank's region for the agreed channel count, and its handle. */
static ringoResult_t alloc_own(struct ringo_device* d, struct dev_region* mine, int nranks) {
  CU_CHECK(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  if (!d->staged && nranks > 1) { /* a staged ring, or a rank alone, has no device FIFOs */
    const size_t bytes = ringo_dev_region_bytes(d->nchannels, DEV_NSLOTS, d->slot_bytes);
    const size_t counters = 2 * sizeof(uint64_t) * (size_t)d->nchannels;
    CU_CHECK(cudaMalloc((void**)&d->region, bytes), "cudaMalloc of the device FIFO region");
    CU_CHECK(cudaMalloc((void**)&d->counters, counters), "cudaMalloc of counters");
    /* On ringo's stream, and waited for there only: a whole-device sync would also wait for other
     * communicators' kernels, which may be waiting for this thread. Zeroed before any peer sees it. */
    CU_CHECK(cudaMemsetAsync(d->region, 0, bytes, d->stream), "cudaMemsetAsync of the device FIFO region");
    CU_CHECK(cudaMemsetAsync(d->counters, 0, counters, d->stream), "cudaMemsetAsync of counters");
    CU_CHECK(cudaStreamSynchronize(d->stream), "cudaStreamSynchronize after the memsets");
    /* Only a previous rank in another process opens the handle: where CUDA IPC is refused (some
     * sandboxes), ranks of one process still link, and a rank that needed it says why. */
    const cudaError_t ipc = cudaIpcGetMemHandle(&mine->handle, d->region);
    mine->ipc = ipc == cudaSuccess;
    if (!mine->ipc) {
      RINGO_INFO(RINGO_LOG_INIT, "cudaIpcGetMemHandle failed: %s: only ranks of this process can reach device %d's "
                 "FIFO region", cudaGetErrorName(ipc), d->dev);
      (void)cudaGetLastError();
    }
  }
  CU_CHECK(cudaHostAlloc((void**)&d->error_host, 2 * sizeof(int32_t), cudaHostAllocMapped), "cudaHostAlloc");
  d->abort_host = d->error_host + 1;
  d->error_host[0] = d->abort_host[0] = 0;
  CU_CHECK(cudaHostGetDevicePointer((void**)&d->error_dev, d->error_host, 0), "cudaHostGetDevicePointer");
  d->abort_dev = d->error_dev + 1;
  CU_CHECK(cudaEventCreateWithFlags(&d->ready, cudaEventDisableTiming), "cudaEventCreate");
  CU_CHECK(cudaEventCreateWithFlags(&d->done, cudaEventDisableTiming), "cudaEventCreate");
  mine->ptr = (uint64_t)(uintptr_t)d->region;
  return ringoSuccess;
}

/* Round 3: the next rank's region: its pointer when it lives in this process, else its handle. */
static ringoResult_t open_next(struct ringo_device* d, const struct dev_probe* next, const struct dev_region* region) {
  if (d->staged) return ringoSuccess;
  if (next->pid == (int32_t)getpid() && next->nonce == process_nonce()) {
    if (next->dev != d->dev) {
      int can = 0;
      CU_CHECK(cudaDeviceCanAccessPeer(&can, d->dev, next->dev), "cudaDeviceCanAccessPeer");
      if (!can) return ringo_fail(ringoUnhandledCudaError, "device %d cannot access device %d (no peer access)", d->dev,
                                  next->dev);
      cudaError_t err = cudaDeviceEnablePeerAccess(next->dev, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else if (err != cudaSuccess) return cuda_fail(err, "cudaDeviceEnablePeerAccess");
    }
    d->next_region = (char*)(uintptr_t)region->ptr;
    return ringoSuccess;
  }
  if (!region->ipc)
    return ringo_fail(ringoUnhandledCudaError, "the next rank (another process) has no CUDA IPC handle of its FIFO "
                      "region: cudaIpcGetMemHandle failed there");
  CU_CHECK(cudaIpcOpenMemHandle((void**)&d->next_region, region->handle, cudaIpcMemLazyEnablePeerAccess),
           "cudaIpcOpenMemHandle of the next rank's FIFO region");
  d->next_opened = 1;
  return ringoSuccess;
}

/* ---- ringo's stream and the caller's ---- */

/* Makes d's GPU current on this thread; *old is the device leave_device gives back. */
static cudaError_t enter_device(const struct ringo_device* d, int* old) {
  *old = ringo_device_current();
  return *old == d->dev ? cudaSuccess : cudaSetDevice(d->dev);
}
static void leave_device(const struct ringo_device* d, int old) {
  if (old >= 0 && old != d->dev) (void)cudaSetDevice(old);
}

/* ringo's stream goes on only after the work enqueued on the caller's stream so far. */
static ringoResult_t follow_caller(struct ringo_device* d, ringoStream_t stream) {
  CU_CHECK(cudaEventRecord(d->ready, (cudaStream_t)stream), "cudaEventRecord on the caller's stream");
  CU_CHECK(cudaStreamWaitEvent(d->stream, d->ready, 0), "cudaStreamWaitEvent");
  return ringoSuccess;
}

/* The point ringo_device_join makes a caller's stream wait for: recorded after a failure too, so
 * the join also waits for what was queued before it. Returns res, or the record's error. */
static ringoResult_t mark_done(struct ringo_device* d, ringoResult_t res) {
  const cudaError_t err = cudaEventRecord(d->done, d->stream);
  return res == ringoSuccess && err != cudaSuccess ? cuda_fail(err, "cudaEventRecord") : res;
}

/* ---- staging (staged.c) on ringo's stream ---- */
static ringoResult_t stage_to_host(void* ctx, void* host, const void* dev, size_t bytes) {
  struct ringo_device* d = ctx;
  CU_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, d->stream), "cudaMemcpyAsync to the staging buffer");
  return ringoSuccess;
}
static ringoResult_t stage_to_device(void* ctx, void* dev, const void* host, size_t bytes) {
  struct ringo_device* d = ctx;
  CU_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, d->stream), "cudaMemcpyAsync from the staging buffer");
  return ringoSuccess;
}
static ringoResult_t stage_host_fn(void* ctx, void (*fn)(void*), void* arg) {
  struct ringo_device* d = ctx;
  CU_CHECK(cudaLaunchHostFunc(d->stream, fn, arg), "cudaLaunchHostFunc");
  return ringoSuccess;
}
static ringoResult_t stage_alloc(void* ctx, void** p, size_t bytes) {
  (void)ctx;
  /* Mapped: the wait kernel reads the proxy's flag from the device. */
  CU_CHECK(cudaHostAlloc(p, bytes, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc of a staging buffer");
  return ringoSuccess;
}
static void stage_free(void* ctx, void* p) {
  (void)ctx;
  (void)cudaFreeHost(p);
}
static ringoResult_t stage_drain(void* ctx) {
  struct ringo_device* d = ctx;
  CU_CHECK(cudaStreamSynchronize(d->stream), "cudaStreamSynchronize of ringo's stream");
  return ringoSuccess;
}
static ringoResult_t stage_wait_flag(void* ctx, const uint64_t* flag, uint64_t value) {
  struct ringo_device* d = ctx;
  uint64_t* dflag;
  CU_CHECK(cudaHostGetDevicePointer((void**)&dflag, (void*)flag, 0), "cudaHostGetDevicePointer of the proxy's flag");
  CU_CHECK((cudaError_t)ringo_cuda_wait_flag(dflag, value, d->abort_dev, d->error_dev, d->stream), "launching the wait kernel");
  return ringoSuccess;
}
static struct ringo_stage_ops stage_ops(struct ringo_device* d) {
  return (struct ringo_stage_ops){d, stage_to_host, stage_to_device, stage_host_fn, stage_alloc, stage_free, stage_drain,
                                  stage_wait_flag};
}

/* Host runs enqueued and not finished: staged collectives and device point-to-point batches. */
static int host_runs_pending(const struct ringo_device* d) { return ringo_staged_pending(&d->stage); }

/* Waits until ringo's stream is idle. The deadline is RINGO_TIMEOUT without progress: staged host
 * runs finishing count as progress (a long collective is not stuck), a caller's event that never
 * completes does not. 1: idle (or an error: nothing runs any more); 0: gave up. */
static int stream_idle(struct ringo_device* d) {
  /* RINGO_TIMEOUT without progress: each host run that finishes starts the wait again. */
  const struct ringo_wait_policy policy = {.timeout_s = d->timeout_s, .sleep_ns = DEV_FREE_POLL_NS,
                                           .net = RINGO_WAIT_NET_NONE};
  struct ringo_waiter w;
  ringo_waiter_start(&w, &policy, ringo_now());
  int pending = host_runs_pending(d);
  for (;;) {
    const cudaError_t err = cudaStreamQuery(d->stream);
    /* The proxy moves its flag just before it counts the work done. A failed stream reaches no
     * more markers: the proxy is told, so it skips the work still queued and gives up the one it
     * runs at its next phase; once that is all done, no host work of it can touch the links. */
    if (err != cudaErrorNotReady && err != cudaSuccess) ringo_staged_stream_failed(&d->stage);
    if (err != cudaErrorNotReady && host_runs_pending(d) == 0) {
      (void)cudaGetLastError();
      return 1;
    }
    const int now_pending = host_runs_pending(d);
    const double now = ringo_now();
    if (now_pending < pending) ringo_waiter_start(&w, &policy, now);
    pending = now_pending;
    if (ringo_waiter_check(&w, now) == RINGO_WAIT_TIMED_OUT) return 0;
    ringo_waiter_sleep(&w, now);
  }
}

static int device_idle(struct ringo_device* d) {
  int old;
  (void)enter_device(d, &old);
  const int idle = stream_idle(d);
  leave_device(d, old);
  return idle;
}

ringoResult_t ringo_device_quiesce(ringoComm_t comm) {
  struct ringo_device* d = comm->device;
  if (!d || host_runs_pending(d) == 0) return ringoSuccess;
  if (device_idle(d)) return ringoSuccess;
  return ringo_fail(ringoTimeout, "rank %d: staged device collectives or device sends/receives of this communicator "
                    "still queued after %.1f s without progress (a stream they wait on never ran?)", comm->rank,
                    d->timeout_s);
}

int ringo_device_drain(ringoComm_t comm) {
  struct ringo_device* d = comm->device;
  return !d || !d->stream || device_idle(d);
}

int ringo_device_free(ringoComm_t comm) {
  struct ringo_device* d = comm->device;
  if (!d) return 1;
  if (!d->stream) {
    comm->device = NULL;
    free(d);
    return 1;
  }
  int old;
  (void)enter_device(d, &old);
  if (!stream_idle(d)) { /* ringo_comm_free drained first: only a stream stuck since can get here */
    RINGO_WARN("rank %d: ringo's stream on device %d still busy after %.0f s; its device memory is left allocated",
               comm->rank, d->dev, d->timeout_s);
    leave_device(d, old);
    return 0; /* d and comm too: queued work, and the proxy, may still use them */
  }
  comm->device = NULL;
  const struct ringo_stage_ops ops = stage_ops(d);
  ringo_staged_free(&d->stage, &ops);
  if (d->next_opened) (void)cudaIpcCloseMemHandle(d->next_region);
  if (d->region) (void)cudaFree(d->region);
  if (d->counters) (void)cudaFree(d->counters);
  if (d->error_host) (void)cudaFreeHost(d->error_host);
  if (d->ready) (void)cudaEventDestroy(d->ready);
  if (d->done) (void)cudaEventDestroy(d->done);
  (void)cudaStreamDestroy(d->stream);
  (void)cudaGetLastError();
  leave_device(d, old);
  free(d);
  return 1;
}

/* Agreement over an allgather: every rank's flag, all must be set. */
static int all_set(const int32_t* flags, int n, int* first_unset) {
  for (int r = 0; r < n; r++)
    if (!flags[r]) {
      *first_unset = r;
      return 0;
    }
  return 1;
}

/* The knobs both ends of a link must read alike — the region's layout (channels, slot size) and the
 * order and size of the slices (window, smallest slice) — taken the same on every rank whatever
 * each process's environment says: the fewest channels and smallest slots asked for, rank 0's
 * window and smallest slice. Ranks that disagreed would write where their neighbours do not read. */
static void agree_knobs(ringoComm_t comm, struct ringo_device* d, const struct dev_probe* probes, int n) {
  int differ = 0;
  d->nchannels = RINGO_DEV_MAX_CHANNELS;
  int asked = 0; /* did any rank set RINGO_CUDA_CHANNELS? */
  d->slot_bytes = probes[0].slot_bytes;
  d->window = probes[0].window;
  d->min_slice_bytes = probes[0].min_slice;
  for (int r = 0; r < n; r++) {
    const struct dev_probe* p = &probes[r];
    if (p->cap_channels > 0 && p->cap_channels < d->nchannels) d->nchannels = p->cap_channels;
    asked |= p->cap_channels > 0;
    if (p->slot_bytes < d->slot_bytes) d->slot_bytes = p->slot_bytes;
    differ |= p->cap_channels != probes[0].cap_channels || p->slot_bytes != probes[0].slot_bytes ||
              p->window != probes[0].window || p->min_slice != probes[0].min_slice;
  }
  if (!asked) d->nchannels = RINGO_DEV_DEFAULT_CHANNELS;
  if (differ && comm->rank == 0)
    RINGO_WARN("ranks set RINGO_CUDA_CHANNELS, RINGO_CUDA_SLICE_BYTES, RINGO_CUDA_WINDOW or RINGO_CUDA_MIN_SLICE_BYTES "
               "differently: every rank uses at most %d channels, %zu-byte slots and rank 0's window (%d) and "
               "smallest slice (%zu bytes)", d->nchannels, d->slot_bytes, d->window, d->min_slice_bytes);
}

/* Three allgathers that every rank joins, with or without a GPU, so they stay in step: probe,
 * regions, links. A rank that cannot make its side (no GPU, no IPC, RINGO_CUDA=0) leaves the
 * device path off on every rank, with the reason kept for the first device call; host
 * collectives are not affected. Fails only when the rendezvous does. */
ringoResult_t ringo_device_setup(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  struct ringo_device* d = calloc(1, sizeof *d);
  if (!d) return ringo_fail(ringoSystemError, "out of memory for the device state");
  comm->device = d;
  d->slot_bytes = comm->env.cuda_slice_bytes;
  d->timeout_s = comm->env.timeout_s;
  const int n = comm->nranks, me = comm->rank, next = comm->ring[(comm->pos + 1) % n];
  struct dev_probe pmine = {.pid = (int32_t)getpid(), .dev = -1, .nonce = process_nonce(),
                            .cap_channels = comm->env.cuda_channels, .window = comm->env.cuda_window,
                            .slot_bytes = comm->env.cuda_slice_bytes, .min_slice = comm->env.cuda_min_slice_bytes};
  /* No GPU, or RINGO_CUDA=0, is the normal case of a host-only job: noted, never warned about. */
  if (!comm->env.cuda_enable) snprintf(d->why, sizeof d->why, "rank %d: RINGO_CUDA=0", me);
  else if (!have_devices()) snprintf(d->why, sizeof d->why, "rank %d: no CUDA device in this process", me);
  else if (!(pmine.ok = probe(comm, d, &pmine) == ringoSuccess))
    snprintf(d->why, sizeof d->why, "rank %d: %s", me, ringo_thread_last_error());
  d->staged = comm->spans_hosts; /* some link of the ring joins two hosts: no device FIFO reaches the next rank */
#ifdef RINGO_HAVE_MPI
  if (pmine.ok && d->staged && !ringo_mpi_links_thread_safe()) {
    pmine.ok = 0;
    snprintf(d->why, sizeof d->why, "rank %d: the ring leaves the host, and device collectives across hosts run the "
             "host ring on ringo's proxy thread: initialise MPI with MPI_THREAD_MULTIPLE", me);
  }
#endif
  (void)cudaGetLastError();
  if (n == 1) { /* its collectives copy on the caller's stream; its sends to itself use ringo's */
    struct dev_region unused;
    d->usable = pmine.ok && alloc_own(d, &unused, n) == ringoSuccess;
    if (pmine.ok && !d->usable) snprintf(d->why, sizeof d->why, "rank %d: %s", me, ringo_thread_last_error());
    (void)cudaGetLastError();
    return ringoSuccess;
  }
  struct dev_probe* probes = calloc((size_t)n, sizeof *probes);
  struct dev_region* regions = calloc((size_t)n, sizeof *regions);
  int32_t* flags = calloc((size_t)n, sizeof *flags);
  ringoResult_t res = probes && regions && flags ? ringoSuccess : ringo_fail(ringoSystemError, "out of memory");
  if (res == ringoSuccess) res = rv->allgather(rv->ctx, &pmine, sizeof pmine, probes);
  /* Channels: as many as the busiest device holds for all its ranks at once, the same on every
   * rank (both ends of a link lay out the region alike); RINGO_CUDA_CHANNELS caps it. */
  int all_ok = res == ringoSuccess, who = 0;
  if (all_ok) agree_knobs(comm, d, probes, n);
  for (int r = 0; all_ok && r < n; r++) {
    if (!probes[r].ok) {
      all_ok = 0;
      who = r;
      break;
    }
    int sharing = 0; /* ranks on rank r's GPU: same host and PCI bus id (device numbers differ between
                        processes that see other CUDA_VISIBLE_DEVICES) */
    for (int q = 0; q < n; q++)
      sharing += strncmp(probes[q].pci, probes[r].pci, sizeof probes[q].pci) == 0 &&
                 strcmp(comm->info[q].host, comm->info[r].host) == 0;
    if (probes[r].nchannels / sharing < d->nchannels) d->nchannels = probes[r].nchannels / sharing;
    if (r != me) continue;
    for (int q = 0; q < n; q++) d->local_ranks += probes[q].dev == d->dev && probes[q].pid == pmine.pid &&
                                                  probes[q].nonce == pmine.nonce;
  }
  int same_gpu = all_ok; /* every rank on this GPU: same host and PCI bus id */
  for (int r = 0; same_gpu && r < n; r++)
    same_gpu = strcmp(comm->info[r].host, comm->info[me].host) == 0 && strncmp(probes[r].pci, pmine.pci, sizeof pmine.pci) == 0;
  d->gpu_scope = ringo_dev_flag_scope(comm->env.cuda_gpu_scope, same_gpu, all_ok && d->local_ranks == n);
  if (all_ok && d->nchannels < 1 && !d->staged) { /* a staged ring launches no ring kernel */
    all_ok = 0;
    snprintf(d->why, sizeof d->why, "too many ranks share one GPU for their ring kernels to be resident at once");
  } else if (!all_ok && pmine.ok && res == ringoSuccess && d->why[0] == '\0') {
    snprintf(d->why, sizeof d->why, "rank %d has no device path (no GPU, or its setup failed)", who);
  }
  struct dev_region rmine = {0};
  if (all_ok) {
    rmine.ok = alloc_own(d, &rmine, n) == ringoSuccess;
    if (!rmine.ok) snprintf(d->why, sizeof d->why, "rank %d: %s", me, ringo_thread_last_error());
  }
  if (res == ringoSuccess) res = rv->allgather(rv->ctx, &rmine, sizeof rmine, regions);
  int32_t linked = 0;
  if (res == ringoSuccess && all_ok && rmine.ok && regions[next].ok) {
    linked = open_next(d, &probes[next], &regions[next]) == ringoSuccess;
    if (!linked) snprintf(d->why, sizeof d->why, "rank %d: %s", me, ringo_thread_last_error());
  }
  if (res == ringoSuccess) res = rv->allgather(rv->ctx, &linked, sizeof linked, flags);
  d->usable = res == ringoSuccess && all_set(flags, n, &who);
  if (res == ringoSuccess && !d->usable && linked && all_ok)
    snprintf(d->why, sizeof d->why, "rank %d could not reach its next rank's device FIFO", who);
  (void)cudaGetLastError();
  free(probes);
  free(regions);
  free(flags);
  if (d->usable && d->staged)
    RINGO_INFO(RINGO_LOG_INIT, "rank %d: device path on: device %d, staged through host memory (the ring leaves the "
               "host)", me, d->dev);
  else if (d->usable)
    RINGO_INFO(RINGO_LOG_INIT, "rank %d: device path on: device %d, %d channels x %d slots x %zu bytes, %s-scope flags",
               me, d->dev, d->nchannels, DEV_NSLOTS, d->slot_bytes, d->gpu_scope ? "GPU" : "system");
  else
    RINGO_INFO(RINGO_LOG_INIT, "rank %d: device path off: %s", me, d->why);
  if (d->usable && d->local_ranks >= 4 && !getenv("CUDA_DEVICE_MAX_CONNECTIONS"))
    RINGO_WARN("rank %d: %d ranks of this process share device %d: their streams outnumber CUDA's 8 "
               "hardware queues; set CUDA_DEVICE_MAX_CONNECTIONS=32 before CUDA starts (cuda/README.md)", me,
               d->local_ranks, d->dev);
  return res;
}

static ringoResult_t dev_code_result(int32_t code) {
  switch (code) {
    case RINGO_DEV_TIMEOUT: return ringoTimeout;
    case RINGO_DEV_POISONED: return ringoRemoteError;
    case RINGO_DEV_ABORTED: return ringoInvalidUsage;
    case RINGO_DEV_MISMATCH: return ringoInvalidUsage;
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
               code == RINGO_DEV_TIMEOUT    ? "a wait passed RINGO_TIMEOUT"
               : code == RINGO_DEV_POISONED ? "a neighbour left on an error"
               : code == RINGO_DEV_MISMATCH ? "collective mismatch: the previous rank in the ring called a different "
                                              "collective (another kind, count, datatype, op or root, or its "
                                              "collectives in another order); every rank must make the same calls "
                                              "in the same order"
                                            : "the communicator was aborted");
    ringo_comm_fail(comm, res);
  }
  return res;
}

int ringo_device_local_ranks(ringoComm_t comm) {
  const struct ringo_device* d = comm->device;
  return d && d->usable ? (d->local_ranks > 0 ? d->local_ranks : 1) : 0;
}

void ringo_device_abort(ringoComm_t comm) {
  struct ringo_device* d = comm->device;
  if (d && d->abort_host) __atomic_store_n(d->abort_host, 1, __ATOMIC_RELEASE);
}

ringoResult_t ringo_device_check(const struct ringo_op* op, ringoStream_t stream, int grouped, const char* name) {
  const ringoComm_t comm = op->comm;
  const struct ringo_device* d = comm->device;
  if (!d || !d->usable)
    return ringo_fail(ringoInvalidUsage, "%s: device buffers, but rank %d's communicator has no device path: %s", name,
                      comm->rank, d ? d->why : "no CUDA");
#ifdef RINGO_HAVE_MPI
  /* Checked at init only where the ring leaves the host; a send may take an MPI link anyway. */
  if (op->kind != RINGO_KIND_COLL && comm->tctx && !ringo_mpi_links_thread_safe())
    return ringo_fail(ringoInvalidUsage, "%s: device sends and receives run on ringo's proxy thread, which may call "
                      "MPI: initialise MPI with MPI_THREAD_MULTIPLE", name);
#endif
  const void* bufs[2] = {op->sendbuff, op->recvbuff};
  for (int k = 0; k < 2; k++) {
    struct cudaPointerAttributes a;
    if (!bufs[k] || cudaPointerGetAttributes(&a, bufs[k]) != cudaSuccess || a.type != cudaMemoryTypeDevice) continue;
    if (a.device != d->dev)
      return ringo_fail(ringoInvalidArgument, "%s: %s is memory of device %d, but rank %d's communicator is on device "
                        "%d", name, k ? "recvbuff" : "sendbuff", a.device, comm->rank, d->dev);
  }
  (void)cudaGetLastError();
  /* Ranks of one process on one GPU that share the legacy stream would each wait, in stream order,
   * for a kernel that waits for them. A group issues all launches before any wait (safe). */
  const int shared = !stream || stream == (ringoStream_t)cudaStreamLegacy || stream == (ringoStream_t)cudaStreamPerThread;
  if (!grouped && shared && d->local_ranks > 1)
    return ringo_fail(ringoInvalidUsage, "%s: %d ranks of this process share device %d: give each rank its own stream "
                      "(not the default stream), or call them inside ringoGroupStart/End", name, d->local_ranks, d->dev);
  return ringoSuccess;
}

/* Bytes one rank's kernel puts on and takes off its links, counted as the host path counts them. */
static void count_bytes(ringoComm_t comm, const struct ringo_dev_ring* r, size_t esize) {
  uint64_t sent = 0, received = 0;
  for (int t = 0; t < r->nsteps; t++) {
    const int prim = r->step[t].prim;
    const uint64_t bytes = r->chunk[r->step[t].chunk].len * esize;
    if (ringo_prim_sends(prim)) sent += bytes;
    if (ringo_prim_receives(prim)) received += bytes;
  }
  atomic_fetch_add_explicit(&comm->bytes_sent, sent, memory_order_relaxed);
  atomic_fetch_add_explicit(&comm->bytes_received, received, memory_order_relaxed);
}

static ringoResult_t launch(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  struct ringo_device* d = comm->device;
  const size_t esize = ringo_type_size(op->type);
  if (comm->nranks == 1) { /* the result is the input; the device does the copy in stream order */
    const size_t bytes = op->count * esize;
    if (bytes && op->recvbuff && op->recvbuff != op->sendbuff)
      CU_CHECK(cudaMemcpyAsync(op->recvbuff, op->sendbuff, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)op->stream),
               "cudaMemcpyAsync");
    return ringoSuccess;
  }
  if (d->staged) { /* after the caller's earlier work, like the kernel; the host ring counts its own bytes */
    RINGO_CHECK(follow_caller(d, op->stream));
    const struct ringo_stage_ops ops = stage_ops(d);
    return mark_done(d, ringo_staged_launch(op, &d->stage, &ops));
  }
  struct ringo_dev_ring r;
  const struct ringo_dev_coll c = {(int)op->coll, op->type, op->op, op->count, comm->nranks, comm->pos,
                                   comm->pos_of[op->root], comm->ring, op->sendbuff, op->recvbuff,
                                   d->nchannels, DEV_NSLOTS, d->slot_bytes, op->seq,
                                   d->min_slice_bytes, d->window};
  RINGO_CHECK(ringo_dev_ring_describe(&c, &r));
  r.recv_region = d->region;
  r.send_region = d->next_region;
  r.counters = d->counters;
  r.error = d->error_dev;
  r.abort_flag = d->abort_dev;
  r.timeout_ns = (uint64_t)(comm->env.timeout_s * 1e9);
  r.gpu_scope = d->gpu_scope;
  r.fence = comm->env.cuda_fence;
  /* ringo's kernel waits for the caller's earlier work on its stream; ringo_device_join makes the
   * caller's stream wait for the kernel. */
  RINGO_CHECK(follow_caller(d, op->stream));
  if (ringo_cuda_ring_launch(&r, d->stream) != ringoSuccess)
    return ringo_fail(ringoUnhandledCudaError, "rank %d: ring kernel launch failed: %s", comm->rank,
                      ringo_cuda_ring_last_error());
  RINGO_CHECK(mark_done(d, ringoSuccess));
  count_bytes(comm, &r, esize);
  return ringoSuccess;
}

ringoResult_t ringo_device_launch(const struct ringo_op* op) {
  struct ringo_device* d = op->comm->device;
  RINGO_CHECK(ringo_device_async_error(op->comm));
  int old;
  CU_CHECK(enter_device(d, &old), "cudaSetDevice");
  const ringoResult_t res = launch(op);
  leave_device(d, old);
  return res;
}

static ringoResult_t p2p_launch(ringoComm_t comm, const struct ringo_op* const* ops, size_t n) {
  struct ringo_device* d = comm->device;
  struct ringo_p2p_call* calls = calloc(n, sizeof *calls);
  if (!calls) return ringo_fail(ringoSystemError, "out of memory for %zu device sends/receives", n);
  ringoResult_t res = ringoSuccess;
  for (size_t i = 0; i < n && res == ringoSuccess; i++) { /* after the work of every caller stream of the batch */
    const struct ringo_op* op = ops[i];
    const int send = op->kind == RINGO_KIND_SEND;
    calls[i] = (struct ringo_p2p_call){send, op->peer, send ? (void*)op->sendbuff : op->recvbuff, op->count, op->type};
    res = follow_caller(d, op->stream);
  }
  const struct ringo_stage_ops sops = stage_ops(d);
  if (res == ringoSuccess) res = ringo_p2p_device_launch(comm, &d->stage, calls, n, &sops);
  free(calls);
  return mark_done(d, res);
}

ringoResult_t ringo_device_p2p_launch(ringoComm_t comm, const struct ringo_op* const* ops, size_t n) {
  struct ringo_device* d = comm->device;
  RINGO_CHECK(ringo_device_async_error(comm));
  int old;
  CU_CHECK(enter_device(d, &old), "cudaSetDevice");
  const ringoResult_t res = p2p_launch(comm, ops, n);
  leave_device(d, old);
  return res;
}

void ringo_device_reserve(const struct ringo_op* ops, size_t nops) {
  for (size_t i = 0; i < nops; i++) {
    const ringoComm_t comm = ops[i].comm;
    if (!ops[i].device || !comm->device) continue;
    size_t first = 0; /* each communicator once, at its first op */
    while (ops[first].comm != comm || !ops[first].device) first++;
    if (first != i) continue;
    struct ringo_device* d = comm->device;
    size_t need[3];
    ringo_stage_needs(comm, d->staged && comm->nranks > 1, ops, nops, need);
    if (need[0] + need[1] + need[2] == 0) continue;
    int old;
    if (enter_device(d, &old) != cudaSuccess) continue;
    const struct ringo_stage_ops sops = stage_ops(d);
    (void)ringo_stage_reserve(comm, &d->stage, need[0], need[1], need[2], &sops);
    leave_device(d, old);
  }
  (void)cudaGetLastError();
}

ringoResult_t ringo_device_join(const struct ringo_op* op) {
  struct ringo_device* d = op->comm->device;
  /* A rank alone copies its collectives on the caller's stream itself. */
  if (op->comm->nranks == 1 && op->kind == RINGO_KIND_COLL) return ringoSuccess;
  CU_CHECK(cudaStreamWaitEvent((cudaStream_t)op->stream, d->done, 0), "cudaStreamWaitEvent on the caller's stream");
  return ringoSuccess;
}

#else /* !RINGO_HAVE_CUDA: host memory only */

int ringo_device_is_device_ptr(const void* p) {
  (void)p;
  return 0;
}
int ringo_device_count(void) { return 0; }
int ringo_device_current(void) { return -1; }
ringoResult_t ringo_device_select(int dev) {
  return ringo_fail(ringoUnhandledCudaError, "device %d: this build has no CUDA path", dev);
}
ringoResult_t ringo_device_setup(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  (void)comm, (void)rv;
  return ringoSuccess;
}
int ringo_device_free(ringoComm_t comm) {
  (void)comm;
  return 1;
}
ringoResult_t ringo_device_async_error(ringoComm_t comm) {
  (void)comm;
  return ringoSuccess;
}
int ringo_device_local_ranks(ringoComm_t comm) {
  (void)comm;
  return 0;
}
void ringo_device_abort(ringoComm_t comm) { (void)comm; }
ringoResult_t ringo_device_quiesce(ringoComm_t comm) {
  (void)comm;
  return ringoSuccess;
}
int ringo_device_drain(ringoComm_t comm) {
  (void)comm;
  return 1;
}
ringoResult_t ringo_device_check(const struct ringo_op* op, ringoStream_t stream, int grouped, const char* name) {
  (void)stream, (void)grouped;
  return ringo_fail(ringoInvalidUsage, "%s: rank %d: device buffers need ringo's CUDA path; this build has none", name,
                    op->comm->rank);
}
ringoResult_t ringo_device_launch(const struct ringo_op* op) {
  return ringo_fail(ringoInvalidUsage, "rank %d: this build has no CUDA path", op->comm->rank);
}
ringoResult_t ringo_device_p2p_launch(ringoComm_t comm, const struct ringo_op* const* ops, size_t n) {
  (void)ops, (void)n;
  return ringo_fail(ringoInvalidUsage, "rank %d: this build has no CUDA path", comm->rank);
}
ringoResult_t ringo_device_join(const struct ringo_op* op) {
  (void)op;
  return ringoSuccess;
}
void ringo_device_reserve(const struct ringo_op* ops, size_t nops) { (void)ops, (void)nops; }

#endif
