/* ring.cu — the ring kernel: one launch per rank per collective walks the steps of schedule.c (given in
 * struct ringo_dev_ring), block c driving channel c's FIFOs: wait for a slot (acquire, system scope) and
 * check its stamp, reduce the received slice with the local one, write the result into the next rank's
 * FIFO, stamp it, post the flag (release). Needs nvcc, ew_plan.cuh, cuda_ring.h. Tested by
 * test/test_cuda_ring.cc (the exact block code run on the CPU) and, on a GPU, by test/test_device.cc. */
#include <cuda_runtime.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "include/cuda_kernels.h"
#include "include/cuda_ring.h"
#include "ew_plan.cuh"
#include "sync.cuh"
#include "sched/schedule.h"

namespace {

using namespace ringo_ew;

constexpr int kRingThreads = 512;   /* threads per block (channel) */
/* Two blocks per SM at most 64 registers a thread: every rank's channels sharing one GPU must be
 * resident at once (they wait for each other), so a block must not need a whole SM. */
constexpr int kRingMinBlocksPerSm = 2;
constexpr uint32_t kCheckEvery = 1024; /* polls between looks at the clock, poison and abort */

/* Flags: system-scope acquire/release on the GPU, C++ atomics' equivalents on the CPU (sync.cuh);
 * GPU scope when the launch says every rank of the ring is on this GPU (RINGO_CUDA_GPU_SCOPE=1). */
using namespace ringo_sync;

__host__ __device__ inline uint64_t flag_acquire(const ringo_dev_ring& d, const uint64_t* p) {
  return d.gpu_scope ? load_acquire<Scope::kGpu>(p) : load_acquire(p);
}

__host__ __device__ inline void flag_release(const ringo_dev_ring& d, uint64_t* p, uint64_t v) {
  if (d.gpu_scope) store_release<Scope::kGpu>(p, v);
  else store_release(p, v);
}

/* ---- one channel of one rank ---- */

/* The region: every channel's flags, then (page-aligned) every channel's slots, each channel's
 * followed by its stamps, one a slot, the two padded to whole 128-byte lines: every channel's part
 * starts on a line, every slot (slot_bytes a multiple of 16) and stamp 16-byte aligned. */
__host__ __device__ inline size_t slots_offset(int nchannels) {
  return ((size_t)nchannels * sizeof(ringo_dev_flags) + 4095) / 4096 * 4096;
}

__host__ __device__ inline size_t channel_bytes(int nslots, size_t slot_bytes) {
  return ((size_t)nslots * (slot_bytes + sizeof(ringo_dev_stamp)) + 127) / 128 * 128;
}

static_assert(sizeof(ringo_dev_stamp) == 32, "a stamp is four words, written and read by one thread");

struct Channel {
  const ringo_dev_ring* d;
  ringo_dev_flags* in;   /* in this rank's region: the previous rank posts head here */
  ringo_dev_flags* out;  /* in the next rank's region: this rank posts head there */
  char* in_slots;
  char* out_slots;
  uint64_t sent, received;
};

/* The stamp of the slot `count` lands in: after the channel's slots, so it is found from the slots
 * pointer and no pointer to the stamps stays live through the reduce. Only thread 0 asks. */
__host__ __device__ inline ringo_dev_stamp* stamp_at(char* slots, const ringo_dev_ring& d, uint64_t count) {
  return (ringo_dev_stamp*)(slots + (size_t)d.nslots * d.slot_bytes) + (size_t)(count % (uint64_t)d.nslots);
}

__host__ __device__ inline char* slot_at(char* slots, const ringo_dev_ring& d, uint64_t count) {
  return slots + (size_t)(count % (uint64_t)d.nslots) * d.slot_bytes;
}

/* Does the slot about to be received belong to this rank's collective? Thread 0 reads the stamp
 * after its acquire of head, which the sender's release made visible along with the stamp. */
__host__ __device__ inline bool stamp_matches(const Channel& x) {
  const ringo_dev_stamp s = *stamp_at(x.in_slots, *x.d, x.received);
  const ringo_dev_fingerprint& fp = x.d->fp;
  return s.fp.seq == fp.seq && s.fp.count == fp.count && s.fp.call == fp.call && s.serial == x.received;
}

/* Thread 0's wait for whatever the step needs: a filled slot to receive from, a free slot in the
 * next rank's FIFO to send into. The received slot's stamp is checked as soon as the slot is
 * there, not once the send side is free too: a mismatched neighbour may never free it. The slot
 * to send into is stamped here, by the one thread, before block_publish's fence and release post
 * it. Bounded: the clock, a poisoned link and an abort end it. */
__host__ __device__ int wait_ready(const Channel& x, bool receives, bool sends) {
  uint64_t start = 0;
  bool in_ok = !receives;
  for (uint32_t spin = 1;; spin++) {
    if (!in_ok && flag_acquire(*x.d, &x.in->head) > x.received) {
      if (!stamp_matches(x)) return RINGO_DEV_MISMATCH;
      in_ok = true;
    }
    const bool out_ok = !sends || x.sent - flag_acquire(*x.d, &x.out->tail) < (uint64_t)x.d->nslots;
    if (in_ok && out_ok) {
      if (sends) *stamp_at(x.out_slots, *x.d, x.sent) = ringo_dev_stamp{x.d->fp, x.sent};
      return RINGO_DEV_OK;
    }
    if (spin % kCheckEvery == 0) {
      /* Only the links this step uses: a neighbour done with this collective may already have
       * freed its region (another process's, mapped through CUDA IPC). */
      if ((receives && load_word(&x.in->poison)) || (sends && load_word(&x.out->poison))) return RINGO_DEV_POISONED;
      if (load_word((const volatile uint32_t*)x.d->abort_flag)) return RINGO_DEV_ABORTED;
      const uint64_t t = now_ns();
      if (start == 0) start = t;
      else if (t - start > x.d->timeout_ns) return RINGO_DEV_TIMEOUT;
    }
#ifndef __CUDA_ARCH__
    if (spin % 64 == 0) sched_yield(); /* the emulation's ranks may outnumber the cores */
#endif
  }
}

/* The whole block waits for thread 0's verdict. */
__host__ __device__ int block_wait(const Channel& x, bool receives, bool sends) {
#ifdef __CUDA_ARCH__
  __shared__ int verdict;
  if (threadIdx.x == 0) verdict = wait_ready(x, receives, sends);
  __syncthreads();
  return verdict;
#else
  return wait_ready(x, receives, sends);
#endif
}

/* Every thread's stores into the slot (and the output) are visible system-wide before thread 0
 * moves the flags; the reads of the received slot are done before its tail frees it. The barrier
 * orders the block's accesses before thread 0's, and thread 0's system-scope fence and release
 * are cumulative over what it has so observed: one fence per slice, not one per thread. The
 * slot's stamp, which thread 0 wrote when it found the slot free, goes out with the same fence.
 * The release alone is enough under PTX's memory model (it is a release pattern, cumulative over
 * what the barrier made thread 0 observe); the fence before it stays by default until a GPU has
 * measured and checked the difference (RINGO_CUDA_FENCE=0 leaves it out). */
__host__ __device__ void block_publish(Channel& x, bool receives, bool sends) {
#ifdef __CUDA_ARCH__
  __syncthreads();
  const bool leader = threadIdx.x == 0;
  if (leader && x.d->fence && x.d->gpu_scope) __threadfence();
  else if (leader && x.d->fence) __threadfence_system();
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  const bool leader = true;
#endif
  if (sends) {
    if (leader) flag_release(*x.d, &x.out->head, x.sent + 1);
    x.sent++;
  }
  if (receives) {
    if (leader) flag_release(*x.d, &x.in->tail, x.received + 1);
    x.received++;
  }
}

/* Leaving on an error: say why (the first code wins) and poison both links, so the neighbours
 * stop waiting and pass it on. */
__host__ __device__ void block_fail(const Channel& x, int code) {
#ifdef __CUDA_ARCH__
  if (threadIdx.x != 0) return;
  atomicCAS((int*)x.d->error, 0, code);
#else
  int32_t expected = 0;
  __atomic_compare_exchange_n(x.d->error, &expected, code, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
#endif
  store_word(&x.in->poison, 1);
  store_word(&x.out->poison, 1);
}

template <class Op>
__host__ __device__ void block_run(const Plan& p, unsigned nthreads) {
#ifdef __CUDA_ARCH__
  (void)nthreads;
  run_thread<Op>(p, threadIdx.x, blockDim.x);
#else
  for (unsigned t = 0; t < nthreads; t++) run_thread<Op>(p, t, nthreads);
#endif
}

/* One slice of one step, as collectives.c's run_prim does it on the host. */
template <class Final, class Partial>
__host__ __device__ void do_prim(const ringo_dev_ring& d, int prim, const char* in, char* out, const char* rslot,
                                 char* sslot, size_t n, unsigned nthreads) {
  typedef typename Final::T T;
  typedef Copy<T> Cp;
  const size_t esz = sizeof(T);
  switch (prim) {
    case RINGO_PRIM_SEND: block_run<Cp>(make_plan(sslot, NULL, in, NULL, n, esz, 1), nthreads); break;
    case RINGO_PRIM_COPY_SEND: block_run<Cp>(make_plan(sslot, out != in ? out : NULL, in, NULL, n, esz, 1), nthreads); break;
    case RINGO_PRIM_RECV_COPY_SEND: block_run<Cp>(make_plan(out, sslot, rslot, NULL, n, esz, 1), nthreads); break;
    case RINGO_PRIM_RECV: block_run<Cp>(make_plan(out, NULL, rslot, NULL, n, esz, 1), nthreads); break;
    case RINGO_PRIM_RECV_REDUCE_SEND:
      block_run<Partial>(make_plan(sslot, NULL, rslot, in, n, esz, 1), nthreads);
      break;
    case RINGO_PRIM_RECV_REDUCE_COPY_SEND:
      block_run<Final>(make_plan(out, sslot, rslot, in, n, esz, d.nranks), nthreads);
      break;
    case RINGO_PRIM_RECV_REDUCE_COPY:
      block_run<Final>(make_plan(out, NULL, rslot, in, n, esz, d.nranks), nthreads);
      break;
  }
}

/* Channel c of this rank: rounds c, c + nchannels, ..., taken d.window at a time through every
 * step: each step moves the window's slices, then the next step. With one round at a time (the
 * host's order) every step waits for the flag its neighbour has just raised for the same slice, a
 * round trip per slice; with a window, the neighbour raised it window - 1 slices ago. Both ends of
 * a link go through their slices in the same order (window, step, round), so the k-th slot sent is
 * the k-th received. Returns a RINGO_DEV_* code. */
template <class Final, class Partial>
__host__ __device__ int run_channel(const ringo_dev_ring& d, int c, unsigned nthreads) {
  typedef typename Final::T T;
  const size_t off = slots_offset(d.nchannels);
  const size_t per_channel = channel_bytes(d.nslots, d.slot_bytes);
  Channel x = {&d,
               (ringo_dev_flags*)d.recv_region + c,
               (ringo_dev_flags*)d.send_region + c,
               d.recv_region + off + (size_t)c * per_channel,
               d.send_region + off + (size_t)c * per_channel,
               d.counters[2 * c],
               d.counters[2 * c + 1]};
  const char* in = (const char*)d.sendbuff;
  char* out = (char*)d.recvbuff;
  const uint64_t stride = (uint64_t)d.nchannels, window = (uint64_t)d.window;
  for (uint64_t j0 = (uint64_t)c; j0 < d.rounds; j0 += stride * window) {
    for (int t = 0; t < d.nsteps; t++) {
      const ringo_dev_step st = d.step[t];
      const ringo_dev_chunk g = d.chunk[st.chunk];
      const bool receives = ringo_prim_receives(st.prim), sends = ringo_prim_sends(st.prim);
      for (uint64_t k = 0, j = j0; k < window && j < d.rounds; k++, j += stride) {
        const uint64_t first = j * d.slice_elems;
        if (first >= g.len) break; /* both ends of the link skip the same empty slices */
        const size_t n = (size_t)(g.len - first < d.slice_elems ? g.len - first : d.slice_elems);
        const int err = block_wait(x, receives, sends);
        if (err != RINGO_DEV_OK) {
          block_fail(x, err);
          return err;
        }
        do_prim<Final, Partial>(d, st.prim, in ? in + (g.in_off + first) * sizeof(T) : NULL,
                                out ? out + (g.out_off + first) * sizeof(T) : NULL,
                                receives ? slot_at(x.in_slots, d, x.received) : NULL,
                                sends ? slot_at(x.out_slots, d, x.sent) : NULL, n, nthreads);
        block_publish(x, receives, sends);
      }
    }
  }
#ifdef __CUDA_ARCH__
  if (threadIdx.x == 0)
#endif
  {
    d.counters[2 * c] = x.sent;
    d.counters[2 * c + 1] = x.received;
  }
  return RINGO_DEV_OK;
}

template <class Final, class Partial>
__global__ void __launch_bounds__(kRingThreads, kRingMinBlocksPerSm) ring_kernel(const ringo_dev_ring d) {
  run_channel<Final, Partial>(d, (int)blockIdx.x, blockDim.x);
}

template <class Final, class Partial>
cudaError_t launch(const ringo_dev_ring& d, cudaStream_t stream) {
  (void)cudaGetLastError(); /* an earlier, already reported failure is not this launch's */
  ring_kernel<Final, Partial><<<d.nchannels, kRingThreads, 0, stream>>>(d);
  return cudaGetLastError();
}

template <class Final, class Partial>
int emulate(const ringo_dev_ring& d, int c, unsigned nthreads) {
  return run_channel<Final, Partial>(d, c, nthreads);
}

struct RingKernel {
  cudaError_t (*launch)(const ringo_dev_ring&, cudaStream_t);
  int (*emulate)(const ringo_dev_ring&, int, unsigned);
  const void* fn; /* the __global__ function, for attribute and occupancy queries */
};
/* Avg adds along the ring and divides in the step that makes the final value. */
#define RING(Final, Partial) {launch<Final, Partial>, emulate<Final, Partial>, (const void*)ring_kernel<Final, Partial>}
#define RING_ROW(sfx, Type, dtype)                                                                    \
  {RING(sum_##sfx, sum_##sfx), RING(prod_##sfx, prod_##sfx), RING(max_##sfx, max_##sfx),              \
   RING(min_##sfx, min_##sfx), RING(avg_##sfx, sum_##sfx)},
const RingKernel kRing[RINGO_NUM_TYPES][RINGO_NUM_OPS] = {RINGO_EW_TYPES(RING_ROW)};

/* The kernel trusts its descriptor; what the host could get wrong is refused here. */
bool valid(const ringo_dev_ring* d) {
  if (!d || (unsigned)d->type >= RINGO_NUM_TYPES || (unsigned)d->op >= RINGO_NUM_OPS) return false;
  if (d->nranks < 2 || d->nranks > RINGO_DEV_MAX_RANKS || d->nsteps < 1 || d->nsteps > RINGO_DEV_MAX_STEPS) return false;
  if (d->nchannels < 1 || d->nchannels > RINGO_DEV_MAX_CHANNELS || d->nslots < 2) return false; /* 1 deadlocks */
  if (d->slice_elems < 1 || d->slot_bytes % 16 != 0) return false;
  if (d->window < 1 || (d->window > 1 && 2 * d->window > d->nslots)) return false; /* run_channel's waits */

  for (int t = 0; t < d->nsteps; t++)
    if (d->step[t].chunk < 0 || d->step[t].chunk >= d->nranks) return false;
  return d->recv_region && d->send_region && d->counters && d->error && d->abort_flag;
}

thread_local char ring_error[256] = "no error";

}  // namespace

extern "C" size_t ringo_dev_slots_offset(int nchannels) { return slots_offset(nchannels); }

extern "C" size_t ringo_dev_channel_bytes(int nslots, size_t slot_bytes) { return channel_bytes(nslots, slot_bytes); }

extern "C" size_t ringo_dev_region_bytes(int nchannels, int nslots, size_t slot_bytes) {
  return slots_offset(nchannels) + (size_t)nchannels * channel_bytes(nslots, slot_bytes);
}

extern "C" ringoResult_t ringo_cuda_ring_launch(const struct ringo_dev_ring* d, void* stream) {
  if (!valid(d)) return ringoInvalidArgument;
  const cudaError_t err = kRing[d->type][d->op].launch(*d, (cudaStream_t)stream);
  if (err == cudaSuccess) return ringoSuccess;
  snprintf(ring_error, sizeof ring_error, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
  return ringoUnhandledCudaError;
}

extern "C" const char* ringo_cuda_ring_last_error(void) { return ring_error; }

extern "C" int ringo_cuda_ring_emulate_block(const struct ringo_dev_ring* d, int channel, unsigned nthreads) {
  if (!valid(d) || channel < 0 || channel >= d->nchannels || nthreads == 0) return -1;
  return kRing[d->type][d->op].emulate(*d, channel, nthreads);
}

/* Loads every variant now (CUDA loads kernels lazily, and a load can wait for the device to go
 * idle — which a spinning ring kernel of another rank never lets it) and returns how many blocks
 * of the hungriest variant one SM holds. */
extern "C" ringoResult_t ringo_cuda_ring_preload(int* blocks_per_sm) {
  int fewest = 1 << 30;
  for (int t = 0; t < RINGO_NUM_TYPES; t++)
    for (int o = 0; o < RINGO_NUM_OPS; o++) {
      cudaFuncAttributes a;
      int blocks = 0;
      cudaError_t err = cudaFuncGetAttributes(&a, kRing[t][o].fn);
      if (err == cudaSuccess)
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kRing[t][o].fn, kRingThreads, 0);
      if (err != cudaSuccess) {
        snprintf(ring_error, sizeof ring_error, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
        return ringoUnhandledCudaError;
      }
      if (blocks < fewest) fewest = blocks;
    }
  *blocks_per_sm = fewest;
  return ringoSuccess;
}
