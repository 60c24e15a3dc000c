/* cuda_scale.h — the DDP pre-scale dst = w * src in the gradient's own dtype: the per-element code
 * (__host__ __device__, on elementwise.h's conversions) and the launcher of cuda/ddp_scale.cu.
 * Needs ringo.h and elementwise.h; tested by test/test_ddp_device.cc (CPU emulation, and on a GPU). */
#ifndef RINGO_CUDA_SCALE_H_
#define RINGO_CUDA_SCALE_H_

#include <stddef.h>
#include <stdint.h>

#include "include/elementwise.h"
#include "ringo.h"

/* The rules are those of src/ddp.c's host scale, bit for bit: float32, float16 and bfloat16 are
 * widened (exactly) to double, multiplied by w there and rounded to float, and float16/bfloat16
 * then rounded once more to nearest-even; float64 multiplies in double. NaN inputs are written out
 * explicitly, because GPU arithmetic turns every NaN into one canonical NaN while the host's keeps
 * the input's sign and payload: float32, float64 and bfloat16 keep sign and payload with the quiet
 * bit set, float16 keeps the sign only (0x7e00), as the host code produces. w == 0 (zeros) and
 * w == 1 (a copy) are the launcher's, so the per-element code never sees them. */

#if defined(__CUDA_ARCH__)
#define RINGO_SCALE_D2F(x) __double2float_rn(x)
#else
#define RINGO_SCALE_D2F(x) ((float)(x))
#endif

static inline RINGO_HD uint64_t ringo_scale_d2u(double d) {
#if defined(__CUDA_ARCH__)
  return (uint64_t)__double_as_longlong(d);
#else
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
#endif
}

static inline RINGO_HD double ringo_scale_u2d(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double((long long)u);
#else
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
#endif
}

static inline RINGO_HD double ringo_scale_f64(double x, double w) {
  if (x != x) return ringo_scale_u2d(ringo_scale_d2u(x) | 0x0008000000000000ull);
  return RINGO_EW_DMUL(x, w);
}

static inline RINGO_HD float ringo_scale_f32(float x, double w) {
  if (x != x) return ringo_ew_u2f(ringo_ew_f2u(x) | 0x00400000u);
  return RINGO_SCALE_D2F(RINGO_EW_DMUL((double)x, w));
}

static inline RINGO_HD uint16_t ringo_scale_f16(uint16_t h, double w) {
  if ((h & 0x7fffu) > 0x7c00u) return (uint16_t)((h & 0x8000u) | 0x7e00u);
  return ringo_ew_float_to_half(RINGO_SCALE_D2F(RINGO_EW_DMUL((double)ringo_ew_half_to_float(h), w)));
}

static inline RINGO_HD uint16_t ringo_scale_bf16(uint16_t h, double w) {
  if ((h & 0x7fffu) > 0x7f80u) return (uint16_t)(h | 0x0040u);
  return ringo_ew_float_to_bf16(RINGO_SCALE_D2F(RINGO_EW_DMUL((double)ringo_ew_bf16_to_float(h), w)));
}

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues dst[i] = w * src[i], i < count, on stream (a cudaStream_t) and returns without waiting:
 * w == 1 is a device-to-device copy (nothing when dst == src), w == 0 a memset to +0 (an empty
 * shard contributes zeros even where its gradient is NaN), anything else the grid-stride kernel.
 * type is float16/bfloat16/float32/float64; dst is src or does not overlap it. Returns the
 * cudaError_t of the enqueue (0: enqueued; cudaErrorInvalidValue for another dtype). */
int ringo_cuda_ddp_scale(void* dst, const void* src, size_t count, ringoDataType_t type, double w, void* stream);
/* Loads the four kernels on the current device now: loaded lazily, a first launch could wait behind
 * a ring kernel spinning for a peer. Returns the cudaError_t (0: loaded). */
int ringo_cuda_ddp_scale_preload(void);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_CUDA_SCALE_H_ */
