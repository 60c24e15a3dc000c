// test_cuda_kernels.cc — the device reduce-copy kernels of cuda/reduce_kernels.cu against ringo_reduce()
// (src/reduce.c), every dtype x op and copy: on the CPU through the kernels' own per-thread code (an
// emulated grid) and on a GPU for real. Needs an nvcc build; GPU tests skip without a device. Run
// ./build/test/test_cuda_kernels (make gpu-check runs it on a GPU machine).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "core/core.h"
#include "reduce/reduce.h"
}
#include "include/cuda_kernels.h"
#include "include/elementwise.h"

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>

namespace {

// ---------------------------------------------------------------------------------------------
// Test data: fast random bits, each dtype's edge values, and "moderate" values whose products and
// sums stay finite so rounding, not overflow, is what gets compared.

uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool is_float(ringoDataType_t t) {
  return t == ringoFloat16 || t == ringoFloat32 || t == ringoFloat64 || t == ringoBfloat16;
}

std::vector<uint64_t> edge_values(ringoDataType_t t) {
  switch (t) {
    case ringoInt8:
    case ringoUint8:
      return {0, 1, 2, 0x7f, 0x80, 0x81, 0xfe, 0xff};
    case ringoInt32:
    case ringoUint32:
      return {0, 1, 2, 0x10000, 0x7fffffff, 0x80000000, 0x80000001, 0xfffffffe, 0xffffffff};
    case ringoInt64:
    case ringoUint64:
      return {0, 1, 2, 0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull,
              0x8000000000000001ull, 0xfffffffffffffffeull, 0xffffffffffffffffull};
    case ringoFloat16:  // zeros, subnormals, normal edges, 1, max, Inf, quiet/signalling NaNs, ~1/3
      return {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff,
              0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x3555, 0x3c01};
    case ringoBfloat16:
      return {0x0000, 0x8000, 0x0001, 0x007f, 0x0080, 0x3f80, 0xbf80, 0x7f7f,
              0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc1, 0x3eab, 0x3f81};
    case ringoFloat32:
      return {0x00000000, 0x80000000, 0x00000001, 0x007fffff, 0x00800000, 0x3f800000,
              0xbf800000, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000,
              0x7f800001, 0xffc00001, 0x3eaaaaab, 0x3f800001};
    case ringoFloat64:
      return {0x0000000000000000ull, 0x8000000000000000ull, 0x0000000000000001ull,
              0x000fffffffffffffull, 0x0010000000000000ull, 0x3ff0000000000000ull,
              0xbff0000000000000ull, 0x7fefffffffffffffull, 0xffefffffffffffffull,
              0x7ff0000000000000ull, 0xfff0000000000000ull, 0x7ff8000000000000ull,
              0x7ff0000000000001ull, 0xfff8000000000001ull, 0x3fd5555555555555ull,
              0x3ff0000000000001ull};
  }
  return {};
}

// A value in [-8, 8) with a few fraction bits, in the dtype's bits (integers: small signed ints).
uint64_t moderate_value(ringoDataType_t t, uint64_t r) {
  const double x = (double)((int64_t)(r % 4096) - 2048) / 256.0 + (double)(r >> 40) * 0x1p-30;
  switch (t) {
    case ringoFloat16: return ringo_ew_float_to_half((float)x);
    case ringoBfloat16: return ringo_ew_float_to_bf16((float)x);
    case ringoFloat32: {
      const float f = (float)x;
      uint32_t u;
      memcpy(&u, &f, 4);
      return u;
    }
    case ringoFloat64: {
      uint64_t u;
      memcpy(&u, &x, 8);
      return u;
    }
    default: return (uint64_t)((int64_t)(r % 33) - 16);
  }
}

// Fills count elements of a (and b): the first ones walk every pair of edge values, the rest are
// random bits or moderate values in runs.
void fill_inputs(ringoDataType_t t, unsigned char* a, unsigned char* b, size_t count, uint64_t seed) {
  const size_t es = ringo_type_size(t);
  const std::vector<uint64_t> edges = edge_values(t);
  for (size_t i = 0; i < count; i++) {
    uint64_t va, vb;
    if (i < edges.size() * edges.size()) {
      va = edges[i / edges.size()];
      vb = edges[i % edges.size()];
    } else if ((i / 64) % 2 == 0) {
      va = splitmix(&seed);
      vb = splitmix(&seed);
    } else {
      va = moderate_value(t, splitmix(&seed));
      vb = moderate_value(t, splitmix(&seed));
    }
    memcpy(a + i * es, &va, es);  // little-endian: the low es bytes
    if (b) memcpy(b + i * es, &vb, es);
  }
}

// Is this element a quiet NaN of its dtype? Integers never are.
bool is_quiet_nan(ringoDataType_t t, const unsigned char* p) {
  uint64_t u = 0;
  memcpy(&u, p, ringo_type_size(t));
  switch (t) {
    case ringoFloat16: return (u & 0x7e00) == 0x7e00;
    case ringoBfloat16: return (u & 0x7fc0) == 0x7fc0;
    case ringoFloat32: return (u & 0x7fc00000u) == 0x7fc00000u;
    case ringoFloat64: return (u & 0x7ff8000000000000ull) == 0x7ff8000000000000ull;
    default: return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Buffers with guard bytes. Each lives at a chosen offset from a 256-byte boundary (cudaMalloc's
// alignment), so a device copy of its window has the same alignment pattern. Everything in the
// window but the destination's elements must come out unchanged.

constexpr size_t kGuard = 40;

struct Buf {
  std::vector<unsigned char> mem;
  size_t off = 0, bytes = 0;
  unsigned char* base() {
    const uintptr_t p = (uintptr_t)mem.data();
    return mem.data() + ((256 - p % 256) % 256);
  }
  unsigned char* data() { return base() + off; }
  size_t window() const { return off + bytes + kGuard; }
};

Buf make_buf(size_t bytes, size_t off, uint64_t seed) {
  Buf b;
  b.off = off;
  b.bytes = bytes;
  b.mem.resize(b.window() + 256);
  for (auto& c : b.mem) c = (unsigned char)splitmix(&seed);  // the canary: random garbage
  return b;
}

// One call to check: buffers 0 (a) and 1 (b, absent for a copy), dst and dst2 (each either a buffer
// of their own or an alias of a or b; dst2 may be absent).
struct Scene {
  std::vector<Buf> bufs;
  int id = 2, id2 = -1;  // buffer index of dst and dst2 (-1: NULL)
  void* ptr(int i, std::vector<unsigned char*>* dev) {
    if (i < 0) return nullptr;
    return dev ? (*dev)[i] + bufs[i].off : bufs[i].data();
  }
};

// Where the kernels run: on the host (emulation, with a thread count) or on the device.
struct Target {
  unsigned nthreads;  // 0: the GPU
};

// Runs op (or a copy when copy is true) on the scene through the target.
ringoResult_t run_scene(Scene& s, const Target& tg, bool copy, ringoDataType_t t, ringoRedOp_t op,
                        size_t count, int divisor, std::string* why) {
  if (tg.nthreads > 0) {
    void *d = s.ptr(s.id, nullptr), *d2 = s.ptr(s.id2, nullptr), *a = s.ptr(0, nullptr);
    if (copy) return ringo_cuda_copy_emulate(d, d2, a, count, tg.nthreads);
    return ringo_cuda_reduce_emulate(d, d2, a, s.ptr(1, nullptr), count, t, op, divisor, tg.nthreads);
  }
  std::vector<unsigned char*> dev(s.bufs.size(), nullptr);
  ringoResult_t res = ringoSuccess;
  cudaError_t e = cudaSuccess;
  for (size_t i = 0; i < s.bufs.size() && e == cudaSuccess; i++) {
    e = cudaMalloc((void**)&dev[i], s.bufs[i].window());
    if (e == cudaSuccess)
      e = cudaMemcpy(dev[i], s.bufs[i].base(), s.bufs[i].window(), cudaMemcpyHostToDevice);
  }
  cudaStream_t stream = nullptr;
  if (e == cudaSuccess) e = cudaStreamCreate(&stream);
  if (e == cudaSuccess) {
    void *d = s.ptr(s.id, &dev), *d2 = s.ptr(s.id2, &dev), *a = s.ptr(0, &dev);
    res = copy ? ringo_cuda_copy(d, d2, a, count, stream)
               : ringo_cuda_reduce(d, d2, a, s.ptr(1, &dev), count, t, op, divisor, stream);
    if (res != ringoSuccess) *why = ringo_cuda_last_error_string();
    e = cudaStreamSynchronize(stream);
  }
  for (size_t i = 0; i < s.bufs.size() && e == cudaSuccess; i++)
    e = cudaMemcpy(s.bufs[i].base(), dev[i], s.bufs[i].window(), cudaMemcpyDeviceToHost);
  if (stream) cudaStreamDestroy(stream);
  for (auto p : dev)
    if (p) cudaFree(p);
  if (e != cudaSuccess) {
    *why = std::string("CUDA: ") + cudaGetErrorString(e);
    return ringoUnhandledCudaError;
  }
  return res;
}

// ---------------------------------------------------------------------------------------------
// The layouts every (dtype, op) is checked on: offsets (bytes from a 256-byte boundary) of a, b,
// dst and dst2, and which buffer dst is. Same offsets modulo 16 take the vector path with a head
// and a tail; different ones the scalar path; odd byte offsets the unaligned (memcpy) path.

struct Layout {
  size_t off_a, off_b, off_d, off_d2;
  int dst;      // 0: dst = a (in place), 1: dst = b, 2: its own buffer
  bool dst2;    // a second destination
  const char* what;
};

std::vector<Layout> layouts(size_t es) {
  std::vector<Layout> l = {
      {0, 0, 0, 0, 2, false, "all 16-byte aligned"},
      {0, 0, 0, 0, 2, true, "aligned, dst2"},
      {es, es, es, es, 2, true, "same misalignment, dst2 (head + vectors + tail)"},
      {(3 * es) % 16, (3 * es) % 16, (3 * es) % 16, 0, 0, false, "in place dst = a, misaligned"},
      {16, 32, 48, 64, 1, true, "in place dst = b, dst2"},
      {0, es % 16, (2 * es) % 16, 0, 2, true, "mutually misaligned (scalar path), dst2"},
      {es % 16, 0, 0, (2 * es) % 16, 2, true, "a misaligned against dst, dst2 against both"},
  };
  if (es > 1) {
    l.push_back({1, 1, 1, 1, 2, true, "odd byte offsets (unaligned path), dst2"});
    l.push_back({0, 3, 5, 0, 0, false, "odd offsets, in place"});
  }
  return l;
}

const size_t kCounts[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 100, 255, 257, 1000, 4097};
const unsigned kEmulatedThreads[] = {1, 2, 5, 64, 1000};
const int kDivisors[] = {1, 2, 3, 7, 200};

std::string describe(const Layout& l, size_t count, const Target& tg) {
  return std::string(l.what) + ", count " + std::to_string(count) + ", offsets a " +
         std::to_string(l.off_a) + " b " + std::to_string(l.off_b) + " dst " +
         std::to_string(l.off_d) + " dst2 " + std::to_string(l.off_d2) +
         (tg.nthreads ? ", " + std::to_string(tg.nthreads) + " emulated threads" : ", on the GPU");
}

// Compares each buffer's window with what it held before, except the destination elements, which
// must equal want: bit for bit, or (unless exact) both quiet NaNs, since the payload of a NaN made by
// arithmetic is the hardware's business (elementwise.h).
void check_scene(Scene& s, const std::vector<std::vector<unsigned char>>& before,
                 const std::vector<unsigned char>& want, ringoDataType_t t, bool exact,
                 const std::string& ctx) {
  const size_t es = ringo_type_size(t);
  for (size_t i = 0; i < s.bufs.size(); i++) {
    Buf& b = s.bufs[i];
    const bool is_dst = (int)i == s.id || (int)i == s.id2;
    // Whole-range compares first: a byte-by-byte assertion over tens of MB is slow, and only a
    // mismatch needs it (to name the byte).
    const size_t end = b.off + b.bytes;
    const bool kept = is_dst ? memcmp(b.base(), before[i].data(), b.off) == 0 &&
                                   memcmp(b.base() + end, before[i].data() + end, b.window() - end) == 0
                             : memcmp(b.base(), before[i].data(), b.window()) == 0;
    for (size_t k = 0; !kept && k < b.window(); k++) {
      const bool in_data = k >= b.off && k < b.off + b.bytes;
      if (is_dst && in_data) continue;
      ASSERT_EQ(b.base()[k], before[i][k]) << ctx << ": buffer " << i << " byte " << k
                                           << " changed (data at " << b.off << ".." << b.off + b.bytes << ")";
    }
    if (!is_dst || memcmp(b.data(), want.data(), b.bytes) == 0) continue;
    for (size_t e = 0; e < b.bytes / es; e++) {
      const unsigned char* got = b.data() + e * es;
      const unsigned char* exp = want.data() + e * es;
      if (memcmp(got, exp, es) == 0) continue;
      if (!exact && is_quiet_nan(t, got) && is_quiet_nan(t, exp)) continue;
      uint64_t g = 0, w = 0;
      memcpy(&g, got, es);
      memcpy(&w, exp, es);
      FAIL() << ctx << ": buffer " << i << " element " << e << " is 0x" << std::hex << g
             << ", want 0x" << w;
    }
  }
}

// One (dtype, op) or copy case on one layout: build the scene, compute the reference with
// ringo_reduce (or memcpy), run, check.
void check_case(bool copy, ringoDataType_t t, ringoRedOp_t op, const Layout& l, size_t count,
                int divisor, const Target& tg, uint64_t seed) {
  const size_t es = copy ? 1 : ringo_type_size(t);
  const size_t bytes = count * es;
  Scene s;
  s.bufs.push_back(make_buf(bytes, l.off_a, seed + 1));
  s.bufs.push_back(make_buf(copy ? 0 : bytes, l.off_b, seed + 2));
  s.bufs.push_back(make_buf(bytes, l.off_d, seed + 3));
  s.bufs.push_back(make_buf(bytes, l.off_d2, seed + 4));
  fill_inputs(copy ? ringoUint8 : t, s.bufs[0].data(), copy ? nullptr : s.bufs[1].data(), count,
              seed);
  s.id = copy && l.dst == 1 ? 2 : l.dst;  // a copy has no b to write into
  s.id2 = l.dst2 ? 3 : -1;
  std::vector<unsigned char> want(bytes);
  if (copy)
    memcpy(want.data(), s.bufs[0].data(), bytes);
  else
    ASSERT_EQ(ringo_reduce(want.data(), nullptr, s.bufs[0].data(), s.bufs[1].data(), count, t, op,
                           divisor),
              ringoSuccess);
  std::vector<std::vector<unsigned char>> before;
  for (auto& b : s.bufs) before.emplace_back(b.base(), b.base() + b.window());
  const std::string ctx = describe(l, count, tg);
  std::string why;
  ASSERT_EQ(run_scene(s, tg, copy, t, op, count, divisor, &why), ringoSuccess) << ctx << ": " << why;
  const bool exact = copy || !is_float(t) || op == ringoMax || op == ringoMin;
  check_scene(s, before, want, copy ? ringoUint8 : t, exact, ctx);
}

// Every layout x count, each with one of the thread counts (emulation) and divisors.
void check_all(bool copy, ringoDataType_t t, ringoRedOp_t op, bool gpu) {
  const std::vector<Layout> ls = layouts(copy ? 8 : ringo_type_size(t));
  size_t n = 0;
  for (const Layout& l : ls) {
    for (size_t count : kCounts) {
      const Target tg = {gpu ? 0u : kEmulatedThreads[n % 5]};
      check_case(copy, t, op, l, count, kDivisors[n % 5], tg, 1000 * n + 17 * t + op);
      if (testing::Test::HasFatalFailure()) return;
      n++;
    }
  }
  // Many vectors per thread: the unrolled loop, its remainder, and (on a GPU) more vectors than a
  // full wave of the device has threads, so the grid-stride loop goes round.
  const size_t big = gpu ? (5u << 20) + 3 : 20000 + 3;
  const Target tg = {gpu ? 0u : 3u};
  check_case(copy, t, op, ls[2], big, 7, tg, 99);
  if (!gpu) check_case(copy, t, op, ls[5], big, 7, tg, 98);
}

// A skip reason when there is no usable GPU, "" when there is one.
std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return std::string("no CUDA device: cudaGetDeviceCount says ") + cudaGetErrorName(e) + " (" +
           cudaGetErrorString(e) + ")";
  if (n == 0) return "no CUDA device: cudaGetDeviceCount reports 0 devices";
  return "";
}

// ---------------------------------------------------------------------------------------------
// Every dtype x op.

struct Combo {
  ringoDataType_t type;
  ringoRedOp_t op;
};

std::vector<Combo> all_combos() {
  std::vector<Combo> v;
  for (int t = 0; t < RINGO_NUM_TYPES; t++)
    for (int o = 0; o < RINGO_NUM_OPS; o++) v.push_back({(ringoDataType_t)t, (ringoRedOp_t)o});
  return v;
}

std::string combo_name(const testing::TestParamInfo<Combo>& info) {
  return std::string(ringo_type_name(info.param.type)) + "_" + ringo_op_name(info.param.op);
}

class ReduceEmulated : public testing::TestWithParam<Combo> {};
class ReduceDevice : public testing::TestWithParam<Combo> {};

TEST_P(ReduceEmulated, MatchesHostReduceOnEveryLayout) {
  check_all(false, GetParam().type, GetParam().op, false);
}

TEST_P(ReduceDevice, MatchesHostReduceOnEveryLayout) {
  const std::string why = no_device_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  check_all(false, GetParam().type, GetParam().op, true);
}

INSTANTIATE_TEST_SUITE_P(AllTypesOps, ReduceEmulated, testing::ValuesIn(all_combos()), combo_name);
INSTANTIATE_TEST_SUITE_P(AllTypesOps, ReduceDevice, testing::ValuesIn(all_combos()), combo_name);

TEST(CopyEmulated, MatchesMemcpyOnEveryLayout) { check_all(true, ringoUint8, ringoSum, false); }

TEST(CopyDevice, MatchesMemcpyOnEveryLayout) {
  const std::string why = no_device_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  check_all(true, ringoUint8, ringoSum, true);
}

// The copy picks its unit (8, 4, 2 or 1 bytes) from the pointers and the length: every
// combination of small offsets and lengths, against memcpy, with guards.
TEST(CopyEmulated, EveryUnitAndOffset) {
  for (size_t bytes : {1, 2, 4, 6, 8, 24, 40, 72, 136})
    for (size_t od = 0; od < 16; od++)
      for (size_t os = 0; os < 16; os += 3) {
        const Layout l = {os, 0, od, (od + os) % 16, 2, (od & 1) != 0, "copy units"};
        check_case(true, ringoUint8, ringoSum, l, bytes, 1, {2}, od * 31 + os);
        if (HasFatalFailure()) return;
      }
}

// ---------------------------------------------------------------------------------------------
// Arguments and errors, checked before any CUDA call, so they run without a GPU.

TEST(Launchers, RejectBadArgumentsLikeRingoReduce) {
  char buf[64] = {0};
  void* p = buf;
  EXPECT_EQ(ringo_cuda_reduce(p, nullptr, p, p, 4, (ringoDataType_t)RINGO_NUM_TYPES, ringoSum, 1, nullptr),
            ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_reduce(p, nullptr, p, p, 4, (ringoDataType_t)-1, ringoSum, 1, nullptr),
            ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_reduce(p, nullptr, p, p, 4, ringoFloat32, (ringoRedOp_t)RINGO_NUM_OPS, 1, nullptr),
            ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_reduce(p, nullptr, p, p, 4, ringoFloat32, ringoAvg, 0, nullptr),
            ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_reduce(nullptr, nullptr, p, p, 4, ringoFloat32, ringoSum, 1, nullptr),
            ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_reduce(p, nullptr, nullptr, p, 4, ringoFloat32, ringoSum, 1, nullptr),
            ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_reduce(p, nullptr, p, nullptr, 4, ringoFloat32, ringoSum, 1, nullptr),
            ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_copy(p, nullptr, nullptr, 4, nullptr), ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_copy(nullptr, nullptr, p, 4, nullptr), ringoInvalidArgument);
  // Nothing to do is success without touching CUDA (NULL buffers included, as in ringo_reduce).
  EXPECT_EQ(ringo_cuda_reduce(nullptr, nullptr, nullptr, nullptr, 0, ringoFloat32, ringoSum, 1, nullptr),
            ringoSuccess);
  EXPECT_EQ(ringo_cuda_copy(nullptr, nullptr, nullptr, 0, nullptr), ringoSuccess);
  EXPECT_EQ(ringo_cuda_copy(p, p, p, 64, nullptr), ringoSuccess);  // onto itself: nothing to do
  // The emulations check the same, and a grid of no threads.
  EXPECT_EQ(ringo_cuda_reduce_emulate(p, nullptr, p, p, 4, ringoFloat32, ringoAvg, 0, 1),
            ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_reduce_emulate(p, nullptr, p, p, 4, ringoFloat32, ringoSum, 1, 0),
            ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_copy_emulate(p, nullptr, p, 4, 0), ringoInvalidArgument);
  EXPECT_EQ(ringo_cuda_copy_emulate(p, nullptr, nullptr, 4, 1), ringoInvalidArgument);
}

// Without a device (or driver) a launch must fail cleanly with a named CUDA error; with one, a
// small launch must work. Either way this test runs, and it never skips.
TEST(Launchers, ResultMatchesDevicePresence) {
  const std::string why = no_device_reason();
  if (!why.empty()) {
    char host[64];
    EXPECT_EQ(ringo_cuda_reduce(host, nullptr, host, host, 4, ringoInt32, ringoSum, 1, nullptr),
              ringoUnhandledCudaError);
    const std::string msg = ringo_cuda_last_error_string();
    EXPECT_NE(msg.find("cudaError"), std::string::npos) << msg;
    EXPECT_EQ(ringo_cuda_copy(host, nullptr, host + 8, 8, nullptr), ringoUnhandledCudaError);
    return;
  }
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc((void**)&d, 4 * sizeof(int)), cudaSuccess);
  const int in[4] = {1, 2, 3, -4};
  int out[4] = {0, 0, 0, 0};
  ASSERT_EQ(cudaMemcpy(d, in, sizeof in, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(ringo_cuda_reduce(d, nullptr, d, d, 4, ringoInt32, ringoSum, 1, nullptr), ringoSuccess)
      << ringo_cuda_last_error_string();
  ASSERT_EQ(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[3], -8);
}

}  // namespace

#else  // !RINGO_HAVE_CUDA

TEST(CudaKernels, NotBuilt) {
  GTEST_SKIP() << "this build has no CUDA part (nvcc not found, or CUDA=0): nothing to test";
}

#endif
