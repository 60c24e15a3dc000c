/* ddp_scale.cu — the DDP pre-scale kernel dst = w * src (float16/bfloat16/float32/float64), grid-stride,
 * and its launcher. Needs nvcc and src/include/cuda_scale.h (the per-element code, shared with the CPU
 * emulation in src/ddp_device.c). Tested by test/test_ddp_device.cc (emulated; the kernel on a GPU). */
#include <cuda_runtime.h>
#include <stdint.h>

#include "include/cuda_scale.h"

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 1024; /* enough to fill an H100/H200 several times; the loop does the rest */

/* One dtype's element scale (cuda_scale.h), as a type the kernel template takes. */
template <class E, E (*F)(E, double)>
struct Scale {
  using T = E;
  __device__ static T apply(T x, double w) { return F(x, w); }
};
using ScaleF64 = Scale<double, ringo_scale_f64>;
using ScaleF32 = Scale<float, ringo_scale_f32>;
using ScaleF16 = Scale<uint16_t, ringo_scale_f16>;
using ScaleBf16 = Scale<uint16_t, ringo_scale_bf16>;

/* dst may be src (in place): each element is read before it is written, by the same thread. */
template <class S>
__global__ void __launch_bounds__(kThreads) scale_kernel(typename S::T* dst, const typename S::T* src, size_t count,
                                                         double w) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) dst[i] = S::apply(src[i], w);
}

template <class S>
int launch(void* dst, const void* src, size_t count, double w, cudaStream_t stream) {
  const size_t want = (count + kThreads - 1) / kThreads;
  const unsigned blocks = (unsigned)(want < kMaxBlocks ? want : kMaxBlocks);
  /* Clear an earlier, unrelated failure from the last-error slot so it is not blamed on this
   * launch; a sticky error comes back anyway. */
  (void)cudaGetLastError();
  scale_kernel<S><<<blocks, kThreads, 0, stream>>>(static_cast<typename S::T*>(dst),
                                                  static_cast<const typename S::T*>(src), count, w);
  return (int)cudaGetLastError();
}

}  // namespace

extern "C" int ringo_cuda_ddp_scale(void* dst, const void* src, size_t count, ringoDataType_t type, double w,
                                    void* stream) {
  size_t esize = 0;
  switch (type) {
    case ringoFloat16: case ringoBfloat16: esize = 2; break;
    case ringoFloat32: esize = 4; break;
    case ringoFloat64: esize = 8; break;
    default: return (int)cudaErrorInvalidValue;
  }
  if (count == 0) return (int)cudaSuccess;
  const cudaStream_t s = (cudaStream_t)stream;
  if (w == 1.0)
    return dst == src ? (int)cudaSuccess : (int)cudaMemcpyAsync(dst, src, count * esize, cudaMemcpyDeviceToDevice, s);
  if (w == 0.0) return (int)cudaMemsetAsync(dst, 0, count * esize, s);
  switch (type) {
    case ringoFloat16: return launch<ScaleF16>(dst, src, count, w, s);
    case ringoBfloat16: return launch<ScaleBf16>(dst, src, count, w, s);
    case ringoFloat32: return launch<ScaleF32>(dst, src, count, w, s);
    default: return launch<ScaleF64>(dst, src, count, w, s);
  }
}

extern "C" int ringo_cuda_ddp_scale_preload(void) {
  cudaFuncAttributes attr;
  cudaError_t err = cudaFuncGetAttributes(&attr, scale_kernel<ScaleF16>);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, scale_kernel<ScaleBf16>);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, scale_kernel<ScaleF32>);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, scale_kernel<ScaleF64>);
  return (int)err;
}
