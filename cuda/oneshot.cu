/* oneshot.cu — the device one-shot all-reduce's kernel (src/include/cuda_oneshot.h): every thread takes
 * 16-byte vectors (or single elements) of each chunk, combines them across all N inputs in the ring's
 * order with ew_plan.cuh's functors, and stores the result once; the boarded kernel around it copies the
 * input into the rank's board and syncs with the other ranks through the boards' flags. Needs nvcc;
 * tested on the CPU by test/test_cuda_oneshot.cc (the same per-thread and per-block code, against the
 * host's ring-order combine). */
#include <cuda_runtime.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>

#include "include/cuda_oneshot.h"
#include "include/cuda_ring.h"
#include "ew_plan.cuh"
#include "sync.cuh"

namespace {

using namespace ringo_ew;

constexpr int kThreads = 512;
constexpr int kBlocksPerSm = 2; /* a small buffer needs the wave, not more */

/* Input j of chunk k in the ring's order, at the chunk's first element. */
__host__ __device__ inline const char* source(const ringo_dev_oneshot& d, const ringo_dev_oneshot_chunk& ch, int j,
                                              size_t esz) {
  return (const char*)d.in[(ch.start + j) % d.nranks] + ch.off * esz;
}

/* The plan of one chunk: vectors where the result and every input sit at one offset modulo 16
 * (the aligned cut of long chunks gives that to any 16-byte aligned buffers), scalars elsewhere. */
struct ChunkPlan {
  size_t head, nvec;
  int unaligned; /* some pointer is not a multiple of the element size */
};

__host__ __device__ inline ChunkPlan plan_chunk(const ringo_dev_oneshot& d, const ringo_dev_oneshot_chunk& ch,
                                                size_t esz) {
  const uintptr_t out = (uintptr_t)d.out + ch.off * esz;
  uintptr_t any = out, apart = 0;
  for (int j = 0; j < d.nranks; j++) {
    const uintptr_t p = (uintptr_t)source(d, ch, j, esz);
    any |= p;
    apart |= p - out;
  }
  ChunkPlan plan = {ch.len, 0, any % esz != 0};
  if (plan.unaligned || apart % 16 != 0) return plan;
  const size_t head = ((16 - out % 16) % 16) / esz;
  if (head >= ch.len) return plan;
  plan.head = head;
  plan.nvec = (ch.len - head) * esz / 16;
  return plan;
}

/* Partial steps with Op, the step that makes the final value with Last (avg's division: Op is the
 * sum there); with one input the value is that input. */
template <class Op, class Last>
__host__ __device__ inline uint4 combine_vec(const ringo_dev_oneshot& d, const ringo_dev_oneshot_chunk& ch,
                                             size_t at) {
  const size_t esz = sizeof(typename Op::T);
  uint4 acc = load_vec(source(d, ch, 0, esz) + at);
  for (int j = 1; j < d.nranks; j++) {
    const uint4 next = load_vec(source(d, ch, j, esz) + at);
    acc = j == d.nranks - 1 ? apply_vec<Last>(acc, next, d.nranks) : apply_vec<Op>(acc, next, 1);
  }
  return acc;
}

template <class Op, class Last>
__host__ __device__ inline typename Op::T combine_one(const ringo_dev_oneshot& d, const ringo_dev_oneshot_chunk& ch,
                                                      size_t at, int unaligned) {
  typedef typename Op::T T;
  T acc = load_one<T>(source(d, ch, 0, sizeof(T)) + at, unaligned);
  for (int j = 1; j < d.nranks; j++) {
    const T next = load_one<T>(source(d, ch, j, sizeof(T)) + at, unaligned);
    acc = j == d.nranks - 1 ? Last::apply(acc, next, d.nranks) : Op::apply(acc, next, 1);
  }
  return acc;
}

/* Thread tid's share of chunk k: vector v and scalar j go to thread v % nthreads and j % nthreads. */
template <class Op, class Last>
__host__ __device__ void run_chunk(const ringo_dev_oneshot& d, int k, size_t tid, size_t nthreads) {
  typedef typename Op::T T;
  const ringo_dev_oneshot_chunk& ch = d.chunk[k];
  const ChunkPlan plan = plan_chunk(d, ch, sizeof(T));
  char* out = (char*)d.out + ch.off * sizeof(T);
  const size_t base = plan.head * sizeof(T);
  for (size_t v = tid; v < plan.nvec; v += nthreads)
    store_vec(out + base + 16 * v, combine_vec<Op, Last>(d, ch, base + 16 * v));
  const size_t tail = plan.head + plan.nvec * (16 / sizeof(T));
  const size_t nscalar = plan.head + (ch.len - tail);
  for (size_t j = tid; j < nscalar; j += nthreads) {
    const size_t at = (j < plan.head ? j : tail + (j - plan.head)) * sizeof(T);
    store_one<T>(out + at, combine_one<Op, Last>(d, ch, at, plan.unaligned), plan.unaligned);
  }
}

/* Each thread reads an element of every input before it writes that element of out, so out may be
 * this rank's own input (cuda_oneshot.h says when that is allowed). */
template <class Op, class Last>
__host__ __device__ void run_thread(const ringo_dev_oneshot& d, size_t tid, size_t nthreads) {
  for (int k = 0; k < d.nranks; k++) run_chunk<Op, Last>(d, k, tid, nthreads);
}

template <class Op, class Last>
__global__ void __launch_bounds__(kThreads) oneshot_kernel(const ringo_dev_oneshot d) {
  run_thread<Op, Last>(d, (size_t)blockIdx.x * blockDim.x + threadIdx.x, (size_t)gridDim.x * blockDim.x);
}

/* One thread per vector of the longest chunk (the first), capped at kBlocksPerSm blocks an SM. */
template <class Op, class Last>
cudaError_t launch(const ringo_dev_oneshot& d, cudaStream_t stream) {
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  const size_t want = (d.chunk[0].len * sizeof(typename Op::T) / 16 + kThreads - 1) / kThreads;
  const size_t cap = (size_t)(sms > 0 ? sms : 1) * kBlocksPerSm;
  const unsigned blocks = (unsigned)(want < 1 ? 1 : want > cap ? cap : want);
  (void)cudaGetLastError(); /* an earlier, unrelated failure is not this launch's */
  oneshot_kernel<Op, Last><<<blocks, kThreads, 0, stream>>>(d);
  return cudaGetLastError();
}

template <class Op, class Last>
void emulate(const ringo_dev_oneshot& d, unsigned nthreads) {
  for (unsigned t = 0; t < nthreads; t++) run_thread<Op, Last>(d, t, nthreads);
}

/* ---- the boarded kernel: copy into the board, post, wait for every post, combine ---- */

using ringo_sync::Scope;

__host__ __device__ inline uint64_t acquire(const ringo_dev_oneshot_run& x, const uint64_t* p) {
  return x.gpu_scope ? ringo_sync::load_acquire<Scope::kGpu>(p) : ringo_sync::load_acquire<Scope::kSystem>(p);
}

__host__ __device__ inline void release(const ringo_dev_oneshot_run& x, uint64_t* p, uint64_t v) {
  if (x.gpu_scope) ringo_sync::store_release<Scope::kGpu>(p, v);
  else ringo_sync::store_release<Scope::kSystem>(p, v);
}

/* The block's writes (seen by thread 0 through the barrier before this) visible where x's flags are. */
__host__ __device__ inline void fence(const ringo_dev_oneshot_run& x) {
#ifdef __CUDA_ARCH__
  if (x.gpu_scope) __threadfence();
  else __threadfence_system();
#else
  (void)x;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* Adds this block to *counter; 1 for the block that makes it `target`, the last one through. */
__host__ __device__ inline bool count_block(uint64_t* counter, uint64_t target) {
#ifdef __CUDA_ARCH__
  return atomicAdd((unsigned long long*)counter, 1ull) + 1 == target;
#else
  return __atomic_add_fetch(counter, 1, __ATOMIC_ACQ_REL) == target;
#endif
}

__host__ __device__ inline ringo_dev_board_fp fingerprint(const ringo_dev_oneshot_run& x) {
  const ringo_dev_oneshot& d = x.combine;
  return {x.k, d.count, (uint64_t)(uint32_t)d.type | (uint64_t)(uint32_t)d.op << 8 | (uint64_t)(uint32_t)d.nranks << 16};
}

/* Thread 0: until every rank has posted collective k, with k's fingerprint; RINGO_DEV_* when not. */
__host__ __device__ int wait_posted(const ringo_dev_oneshot_run& x) {
  uint64_t start = 0;
  for (int p = 0; p < x.combine.nranks; p++) {
    for (uint64_t spin = 0; acquire(x, &x.flags[p]->posted) < x.k; spin++) {
      if (spin % 64 != 0) continue;
      if (ringo_sync::load_word((const volatile uint32_t*)x.abort_flag)) return RINGO_DEV_ABORTED;
      const uint64_t t = ringo_sync::now_ns();
      if (start == 0) start = t;
      else if (t - start > x.timeout_ns) return RINGO_DEV_TIMEOUT;
#ifndef __CUDA_ARCH__
      sched_yield(); /* the emulation's blocks may outnumber the cores */
#endif
    }
    /* After the acquire of posted: the slot k uses holds k's fingerprint (the rank cannot post k + 2
     * into it before this rank's kernel k has ended: cuda_oneshot.h). */
    const ringo_dev_board_fp theirs = x.flags[p]->fp[x.k % 2], mine = fingerprint(x);
    if (theirs.k != mine.k || theirs.count != mine.count || theirs.call != mine.call) return RINGO_DEV_MISMATCH;
  }
  return RINGO_DEV_OK;
}

/* Thread 0 of a block that leaves on an error: the rank's first code wins. */
__host__ __device__ inline void run_fail(const ringo_dev_oneshot_run& x, int code) {
#ifdef __CUDA_ARCH__
  atomicCAS((int*)x.error, 0, code);
#else
  int32_t expected = 0;
  __atomic_compare_exchange_n(x.error, &expected, code, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
#endif
}

/* Thread 0 after the block copied its share: the last block posts the slot. */
__host__ __device__ inline void post(const ringo_dev_oneshot_run& x) {
  fence(x);
  if (!count_block(&x.mine->arrived, x.arrive_target)) return;
  x.mine->fp[x.k % 2] = fingerprint(x);
  fence(x);
  release(x, &x.mine->posted, x.k);
}

/* Thread tid of nthreads in the grid: its share of the copy of the input into the slot. */
template <class T>
__host__ __device__ inline void copy_share(const ringo_dev_oneshot_run& x, size_t tid, size_t nthreads) {
  const size_t bytes = x.combine.count * sizeof(T);
  const Plan p = make_plan(x.slot, NULL, x.sendbuff, NULL, bytes, 1, 1);
  ringo_ew::run_thread<Copy<uint8_t>>(p, tid, nthreads);
}

template <class Op, class Last>
__global__ void __launch_bounds__(kThreads) boarded_kernel(const ringo_dev_oneshot_run x) {
  __shared__ int code;
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nthreads = (size_t)gridDim.x * blockDim.x;
  copy_share<typename Op::T>(x, tid, nthreads);
  __syncthreads();
  if (threadIdx.x == 0) {
    post(x);
    code = wait_posted(x);
    if (code != RINGO_DEV_OK) run_fail(x, code);
  }
  __syncthreads();
  if (code == RINGO_DEV_OK) run_thread<Op, Last>(x.combine, tid, nthreads);
}

/* The same block on the CPU: its nthreads threads one after another between the waits. */
template <class Op, class Last>
int boarded_emulate(const ringo_dev_oneshot_run& x, int block, unsigned nthreads) {
  const size_t base = (size_t)block * nthreads, all = (size_t)x.nblocks * nthreads;
  for (unsigned t = 0; t < nthreads; t++) copy_share<typename Op::T>(x, base + t, all);
  post(x);
  const int code = wait_posted(x);
  if (code != RINGO_DEV_OK) {
    run_fail(x, code);
    return code;
  }
  for (unsigned t = 0; t < nthreads; t++) run_thread<Op, Last>(x.combine, base + t, all);
  return RINGO_DEV_OK;
}

template <class Op, class Last>
cudaError_t boarded_launch(const ringo_dev_oneshot_run& x, cudaStream_t stream) {
  (void)cudaGetLastError(); /* an earlier, unrelated failure is not this launch's */
  boarded_kernel<Op, Last><<<(unsigned)x.nblocks, kThreads, 0, stream>>>(x);
  return cudaGetLastError();
}

/* ---- the (dtype, op) table: avg sums along and divides in the last step ---- */
struct Kernel {
  cudaError_t (*launch)(const ringo_dev_oneshot&, cudaStream_t);
  void (*emulate)(const ringo_dev_oneshot&, unsigned);
  cudaError_t (*run_launch)(const ringo_dev_oneshot_run&, cudaStream_t);
  int (*run_emulate)(const ringo_dev_oneshot_run&, int, unsigned);
};
#define ONESHOT(P, L) {launch<P, L>, emulate<P, L>, boarded_launch<P, L>, boarded_emulate<P, L>}
#define ONESHOT_ROW(sfx, Type, dtype)                                                                       \
  {ONESHOT(sum_##sfx, sum_##sfx), ONESHOT(prod_##sfx, prod_##sfx), ONESHOT(max_##sfx, max_##sfx),           \
   ONESHOT(min_##sfx, min_##sfx), ONESHOT(sum_##sfx, avg_##sfx)},
const Kernel kOneshot[RINGO_NUM_TYPES][RINGO_NUM_OPS] = {RINGO_EW_TYPES(ONESHOT_ROW)};
static_assert(ringoSum == 0 && ringoProd == 1 && ringoMax == 2 && ringoMin == 3 && ringoAvg == 4,
              "kOneshot's columns are sum, prod, max, min, avg");

thread_local char last_error[256] = "no error";

/* The descriptor's own checks (ringo_dev_oneshot_describe makes good ones): NULL when it is bad. */
const Kernel* kernel_for(const ringo_dev_oneshot* d) {
  if (!d || (unsigned)d->type >= RINGO_NUM_TYPES || (unsigned)d->op >= RINGO_NUM_OPS || d->nranks < 1 ||
      d->nranks > RINGO_DEV_ONESHOT_MAX_RANKS || (d->count > 0 && !d->out))
    return NULL;
  for (int p = 0; p < d->nranks; p++)
    if (d->count > 0 && !d->in[p]) return NULL;
  return &kOneshot[d->type][d->op];
}

}  // namespace

extern "C" ringoResult_t ringo_cuda_oneshot_launch(const struct ringo_dev_oneshot* d, void* stream) {
  const Kernel* k = kernel_for(d);
  if (!k) return ringoInvalidArgument;
  if (d->count == 0) return ringoSuccess;
  const cudaError_t err = k->launch(*d, (cudaStream_t)stream);
  if (err == cudaSuccess) return ringoSuccess;
  snprintf(last_error, sizeof last_error, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
  return ringoUnhandledCudaError;
}

extern "C" const char* ringo_cuda_oneshot_last_error(void) { return last_error; }

extern "C" ringoResult_t ringo_cuda_oneshot_emulate(const struct ringo_dev_oneshot* d, unsigned nthreads) {
  const Kernel* k = kernel_for(d);
  if (!k || nthreads == 0) return ringoInvalidArgument;
  if (d->count > 0) k->emulate(*d, nthreads);
  return ringoSuccess;
}

extern "C" ringoResult_t ringo_cuda_oneshot_run_launch(const struct ringo_dev_oneshot_run* run, void* stream) {
  const Kernel* k = run ? kernel_for(&run->combine) : NULL;
  if (!k || run->nblocks < 1 || !run->mine || !run->slot || !run->error || !run->abort_flag) return ringoInvalidArgument;
  const cudaError_t err = k->run_launch(*run, (cudaStream_t)stream);
  if (err == cudaSuccess) return ringoSuccess;
  snprintf(last_error, sizeof last_error, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
  return ringoUnhandledCudaError;
}

extern "C" int ringo_cuda_oneshot_run_emulate_block(const struct ringo_dev_oneshot_run* run, int block,
                                                    unsigned nthreads) {
  const Kernel* k = run ? kernel_for(&run->combine) : NULL;
  if (!k || block < 0 || block >= run->nblocks || nthreads == 0 || !run->mine || !run->slot || !run->error ||
      !run->abort_flag)
    return -1;
  return k->run_emulate(*run, block, nthreads);
}
