// test_ddp_scale.cc — the DDP gradient scale: the scale kernel's per-element code (cuda/ddp_scale.cu,
// emulated on the CPU) and, where a GPU answers, the kernel itself equal ddp.c's host scale bit for bit.
// Depends on src/ddp_device.h, elementwise.h, harness.h, gpu_probe.h. Run: make test (a few seconds).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ddp/ddp_device.h"
#include "include/elementwise.h"
#include "gpu_probe.h"
#include "harness.h"
#include "ringo.h"

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime.h>

#include "include/cuda_scale.h"
#endif

namespace {

using ringo_test::NoGpuReason;  // test/gpu_probe.h
using ringo_test::Options;

size_t Esize(ringoDataType_t t) { return t == ringoFloat64 ? 8 : t == ringoFloat32 ? 4 : 2; }
const char* TypeName(ringoDataType_t t) {
  return t == ringoFloat64 ? "float64" : t == ringoFloat32 ? "float32" : t == ringoFloat16 ? "float16" : "bfloat16";
}

const ringoDataType_t kFloatTypes[] = {ringoFloat16, ringoBfloat16, ringoFloat32, ringoFloat64};
const std::vector<double> kWeights = {0.0, 1.0, 1.0 / 3, 0.5, 0.25, 2.0 / 7, 1e-3, 0.75, 5.0 / 9, 1.0 / 1024,
                                      1e-30, 1.0 - 1e-9};

uint64_t Lcg(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return s >> 11;
}

// Inputs that reach every rounding case: all 65536 patterns of a 16-bit type; edges and random bit
// patterns for float32/float64.
std::vector<uint8_t> EdgeInputs(ringoDataType_t t) {
  std::vector<uint8_t> v;
  auto put = [&](uint64_t bits) {
    const size_t es = Esize(t);
    v.resize(v.size() + es);
    memcpy(&v[v.size() - es], &bits, es);  // little-endian: the low bytes are the value
  };
  if (Esize(t) == 2) {
    for (uint32_t b = 0; b < 65536; b++) put(b);
    return v;
  }
  const bool f32 = t == ringoFloat32;
  const std::vector<uint64_t> edges32 = {0, 0x80000000u, 1, 0x80000001u, 0x007fffffu, 0x00800000u, 0x00800001u,
                                         0x3f800000u, 0x3f800001u, 0x3eaaaaabu, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u,
                                         0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u,
                                         0x7fbfffffu, 0x33800000u, 0x34000001u, 0x0000ffffu};
  const std::vector<uint64_t> edges64 = {0, 1ull << 63, 1, 0x000fffffffffffffull, 0x0010000000000000ull,
                                         0x3ff0000000000000ull, 0x3ff0000000000001ull, 0x7fefffffffffffffull,
                                         0x7ff0000000000000ull, 0xfff0000000000000ull, 0x7ff8000000000000ull,
                                         0x7ff0000000000001ull, 0xfff4000000000abcull, 0x3fd5555555555555ull};
  for (uint64_t e : f32 ? edges32 : edges64) put(e);
  uint64_t s = 12345;
  for (int i = 0; i < 8192; i++) put(f32 ? (Lcg(s) & 0xffffffffu) : (Lcg(s) << 11 | (Lcg(s) & 0x7ff)));
  return v;
}

TEST(DdpDeviceScale, EmulatedKernelEqualsHostScaleBitForBit) {
  for (ringoDataType_t t : kFloatTypes) {
    const std::vector<uint8_t> in = EdgeInputs(t);
    const size_t n = in.size() / Esize(t);
    for (double w : kWeights) {
      std::vector<uint8_t> host(in.size(), 0xAB), emu(in.size(), 0xCD), inplace(in);
      ringo_ddp_host_scale(host.data(), in.data(), n, t, w);
      ringo_ddp_scale_emulate(emu.data(), in.data(), n, t, w);
      ringo_ddp_scale_emulate(inplace.data(), inplace.data(), n, t, w);
      for (size_t i = 0; i < n; i++) {
        const size_t es = Esize(t);
        if (memcmp(&host[i * es], &emu[i * es], es) != 0 || memcmp(&host[i * es], &inplace[i * es], es) != 0) {
          uint64_t a = 0, h = 0, e = 0;
          memcpy(&a, &in[i * es], es), memcpy(&h, &host[i * es], es), memcpy(&e, &emu[i * es], es);
          ADD_FAILURE() << TypeName(t) << " w=" << w << " input 0x" << std::hex << a << ": host 0x" << h
                        << ", kernel code 0x" << e;
          break;
        }
      }
    }
  }
  // Sanity of the reference itself, so the comparison cannot pass with both sides wrong.
  const float x = 3.0f;
  float y = 0;
  ringo_ddp_host_scale(&y, &x, 1, ringoFloat32, 1.0 / 3);
  EXPECT_EQ(y, 1.0f);
  const uint16_t h = ringo_ew_float_to_half(6.0f);
  uint16_t hy = 0;
  ringo_ddp_scale_emulate(&hy, &h, 1, ringoFloat16, 0.5);
  EXPECT_EQ(ringo_ew_half_to_float(hy), 3.0f);
}

// ---------------------------------------------------------------------------------------------
// On a GPU (skipped, with the reason, where none answers). CUDA is only touched in a forked child.

#ifdef RINGO_HAVE_CUDA
#define CU_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())
#endif

TEST(DdpDeviceGpu, ScaleKernelEqualsHostScaleBitForBit) {
  const std::string why = NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
#ifdef RINGO_HAVE_CUDA
  Options o;  // one forked process, no communicator: no unique id
  o.deadline_s = 90;
  o.ringo_timeout_s = 20;
  o.make_id = false;
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId&, ringo_test::Shared&) {
    cudaStream_t s;
    CU_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (ringoDataType_t t : kFloatTypes) {
      const std::vector<uint8_t> in = EdgeInputs(t);
      const size_t n = in.size() / Esize(t);
      void *src = nullptr, *dst = nullptr;
      CU_OK(cudaMalloc(&src, in.size()));
      CU_OK(cudaMalloc(&dst, in.size()));
      for (double w : kWeights) {
        std::vector<uint8_t> host(in.size()), out(in.size()), inplace(in.size());
        ringo_ddp_host_scale(host.data(), in.data(), n, t, w);
        CU_OK(cudaMemcpy(src, in.data(), in.size(), cudaMemcpyHostToDevice));
        CU_OK(cudaMemset(dst, 0xAB, in.size()));
        // Both on the legacy stream, which the kernel's non-blocking stream does not wait for.
        CU_OK(cudaStreamSynchronize(cudaStreamLegacy));
        ASSERT_EQ(ringo_cuda_ddp_scale(dst, src, n, t, w, s), 0) << TypeName(t) << " w=" << w;
        CU_OK(cudaStreamSynchronize(s));
        CU_OK(cudaMemcpy(out.data(), dst, in.size(), cudaMemcpyDeviceToHost));
        ASSERT_EQ(ringo_cuda_ddp_scale(src, src, n, t, w, s), 0);  // in place
        CU_OK(cudaStreamSynchronize(s));
        CU_OK(cudaMemcpy(inplace.data(), src, in.size(), cudaMemcpyDeviceToHost));
        EXPECT_TRUE(host == out) << TypeName(t) << " w=" << w << ": the kernel differs from the host scale";
        EXPECT_TRUE(host == inplace) << TypeName(t) << " w=" << w << ": in place differs";
      }
      cudaFree(src);
      cudaFree(dst);
    }
    cudaStreamDestroy(s);
  }, o);
#endif
}

}  // namespace
