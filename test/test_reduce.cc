// test_reduce.cc — ringo_reduce / ringo_copy2 and the element-wise math of elementwise.h, checked
// bit for bit against slow, independent references (frexp/ldexp rounding, __int128, __float128).
// Needs src/reduce.c, src/core.c; run ./build/test/test_reduce (every loop variant the CPU has).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

extern "C" {
#include "core/core.h"
#include "reduce/reduce.h"  // also declares the testing hook ringo_reduce_limit_isa
}
#include "include/elementwise.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Independent references for the 16-bit floats: decode with ldexp, round with frexp and a
// hand-written round-half-to-even on an exact double, encode field by field.

struct HalfFormat {
  int mant_bits;       // stored mantissa bits (10 for half, 7 for bfloat16)
  int exp_bits;        // exponent bits (5, 8)
  uint16_t quiet_bit;  // top mantissa bit
  int emin() const { return 2 - (1 << (exp_bits - 1)); }  // exponent of the smallest normal
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint16_t exp_mask() const { return (uint16_t)(((1u << exp_bits) - 1) << mant_bits); }
  uint16_t mant_mask() const { return (uint16_t)((1u << mant_bits) - 1); }
  double max_finite() const { return std::ldexp(2.0 - std::ldexp(1.0, -mant_bits), bias()); }
};
const HalfFormat kHalf = {10, 5, 0x0200};
const HalfFormat kBf16 = {7, 8, 0x0040};

bool ref_is_nan(const HalfFormat& f, uint16_t h) {
  return (h & f.exp_mask()) == f.exp_mask() && (h & f.mant_mask()) != 0;
}

double ref_decode(const HalfFormat& f, uint16_t h) {
  const int e = (h & f.exp_mask()) >> f.mant_bits;
  const int m = h & f.mant_mask();
  double v;
  if (e == 0)
    v = std::ldexp((double)m, f.emin() - f.mant_bits);
  else if (e == (1 << f.exp_bits) - 1)
    v = m ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else
    v = std::ldexp((double)(m + (1 << f.mant_bits)), e - f.bias() - f.mant_bits);
  return (h & 0x8000) ? -v : v;
}

// x rounded to the format (nearest, ties to even), as a double; +-Inf past the largest finite.
double ref_round(const HalfFormat& f, double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  int e;
  std::frexp(x, &e);                             // |x| in [2^(e-1), 2^e)
  const int binade = std::max(e - 1, f.emin());  // subnormals share the smallest normal's step
  const int step_exp = binade - f.mant_bits;
  const double q = std::ldexp(std::fabs(x), -step_exp);  // exact: only the exponent changes
  double r = std::floor(q);
  const double frac = q - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  const double v = std::ldexp(r, step_exp);
  if (v > f.max_finite()) return std::copysign(INFINITY, x);
  return std::copysign(v, x);
}

// Bits of a value the format holds exactly (finite or infinite, not NaN).
uint16_t ref_encode(const HalfFormat& f, double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  v = std::fabs(v);
  if (std::isinf(v)) return sign | f.exp_mask();
  if (v == 0) return sign;
  int e;
  const double fr = std::frexp(v, &e);
  if (e - 1 < f.emin()) return sign | (uint16_t)std::ldexp(v, f.mant_bits - f.emin());
  const uint16_t mant = (uint16_t)(std::ldexp(fr, f.mant_bits + 1) - (1 << f.mant_bits));
  return sign | (uint16_t)((e - 1 + f.bias()) << f.mant_bits) | mant;
}

uint16_t ref_from_double(const HalfFormat& f, double x) { return ref_encode(f, ref_round(f, x)); }

uint32_t float_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
float bits_float(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

// ---------------------------------------------------------------------------------------------
// Conversions.

void check_to_float(const HalfFormat& f, float (*to_float)(uint16_t), const char* name) {
  for (uint32_t h = 0; h < 65536; h++) {
    const float got = to_float((uint16_t)h);
    const double want = ref_decode(f, (uint16_t)h);
    if (std::isnan(want)) {
      // A NaN stays a NaN, quiet, with its sign and payload (shifted into the float mantissa).
      const uint32_t g = float_bits(got);
      ASSERT_TRUE(std::isnan(got)) << name << " " << std::hex << h;
      ASSERT_TRUE(g & 0x00400000u) << name << " NaN not quiet: " << std::hex << h;
      ASSERT_EQ(g >> 31, h >> 15) << name << " NaN sign: " << std::hex << h;
      ASSERT_EQ((g >> (23 - f.mant_bits)) & (f.mant_mask() >> 1), h & (f.mant_mask() >> 1u))
          << name << " NaN payload: " << std::hex << h;
    } else {
      ASSERT_EQ(float_bits(got), float_bits((float)want)) << name << " " << std::hex << h;
    }
  }
}

TEST(Conversions, HalfToFloatAll65536) { check_to_float(kHalf, ringo_ew_half_to_float, "half"); }
TEST(Conversions, Bf16ToFloatAll65536) { check_to_float(kBf16, ringo_ew_bf16_to_float, "bf16"); }

void expect_from_float(const HalfFormat& f, uint16_t (*from_float)(float), uint32_t u) {
  const float x = bits_float(u);
  const uint16_t got = from_float(x);
  if (std::isnan(x)) {
    const uint16_t want = (uint16_t)((u >> 16) & 0x8000) | f.exp_mask() | f.quiet_bit |
                          (uint16_t)((u >> (23 - f.mant_bits)) & f.mant_mask());
    ASSERT_EQ(got, want) << "NaN " << std::hex << u;
  } else {
    ASSERT_EQ(got, ref_from_double(f, x)) << std::hex << u << " = " << x;
  }
}

// Every float whose bits above the rounding position take all values, combined with the
// patterns below it that decide rounding: zero, smallest, just below / at / above the tie,
// largest, plus random ones. Subnormal results round higher up, inside the enumerated bits.
void check_from_float(const HalfFormat& f, uint16_t (*from_float)(float)) {
  const int low = 23 - f.mant_bits;  // dropped bits of a normal result
  const uint32_t tie = 1u << (low - 1);
  std::mt19937 rng(7);
  const uint32_t patterns[] = {0, 1, tie - 1, tie, tie + 1, (1u << low) - 1, 0, 0};
  for (uint32_t hi = 0; hi < (1u << (32 - low)); hi++) {
    for (uint32_t k = 0; k < sizeof patterns / sizeof patterns[0]; k++) {
      const uint32_t lo = k >= 6 ? rng() & ((1u << low) - 1) : patterns[k];
      expect_from_float(f, from_float, (hi << low) | lo);
      if (testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(Conversions, FloatToHalfExhaustiveRoundingClasses) {
  check_from_float(kHalf, ringo_ew_float_to_half);
}
TEST(Conversions, FloatToBf16ExhaustiveRoundingClasses) {
  check_from_float(kBf16, ringo_ew_float_to_bf16);
}

TEST(Conversions, KnownHalfValues) {
  struct {
    float x;
    uint16_t h;
  } cases[] = {
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},
      {65519.99f, 0x7bff},
      {65520.0f, 0x7c00},
      {1e10f, 0x7c00},
      {-1e10f, 0xfc00},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {std::ldexp(1.0f, -14), 0x0400},
      {std::ldexp(1.0f, -24), 0x0001},
      {std::ldexp(1.0f, -25), 0x0000},  // tie -> even 0
      {std::ldexp(3.0f, -26), 0x0001},
      {std::ldexp(3.0f, -25), 0x0002},  // tie -> even 2
      {std::ldexp(1023.0f, -24), 0x03ff},
      {std::ldexp(2047.0f, -25), 0x0400},  // tie up into normal
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},
      {1.0f + std::ldexp(3.0f, -11), 0x3c02},
      {std::numeric_limits<float>::max(), 0x7c00},
      {std::numeric_limits<float>::denorm_min(), 0x0000},
  };
  for (const auto& c : cases) EXPECT_EQ(ringo_ew_float_to_half(c.x), c.h) << c.x;
  EXPECT_EQ(ringo_ew_float_to_half(NAN) & 0x7e00, 0x7e00);
  EXPECT_EQ(ringo_ew_float_to_half(bits_float(0x7f800001u)), 0x7e00);  // signalling -> quiet, not Inf
  EXPECT_EQ(ringo_ew_half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(ringo_ew_half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(float_bits(ringo_ew_half_to_float(0x7c01)), 0x7fc02000u);  // sNaN comes out quiet
}

TEST(Conversions, KnownBf16Values) {
  struct {
    uint32_t f;
    uint16_t h;
  } cases[] = {
      {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80},  // 1 + 2^-8: tie -> even
      {0x3f818000u, 0x3f82}, {0x3f808001u, 0x3f81},  // tie -> even up; just above tie
      {0x7f7fffffu, 0x7f80}, {0x7f7f7fffu, 0x7f7f},  // float max overflows to Inf
      {0x7f7f8000u, 0x7f80}, {0xff7fffffu, 0xff80},  // tie at the top goes to Inf
      {0x00008000u, 0x0000}, {0x00018000u, 0x0002},  // float subnormal ties
      {0x00000001u, 0x0000}, {0x80000000u, 0x8000}, {0x7f800000u, 0x7f80},
      {0x7f800001u, 0x7fc0}, {0xffc00001u, 0xffc0},  // NaNs stay NaN, quiet, sign kept
  };
  for (const auto& c : cases) EXPECT_EQ(ringo_ew_float_to_bf16(bits_float(c.f)), c.h) << std::hex << c.f;
  EXPECT_EQ(float_bits(ringo_ew_bf16_to_float(0x7f81)), 0x7fc10000u);
  EXPECT_EQ(float_bits(ringo_ew_bf16_to_float(0x0001)), 0x00010000u);  // subnormal, exact
}

// ---------------------------------------------------------------------------------------------
// References for the ops, one per dtype family. An Expect is exact bits, or "some quiet NaN"
// where the payload of an arithmetic NaN is the hardware's business.

struct Expect {
  uint64_t bits;
  bool any_nan;
};

template <typename T>
uint64_t to_bits(T v) {
  uint64_t u = 0;
  memcpy(&u, &v, sizeof v);
  return u;
}

// v modulo 2^bits, as T (two's complement for signed T), computed on __int128.
template <typename T>
T wrap(__int128 v) {
  const __int128 m = (__int128)1 << (8 * sizeof(T));
  __int128 r = v % m;
  if (r < 0) r += m;
  if (std::is_signed<T>::value && r >= m / 2) r -= m;
  return (T)r;
}

template <typename T>
Expect ref_int(ringoRedOp_t op, T a, T b, int d) {
  __int128 prod;
  if (std::is_same<T, uint64_t>::value)  // the only product that does not fit a signed __int128
    prod = (__int128)(((unsigned __int128)(uint64_t)a * (uint64_t)b) & ~(uint64_t)0);
  else
    prod = (__int128)a * (__int128)b;
  const T sum = wrap<T>((__int128)a + (__int128)b);
  switch (op) {
    case ringoSum:
      return {to_bits(sum), false};
    case ringoProd:
      return {to_bits(wrap<T>(prod)), false};
    case ringoMax:
      return {to_bits(a > b ? a : b), false};
    case ringoMin:
      return {to_bits(a < b ? a : b), false};
    default:
      return {to_bits((T)((__int128)sum / d)), false};  // C++ division truncates
  }
}

// max/min rule of elementwise.h: a NaN a wins, then a NaN b, else the comparison; ties give b.
template <typename T>
bool pick_a(ringoRedOp_t op, T a, T b) {
  if (std::isnan(a)) return true;
  if (std::isnan(b)) return false;
  return op == ringoMax ? a > b : a < b;
}

// float32: exact in double, rounded once (53 >= 2*24+2 bits, so double rounding is harmless).
Expect ref_f32(ringoRedOp_t op, float a, float b, int d) {
  float r;
  switch (op) {
    case ringoSum:
      r = (float)((double)a + (double)b);
      break;
    case ringoProd:
      r = (float)((double)a * (double)b);
      break;
    case ringoMax:
    case ringoMin:
      return {to_bits(pick_a(op, a, b) ? a : b), false};
    default:
      r = (float)((double)(float)((double)a + (double)b) / d);
      break;
  }
  return {to_bits(r), std::isnan(r)};
}

// float64: the same through __float128 (113 >= 2*53+2 bits).
Expect ref_f64(ringoRedOp_t op, double a, double b, int d) {
  double r;
  switch (op) {
    case ringoSum:
      r = (double)((__float128)a + (__float128)b);
      break;
    case ringoProd:
      r = (double)((__float128)a * (__float128)b);
      break;
    case ringoMax:
    case ringoMin:
      return {to_bits(pick_a(op, a, b) ? a : b), false};
    default:
      r = (double)((__float128)(double)((__float128)a + (__float128)b) / (__float128)d);
      break;
  }
  return {to_bits(r), std::isnan(r)};
}

// float16 / bfloat16: sum and prod are exact in double and rounded once by ref_round; avg is
// specified as float arithmetic (float sum, float division) and then one rounding.
Expect ref_half(const HalfFormat& f, ringoRedOp_t op, uint16_t a, uint16_t b, int d) {
  const double x = ref_decode(f, a), y = ref_decode(f, b);
  double r;
  switch (op) {
    case ringoSum:
      r = x + y;
      break;
    case ringoProd:
      r = x * y;
      break;
    case ringoMax:
    case ringoMin: {
      const uint16_t pick = pick_a(op, x, y) ? a : b;
      return {(uint64_t)(ref_is_nan(f, pick) ? pick | f.quiet_bit : pick), false};
    }
    default:
      r = (double)(float)((double)(float)(x + y) / d);
      break;
  }
  if (std::isnan(r)) return {0, true};
  return {ref_from_double(f, r), false};
}

Expect reference(ringoDataType_t type, ringoRedOp_t op, const void* a, const void* b, int d) {
#define REF_LOAD(T, p)       \
  ([&] {                     \
    T v;                     \
    memcpy(&v, p, sizeof v); \
    return v;                \
  }())
  switch (type) {
    case ringoInt8:
      return ref_int(op, REF_LOAD(int8_t, a), REF_LOAD(int8_t, b), d);
    case ringoUint8:
      return ref_int(op, REF_LOAD(uint8_t, a), REF_LOAD(uint8_t, b), d);
    case ringoInt32:
      return ref_int(op, REF_LOAD(int32_t, a), REF_LOAD(int32_t, b), d);
    case ringoUint32:
      return ref_int(op, REF_LOAD(uint32_t, a), REF_LOAD(uint32_t, b), d);
    case ringoInt64:
      return ref_int(op, REF_LOAD(int64_t, a), REF_LOAD(int64_t, b), d);
    case ringoUint64:
      return ref_int(op, REF_LOAD(uint64_t, a), REF_LOAD(uint64_t, b), d);
    case ringoFloat16:
      return ref_half(kHalf, op, REF_LOAD(uint16_t, a), REF_LOAD(uint16_t, b), d);
    case ringoFloat32:
      return ref_f32(op, REF_LOAD(float, a), REF_LOAD(float, b), d);
    case ringoFloat64:
      return ref_f64(op, REF_LOAD(double, a), REF_LOAD(double, b), d);
    default:
      return ref_half(kBf16, op, REF_LOAD(uint16_t, a), REF_LOAD(uint16_t, b), d);
  }
#undef REF_LOAD
}

// Is this element a quiet NaN of its dtype? (Integers never are.)
bool is_quiet_nan(ringoDataType_t type, const void* p) {
  uint64_t u = 0;
  memcpy(&u, p, ringo_type_size(type));
  switch (type) {
    case ringoFloat16:
      return ref_is_nan(kHalf, (uint16_t)u) && (u & kHalf.quiet_bit);
    case ringoBfloat16:
      return ref_is_nan(kBf16, (uint16_t)u) && (u & kBf16.quiet_bit);
    case ringoFloat32:
      return (u & 0x7fc00000u) == 0x7fc00000u;
    case ringoFloat64:
      return (u & 0x7ff8000000000000ull) == 0x7ff8000000000000ull;
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Inputs: two pools of kPool elements (specials, random bits, moderate values that make ties and
// exact results likely), repeated to any count. kPool is prime so pairs fall on every vector lane.

constexpr size_t kPool = 4099;

template <typename T>
void put(std::vector<uint8_t>& pool, size_t i, T v) {
  memcpy(pool.data() + i * sizeof(T), &v, sizeof(T));
}

std::vector<uint8_t> make_pool(ringoDataType_t type, uint64_t seed) {
  const size_t es = ringo_type_size(type);
  std::vector<uint8_t> pool(kPool * es);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < kPool; i++) {
    const uint64_t bits = rng();
    const int kind = (int)(rng() % 4);  // 0: raw bits, 1-2: moderate values, 3: small integers
    const double moderate = (double)(int64_t)(rng() % 20001 - 10000) / 64.0;
    const double small = (double)(int64_t)(rng() % 9 - 4);
    const double v = kind == 3 ? small : moderate;
    switch (type) {
      case ringoFloat16:
        put(pool, i, kind ? ref_from_double(kHalf, v) : (uint16_t)bits);
        break;
      case ringoBfloat16:
        put(pool, i, kind ? ref_from_double(kBf16, v) : (uint16_t)bits);
        break;
      case ringoFloat32:
        put(pool, i, kind ? (float)v : bits_float((uint32_t)bits));
        break;
      case ringoFloat64: {
        double x;
        memcpy(&x, &bits, 8);
        put(pool, i, kind ? v : x);
        break;
      }
      default: {  // integers: raw bits, or small values of either sign (low bytes, little-endian)
        const int64_t s = (int64_t)(rng() % 41) - 20;
        memcpy(pool.data() + i * es, kind >= 2 ? (const void*)&s : (const void*)&bits, es);
      }
    }
  }
  // Specials at the front, so every count >= 16 meets them.
  const uint64_t ones = ~0ull;
  const uint64_t int_specials[] = {0,
                                   1,
                                   ones,
                                   0x7full,
                                   0x80ull,
                                   0x7fffffffull,
                                   0x80000000ull,
                                   0x7fffffffffffffffull,
                                   0x8000000000000000ull,
                                   0xffull};
  const uint16_t half_specials[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x7bff, 0xfbff,
                                    0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x6800, 0x3c01, 0x8001};
  const uint16_t bf16_specials[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x7f7f, 0xff7f,
                                    0x0001, 0x007f, 0x0080, 0x3f80, 0xbf80, 0x4b00, 0x3f81, 0x8001};
  const float f32_specials[] = {0.0f,
                                -0.0f,
                                INFINITY,
                                -INFINITY,
                                NAN,
                                bits_float(0x7f800001u),
                                std::numeric_limits<float>::max(),
                                -std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::min(),
                                std::numeric_limits<float>::denorm_min(),
                                1.0f,
                                -1.0f,
                                16777216.0f,
                                1.0f};
  for (size_t i = 0; i < 16; i++) {
    const size_t at = (i * 7 + (size_t)seed) % 16;  // shuffle so specials meet each other
    switch (type) {
      case ringoFloat16:
        put(pool, at, half_specials[i]);
        break;
      case ringoBfloat16:
        put(pool, at, bf16_specials[i]);
        break;
      case ringoFloat32:
        put(pool, at, f32_specials[i % 14]);
        break;
      case ringoFloat64:
        put(pool, at, (double)f32_specials[i % 14]);
        break;
      default:
        memcpy(pool.data() + at * es, &int_specials[i % 10], es);
    }
  }
  return pool;
}

// A buffer with guard bytes around the elements, aligned or shifted by one element.
struct Buffer {
  std::vector<uint8_t> mem;
  size_t off;
  size_t bytes;
  static constexpr uint8_t kGuard = 0xa5;
  static constexpr size_t kPad = 128;
  Buffer(size_t count, size_t es, bool misalign)
      : mem(count * es + 2 * kPad, kGuard), bytes(count * es) {
    const uintptr_t base = (uintptr_t)mem.data();
    off = (64 - base % 64) % 64 + (misalign ? es : 0);  // 64-aligned start, or one element past it
  }
  uint8_t* data() { return mem.data() + off; }
  void fill(const std::vector<uint8_t>& pool) {
    for (size_t done = 0; done < bytes; done += pool.size())
      memcpy(data() + done, pool.data(), std::min(pool.size(), bytes - done));
  }
  bool guards_intact() const {
    for (size_t i = 0; i < mem.size(); i++)
      if ((i < off || i >= off + bytes) && mem[i] != kGuard) return false;
    return true;
  }
};

struct Pools {
  std::vector<uint8_t> a, b;
  std::vector<Expect> expect;
};

Pools make_pools(ringoDataType_t type, ringoRedOp_t op, int divisor) {
  Pools p{make_pool(type, 1), make_pool(type, 2), {}};
  const size_t es = ringo_type_size(type);
  for (size_t k = 0; k < kPool; k++)
    p.expect.push_back(reference(type, op, &p.a[k * es], &p.b[k * es], divisor));
  return p;
}

// Every element of got against the reference; reports the first few mismatches.
void check_result(ringoDataType_t type, const Pools& p, const uint8_t* got, size_t count,
                  const char* what) {
  const size_t es = ringo_type_size(type);
  int bad = 0;
  for (size_t i = 0; i < count && bad < 5; i++) {
    const Expect& e = p.expect[i % kPool];
    const uint8_t* g = got + i * es;
    const bool ok = e.any_nan ? is_quiet_nan(type, g) : memcmp(g, &e.bits, es) == 0;
    if (!ok) {
      uint64_t gb = 0, ab = 0, bb = 0;
      memcpy(&gb, g, es);
      memcpy(&ab, &p.a[(i % kPool) * es], es);
      memcpy(&bb, &p.b[(i % kPool) * es], es);
      ADD_FAILURE() << what << ": element " << i << " of " << count << std::hex << ": a=0x" << ab
                    << " b=0x" << bb << " got 0x" << gb << " want 0x" << e.bits
                    << (e.any_nan ? " (any quiet NaN)" : "");
      bad++;
    }
  }
}

// kSendOnly: no dst, the result only goes to dst2 (a ring step that reduces into the send slot).
enum Layout { kOutOfPlace, kInPlaceA, kInPlaceB, kSendOnly };

// One call of ringo_reduce in one layout; checks dst, dst2 and the guards.
void run_case(ringoDataType_t type, ringoRedOp_t op, int divisor, const Pools& p, size_t count,
              Layout layout, bool misalign, bool with_dst2) {
  const size_t es = ringo_type_size(type);
  Buffer a(count, es, misalign), b(count, es, misalign), out(count, es, misalign),
      out2(count, es, misalign);
  a.fill(p.a);
  b.fill(p.b);
  if (layout == kSendOnly) with_dst2 = true;
  void* dst = layout == kInPlaceA   ? a.data()
              : layout == kInPlaceB ? b.data()
              : layout == kSendOnly ? nullptr
                                    : out.data();
  const std::string what = std::string(ringo_type_name(type)) + " " + ringo_op_name(op) + " count " +
                           std::to_string(count) + " divisor " + std::to_string(divisor) +
                           (layout == kInPlaceA   ? " dst==a"
                            : layout == kInPlaceB ? " dst==b"
                            : layout == kSendOnly ? " dst NULL"
                                                  : " dst!=a,b") +
                           (misalign ? " misaligned" : " aligned") + (with_dst2 ? " +dst2" : "");
  ASSERT_EQ(
      ringo_reduce(dst, with_dst2 ? out2.data() : nullptr, a.data(), b.data(), count, type, op, divisor),
      ringoSuccess)
      << what;
  check_result(type, p, (const uint8_t*)(dst != nullptr ? dst : out2.data()), count, what.c_str());
  if (layout == kSendOnly) {
    EXPECT_TRUE(out2.guards_intact()) << what << ": wrote outside dst2";
    EXPECT_EQ(out.mem, std::vector<uint8_t>(out.mem.size(), Buffer::kGuard)) << what;
  } else if (with_dst2) {
    EXPECT_EQ(memcmp(out2.data(), dst, count * es), 0) << what << ": dst2 differs from dst";
    EXPECT_TRUE(out2.guards_intact()) << what << ": wrote outside dst2";
  } else {
    EXPECT_EQ(out2.mem, std::vector<uint8_t>(out2.mem.size(), Buffer::kGuard)) << what;
  }
  EXPECT_TRUE(a.guards_intact() && b.guards_intact() && out.guards_intact()) << what;
  if (layout == kInPlaceA || layout == kInPlaceB) {  // the untouched buffer is still all guard bytes
    EXPECT_EQ(out.mem, std::vector<uint8_t>(out.mem.size(), Buffer::kGuard)) << what;
  }
}

// ---------------------------------------------------------------------------------------------
// Every dtype x op, every loop variant the CPU has, many counts and layouts.

class ReduceOps : public testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void TearDown() override { ringo_reduce_limit_isa(-1); }
};

TEST_P(ReduceOps, MatchesReference) {
  const auto type = (ringoDataType_t)std::get<0>(GetParam());
  const auto op = (ringoRedOp_t)std::get<1>(GetParam());
  const std::vector<int> divisors =
      op == ringoAvg ? std::vector<int>{1, 2, 3, 7, 200} : std::vector<int>{1};
  // The last count spans several of ringo_reduce's 16 KiB blocks (dst2 is filled block by block)
  // for every element size, with a partial block at the end.
  const size_t small_counts[] = {0, 1, 2, 3, 7, 15, 16, 17, 33, 64, 511, 512, 513, 1025, 4099 * 3 + 5, 40963};
  for (int divisor : divisors) {
    const Pools p = make_pools(type, op, divisor);
    for (int isa = 0; isa <= 2; isa++) {
      const int got_isa = ringo_reduce_limit_isa(isa);
      if (got_isa != isa) continue;  // the CPU lacks it; the lower level already ran
      SCOPED_TRACE("loop variant " + std::to_string(isa));
      for (size_t count : small_counts)
        for (Layout layout : {kOutOfPlace, kInPlaceA, kInPlaceB, kSendOnly})
          for (bool misalign : {false, true})
            for (bool dst2 : {false, true}) {
              run_case(type, op, divisor, p, count, layout, misalign, dst2);
              if (HasFailure()) return;
            }
    }
    ringo_reduce_limit_isa(-1);
    if (divisor != 1 && divisor != 3) continue;
    // The long run, on the best variant, in four layouts.
    run_case(type, op, divisor, p, 1000003, kOutOfPlace, false, true);
    run_case(type, op, divisor, p, 1000003, kInPlaceA, true, false);
    run_case(type, op, divisor, p, 1000003, kInPlaceB, false, true);
    run_case(type, op, divisor, p, 1000003, kSendOnly, true, true);
  }
}

std::string case_name(const testing::TestParamInfo<std::tuple<int, int>>& info) {
  return std::string(ringo_type_name((ringoDataType_t)std::get<0>(info.param))) + "_" +
         ringo_op_name((ringoRedOp_t)std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllTypesAllOps, ReduceOps,
                         testing::Combine(testing::Range(0, RINGO_NUM_TYPES),
                                          testing::Range(0, RINGO_NUM_OPS)),
                         case_name);

// ---------------------------------------------------------------------------------------------
// Hand-computed values, independent of any reference code.

template <typename T>
T reduce1(ringoDataType_t type, ringoRedOp_t op, T a, T b, int divisor = 1) {
  T out{};
  EXPECT_EQ(ringo_reduce(&out, nullptr, &a, &b, 1, type, op, divisor), ringoSuccess);
  return out;
}

TEST(ReduceValues, SignedWrapAround) {
  EXPECT_EQ(reduce1<int8_t>(ringoInt8, ringoSum, 127, 1), -128);
  EXPECT_EQ(reduce1<int8_t>(ringoInt8, ringoSum, -128, -1), 127);
  EXPECT_EQ(reduce1<int8_t>(ringoInt8, ringoProd, 16, 16), 0);
  EXPECT_EQ(reduce1<int8_t>(ringoInt8, ringoProd, -128, -1), -128);
  EXPECT_EQ(reduce1<int8_t>(ringoInt8, ringoProd, 100, 3), 44);  // 300 - 256
  EXPECT_EQ(reduce1<uint8_t>(ringoUint8, ringoSum, 200, 100), 44);
  EXPECT_EQ(reduce1<int32_t>(ringoInt32, ringoSum, INT32_MAX, 1), INT32_MIN);
  EXPECT_EQ(reduce1<int32_t>(ringoInt32, ringoProd, 65536, 65536), 0);
  EXPECT_EQ(reduce1<int32_t>(ringoInt32, ringoProd, 46341, 46341), -2147479015);  // 2147488281 - 2^32
  EXPECT_EQ(reduce1<int32_t>(ringoInt32, ringoProd, INT32_MIN, -1), INT32_MIN);
  EXPECT_EQ(reduce1<uint32_t>(ringoUint32, ringoProd, 0xffffffffu, 0xffffffffu), 1u);
  EXPECT_EQ(reduce1<int64_t>(ringoInt64, ringoSum, INT64_MAX, 1), INT64_MIN);
  EXPECT_EQ(reduce1<int64_t>(ringoInt64, ringoProd, INT64_MIN, -1), INT64_MIN);
  EXPECT_EQ(reduce1<int64_t>(ringoInt64, ringoProd, 1ll << 32, 1ll << 32), 0);
  EXPECT_EQ(reduce1<uint64_t>(ringoUint64, ringoSum, ~0ull, 2), 1u);
}

TEST(ReduceValues, AvgTruncatesTowardZero) {
  EXPECT_EQ(reduce1<int32_t>(ringoInt32, ringoAvg, -7, 0, 2), -3);
  EXPECT_EQ(reduce1<int32_t>(ringoInt32, ringoAvg, -7, -2, 4), -2);
  EXPECT_EQ(reduce1<int32_t>(ringoInt32, ringoAvg, 7, 2, 4), 2);
  EXPECT_EQ(reduce1<int32_t>(ringoInt32, ringoAvg, INT32_MIN, 0, 1), INT32_MIN);
  EXPECT_EQ(reduce1<int8_t>(ringoInt8, ringoAvg, -100, -29, 2), 63);  // the sum wraps to 127 first
  EXPECT_EQ(reduce1<int8_t>(ringoInt8, ringoAvg, -60, -60, 7), -17);
  EXPECT_EQ(reduce1<int8_t>(ringoInt8, ringoAvg, -60, -60, 200), 0);  // divisor beyond int8
  EXPECT_EQ(reduce1<uint8_t>(ringoUint8, ringoAvg, 250, 5, 200), 1);
  EXPECT_EQ(reduce1<int64_t>(ringoInt64, ringoAvg, INT64_MIN, -1, 2), INT64_MAX / 2);
  EXPECT_EQ(reduce1<int64_t>(ringoInt64, ringoAvg, -9, 0, 4), -2);
  EXPECT_EQ(reduce1<uint64_t>(ringoUint64, ringoAvg, ~0ull, 0, 3), 0x5555555555555555ull);
}

// 8- and 32-bit avg divides in double (src/reduce.c): exact for every divisor. Quotients just
// below an integer, and large divisors, are where a rounded division would go wrong.
// Hard cases of one 8- or 32-bit dtype, as many as a vector loop takes (not only its scalar tail),
// reduced at every ISA level the CPU has and compared with C's integer division.
template <typename T>
void ExpectAvgLikeIntegerDivision(ringoDataType_t type, const std::vector<int64_t>& sums, int d) {
  std::vector<T> a, b, want;
  for (int rep = 0; a.size() < 96; rep++)
    for (int64_t s : sums) {
      const T x = (T)(s / 2), y = (T)((uint64_t)s - (uint64_t)(s / 2));  // x + y wraps to s in T
      const T sum = (T)((uint64_t)x + (uint64_t)y);
      a.push_back(x), b.push_back(y);
      want.push_back(std::is_signed<T>::value ? (T)((int64_t)sum / d) : (T)((uint64_t)sum / (uint64_t)d));
    }
  for (int isa = 0; isa <= 2; isa++) {
    if (ringo_reduce_limit_isa(isa) != isa) continue;
    std::vector<T> out(a.size());
    ASSERT_EQ(ringo_reduce(out.data(), nullptr, a.data(), b.data(), a.size(), type, ringoAvg, d), ringoSuccess);
    for (size_t i = 0; i < out.size(); i++)
      ASSERT_EQ((int64_t)want[i], (int64_t)out[i]) << ringo_type_name(type) << " isa " << isa << ": ("
                                                   << (int64_t)a[i] << " + " << (int64_t)b[i] << ") / " << d;
  }
  ringo_reduce_limit_isa(-1);
}

// 8- and 32-bit avg divides in double (src/reduce.c): exact for every divisor. Quotients just
// below an integer, and large divisors, are where a rounded division would go wrong.
TEST(ReduceValues, AvgInDoubleEqualsIntegerDivision) {
  for (int d : {1, 2, 3, 7, 65535, (1 << 21) - 1, 1 << 21, (1 << 21) + 1, INT32_MAX}) {
    const int64_t dd = d;
    const std::vector<int64_t> sums = {INT32_MAX, INT32_MIN, INT32_MAX - 1, dd * 1000 - 1, -dd * 1000 + 1,
                                       dd - 1, -dd + 1, dd, dd * 2047 - 1, (int64_t)UINT32_MAX, 0, -1};
    ExpectAvgLikeIntegerDivision<int32_t>(ringoInt32, sums, d);
    ExpectAvgLikeIntegerDivision<uint32_t>(ringoUint32, sums, d);
    ExpectAvgLikeIntegerDivision<int8_t>(ringoInt8, {-128, 127, -1, 1, 100, -100, 255, 0}, d);
    ExpectAvgLikeIntegerDivision<uint8_t>(ringoUint8, {255, 254, 1, 0, 128, 127, 300}, d);
  }
  EXPECT_EQ(reduce1<float>(ringoFloat32, ringoAvg, 1.0f, 2.0f, 2), 1.5f);
  EXPECT_EQ(reduce1<double>(ringoFloat64, ringoAvg, -1.0, -2.0, 4), -0.75);
  // The sum of two largest halves overflows float16 but not the float it is computed in.
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoSum, 0x7bff, 0x7bff), 0x7c00);
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoAvg, 0x7bff, 0x7bff, 2), 0x7bff);
  EXPECT_EQ(reduce1<uint16_t>(ringoBfloat16, ringoAvg, 0x3f80, 0x4000, 2), 0x3fc0);  // (1+2)/2
}

TEST(ReduceValues, HalfRoundingAndNaNRules) {
  // 2048 + 1 is a tie between 2048 and 2050 in float16: even wins.
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoSum, 0x6800, 0x3c00), 0x6800);
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoSum, 0x6801, 0x3c00), 0x6802);  // 2050+1 -> 2052
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoSum, 0x7bff, 0x4c00), 0x7c00);  // 65504+16 -> Inf (tie)
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoSum, 0x7bff, 0x4b80), 0x7bff);  // 65504+15
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoSum, 0x0001, 0x0001), 0x0002);  // subnormals
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoProd, 0x0001, 0x3800), 0x0000);  // 2^-25: tie -> 0
  EXPECT_EQ(reduce1<uint16_t>(ringoBfloat16, ringoSum, 0x4380, 0x3f80), 0x4380);  // 256+1 -> tie -> 256
  // max/min: ties return b (so -0/+0 keep b's sign), NaN in either input wins, made quiet.
  EXPECT_EQ(reduce1<float>(ringoFloat32, ringoMax, 0.0f, -0.0f), -0.0f);
  EXPECT_TRUE(std::signbit(reduce1<float>(ringoFloat32, ringoMax, 0.0f, -0.0f)));
  EXPECT_FALSE(std::signbit(reduce1<float>(ringoFloat32, ringoMin, -0.0f, 0.0f)));
  EXPECT_TRUE(std::isnan(reduce1<float>(ringoFloat32, ringoMax, NAN, 1.0f)));
  EXPECT_TRUE(std::isnan(reduce1<float>(ringoFloat32, ringoMin, 1.0f, NAN)));
  EXPECT_TRUE(std::isnan(reduce1<double>(ringoFloat64, ringoMax, 1.0, NAN)));
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoMax, 0x7c01, 0x3c00), 0x7e01);
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoMin, 0x3c00, 0xfc01), 0xfe01);
  EXPECT_EQ(reduce1<uint16_t>(ringoBfloat16, ringoMax, 0x3f80, 0x7f81), 0x7fc1);
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoMax, 0x8000, 0x0000), 0x0000);
  EXPECT_EQ(reduce1<uint16_t>(ringoFloat16, ringoMax, 0x0000, 0x8000), 0x8000);
}

// The hardware half conversions (F16C) of the wide variants must give the portable header's bits:
// every half through sum with -0 (exact, so only the round trip), and through avg and prod with
// several factors (many float values to narrow), in every variant against ringo_ew_* directly.
TEST(ReduceValues, F16VariantsMatchPortableMathOnAllHalves) {
  std::vector<uint16_t> all(65536), other(65536), out(65536);
  for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
  const uint16_t factors[] = {0x8000, 0x3c00, 0x3555 /* ~1/3 */, 0x1400 /* 2^-10 */, 0x7bff,
                              0x0001, 0x4248};
  for (int isa = 0; isa <= 2; isa++) {
    if (ringo_reduce_limit_isa(isa) != isa) continue;
    for (uint16_t f : factors) {
      std::fill(other.begin(), other.end(), f);
      for (ringoRedOp_t op : {ringoSum, ringoProd, ringoAvg}) {
        ASSERT_EQ(
            ringo_reduce(out.data(), nullptr, all.data(), other.data(), 65536, ringoFloat16, op, 3),
            ringoSuccess);
        for (uint32_t h = 0; h < 65536; h++) {
          const uint16_t want = op == ringoSum    ? ringo_ew_sum_f16((uint16_t)h, f)
                                : op == ringoProd ? ringo_ew_prod_f16((uint16_t)h, f)
                                                  : ringo_ew_avg_f16((uint16_t)h, f, 3);
          ASSERT_EQ(out[h], want) << "variant " << isa << " op " << op << std::hex << " h=" << h
                                  << " f=" << f;
        }
      }
    }
  }
  ringo_reduce_limit_isa(-1);
}

// ---------------------------------------------------------------------------------------------
// Errors.

void expect_invalid(ringoResult_t res, const char* needle) {
  EXPECT_EQ(res, ringoInvalidArgument);
  const std::string msg = ringo_thread_last_error();
  EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg;
  ringo_thread_clear_error();
}

TEST(ReduceErrors, BadTypeOpDivisorOrBuffer) {
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1}, d[4] = {0, 0, 0, 0};
  ringo_thread_clear_error();
  expect_invalid(ringo_reduce(d, nullptr, a, b, 4, (ringoDataType_t)RINGO_NUM_TYPES, ringoSum, 1),
                 "datatype 10");
  expect_invalid(ringo_reduce(d, nullptr, a, b, 4, (ringoDataType_t)-1, ringoSum, 1), "datatype -1");
  expect_invalid(ringo_reduce(d, nullptr, a, b, 4, ringoFloat32, (ringoRedOp_t)RINGO_NUM_OPS, 1),
                 "op 5");
  expect_invalid(ringo_reduce(d, nullptr, a, b, 4, ringoFloat32, (ringoRedOp_t)-1, 1), "op -1");
  expect_invalid(ringo_reduce(d, nullptr, a, b, 4, ringoInt32, ringoAvg, 0), "divisor");
  expect_invalid(ringo_reduce(d, nullptr, a, b, 4, ringoInt32, ringoAvg, -2), "divisor");
  expect_invalid(ringo_reduce(nullptr, nullptr, a, b, 4, ringoFloat32, ringoSum, 1), "NULL");
  expect_invalid(ringo_reduce(d, nullptr, nullptr, b, 4, ringoFloat32, ringoSum, 1), "NULL");
  // Bad arguments are rejected even with nothing to do; an empty reduce of NULLs is fine.
  expect_invalid(ringo_reduce(d, nullptr, a, b, 0, (ringoDataType_t)42, ringoSum, 1), "datatype");
  EXPECT_EQ(ringo_reduce(nullptr, nullptr, nullptr, nullptr, 0, ringoFloat32, ringoSum, 1),
            ringoSuccess);
  for (float x : d) EXPECT_EQ(x, 0.0f);  // nothing was written by the failed calls
}

// ---------------------------------------------------------------------------------------------
// ringo_copy2.

TEST(Copy2, CopiesToOneOrTwoDestinations) {
  for (size_t bytes :
       {(size_t)0, (size_t)1, (size_t)100, (size_t)16384, (size_t)16385, (size_t)1000003}) {
    std::vector<uint8_t> src(bytes), d1(bytes + 2, 0xee), d2(bytes + 2, 0xdd);
    for (size_t i = 0; i < bytes; i++) src[i] = (uint8_t)(i * 131 + 7);
    ringo_copy2(d1.data() + 1, d2.data() + 1, src.data(), bytes);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), d1.begin() + 1)) << bytes;
    EXPECT_TRUE(std::equal(src.begin(), src.end(), d2.begin() + 1)) << bytes;
    EXPECT_EQ(d1[0], 0xee);
    EXPECT_EQ(d1[bytes + 1], 0xee);
    EXPECT_EQ(d2[0], 0xdd);
    EXPECT_EQ(d2[bytes + 1], 0xdd);
    std::vector<uint8_t> d3(bytes, 0x11);
    ringo_copy2(d3.data(), nullptr, src.data(), bytes);
    EXPECT_EQ(d3, src) << bytes;
    std::vector<uint8_t> d4(bytes, 0x22);
    ringo_copy2(nullptr, d4.data(), src.data(), bytes);  // only the second destination
    EXPECT_EQ(d4, src) << bytes;
  }
}

TEST(Copy2, SkipsCopiesOntoItself) {
  std::vector<uint8_t> buf(5000), other(5000, 0);
  for (size_t i = 0; i < buf.size(); i++) buf[i] = (uint8_t)i;
  const std::vector<uint8_t> before = buf;
  ringo_copy2(buf.data(), nullptr, buf.data(), buf.size());
  EXPECT_EQ(buf, before);
  ringo_copy2(buf.data(), other.data(), buf.data(), buf.size());  // dst == src, dst2 still written
  EXPECT_EQ(buf, before);
  EXPECT_EQ(other, before);
  std::fill(other.begin(), other.end(), 0);
  ringo_copy2(other.data(), buf.data(), buf.data(), buf.size());  // dst2 == src
  EXPECT_EQ(other, before);
  std::fill(other.begin(), other.end(), 0);
  ringo_copy2(other.data(), other.data(), buf.data(), buf.size());  // dst == dst2
  EXPECT_EQ(other, before);
}

}  // namespace
