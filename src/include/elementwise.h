/* elementwise.h — ringo's per-element reduction math (sum/prod/max/min/avg of every dtype, fp16 and
 * bf16 <-> float on the bits), one header for C (src/reduce.c) and CUDA (__host__ __device__).
 * Needs <stdint.h>/<string.h>; RINGO_EW_TYPES names ringo.h's dtypes. Tested by test/test_reduce.cc. */
#ifndef RINGO_ELEMENTWISE_H_
#define RINGO_ELEMENTWISE_H_

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define RINGO_HD __host__ __device__
#else
#define RINGO_HD
#endif

/* Rules every function here follows, so the CPU and the GPU produce the same bits:
 * - Integers wrap modulo 2^bits like two's complement. Signed sum and prod are computed in the
 *   unsigned type of the same width, so there is no undefined overflow; the conversion back to
 *   the signed type is modulo 2^bits on gcc, clang and nvcc.
 * - float16 and bfloat16 are stored as uint16_t bits. Their ops widen to float (exact), apply the
 *   float32 op and round once to nearest-even. Float's 24-bit significand is at least 2p+2 bits
 *   for p = 11 (half) and p = 8 (bfloat16), so rounding to float first does not change the result:
 *   sum and prod come out correctly rounded.
 * - NaN payloads of arithmetic results are whatever the hardware gives (x86 keeps the first NaN
 *   operand's, CUDA gives a canonical NaN); only "it is a NaN" is part of the contract.
 * - Float conversions assume the default rounding mode (to nearest-even). Host code that includes
 *   this header must not contract a*b+c into an fma (C11 ISO modes default to -ffp-contract=off);
 *   under CUDA the arithmetic goes through the __f*_rn intrinsics, which are never contracted.
 * - max/min: max(a, b) = (a > b || a is NaN) ? a : b, min likewise with <. A NaN in either input
 *   gives a NaN (a's when both are NaN); ties, including +0 against -0, return b. The result is
 *   one of the inputs, bit for bit, except that float16/bfloat16 NaNs come out quiet.
 * - avg(a, b, d) = sum(a, b) / d with d >= 1 (the caller checks): integers divide the wrapped sum
 *   with C's truncating division (signed for signed types); floats divide the float sum. */

/* ---- float arithmetic that CUDA must not contract or approximate ---- */
#if defined(__CUDA_ARCH__)
#define RINGO_EW_FADD(x, y) __fadd_rn((x), (y))
#define RINGO_EW_FMUL(x, y) __fmul_rn((x), (y))
#define RINGO_EW_FDIV(x, y) __fdiv_rn((x), (y))
#define RINGO_EW_DADD(x, y) __dadd_rn((x), (y))
#define RINGO_EW_DMUL(x, y) __dmul_rn((x), (y))
#define RINGO_EW_DDIV(x, y) __ddiv_rn((x), (y))
#else
#define RINGO_EW_FADD(x, y) ((x) + (y))
#define RINGO_EW_FMUL(x, y) ((x) * (y))
#define RINGO_EW_FDIV(x, y) ((x) / (y))
#define RINGO_EW_DADD(x, y) ((x) + (y))
#define RINGO_EW_DMUL(x, y) ((x) * (y))
#define RINGO_EW_DDIV(x, y) ((x) / (y))
#endif

static inline RINGO_HD uint32_t ringo_ew_f2u(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u; /* memcpy is the defined way to reinterpret in C and C++; compilers fold it away */
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

static inline RINGO_HD float ringo_ew_u2f(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/* cond ? x : y through a mask. With a plain ?: gcc sinks the float operation that feeds one side
 * into a branch, and under -ftrapping-math (the default) it then cannot if-convert the loop, so
 * it does not vectorise it at all. */
static inline RINGO_HD uint32_t ringo_ew_blend(int cond, uint32_t x, uint32_t y) {
  const uint32_t mask = 0u - (uint32_t)(cond != 0);
  return (x & mask) | (y & ~mask);
}

/* ---- float16 (IEEE binary16: 1 sign, 5 exponent bits biased by 15, 10 mantissa bits) ----
 * Written without branches (only selects) so gcc vectorises loops that call it. */

/* Exact: every half is a float. NaNs keep sign and payload and come out quiet. */
static inline RINGO_HD float ringo_ew_half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = h & 0x7c00u;
  const uint32_t mant = h & 0x03ffu;
  /* Normal numbers: move exponent and mantissa up by 13 bits and rebias 15 -> 127. */
  const uint32_t normal = ((uint32_t)(h & 0x7fffu) << 13) + ((127u - 15u) << 23);
  /* Inf keeps a zero mantissa; a NaN gets the quiet bit set. */
  const uint32_t special = 0x7f800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u);
  /* Zero and subnormals are mant * 2^-24: an exact int->float conversion and an exact scaling
   * (the product is a normal float, so flush-to-zero modes cannot touch it). */
  const float tiny = RINGO_EW_FMUL((float)(int32_t)mant, 5.9604644775390625e-8f);
  const uint32_t big = ringo_ew_blend(exp == 0x7c00u, special, normal);
  const uint32_t bits = ringo_ew_blend(exp == 0, ringo_ew_f2u(tiny), big);
  return ringo_ew_u2f(bits | sign);
}

/* Rounds to nearest-even; overflow (|f| >= 65520) gives Inf; a NaN stays a NaN, quiet, keeping
 * its sign and the top 9 bits of its payload. */
static inline RINGO_HD uint16_t ringo_ew_float_to_half(float f) {
  const uint32_t u = ringo_ew_f2u(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  const uint32_t nan = 0x7e00u | ((abs >> 13) & 0x03ffu);
  /* Normal halves: rebias 127 -> 15, then round the 13 dropped bits to nearest-even by adding
   * 0xfff plus the lowest kept bit; a carry out of the mantissa correctly bumps the exponent,
   * and anything that lands at or beyond the Inf encoding is clamped to Inf. The subtraction
   * wraps for small inputs, whose result the subnormal select below replaces. */
  uint32_t normal = (abs - ((127u - 15u) << 23) + 0x0fffu + ((abs >> 13) & 1u)) >> 13;
  normal = normal < 0x7c00u ? normal : 0x7c00u;
  /* |f| < 2^-14: adding 0.5f, whose ulp is 2^-24 (the half subnormal step), makes the float
   * adder round |f| to a multiple of 2^-24 (nearest-even); the low bits are then the half
   * encoding, 0x400 included when it rounds up to the smallest normal. */
  const uint32_t subnormal = ringo_ew_f2u(RINGO_EW_FADD(ringo_ew_u2f(abs), 0.5f)) - 0x3f000000u;
  const uint32_t number = ringo_ew_blend(abs < 0x38800000u, subnormal, normal);
  const uint32_t bits = ringo_ew_blend(abs > 0x7f800000u, nan, number);
  return (uint16_t)(bits | sign);
}

/* ---- bfloat16 (the top 16 bits of a float) ---- */

/* Exact. NaNs keep sign and payload and come out quiet. */
static inline RINGO_HD float ringo_ew_bf16_to_float(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  const uint32_t quiet = (h & 0x7fffu) > 0x7f80u ? 0x00400000u : 0u;
  return ringo_ew_u2f(bits | quiet);
}

/* Rounds to nearest-even on the 16 dropped bits; overflow carries into Inf by itself, float
 * subnormals round like any other value. A NaN stays a NaN, quiet, with its sign and top payload. */
static inline RINGO_HD uint16_t ringo_ew_float_to_bf16(float f) {
  const uint32_t u = ringo_ew_f2u(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/* ---- the ops ----
 * Every dtype: X(suffix, storage type, ringoDataType_t value). reduce.c and the CUDA kernels
 * generate one loop per (dtype, op) from this list. */
#define RINGO_EW_TYPES(X)                                                               \
  X(i8, int8_t, ringoInt8) X(u8, uint8_t, ringoUint8) X(i32, int32_t, ringoInt32)       \
  X(u32, uint32_t, ringoUint32) X(i64, int64_t, ringoInt64) X(u64, uint64_t, ringoUint64) \
  X(f16, uint16_t, ringoFloat16) X(f32, float, ringoFloat32) X(f64, double, ringoFloat64) \
  X(bf16, uint16_t, ringoBfloat16)

/* Integers. U is the unsigned type of T's width; W, at least 32 bits wide with T's signedness,
 * holds both the sum and the int divisor (which may not fit in T: 200 ranks for int8). */
#define RINGO_EW_INT_OPS(sfx, T, U, W)                                                         \
  static inline RINGO_HD T ringo_ew_sum_##sfx(T a, T b) { return (T)(U)((U)a + (U)b); }        \
  static inline RINGO_HD T ringo_ew_prod_##sfx(T a, T b) { return (T)(U)((U)a * (U)b); }       \
  static inline RINGO_HD T ringo_ew_max_##sfx(T a, T b) { return a > b ? a : b; }              \
  static inline RINGO_HD T ringo_ew_min_##sfx(T a, T b) { return a < b ? a : b; }              \
  static inline RINGO_HD T ringo_ew_avg_##sfx(T a, T b, int divisor) {                         \
    return (T)((W)ringo_ew_sum_##sfx(a, b) / (W)divisor);                                      \
  }

RINGO_EW_INT_OPS(i8, int8_t, uint8_t, int32_t)
RINGO_EW_INT_OPS(u8, uint8_t, uint8_t, uint32_t)
RINGO_EW_INT_OPS(i32, int32_t, uint32_t, int32_t)
RINGO_EW_INT_OPS(u32, uint32_t, uint32_t, uint32_t)
RINGO_EW_INT_OPS(i64, int64_t, uint64_t, int64_t)
RINGO_EW_INT_OPS(u64, uint64_t, uint64_t, uint64_t)

/* float32 and float64: ADD/MUL/DIV are the non-contracted operations above. */
#define RINGO_EW_FLOAT_OPS(sfx, T, ADD, MUL, DIV)                                               \
  static inline RINGO_HD T ringo_ew_sum_##sfx(T a, T b) { return ADD(a, b); }                   \
  static inline RINGO_HD T ringo_ew_prod_##sfx(T a, T b) { return MUL(a, b); }                  \
  static inline RINGO_HD T ringo_ew_max_##sfx(T a, T b) { return (a > b || a != a) ? a : b; }   \
  static inline RINGO_HD T ringo_ew_min_##sfx(T a, T b) { return (a < b || a != a) ? a : b; }   \
  static inline RINGO_HD T ringo_ew_avg_##sfx(T a, T b, int divisor) {                          \
    return DIV(ADD(a, b), (T)divisor);                                                          \
  }

RINGO_EW_FLOAT_OPS(f32, float, RINGO_EW_FADD, RINGO_EW_FMUL, RINGO_EW_FDIV)
RINGO_EW_FLOAT_OPS(f64, double, RINGO_EW_DADD, RINGO_EW_DMUL, RINGO_EW_DDIV)

/* float16 and bfloat16: widen to float (exact), apply the float32 op, narrow once. For max/min
 * the narrowing is exact too, so they return the chosen input, with a NaN made quiet. */
#define RINGO_EW_HALF_OP(op, sfx, TO_F, FROM_F)                                               \
  static inline RINGO_HD uint16_t ringo_ew_##op##_##sfx(uint16_t a, uint16_t b) {             \
    return FROM_F(ringo_ew_##op##_f32(TO_F(a), TO_F(b)));                                     \
  }
#define RINGO_EW_HALF_OPS(sfx, TO_F, FROM_F)                                                  \
  RINGO_EW_HALF_OP(sum, sfx, TO_F, FROM_F)                                                    \
  RINGO_EW_HALF_OP(prod, sfx, TO_F, FROM_F)                                                   \
  RINGO_EW_HALF_OP(max, sfx, TO_F, FROM_F)                                                    \
  RINGO_EW_HALF_OP(min, sfx, TO_F, FROM_F)                                                    \
  static inline RINGO_HD uint16_t ringo_ew_avg_##sfx(uint16_t a, uint16_t b, int divisor) {   \
    return FROM_F(ringo_ew_avg_f32(TO_F(a), TO_F(b), divisor));                               \
  }

RINGO_EW_HALF_OPS(f16, ringo_ew_half_to_float, ringo_ew_float_to_half)
RINGO_EW_HALF_OPS(bf16, ringo_ew_bf16_to_float, ringo_ew_float_to_bf16)

#endif /* RINGO_ELEMENTWISE_H_ */
