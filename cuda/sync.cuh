/* sync.cuh — the flag operations ringo's kernels wait and signal with: system-scope acquire and
 * release on the GPU, their C++ atomic equivalents on the CPU (where tests emulate the kernels),
 * and a nanosecond clock. Header-only, __host__ __device__; used by ring.cu and wait.cu. */
#ifndef RINGO_CUDA_SYNC_CUH_
#define RINGO_CUDA_SYNC_CUH_

#include <stdint.h>
#include <time.h>

namespace ringo_sync {

/* How far an acquire or release reaches: every thread of the system (peers on other GPUs, the
 * host), or only those of this GPU — enough, and cheaper, when every thread that touches the flag
 * and the data it guards runs here (ranks sharing one device). */
enum class Scope { kSystem, kGpu };

template <Scope S = Scope::kSystem>
__host__ __device__ inline uint64_t load_acquire(const uint64_t* p) {
#ifdef __CUDA_ARCH__
  uint64_t v; /* generic address: peer, local or host */
  if constexpr (S == Scope::kGpu) asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

template <Scope S = Scope::kSystem>
__host__ __device__ inline void store_release(uint64_t* p, uint64_t v) {
#ifdef __CUDA_ARCH__
  if constexpr (S == Scope::kGpu) asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

__host__ __device__ inline uint32_t load_word(const volatile uint32_t* p) {
#ifdef __CUDA_ARCH__
  return *p;
#else
  return __atomic_load_n((const uint32_t*)p, __ATOMIC_ACQUIRE);
#endif
}

__host__ __device__ inline void store_word(volatile uint32_t* p, uint32_t v) {
#ifdef __CUDA_ARCH__
  *p = v;
  __threadfence_system();
#else
  __atomic_store_n((uint32_t*)p, v, __ATOMIC_RELEASE);
#endif
}

/* Nanoseconds from some fixed point: the GPU's global timer, or CLOCK_MONOTONIC. */
__host__ __device__ inline uint64_t now_ns() {
#ifdef __CUDA_ARCH__
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

}  // namespace ringo_sync

#endif  // RINGO_CUDA_SYNC_CUH_
