/* wait.cu — the wait kernel: one thread that holds its stream until a host thread moves a flag
 * (acquire, system scope), or the communicator is aborted. Needs nvcc, sync.cuh, cuda_wait.h.
 * Tested by test/test_cuda_wait.cc (the same code on the CPU) and, on a GPU, by test/test_device.cc. */
#include <cuda_runtime.h>
#include <sched.h>
#include <stdint.h>

#include "include/cuda_ring.h"
#include "include/cuda_wait.h"
#include "sync.cuh"

namespace {

constexpr uint32_t kAbortEvery = 256; /* polls between looks at the abort word */

__host__ __device__ int wait_flag(const uint64_t* flag, uint64_t value, const int32_t* abort_flag) {
  for (uint32_t spin = 1; ringo_sync::load_acquire(flag) < value; spin++) {
    if (spin % kAbortEvery == 0 && ringo_sync::load_word((const volatile uint32_t*)abort_flag)) return RINGO_DEV_ABORTED;
#ifdef __CUDA_ARCH__
    __nanosleep(500); /* leave the memory system to the kernels doing work */
#else
    sched_yield();
#endif
  }
  return RINGO_DEV_OK;
}

__global__ void wait_flag_kernel(const uint64_t* flag, uint64_t value, const int32_t* abort_flag, int32_t* error) {
  const int code = wait_flag(flag, value, abort_flag);
  if (code != RINGO_DEV_OK) atomicCAS((int*)error, 0, code);
}

}  // namespace

extern "C" int ringo_cuda_wait_flag(const uint64_t* flag, uint64_t value, const int32_t* abort_flag, int32_t* error,
                                    void* stream) {
  (void)cudaGetLastError(); /* an earlier error is not this launch's */
  wait_flag_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(flag, value, abort_flag, error);
  return (int)cudaGetLastError();
}

extern "C" int ringo_cuda_wait_preload(void) {
  cudaFuncAttributes attr;
  return (int)cudaFuncGetAttributes(&attr, wait_flag_kernel);
}

extern "C" int ringo_cuda_wait_flag_emulate(const uint64_t* flag, uint64_t value, const int32_t* abort_flag) {
  return wait_flag(flag, value, abort_flag);
}
