/* ddp_scale.c — the DDP layer's host pre-scale dst[i] = w * src[i] in the gradient's own dtype (dst
 * may be src), before a bucket's sum. Part of the DDP layer on the public API: libc only, its own
 * float16/bfloat16 conversions (faster here than the shared per-element code of cuda_scale.h, which
 * test/test_ddp_scale.cc proves equal to it bit for bit). Run: make test (test_ddp, test_ddp_scale). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ddp/ddp_device.h"

/* float16 and bfloat16 go through float with round-to-nearest-even; float32 and float64 multiply
 * in double, rounded once. */

static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
  else if (exp != 0) bits = sign | ((exp + 112u) << 23) | (man << 13);
  else if (man == 0) bits = sign;
  else { /* subnormal: man * 2^-24 is exact in float */
    bits = f2u((float)man * (1.0f / 16777216.0f)) | sign;
  }
  return u2f(bits);
}

static uint16_t float_to_half(float f) {
  const uint32_t x = f2u(f);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | 0x7e00u; /* NaN */
  if (mag >= 0x477ff000u) return sign | 0x7c00u; /* rounds to infinity */
  if (mag < 0x38800000u) { /* below 2^-14: a subnormal half, in units of 2^-24, rounded to even */
    return sign | (uint16_t)nearbyintf(u2f(mag) * 16777216.0f);
  }
  uint32_t h = ((mag >> 23) - 112u) << 10 | ((mag & 0x7fffffu) >> 13);
  const uint32_t rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* a carry into the exponent is right */
  return (uint16_t)(sign | h);
}

static float bf16_to_float(uint16_t b) { return u2f((uint32_t)b << 16); }

static uint16_t float_to_bf16(float f) {
  const uint32_t x = f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

void ringo_ddp_host_scale(void* dst, const void* src, size_t n, ringoDataType_t t, double w) {
  const size_t esize = t == ringoFloat64 ? 8 : t == ringoFloat32 ? 4 : 2;
  if (n == 0) return;
  if (w == 1.0) {
    if (dst != src) memmove(dst, src, n * esize);
    return;
  }
  if (w == 0.0) { /* an empty shard: its (possibly 0/0) gradient contributes nothing */
    memset(dst, 0, n * esize);
    return;
  }
  size_t i;
  switch (t) {
    case ringoFloat32: {
      const float* s = src;
      float* o = dst;
      for (i = 0; i < n; i++) o[i] = (float)((double)s[i] * w); /* one correctly rounded product */
      break;
    }
    case ringoFloat64: {
      const double* s = src;
      double* o = dst;
      for (i = 0; i < n; i++) o[i] = s[i] * w;
      break;
    }
    case ringoFloat16: {
      const uint16_t* s = src;
      uint16_t* o = dst;
      for (i = 0; i < n; i++) o[i] = float_to_half((float)((double)half_to_float(s[i]) * w));
      break;
    }
    default: {
      const uint16_t* s = src;
      uint16_t* o = dst;
      for (i = 0; i < n; i++) o[i] = float_to_bf16((float)((double)bf16_to_float(s[i]) * w));
      break;
    }
  }
}
