// test_cuda_ring.cc — the ring kernel's own block code (cuda/ring.cu) run on the CPU: every rank's every
// channel on a host thread, over FIFO regions in host memory, for every collective, dtype and op, with
// descriptors from src/device_plan.c; results checked exactly; then timeouts, poison and abort. Needs a
// CUDA build (nvcc), not a GPU. Run: make test (build/test/test_cuda_ring).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "collective_cases.h"
#include "ringo.h"

#ifdef RINGO_HAVE_CUDA
#include "cuda_ring.h"
#include "schedule.h"

namespace {

using ringo_cases::Case;
using ringo_cases::CaseBufs;
using ringo_cases::Coll;

using Pattern = ringo_cases::ExactPattern<ringo_cases::SmallIntData>;

// A ring of n emulated ranks: each rank's FIFO region (written by its previous rank), its counters
// (which, as on the GPU, persist from one collective to the next), its error word, one abort flag.
class EmulatedRing {
 public:
  EmulatedRing(int n, int nchannels, int nslots, size_t slot_bytes)
      : n_(n), nch_(nchannels), nslots_(nslots), slot_bytes_(slot_bytes), ring_(n), errors_(n, 0) {
    std::iota(ring_.begin(), ring_.end(), 0);
    const size_t bytes = ringo_dev_region_bytes(nchannels, nslots, slot_bytes);
    for (int r = 0; r < n; r++) {
      regions_.emplace_back(static_cast<char*>(std::aligned_alloc(4096, bytes)), std::free);
      memset(regions_.back().get(), 0, bytes);
      counters_.emplace_back(2 * static_cast<size_t>(nchannels), 0);
    }
  }

  // Runs one collective on every rank (rank r's buffers in bufs[r]); returns each rank's RINGO_DEV_*
  // code (the first of its channels that failed). skip_rank never runs (a rank that died).
  std::vector<int> Run(const Case& c, std::vector<CaseBufs>& bufs, int skip_rank = -1, uint64_t timeout_ns = 20e9,
                       unsigned nthreads = 3) {
    std::vector<ringo_dev_ring> d(static_cast<size_t>(n_));
    for (int r = 0; r < n_; r++) {
      const ringo_dev_coll dc = {static_cast<int>(c.coll), c.type, c.op, c.count, n_, r, c.root, ring_.data(),
                                 bufs[r].send, bufs[r].recv, nch_, nslots_, slot_bytes_};
      EXPECT_EQ(ringo_dev_ring_describe(&dc, &d[r]), ringoSuccess) << ringo_cases::Label(c);
      d[r].recv_region = regions_[r].get();
      d[r].send_region = regions_[(r + 1) % n_].get();
      d[r].counters = counters_[r].data();
      d[r].error = &errors_[r];
      d[r].abort_flag = &abort_;
      d[r].timeout_ns = timeout_ns;
    }
    std::vector<int> codes(static_cast<size_t>(n_) * nch_, 0);
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; r++)
      for (int ch = 0; ch < nch_ && r != skip_rank; ch++)
        threads.emplace_back([&, r, ch] { codes[r * nch_ + ch] = ringo_cuda_ring_emulate_block(&d[r], ch, nthreads); });
    for (auto& t : threads) t.join();
    std::vector<int> per_rank(static_cast<size_t>(n_), 0);
    for (int r = 0; r < n_; r++)
      for (int ch = 0; ch < nch_; ch++)
        if (per_rank[r] == 0) per_rank[r] = codes[r * nch_ + ch];
    return per_rank;
  }

  int32_t error(int r) const { return errors_[r]; }
  void SetAbort() { abort_ = 1; }
  const uint64_t* counters(int r) const { return counters_[r].data(); }

 private:
  int n_, nch_, nslots_;
  size_t slot_bytes_;
  std::vector<int> ring_;
  std::vector<std::unique_ptr<char, void (*)(void*)>> regions_;
  std::vector<std::vector<uint64_t>> counters_;
  std::vector<int32_t> errors_;
  int32_t abort_ = 0;
};

std::string RunAndCheck(EmulatedRing& ring, const Case& c, int n) {
  const Pattern pat(c.type, c.coll == Coll::kAllGather || c.coll == Coll::kBroadcast ? ringoSum : c.op, n);
  std::vector<CaseBufs> bufs(static_cast<size_t>(n));
  for (int r = 0; r < n; r++) ringo_cases::Prepare(c, pat, n, r, &bufs[r]);
  const std::vector<int> codes = ring.Run(c, bufs);
  std::string err;
  for (int r = 0; r < n; r++) {
    if (codes[r] != RINGO_DEV_OK) ringo_cases::Append(&err, "rank " + std::to_string(r) + " code " + std::to_string(codes[r]));
    const std::string e = ringo_cases::CheckRecv(c, pat, n, r, bufs[r]);
    if (!e.empty()) ringo_cases::Append(&err, "rank " + std::to_string(r) + ": " + e);
    if (!bufs[r].GuardsIntact()) ringo_cases::Append(&err, "rank " + std::to_string(r) + " wrote past a buffer");
  }
  return err;
}

struct Shape {
  int n, nchannels, nslots;
  size_t slot_bytes;
};

class CudaRingEmulated : public testing::TestWithParam<Shape> {};

// Every collective, dtype and op, in and out of place, with counts around N, a chunk that is not a
// multiple of the slice, and many slices per channel so every FIFO wraps; one ring (counters carry
// over) for all of them, as one communicator would run them.
TEST_P(CudaRingEmulated, EveryCollectiveTypeAndOpIsExact) {
  const Shape s = GetParam();
  EmulatedRing ring(s.n, s.nchannels, s.nslots, s.slot_bytes);
  int root = 0;
  const size_t counts[] = {1, static_cast<size_t>(s.n) + 1, 2000 + 3};
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce})
    for (ringoDataType_t t : ringo_cases::kAllTypes)
      for (int o = 0; o < RINGO_NUM_OPS; o++) {
        if ((coll == Coll::kAllGather || coll == Coll::kBroadcast) && o > 0) continue;
        for (size_t count : counts)
          for (bool inplace : {false, true}) {
            const Case c{coll, t, ringo_cases::kAllOps[o], count, inplace, root++ % s.n};
            const std::string err = RunAndCheck(ring, c, s.n);
            ASSERT_EQ(err, "") << ringo_cases::Label(c);
          }
      }
}

const Shape kShapes[] = {{2, 1, 2, 64}, {3, 2, 4, 128}, {4, 3, 2, 256}, {5, 4, 3, 96}, {8, 2, 4, 4096}};
INSTANTIATE_TEST_SUITE_P(Shapes, CudaRingEmulated, testing::ValuesIn(kShapes),
                         [](const testing::TestParamInfo<Shape>& i) {
                           return "N" + std::to_string(i.param.n) + "_ch" + std::to_string(i.param.nchannels) +
                                  "_slots" + std::to_string(i.param.nslots) + "_" +
                                  std::to_string(i.param.slot_bytes) + "B";
                         });

// A large all-reduce: thousands of slices through small FIFOs, every channel busy.
TEST(CudaRingEmulatedLarge, FloatAllReduceOfAMillionElements) {
  const int n = 4;
  EmulatedRing ring(n, 4, 4, 1024);
  for (bool inplace : {false, true}) {
    const Case c{Coll::kAllReduce, ringoFloat32, ringoSum, 1000003, inplace, 0};
    ASSERT_EQ(RunAndCheck(ring, c, n), "") << ringo_cases::Label(c);
  }
}

// The counters say how many slots went each way: sender's sent == receiver's received, per
// channel, after any sequence of collectives.
TEST(CudaRingEmulatedLarge, CountersOfBothEndsAgree) {
  const int n = 3, nch = 2;
  EmulatedRing ring(n, nch, 2, 64);
  for (size_t count : {7, 100, 1001}) {
    const Case c{Coll::kAllReduce, ringoInt32, ringoSum, count, false, 0};
    ASSERT_EQ(RunAndCheck(ring, c, n), "");
  }
  for (int r = 0; r < n; r++)
    for (int ch = 0; ch < nch; ch++)
      EXPECT_EQ(ring.counters(r)[2 * ch], ring.counters((r + 1) % n)[2 * ch + 1]) << "rank " << r << " channel " << ch;
}

// A rank that never runs: its neighbours' waits end (timeout, or the poison the first to time
// out leaves), every running rank reports an error, nobody hangs.
TEST(CudaRingEmulatedFailures, AMissingRankEndsEveryWaitInBoundedTime) {
  const int n = 4;
  EmulatedRing ring(n, 2, 2, 64);
  const Case c{Coll::kAllReduce, ringoFloat32, ringoSum, 4096, false, 0};
  const Pattern pat(c.type, c.op, n);
  std::vector<CaseBufs> bufs(n);
  for (int r = 0; r < n; r++) ringo_cases::Prepare(c, pat, n, r, &bufs[r]);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int> codes = ring.Run(c, bufs, /*skip_rank=*/2, /*timeout_ns=*/300000000);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);
  int timeouts = 0;
  for (int r = 0; r < n; r++) {
    if (r == 2) continue;
    EXPECT_TRUE(codes[r] == RINGO_DEV_TIMEOUT || codes[r] == RINGO_DEV_POISONED) << "rank " << r << ": " << codes[r];
    // The error word keeps the rank's first code (one channel may time out, another see its poison).
    EXPECT_TRUE(ring.error(r) == RINGO_DEV_TIMEOUT || ring.error(r) == RINGO_DEV_POISONED)
        << "rank " << r << " must leave its code for the host, not " << ring.error(r);
    timeouts += ring.error(r) == RINGO_DEV_TIMEOUT;
  }
  EXPECT_GE(timeouts, 1) << "someone must have timed out first";
}

TEST(CudaRingEmulatedFailures, AbortEndsTheWaits) {
  const int n = 2;
  EmulatedRing ring(n, 1, 2, 64);
  ring.SetAbort();
  const Case c{Coll::kAllReduce, ringoFloat32, ringoSum, 4096, false, 0};
  const Pattern pat(c.type, c.op, n);
  std::vector<CaseBufs> bufs(n);
  for (int r = 0; r < n; r++) ringo_cases::Prepare(c, pat, n, r, &bufs[r]);
  const std::vector<int> codes = ring.Run(c, bufs, /*skip_rank=*/1, /*timeout_ns=*/60000000000ull);
  EXPECT_EQ(codes[0], RINGO_DEV_ABORTED);
}

TEST(CudaRingDescribe, RefusesShapesTheKernelCannotRun) {
  std::vector<int> ring(65);
  std::iota(ring.begin(), ring.end(), 0);
  ringo_dev_ring d;
  ringo_dev_coll c = {RINGO_COLL_ALLREDUCE, ringoFloat32, ringoSum, 10, 65, 0, 0, ring.data(), nullptr, nullptr, 1, 2, 64};
  EXPECT_EQ(ringo_dev_ring_describe(&c, &d), ringoInvalidUsage) << "65 ranks";
  c.nranks = 4;
  c.slot_bytes = 72;
  EXPECT_EQ(ringo_dev_ring_describe(&c, &d), ringoInvalidArgument) << "slot not a multiple of 16";
  c.slot_bytes = 64;
  c.type = static_cast<ringoDataType_t>(RINGO_NUM_TYPES);
  EXPECT_EQ(ringo_dev_ring_describe(&c, &d), ringoInvalidArgument) << "bad dtype";
  c.type = ringoFloat32;
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.nsteps, 2 * 4 - 1);
  EXPECT_EQ(d.slice_elems, 16u);
  EXPECT_EQ(d.rounds, 1u);
  EXPECT_LE(sizeof(ringo_dev_ring), 4096u) << "a kernel parameter must fit 4 KiB";
}

}  // namespace

#else  // !RINGO_HAVE_CUDA

TEST(CudaRingEmulated, NeedsACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA part (nvcc not found, or CUDA=0): the ring kernel is not built";
}

#endif
