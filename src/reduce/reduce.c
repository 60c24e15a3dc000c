/* reduce.c — the fused host reduce-copy: one vectorised loop per (dtype, op), compiled for baseline
 * x86-64, AVX2 and AVX-512 and picked at run time. Depends on core.h and elementwise.h (the math).
 * Tested by test/test_reduce.cc. Must be built with -O3 (gcc -O2 vectorises none of the loops). */
#include "reduce/reduce.h"

#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "include/elementwise.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define RINGO_REDUCE_X86 1
#include <immintrin.h>
#endif

/* Bytes of a block that stays in L1 between the loop that writes it and the copy that reads it. */
#ifndef L1_BLOCK
#define L1_BLOCK ((size_t)16 * 1024)
#endif

typedef void (*reduce_fn)(void* dst, const void* a, const void* b, size_t n, int divisor);

/* One element of each op; only avg uses the divisor, which every loop has in scope. */
#define CALL_sum(sfx, x, y) ringo_ew_sum_##sfx(x, y)
#define CALL_prod(sfx, x, y) ringo_ew_prod_##sfx(x, y)
#define CALL_max(sfx, x, y) ringo_ew_max_##sfx(x, y)
#define CALL_min(sfx, x, y) ringo_ew_min_##sfx(x, y)
#define CALL_avg(sfx, x, y) ringo_ew_avg_##sfx(x, y, divisor)

/* ---- integers, float32, float64: the element-wise op in a plain loop ----
 * No restrict: dst may be a or b (in place), and gcc's run-time overlap check lets that exact
 * alias take the vector path; only a partial overlap (which reduce.h rules out) would run the
 * scalar copy of the loop, still correctly. gcc vectorises these loops at -O3 only: at -O2 its
 * cost model refuses any loop that needs the overlap check. */
#define LOOP_PLAIN(isa, attr, op, sfx, T)                                                      \
  static attr void reduce_##op##_##sfx##_##isa(void* dst, const void* a, const void* b,        \
                                                 size_t n, int divisor) {                      \
    T* d = (T*)dst;                                                                            \
    const T* x = (const T*)a;                                                                  \
    const T* y = (const T*)b;                                                                  \
    (void)divisor;                                                                             \
    for (size_t i = 0; i < n; i++) d[i] = CALL_##op(sfx, x[i], y[i]);                          \
  }

/* ---- bfloat16: two elements per 32-bit word ----
 * Widening 16-bit lanes to 32-bit ones costs the vector loop more shuffles than arithmetic. A
 * bfloat16 is the top half of a float, so a trick that works in either byte order avoids them:
 * of a word holding two elements, w << 16 is one element as a float and w & 0xffff0000 the other.
 * Each is reduced with the float32 op and narrowed with ringo_ew_float_to_bf16, which also makes
 * NaNs quiet, so the widening can skip that step and the bits equal ringo_ew_<op>_bf16's. */
#define BF16_HALF(op, x, y, LANE) \
  ((uint32_t)ringo_ew_float_to_bf16(CALL_##op(f32, ringo_ew_u2f(LANE(x)), ringo_ew_u2f(LANE(y)))))
#define BF16_LOW(w) ((w) << 16)
#define BF16_HIGH(w) ((w) & 0xffff0000u)
#define BF16_PAIR(op, x, y) (BF16_HALF(op, x, y, BF16_LOW) | BF16_HALF(op, x, y, BF16_HIGH) << 16)

/* A word of two bfloat16s; memcpy because the pointers are only 2-byte aligned. */
static inline uint32_t load32(const char* p) {
  uint32_t u;
  memcpy(&u, p, 4);
  return u;
}

#define LOOP_BF16(isa, attr, op, sfx, T)                                                       \
  static attr void reduce_##op##_##sfx##_##isa(void* dst, const void* a, const void* b,        \
                                                 size_t n, int divisor) {                      \
    char* d = (char*)dst;                                                                      \
    const char* x = (const char*)a;                                                            \
    const char* y = (const char*)b;                                                            \
    const size_t words = n / 2;                                                                \
    (void)divisor;                                                                             \
    for (size_t i = 0; i < words; i++) {                                                       \
      const uint32_t r = BF16_PAIR(op, load32(x + 4 * i), load32(y + 4 * i));                  \
      memcpy(d + 4 * i, &r, 4);                                                                \
    }                                                                                          \
    if (n % 2) /* the odd last element */                                                      \
      ((T*)dst)[n - 1] = CALL_##op(sfx, ((const T*)a)[n - 1], ((const T*)b)[n - 1]);           \
  }

/* ---- float16: widen a block to float, reduce, narrow ----
 * Converting half <-> float on the bits costs ~15 vector instructions per element; x86's F16C does
 * it in one per 8 or 16 elements. So float16 runs in blocks that fit in L1: widen a and b into
 * float arrays (widen_f16_<isa>), apply the float32 op, narrow into dst. That is exactly
 * ringo_ew_<op>_f16, and test_reduce checks that the hardware conversions match the portable ones. */
#define F16_BLOCK 512

#define LOOP_F16(isa, attr, op, sfx, T)                                                        \
  static attr void reduce_##op##_##sfx##_##isa(void* dst, const void* a, const void* b,        \
                                                 size_t n, int divisor) {                      \
    float fa[F16_BLOCK] __attribute__((aligned(64)));                                          \
    float fb[F16_BLOCK] __attribute__((aligned(64)));                                          \
    (void)divisor;                                                                             \
    for (size_t off = 0; off < n; off += F16_BLOCK) {                                          \
      const size_t m = n - off < F16_BLOCK ? n - off : F16_BLOCK;                              \
      widen_f16_##isa(fa, (const T*)a + off, m);                                               \
      widen_f16_##isa(fb, (const T*)b + off, m);                                               \
      for (size_t j = 0; j < m; j++) fa[j] = CALL_##op(f32, fa[j], fb[j]);                     \
      narrow_f16_##isa((T*)dst + off, fa, m);                                                  \
    }                                                                                          \
  }

/* The portable conversions, vectorised by gcc; every variant uses them for its tail. */
#define DEFINE_F16_PORTABLE(isa, attr)                                                         \
  static attr void widen_f16_##isa(float* f, const uint16_t* h, size_t m) {                    \
    for (size_t j = 0; j < m; j++) f[j] = ringo_ew_half_to_float(h[j]);                        \
  }                                                                                            \
  static attr void narrow_f16_##isa(uint16_t* h, const float* f, size_t m) {                   \
    for (size_t j = 0; j < m; j++) h[j] = ringo_ew_float_to_half(f[j]);                        \
  }

/* ---- avg of 8- and 32-bit integers: the division in double ----
 * x86 has no vector integer division: one idiv per element made int32 avg several times slower
 * than sum (docs/performance.md). The wrapped sum s (|s| < 2^32) and the divisor d are exact in double.
 * When s / d is not an integer, every integer is at least 1/d away from it, and fl(s / d) is
 * within |s / d| * 2^-53 < 1/d of it: truncating fl(s / d) gives C's quotient, bit for bit
 * (test_reduce compares with ringo_ew_avg_<type>, divisors up to INT32_MAX, at every ISA level).
 * The quotient goes back through AVG_VIA_<type>: int32_t where it always fits (int8, uint8,
 * int32), which AVX2 converts in vectors; uint32's needs int64_t, which only AVX-512 converts in
 * vectors. */
#define AVG_VIA_i8 int32_t
#define AVG_VIA_u8 int32_t
#define AVG_VIA_i32 int32_t
#define AVG_VIA_u32 int64_t
#define LOOP_AVG_DOUBLE(isa, attr, op, sfx, T)                                                 \
  static attr void reduce_avg_##sfx##_##isa(void* dst, const void* a, const void* b, size_t n,  \
                                            int divisor) {                                     \
    T* d = (T*)dst;                                                                            \
    const T* x = (const T*)a;                                                                  \
    const T* y = (const T*)b;                                                                  \
    const double dd = (double)divisor;                                                         \
    for (size_t i = 0; i < n; i++)                                                             \
      d[i] = (T)(AVG_VIA_##sfx)((double)ringo_ew_sum_##sfx(x[i], y[i]) / dd);                  \
  }

/* Which loop each dtype uses. */
#define LOOP_KIND_i8 LOOP_PLAIN
#define LOOP_KIND_u8 LOOP_PLAIN
#define LOOP_KIND_i32 LOOP_PLAIN
#define LOOP_KIND_u32 LOOP_PLAIN
#define LOOP_KIND_i64 LOOP_PLAIN
#define LOOP_KIND_u64 LOOP_PLAIN
#define LOOP_KIND_f32 LOOP_PLAIN
#define LOOP_KIND_f64 LOOP_PLAIN
#define LOOP_KIND_f16 LOOP_F16
#define LOOP_KIND_bf16 LOOP_BF16

/* ... and for avg. */
#define AVG_KIND_i8 LOOP_AVG_DOUBLE
#define AVG_KIND_u8 LOOP_AVG_DOUBLE
#define AVG_KIND_i32 LOOP_AVG_DOUBLE
#define AVG_KIND_u32 LOOP_AVG_DOUBLE
#define AVG_KIND_i64 LOOP_PLAIN /* 64-bit sums are not exact in double */
#define AVG_KIND_u64 LOOP_PLAIN
#define AVG_KIND_f32 LOOP_PLAIN
#define AVG_KIND_f64 LOOP_PLAIN
#define AVG_KIND_f16 LOOP_F16
#define AVG_KIND_bf16 LOOP_BF16

/* All five ops of one dtype (KIND and AVG are expanded to their loop macros before they are
 * called), and their row of the [dtype][op] table. */
#define DEFINE_OPS(KIND, AVG, isa, attr, sfx, T) \
  KIND(isa, attr, sum, sfx, T)                   \
  KIND(isa, attr, prod, sfx, T)                  \
  KIND(isa, attr, max, sfx, T)                   \
  KIND(isa, attr, min, sfx, T)                   \
  AVG(isa, attr, avg, sfx, T)
#define DEFINE_TYPE(isa, attr, sfx, T) DEFINE_OPS(LOOP_KIND_##sfx, AVG_KIND_##sfx, isa, attr, sfx, T)
#define TABLE_ROW(isa, sfx, dtype)                                                             \
  [dtype] = {[ringoSum] = reduce_sum_##sfx##_##isa, [ringoProd] = reduce_prod_##sfx##_##isa,   \
             [ringoMax] = reduce_max_##sfx##_##isa, [ringoMin] = reduce_min_##sfx##_##isa,     \
             [ringoAvg] = reduce_avg_##sfx##_##isa},

/* Every loop of one instruction set and its table; DEFINE_TYPE_<isa> and TABLE_ROW_<isa> bind the
 * isa for RINGO_EW_TYPES, which passes (suffix, type, dtype). */
#define DEFINE_ISA(isa)                                                                        \
  RINGO_EW_TYPES(DEFINE_TYPE_##isa)                                                            \
  static const reduce_fn table_##isa[RINGO_NUM_TYPES][RINGO_NUM_OPS] = {                      \
      RINGO_EW_TYPES(TABLE_ROW_##isa)};

#define DEFINE_TYPE_base(sfx, T, dtype) DEFINE_TYPE(base, , sfx, T)
#define TABLE_ROW_base(sfx, T, dtype) TABLE_ROW(base, sfx, dtype)
DEFINE_F16_PORTABLE(base, )
DEFINE_ISA(base)

#ifdef RINGO_REDUCE_X86
/* The same loops for wider vectors. The library must run on any x86-64, so these are only called
 * when the CPU reports the features at run time. Only integer/float SIMD and F16C are enabled (no
 * fma), so every variant computes the same bits. */
#define ATTR_avx2 __attribute__((target("avx2,f16c")))
#define ATTR_avx512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,prefer-vector-width=512")))

DEFINE_F16_PORTABLE(tail_avx2, ATTR_avx2)
static ATTR_avx2 void widen_f16_avx2(float* f, const uint16_t* h, size_t m) {
  size_t j = 0;
  for (; j + 8 <= m; j += 8)
    _mm256_storeu_ps(f + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(h + j))));
  widen_f16_tail_avx2(f + j, h + j, m - j);
}
static ATTR_avx2 void narrow_f16_avx2(uint16_t* h, const float* f, size_t m) {
  size_t j = 0;
  for (; j + 8 <= m; j += 8)
    _mm_storeu_si128((__m128i*)(h + j),
                     _mm256_cvtps_ph(_mm256_loadu_ps(f + j), _MM_FROUND_TO_NEAREST_INT));
  narrow_f16_tail_avx2(h + j, f + j, m - j);
}

DEFINE_F16_PORTABLE(tail_avx512, ATTR_avx512)
static ATTR_avx512 void widen_f16_avx512(float* f, const uint16_t* h, size_t m) {
  size_t j = 0;
  for (; j + 16 <= m; j += 16)
    _mm512_storeu_ps(f + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(h + j))));
  widen_f16_tail_avx512(f + j, h + j, m - j);
}
static ATTR_avx512 void narrow_f16_avx512(uint16_t* h, const float* f, size_t m) {
  size_t j = 0;
  for (; j + 16 <= m; j += 16)
    _mm256_storeu_si256((__m256i*)(h + j),
                        _mm512_cvtps_ph(_mm512_loadu_ps(f + j), _MM_FROUND_TO_NEAREST_INT));
  narrow_f16_tail_avx512(h + j, f + j, m - j);
}

#define DEFINE_TYPE_avx2(sfx, T, dtype) DEFINE_TYPE(avx2, ATTR_avx2, sfx, T)
#define TABLE_ROW_avx2(sfx, T, dtype) TABLE_ROW(avx2, sfx, dtype)
#define DEFINE_TYPE_avx512(sfx, T, dtype) DEFINE_TYPE(avx512, ATTR_avx512, sfx, T)
#define TABLE_ROW_avx512(sfx, T, dtype) TABLE_ROW(avx512, sfx, dtype)
DEFINE_ISA(avx2)
DEFINE_ISA(avx512)
#endif

/* ---- picking a table ---- */
typedef const reduce_fn (*reduce_table)[RINGO_NUM_OPS];
enum { ISA_BASE = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };

static int cpu_isa(void) {
#ifdef RINGO_REDUCE_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("f16c"))
    return ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return ISA_AVX2;
#endif
  return ISA_BASE;
}

static reduce_table isa_table(int isa) {
#ifdef RINGO_REDUCE_X86
  if (isa == ISA_AVX512) return table_avx512;
  if (isa == ISA_AVX2) return table_avx2;
#endif
  (void)isa;
  return table_base;
}

/* The table in use; the first callers may race to store it, storing the same pointer. */
static reduce_table chosen_table;

static reduce_table pick_table(void) {
  reduce_table t = __atomic_load_n(&chosen_table, __ATOMIC_ACQUIRE);
  if (t == NULL) {
    t = isa_table(cpu_isa());
    __atomic_store_n(&chosen_table, t, __ATOMIC_RELEASE);
  }
  return t;
}

/* Testing hook (declared by test/test_reduce.cc): use loops of at most max_level (0 baseline,
 * 1 AVX2, 2 AVX-512), capped by what the CPU has; a negative level goes back to the best the CPU
 * has. Returns the level now in use. Not for use while another thread is inside ringo_reduce. */
int ringo_reduce_limit_isa(int max_level);
int ringo_reduce_limit_isa(int max_level) {
  int isa = cpu_isa();
  if (max_level >= 0 && max_level < isa) isa = max_level;
  __atomic_store_n(&chosen_table, isa_table(isa), __ATOMIC_RELEASE);
  return isa;
}

ringoResult_t ringo_reduce(void* dst, void* dst2, const void* a, const void* b, size_t count,
                           ringoDataType_t type, ringoRedOp_t op, int divisor) {
  if ((unsigned)type >= RINGO_NUM_TYPES)
    return ringo_fail(ringoInvalidArgument, "reduce: invalid datatype %d (valid: 0..%d)", (int)type,
                      RINGO_NUM_TYPES - 1);
  if ((unsigned)op >= RINGO_NUM_OPS)
    return ringo_fail(ringoInvalidArgument, "reduce: invalid reduction op %d (valid: 0..%d)", (int)op,
                      RINGO_NUM_OPS - 1);
  if (op == ringoAvg && divisor < 1)
    return ringo_fail(ringoInvalidArgument, "reduce: avg of %s needs a divisor >= 1, got %d",
                      ringo_type_name(type), divisor);
  if (count == 0) return ringoSuccess;
  if ((dst == NULL && dst2 == NULL) || a == NULL || b == NULL)
    return ringo_fail(ringoInvalidArgument, "reduce: NULL buffer (dst %p, dst2 %p, a %p, b %p) for %zu %s",
                      dst, dst2, a, b, count, ringo_type_name(type));
  const reduce_fn fn = pick_table()[type][op];
  if (dst2 == dst) dst2 = NULL;
  if (dst2 == NULL) {
    fn(dst, a, b, count, divisor);
    return ringoSuccess;
  }
  /* dst2 is a peer's FIFO slot, whose lines sit in the peer's cache since it last read them.
   * Vector stores must first fetch each line from there; memcpy's string copy writes whole lines
   * without fetching them. So each block is reduced into dst (or an L1 scratch block) and copied
   * on while hot, faster than one loop storing to both (docs/performance.md). */
  const size_t esize = ringo_type_size(type), per = L1_BLOCK / esize;
  _Alignas(64) unsigned char scratch[L1_BLOCK];
  for (size_t i = 0; i < count; i += per) {
    const size_t m = count - i < per ? count - i : per, off = i * esize;
    void* d = dst != NULL ? (void*)((char*)dst + off) : (void*)scratch;
    fn(d, (const char*)a + off, (const char*)b + off, m, divisor);
    memcpy((char*)dst2 + off, d, m * esize);
  }
  return ringoSuccess;
}

/* Copies in blocks so that, with two destinations, the second copy reads src from L1 instead of
 * from memory again; memcpy itself is already libc's fastest copy for this CPU. */
void ringo_copy2(void* dst, void* dst2, const void* src, size_t bytes) {
  char* d = (char*)dst;
  char* d2 = (char*)dst2;
  const char* s = (const char*)src;
  if (d == s) d = NULL; /* a copy onto itself is a no-op, and memcpy forbids it */
  if (d2 == s || d2 == d) d2 = NULL;
  if (d == NULL) d = d2, d2 = NULL;
  if (d == NULL || bytes == 0) return;
  if (d2 == NULL) {
    memcpy(d, s, bytes);
    return;
  }
  for (size_t off = 0; off < bytes; off += L1_BLOCK) {
    const size_t n = bytes - off < L1_BLOCK ? bytes - off : L1_BLOCK;
    memcpy(d + off, s + off, n);
    memcpy(d2 + off, s + off, n);
  }
}
