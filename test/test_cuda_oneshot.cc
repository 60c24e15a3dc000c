// test_cuda_oneshot.cc — the device one-shot all-reduce kernel (cuda/oneshot.cu) against its CPU
// reference, the host's ring-order combine (ring_order.h: what the host ring and one-shot give): the
// kernel's own per-thread code on the CPU for every dtype and op, N = 2..8 and 16, short and aligned
// long chunks, buffers at one offset modulo 16 (vectors) and not (scalars); the boarded kernel's
// blocks on host threads (collectives in a row, mismatch, timeout, abort); on a GPU, the real kernel.
// Needs an nvcc build; the GPU test skips without a device. Run: make test (build/test/test_cuda_oneshot).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective_cases.h"
#include "gpu_probe.h"
#include "ring_order.h"
#include "ringo.h"

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "include/cuda_oneshot.h"
#include "include/cuda_ring.h"

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

// ---- the boarded kernel: every rank's every block on a host thread, boards in host memory ----

// n ranks' boards (zeroed, as the device path allocates them), and the k-th collective's launch of
// each, run by the kernel's own block code; the counters of blocks carry over, as on a communicator.
class EmulatedBoards {
 public:
  EmulatedBoards(int n, size_t slot_bytes, int nblocks)
      : n_(n), nblocks_(nblocks), slot_bytes_(slot_bytes), before_(n, 0), errors_(n, 0) {
    const size_t bytes = ringo_dev_board_bytes(slot_bytes);
    for (int r = 0; r < n; r++) {
      mem_.emplace_back(static_cast<char*>(std::aligned_alloc(4096, bytes)), std::free);
      memset(mem_.back().get(), 0, bytes);
      boards_.push_back(mem_.back().get());
    }
  }
  uint64_t timeout_ns = 20000000000ull;

  // Rank r all-reduces counts[r] elements of in[r] into out[r] (types[r], ops[r]: all the same in a
  // right program); skip never runs. Returns each rank's code (the first of its blocks that failed).
  std::vector<int> Run(const std::vector<ringoDataType_t>& types, ringoRedOp_t op, const std::vector<size_t>& counts,
                       const std::vector<const void*>& in, const std::vector<void*>& out, int skip = -1) {
    k_++;
    std::vector<ringo_dev_oneshot_run> run(n_);
    for (int r = 0; r < n_; r++) {
      EXPECT_EQ(ringo_dev_oneshot_board_run(types[r], op, counts[r], n_, r, boards_.data(), slot_bytes_, k_, before_[r],
                                            nblocks_, in[r], out[r], &run[r]),
                ringoSuccess);
      run[r].error = &errors_[r];
      run[r].abort_flag = &abort_;
      run[r].timeout_ns = timeout_ns;
      before_[r] += nblocks_;
    }
    std::vector<int> codes(static_cast<size_t>(n_) * nblocks_, 0);
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; r++)
      for (int b = 0; b < nblocks_ && r != skip; b++)
        threads.emplace_back([&, r, b] { codes[r * nblocks_ + b] = ringo_cuda_oneshot_run_emulate_block(&run[r], b, 3); });
    for (auto& t : threads) t.join();
    std::vector<int> per_rank(n_, 0);
    for (int r = 0; r < n_; r++)
      for (int b = 0; b < nblocks_; b++)
        if (per_rank[r] == 0) per_rank[r] = codes[r * nblocks_ + b];
    return per_rank;
  }
  // Every rank runs collectives k + 1 .. k + K back to back, as its stream would run its kernels: a
  // block of rank r starts the next one once every block of r is done with this one (the kernel's
  // end), never waiting for other ranks there, so a fast rank runs ahead into the slot a slow one
  // may still read, and only the boards' flags keep them apart. in[i][r], out[i][r]: collective i.
  std::vector<int> RunInARow(ringoDataType_t t, ringoRedOp_t op, size_t count,
                             const std::vector<std::vector<const void*>>& in, const std::vector<std::vector<void*>>& out) {
    const size_t kk = in.size();
    std::vector<std::vector<ringo_dev_oneshot_run>> run(kk, std::vector<ringo_dev_oneshot_run>(n_));
    for (size_t i = 0; i < kk; i++) {
      k_++;
      for (int r = 0; r < n_; r++) {
        EXPECT_EQ(ringo_dev_oneshot_board_run(t, op, count, n_, r, boards_.data(), slot_bytes_, k_, before_[r], nblocks_,
                                              in[i][r], out[i][r], &run[i][r]),
                  ringoSuccess);
        run[i][r].error = &errors_[r];
        run[i][r].abort_flag = &abort_;
        run[i][r].timeout_ns = timeout_ns;
        before_[r] += nblocks_;
      }
    }
    std::vector<uint64_t> ended(n_, 0);  // blocks of rank r past their kernel, all collectives
    std::vector<int> codes(static_cast<size_t>(n_) * nblocks_, 0);
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; r++)
      for (int b = 0; b < nblocks_; b++)
        threads.emplace_back([&, r, b] {
          for (size_t i = 0; i < kk; i++) {
            int& code = codes[r * nblocks_ + b];
            if (code == 0) code = ringo_cuda_oneshot_run_emulate_block(&run[i][r], b, 3);
            __atomic_add_fetch(&ended[r], 1, __ATOMIC_ACQ_REL);
            while (__atomic_load_n(&ended[r], __ATOMIC_ACQUIRE) < (i + 1) * nblocks_) std::this_thread::yield();
          }
        });
    for (auto& t : threads) t.join();
    std::vector<int> per_rank(n_, 0);
    for (int r = 0; r < n_; r++)
      for (int b = 0; b < nblocks_; b++)
        if (per_rank[r] == 0) per_rank[r] = codes[r * nblocks_ + b];
    return per_rank;
  }
  int32_t error(int r) const { return errors_[r]; }
  void SetAbort() { abort_ = 1; }

 private:
  int n_, nblocks_;
  size_t slot_bytes_;
  uint64_t k_ = 0;
  std::vector<uint64_t> before_;
  std::vector<int32_t> errors_;
  int32_t abort_ = 0;
  std::vector<std::unique_ptr<char, void (*)(void*)>> mem_;
  std::vector<char*> boards_;
};

// Collective after collective on one set of boards (both slots reused), in and out of place: every
// rank's result is the ring's order's, bit for bit.
TEST(BoardedEmulated, CollectivesInARowEqualTheRingsOrder) {
  for (int n : {2, 3, 5, 8}) {
    EmulatedBoards boards(n, 64 << 10, 2);
    int round = 0;
    for (ringoDataType_t t : {ringoFloat32, ringoBfloat16, ringoFloat64, ringoInt32})
      for (ringoRedOp_t op : {ringoSum, ringoAvg, ringoMax})
        for (size_t count : {size_t{1}, size_t(n) + 3, size_t{4000} / ringo_cases::TypeSize(t) * 3 + 7}) {
          const bool inplace = round++ % 2 == 1;
          const size_t esz = ringo_cases::TypeSize(t);
          const InexactPattern pat(t, n);
          std::vector<std::vector<unsigned char>> in(n, std::vector<unsigned char>(count * esz)),
              out(n, std::vector<unsigned char>(count * esz, 0xa5));
          std::vector<const unsigned char*> inputs;
          for (int r = 0; r < n; r++) {
            for (size_t j = 0; j < count; j++) memcpy(&in[r][j * esz], pat.In(r, j), esz);
            inputs.push_back(in[r].data());
          }
          const std::vector<unsigned char> want = ringo_order::RingOrderAllReduce(inputs, count, t, op);
          std::vector<const void*> src;
          std::vector<void*> dst;
          for (int r = 0; r < n; r++) {
            if (inplace) out[r] = in[r];
            src.push_back(inplace ? out[r].data() : in[r].data());
            dst.push_back(out[r].data());
          }
          const std::vector<int> codes =
              boards.Run(std::vector<ringoDataType_t>(n, t), op, std::vector<size_t>(n, count), src, dst);
          for (int r = 0; r < n; r++) {
            ASSERT_EQ(codes[r], RINGO_DEV_OK) << "n=" << n << " rank " << r;
            ASSERT_EQ(0, memcmp(out[r].data(), want.data(), want.size()))
                << ringo_cases::TypeName(t) << " " << ringo_cases::OpName(op) << " n=" << n << " count=" << count
                << (inplace ? " in place" : "") << " rank " << r;
          }
        }
  }
}

// Ranks running ahead: eight collectives back to back on every rank, each of other inputs, with no
// step between collectives that waits for the other ranks but the kernel's own: every result is
// the ring's order's, so no rank overwrote a slot another still read (two slots and the posted flags
// suffice: cuda_oneshot.h).
TEST(BoardedEmulated, RanksRunningAheadReuseNoSlotStillRead) {
  for (int n : {2, 3, 8}) {
    constexpr size_t kRounds = 8, kCount = 3001;
    const ringoDataType_t t = ringoFloat32;
    const InexactPattern pat(t, n);
    EmulatedBoards boards(n, kCount * 4, 3);
    std::vector<std::vector<std::vector<float>>> in(kRounds), out(kRounds);
    std::vector<std::vector<const void*>> src(kRounds);
    std::vector<std::vector<void*>> dst(kRounds);
    std::vector<std::vector<unsigned char>> want(kRounds);
    for (size_t i = 0; i < kRounds; i++) {
      std::vector<const unsigned char*> inputs;
      for (int r = 0; r < n; r++) {
        in[i].emplace_back(kCount);
        out[i].emplace_back(kCount, -1.0f);
        for (size_t j = 0; j < kCount; j++) memcpy(&in[i][r][j], pat.In(r, j + 97 * i), 4);
        inputs.push_back(reinterpret_cast<const unsigned char*>(in[i][r].data()));
        src[i].push_back(in[i][r].data());
        dst[i].push_back(out[i][r].data());
      }
      want[i] = ringo_order::RingOrderAllReduce(inputs, kCount, t, ringoSum);
    }
    const std::vector<int> codes = boards.RunInARow(t, ringoSum, kCount, src, dst);
    for (int r = 0; r < n; r++) {
      ASSERT_EQ(codes[r], RINGO_DEV_OK) << "n=" << n << " rank " << r;
      for (size_t i = 0; i < kRounds; i++)
        ASSERT_EQ(0, memcmp(out[i][r].data(), want[i].data(), want[i].size()))
            << "n=" << n << " rank " << r << " collective " << i + 1;
    }
  }
}

// A rank that calls another count or dtype is caught at the first wait for its post (its slot's
// fingerprint), long before a timeout; a rank that never runs ends every other rank's wait in a
// timeout; the abort word ends them at once.
TEST(BoardedEmulated, MismatchesTimeoutsAndAbortEndTheWaits) {
  const int n = 3;
  std::vector<std::vector<float>> buf(n, std::vector<float>(1000, 1.0f)), res(n, std::vector<float>(1000));
  std::vector<const void*> src;
  std::vector<void*> dst;
  for (int r = 0; r < n; r++) src.push_back(buf[r].data()), dst.push_back(res[r].data());
  {
    EmulatedBoards boards(n, 4096 * 4, 2);
    boards.timeout_ns = 2000000000ull;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int> codes = boards.Run({ringoFloat32, ringoFloat32, ringoFloat32}, ringoSum, {1000, 999, 1000}, src, dst);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0) << "caught, not timed out";
    for (int r = 0; r < n; r++) EXPECT_EQ(codes[r], RINGO_DEV_MISMATCH) << "rank " << r;
  }
  {
    EmulatedBoards boards(n, 4096 * 4, 2);
    const std::vector<int> codes = boards.Run({ringoFloat32, ringoInt32, ringoFloat32}, ringoSum, {1000, 1000, 1000}, src, dst);
    for (int r = 0; r < n; r++) EXPECT_EQ(codes[r], RINGO_DEV_MISMATCH) << "rank " << r << ": another dtype";
  }
  {
    EmulatedBoards boards(n, 4096 * 4, 2);
    boards.timeout_ns = 200000000ull;
    const std::vector<int> codes =
        boards.Run({ringoFloat32, ringoFloat32, ringoFloat32}, ringoSum, {1000, 1000, 1000}, src, dst, /*skip=*/1);
    EXPECT_EQ(codes[0], RINGO_DEV_TIMEOUT);
    EXPECT_EQ(codes[2], RINGO_DEV_TIMEOUT);
    EXPECT_EQ(boards.error(0), RINGO_DEV_TIMEOUT) << "the code is left for the host";
  }
  {
    EmulatedBoards boards(n, 4096 * 4, 2);
    boards.SetAbort();
    const std::vector<int> codes =
        boards.Run({ringoFloat32, ringoFloat32, ringoFloat32}, ringoSum, {1000, 1000, 1000}, src, dst, /*skip=*/1);
    EXPECT_EQ(codes[0], RINGO_DEV_ABORTED);
  }
}

// The launch's own pure half: position p's slot for collective k is its board's slot k % 2, the
// blocks' counters end one launch further, and a buffer over a slot is refused.
TEST(BoardedDescribe, SlotsAlternateAndTheCountersAdvance) {
  std::vector<char> a(ringo_dev_board_bytes(1024)), b(ringo_dev_board_bytes(1024));
  char* boards[2] = {a.data(), b.data()};
  float in[256], out[256];
  ringo_dev_oneshot_run run;
  ASSERT_EQ(ringo_dev_oneshot_board_run(ringoFloat32, ringoSum, 256, 2, 1, boards, 1024, 3, 40, 4, in, out, &run),
            ringoSuccess);
  EXPECT_EQ(run.slot, b.data() + ringo_dev_board_slot_offset(1024, 1));
  EXPECT_EQ(run.combine.in[0], a.data() + ringo_dev_board_slot_offset(1024, 1));
  EXPECT_EQ(run.mine, reinterpret_cast<ringo_dev_board_flags*>(b.data()));
  EXPECT_EQ(run.arrive_target, 44u);
  ASSERT_EQ(ringo_dev_oneshot_board_run(ringoFloat32, ringoSum, 256, 2, 0, boards, 1024, 4, 44, 4, in, out, &run),
            ringoSuccess);
  EXPECT_EQ(run.slot, a.data() + ringo_dev_board_slot_offset(1024, 0));
  EXPECT_EQ(ringo_dev_oneshot_board_run(ringoFloat32, ringoSum, 257, 2, 0, boards, 1024, 4, 44, 4, in, out, &run),
            ringoInvalidArgument)
      << "1028 bytes in 1024-byte slots";
  EXPECT_EQ(sizeof(ringo_dev_board_flags), 384u) << "three 128-byte lines";
  EXPECT_LE(sizeof(ringo_dev_oneshot_run), 4096u) << "a kernel parameter must fit 4 KiB";
}

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

// The boarded kernel on a GPU: N ranks of this process on this GPU (boards in device memory, flags
// at GPU scope, each rank its own stream, launched one after another as a group would), 25
// all-reduces in a row; every rank's last result equals the ring's order, and the time of the
// slowest stream, per all-reduce, is printed as '# oneshot-boarded' lines (make gpu-check collects
// them): the device one-shot's own time, without the library's launch path around it.
TEST(OneshotDevice, BoardedRanksOnOneGpuEqualTheRingsOrder) {
  const std::string why = ringo_test::NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
  constexpr int kBlocks = 8, kWarm = 5, kIters = 20;
  constexpr size_t kSlot = size_t{1} << 20;
  for (int n : {2, 4, 8})
    for (ringoDataType_t t : {ringoFloat32, ringoBfloat16})
      for (size_t bytes : {size_t{64} << 10, size_t{256} << 10, kSlot}) {
        const size_t count = bytes / ringo_cases::TypeSize(t);
        const InexactPattern pat(t, n);
        DeviceInputs b(pat, n, count);
        ASSERT_TRUE(b.ok()) << "cudaMalloc";
        std::vector<char*> boards(n);
        std::vector<void*> outs(n);
        std::vector<cudaStream_t> streams(n);
        std::vector<cudaEvent_t> e0(n), e1(n);
        int32_t* words = nullptr;  // [0]: the error word, [1]: the abort word
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&words), 2 * sizeof(int32_t)), cudaSuccess);
        ASSERT_EQ(cudaMemset(words, 0, 2 * sizeof(int32_t)), cudaSuccess);
        for (int r = 0; r < n; r++) {
          ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&boards[r]), ringo_dev_board_bytes(kSlot)), cudaSuccess);
          ASSERT_EQ(cudaMemset(boards[r], 0, ringo_dev_board_bytes(kSlot)), cudaSuccess);
          ASSERT_EQ(cudaMalloc(&outs[r], bytes), cudaSuccess);
          ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
          ASSERT_EQ(cudaEventCreate(&e0[r]), cudaSuccess);
          ASSERT_EQ(cudaEventCreate(&e1[r]), cudaSuccess);
        }
        for (int it = 0; it < kWarm + kIters; it++) {
          if (it == kWarm) {
            for (int r = 0; r < n; r++) ASSERT_EQ(cudaEventRecord(e0[r], streams[r]), cudaSuccess);
          }
          for (int r = 0; r < n; r++) {
            ringo_dev_oneshot_run run;
            ASSERT_EQ(ringo_dev_oneshot_board_run(t, ringoSum, count, n, r, boards.data(), kSlot, uint64_t(it) + 1,
                                                  uint64_t(it) * kBlocks, kBlocks, b.dev[r], outs[r], &run),
                      ringoSuccess);
            run.error = words;
            run.abort_flag = words + 1;
            run.timeout_ns = 5000000000ull;
            run.gpu_scope = 1;
            ASSERT_EQ(ringo_cuda_oneshot_run_launch(&run, streams[r]), ringoSuccess) << ringo_cuda_oneshot_last_error();
          }
        }
        float most = 0;
        for (int r = 0; r < n; r++) {
          ASSERT_EQ(cudaEventRecord(e1[r], streams[r]), cudaSuccess);
          ASSERT_EQ(cudaEventSynchronize(e1[r]), cudaSuccess);
          float ms = 0;
          ASSERT_EQ(cudaEventElapsedTime(&ms, e0[r], e1[r]), cudaSuccess);
          if (ms > most) most = ms;
        }
        int32_t error = -1;
        ASSERT_EQ(cudaMemcpy(&error, words, sizeof error, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_EQ(error, RINGO_DEV_OK) << "n=" << n << " " << bytes << " bytes";
        printf("# oneshot-boarded N=%d %s %zu KiB: %.2f us per all-reduce (N kernels on one GPU)\n", n,
               ringo_cases::TypeName(t), bytes >> 10, 1e3 * most / kIters);
        const std::vector<unsigned char> want = ringo_order::RingOrderAllReduce(b.inputs, count, t, ringoSum);
        std::vector<unsigned char> got(bytes);
        for (int r = 0; r < n; r++) {
          ASSERT_EQ(cudaMemcpy(got.data(), outs[r], bytes, cudaMemcpyDeviceToHost), cudaSuccess);
          EXPECT_EQ(0, memcmp(got.data(), want.data(), bytes)) << "n=" << n << " " << bytes << " bytes, rank " << r;
          cudaFree(boards[r]);
          cudaFree(outs[r]);
          cudaStreamDestroy(streams[r]);
          cudaEventDestroy(e0[r]);
          cudaEventDestroy(e1[r]);
        }
        cudaFree(words);
      }
}

}  // namespace

#else  // !RINGO_HAVE_CUDA

TEST(CudaOneshot, NeedsACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA part (nvcc not found, or CUDA=0): the one-shot kernel is not built";
}

#endif
