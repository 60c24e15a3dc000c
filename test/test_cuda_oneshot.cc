// test_cuda_oneshot.cc — the device one-shot all-reduce kernel (cuda/oneshot.cu) against its CPU
// reference, the host's ring-order combine (ring_order.h: what the host ring and one-shot give): the
// kernel's own per-thread code on the CPU for every dtype and op, N = 2..8 and 16, short and aligned
// long chunks, buffers at one offset modulo 16 (vectors) and not (scalars); on a GPU, the real kernel.
// Needs an nvcc build; the GPU test skips without a device. Run: make test (build/test/test_cuda_oneshot).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collective_cases.h"
#include "gpu_probe.h"
#include "ring_order.h"
#include "ringo.h"

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "include/cuda_oneshot.h"

namespace {

using ringo_order::InexactPattern;

// One rank's input (or the result) at byte offset `shift` past a 64-byte boundary, with guard bytes
// after it that nothing may touch.
struct Placed {
  static constexpr size_t kGuard = 64;
  std::vector<unsigned char> mem;
  unsigned char* p;
  size_t bytes;
  Placed(size_t n, size_t shift) : mem(n + shift + 64 + kGuard, 0xa5), bytes(n) {
    const uintptr_t base = (reinterpret_cast<uintptr_t>(mem.data()) + 63) / 64 * 64;
    p = reinterpret_cast<unsigned char*>(base) + shift;
  }
  bool GuardIntact() const {
    for (size_t i = 0; i < kGuard; i++)
      if (p[bytes + i] != 0xa5) return false;
    return true;
  }
};

struct Layout {
  size_t in_shift, odd_shift, out_shift;  // odd_shift: rank 1's input, where it differs
  const char* name;
};

// Runs the emulated kernel for one case and compares with the reference, bit for bit.
std::string CheckCase(ringoDataType_t t, ringoRedOp_t op, int n, size_t count, const Layout& l, unsigned nthreads) {
  const size_t esz = ringo_cases::TypeSize(t);
  const InexactPattern pat(t, n);
  std::vector<Placed> in;
  std::vector<const unsigned char*> inputs;
  std::vector<const void*> by_pos;
  for (int r = 0; r < n; r++) in.emplace_back(count * esz, r == 1 ? l.odd_shift : l.in_shift);
  for (int r = 0; r < n; r++) {
    for (size_t j = 0; j < count; j++) memcpy(in[r].p + j * esz, pat.In(r, j), esz);
    inputs.push_back(in[r].p);
    by_pos.push_back(in[r].p);
  }
  Placed out(count * esz, l.out_shift);
  ringo_dev_oneshot d;
  if (ringo_dev_oneshot_describe(t, op, count, n, by_pos.data(), out.p, &d) != ringoSuccess) return "describe failed";
  if (ringo_cuda_oneshot_emulate(&d, nthreads) != ringoSuccess) return "emulate failed";
  const std::vector<unsigned char> want = ringo_order::RingOrderAllReduce(inputs, count, t, op);
  const std::string what = std::string(ringo_cases::TypeName(t)) + " " + ringo_cases::OpName(op) + " n=" +
                           std::to_string(n) + " count=" + std::to_string(count) + " " + l.name;
  for (size_t j = 0; j < count; j++)
    if (memcmp(out.p + j * esz, want.data() + j * esz, esz) != 0)
      return what + ": element " + std::to_string(j) + " differs from the ring's order";
  if (!out.GuardIntact()) return what + ": written past the result";
  return "";
}

// Same offset modulo 16 everywhere (vectors), the result elsewhere (scalars), element-aligned
// inputs at another offset, and an input off its element size (memcpy scalars).
const Layout kLayouts[] = {{0, 0, 0, "aligned"},
                           {4, 4, 4, "one offset"},
                           {0, 0, 8, "result apart"},
                           {0, 2, 0, "one input apart"},
                           {0, 1, 0, "an input off its element size"}};

class OneshotEmulated : public testing::TestWithParam<int> {};

// Every dtype and op, short chunks (counts around N, remainders spread) and long ones (the aligned
// cut, N dividing the count and not), every layout.
TEST_P(OneshotEmulated, EqualsTheRingsOrderForEveryTypeOpAndLayout) {
  const int n = GetParam();
  const size_t counts[] = {1, size_t(n) - 1, size_t(n) + 1, 37 * size_t(n) + 3, RINGO_CHUNK_ALIGN_MIN * n + 1,
                           size_t{8195} * n};
  for (ringoDataType_t t : ringo_cases::kAllTypes)
    for (ringoRedOp_t op : ringo_cases::kAllOps)
      for (size_t count : counts)
        for (const Layout& l : kLayouts) {
          // Long counts through every layout only for two dtypes; the others once, aligned.
          if (count > 1000 && &l != &kLayouts[0] && t != ringoFloat32 && t != ringoInt8) continue;
          const std::string err = CheckCase(t, op, n, count, l, 5);
          ASSERT_EQ(err, "");
        }
}
INSTANTIATE_TEST_SUITE_P(N, OneshotEmulated, testing::Values(2, 3, 4, 5, 6, 7, 8, 16));

TEST(OneshotLauncher, RefusesBadDescriptors) {
  ringo_dev_oneshot d;
  float a[4] = {}, b[4] = {}, out[4];
  const void* in[2] = {a, b};
  ASSERT_EQ(ringo_dev_oneshot_describe(ringoFloat32, ringoSum, 4, 2, in, out, &d), ringoSuccess);
  EXPECT_EQ(ringo_cuda_oneshot_emulate(&d, 0), ringoInvalidArgument) << "no threads";
  EXPECT_EQ(ringo_cuda_oneshot_emulate(nullptr, 1), ringoInvalidArgument);
  ringo_dev_oneshot bad = d;
  bad.type = RINGO_NUM_TYPES;
  EXPECT_EQ(ringo_cuda_oneshot_launch(&bad, nullptr), ringoInvalidArgument) << "bad dtype";
  bad = d;
  bad.out = nullptr;
  EXPECT_EQ(ringo_cuda_oneshot_emulate(&bad, 1), ringoInvalidArgument) << "no result buffer";
  bad = d;
  bad.in[1] = nullptr;
  EXPECT_EQ(ringo_cuda_oneshot_emulate(&bad, 1), ringoInvalidArgument) << "an input missing";
  bad = d;
  bad.count = 0;
  bad.out = nullptr;
  EXPECT_EQ(ringo_cuda_oneshot_emulate(&bad, 1), ringoSuccess) << "nothing to do";
}

// Device buffers of n inputs (from pat) and one result, freed at the end of the scope.
struct DeviceInputs {
  std::vector<std::vector<unsigned char>> host;
  std::vector<const unsigned char*> inputs;  // host copies, for the reference
  std::vector<const void*> dev;
  void* out = nullptr;
  DeviceInputs(const InexactPattern& pat, int n, size_t count) : host(n), dev(n, nullptr) {
    const size_t bytes = count * pat.size();
    for (int r = 0; r < n; r++) {
      host[r].resize(bytes);
      for (size_t j = 0; j < count; j++) memcpy(&host[r][j * pat.size()], pat.In(r, j), pat.size());
      inputs.push_back(host[r].data());
      void* p = nullptr;
      if (cudaMalloc(&p, bytes) != cudaSuccess || cudaMemcpy(p, host[r].data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        return;
      dev[r] = p;
    }
    if (cudaMalloc(&out, bytes) != cudaSuccess) out = nullptr;
  }
  bool ok() const {
    for (const void* p : dev)
      if (!p) return false;
    return out != nullptr;
  }
  ~DeviceInputs() {
    for (const void* p : dev) cudaFree(const_cast<void*>(p));
    cudaFree(out);
  }
};

// On a GPU, the real kernel: N = 2, 3 and 8 inputs in device memory, float32 and bfloat16 sum and
// avg, short and long chunks, the same bits as the reference.
TEST(OneshotDevice, EqualsTheRingsOrderOnTheGpu) {
  const std::string why = ringo_test::NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
  for (int n : {2, 3, 8})
    for (ringoDataType_t t : {ringoFloat32, ringoBfloat16})
      for (ringoRedOp_t op : {ringoSum, ringoAvg})
        for (size_t count : {size_t(37 * n + 3), size_t{262144} + 5}) {
          const size_t bytes = count * ringo_cases::TypeSize(t);
          const InexactPattern pat(t, n);
          DeviceInputs b(pat, n, count);
          ASSERT_TRUE(b.ok()) << "cudaMalloc";
          ringo_dev_oneshot d;
          ASSERT_EQ(ringo_dev_oneshot_describe(t, op, count, n, b.dev.data(), b.out, &d), ringoSuccess);
          ASSERT_EQ(ringo_cuda_oneshot_launch(&d, nullptr), ringoSuccess) << ringo_cuda_oneshot_last_error();
          std::vector<unsigned char> got(bytes);
          ASSERT_EQ(cudaMemcpy(got.data(), b.out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
          EXPECT_EQ(0, memcmp(got.data(), ringo_order::RingOrderAllReduce(b.inputs, count, t, op).data(), bytes))
              << ringo_cases::TypeName(t) << " " << ringo_cases::OpName(op) << " n=" << n << " count=" << count;
        }
}

// The kernel alone on a GPU at the sizes where the one-shot threshold will be (every input on this
// GPU, no flags, no copy into a board): the lower bound of the device one-shot's time, printed as
// '# oneshot-kernel' lines that make gpu-check collects beside the ring's times at 1 MiB. Each
// size's last result must still equal the ring's order.
TEST(OneshotDevice, TimesTheKernelAtSmallSizes) {
  const std::string why = ringo_test::NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
  cudaStream_t s;
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  constexpr int kIters = 50;
  for (int n : {2, 4, 8})
    for (ringoDataType_t t : {ringoFloat32, ringoBfloat16})
      for (size_t bytes : {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20, size_t{4} << 20}) {
        const size_t count = bytes / ringo_cases::TypeSize(t);
        const InexactPattern pat(t, n);
        DeviceInputs b(pat, n, count);
        ASSERT_TRUE(b.ok()) << "cudaMalloc";
        ringo_dev_oneshot d;
        ASSERT_EQ(ringo_dev_oneshot_describe(t, ringoSum, count, n, b.dev.data(), b.out, &d), ringoSuccess);
        for (int i = 0; i < 5; i++) ASSERT_EQ(ringo_cuda_oneshot_launch(&d, s), ringoSuccess);
        ASSERT_EQ(cudaEventRecord(e0, s), cudaSuccess);
        for (int i = 0; i < kIters; i++) ASSERT_EQ(ringo_cuda_oneshot_launch(&d, s), ringoSuccess);
        ASSERT_EQ(cudaEventRecord(e1, s), cudaSuccess);
        ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
        float ms = 0;
        ASSERT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
        printf("# oneshot-kernel N=%d %s %zu KiB: %.2f us per launch (combine only)\n", n, ringo_cases::TypeName(t),
               bytes >> 10, 1e3 * ms / kIters);
        std::vector<unsigned char> got(bytes);
        ASSERT_EQ(cudaMemcpy(got.data(), b.out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_EQ(0, memcmp(got.data(), ringo_order::RingOrderAllReduce(b.inputs, count, t, ringoSum).data(), bytes))
            << ringo_cases::TypeName(t) << " n=" << n << " " << bytes << " bytes";
      }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(s);
}

}  // namespace

#else  // !RINGO_HAVE_CUDA

TEST(CudaOneshot, NeedsACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA part (nvcc not found, or CUDA=0): the one-shot kernel is not built";
}

#endif
