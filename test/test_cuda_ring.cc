// test_cuda_ring.cc — the ring kernel's own block code (cuda/ring.cu) run on the CPU: every rank's every
// channel on a host thread, over FIFO regions in host memory, for every collective, dtype and op, with
// descriptors from src/device_plan.c; results checked exactly; then timeouts, poison, abort and ranks
// that disagree on the collective (slot stamps). Needs a CUDA build (nvcc), not a GPU.
// Run: make test (build/test/test_cuda_ring).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "collective_cases.h"
#include "ring_order.h"
#include "ringo.h"

#ifdef RINGO_HAVE_CUDA
#include "include/cuda_ring.h"
#include "sched/schedule.h"

namespace {

using ringo_cases::Case;
using ringo_cases::CaseBufs;
using ringo_cases::Coll;

using Pattern = ringo_cases::ExactPattern<ringo_cases::SmallIntData>;

// A ring of n emulated ranks: each rank's FIFO region (written by its previous rank), its counters
// (which, as on the GPU, persist from one collective to the next), its collective sequence number
// (one more for every collective, as a communicator's), its error word, one abort flag.
class EmulatedRing {
 public:
  EmulatedRing(int n, int nchannels, int nslots, size_t slot_bytes)
      : n_(n), nch_(nchannels), nslots_(nslots), slot_bytes_(slot_bytes), ring_(n), seq_(n, 0), errors_(n, 0) {
    std::iota(ring_.begin(), ring_.end(), 0);
    const size_t bytes = ringo_dev_region_bytes(nchannels, nslots, slot_bytes);
    for (int r = 0; r < n; r++) {
      regions_.emplace_back(static_cast<char*>(std::aligned_alloc(4096, bytes)), std::free);
      memset(regions_.back().get(), 0, bytes);
      counters_.emplace_back(2 * static_cast<size_t>(nchannels), 0);
    }
  }

  int gpu_scope = 0;  // the launch's flag scope (RINGO_CUDA_GPU_SCOPE); the CPU's atomics either way
  size_t min_slice_bytes = 0;  // 0: full slots; else slices shrink to spread over the channels
  int window = 0;              // rounds per step together (0: nslots / 2)

  // Runs one collective on every rank (rank r's buffers in bufs[r]); returns each rank's RINGO_DEV_*
  // code (the first of its channels that failed). skip_rank never runs (a rank that died).
  std::vector<int> Run(const Case& c, std::vector<CaseBufs>& bufs, int skip_rank = -1, uint64_t timeout_ns = 20e9,
                       unsigned nthreads = 3) {
    return RunEach(std::vector<Case>(static_cast<size_t>(n_), c), bufs, skip_rank, timeout_ns, nthreads);
  }

  // The same with rank r calling cases[r]: ranks that disagree, as a wrong program's would.
  std::vector<int> RunEach(const std::vector<Case>& cases, std::vector<CaseBufs>& bufs, int skip_rank = -1,
                           uint64_t timeout_ns = 20e9, unsigned nthreads = 3) {
    std::vector<ringo_dev_ring> d(static_cast<size_t>(n_));
    for (int r = 0; r < n_; r++) {
      const Case& c = cases[r];
      const ringo_dev_coll dc = {static_cast<int>(c.coll), c.type, c.op, c.count, n_, r, c.root, ring_.data(),
                                 bufs[r].send, bufs[r].recv, nch_, nslots_, slot_bytes_, seq_[r]++,
                                 min_slice_bytes, window};
      EXPECT_EQ(ringo_dev_ring_describe(&dc, &d[r]), ringoSuccess) << ringo_cases::Label(c);
      d[r].recv_region = regions_[r].get();
      d[r].send_region = regions_[(r + 1) % n_].get();
      d[r].counters = counters_[r].data();
      d[r].error = &errors_[r];
      d[r].abort_flag = &abort_;
      d[r].timeout_ns = timeout_ns;
      d[r].gpu_scope = gpu_scope;
      d[r].fence = 1;
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
  // Rank r has called one collective more than the others: its sequence numbers run ahead.
  void SkipCollective(int r) { seq_[r]++; }
  const uint64_t* counters(int r) const { return counters_[r].data(); }

 private:
  int n_, nch_, nslots_;
  size_t slot_bytes_;
  std::vector<int> ring_;
  std::vector<uint64_t> seq_;
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
  size_t min_slice = 0;  // RINGO_CUDA_MIN_SLICE_BYTES (0: every slice fills a slot)
  int window = 0;        // RINGO_CUDA_WINDOW (0: nslots / 2)
};

class CudaRingEmulated : public testing::TestWithParam<Shape> {};

// Every collective, dtype and op, in and out of place, with counts around N, a chunk that is not a
// multiple of the slice, and many slices per channel so every FIFO wraps; one ring (counters carry
// over) for all of them, as one communicator would run them.
TEST_P(CudaRingEmulated, EveryCollectiveTypeAndOpIsExact) {
  const Shape s = GetParam();
  EmulatedRing ring(s.n, s.nchannels, s.nslots, s.slot_bytes);
  ring.min_slice_bytes = s.min_slice;
  ring.window = s.window;
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

// Windows of nslots / 2 rounds by default (one round where the slots are 2 or 3); one round at a time
// with 4 slots; three of 6 slots. The last two shrink their slices to spread short chunks over every
// channel (16- and 48-byte floors).
const Shape kShapes[] = {{2, 1, 2, 64},   {3, 2, 4, 128},          {3, 2, 4, 128, 0, 1}, {4, 3, 2, 256},
                         {5, 4, 3, 96},   {4, 3, 6, 256, 0, 3},    {8, 2, 4, 4096},      {3, 4, 2, 4096, 16},
                         {5, 3, 3, 1024, 48}};
INSTANTIATE_TEST_SUITE_P(Shapes, CudaRingEmulated, testing::ValuesIn(kShapes),
                         [](const testing::TestParamInfo<Shape>& i) {
                           return "N" + std::to_string(i.param.n) + "_ch" + std::to_string(i.param.nchannels) +
                                  "_slots" + std::to_string(i.param.nslots) + "_" +
                                  std::to_string(i.param.slot_bytes) + "B" +
                                  (i.param.min_slice ? "_min" + std::to_string(i.param.min_slice) + "B" : "") +
                                  (i.param.window ? "_w" + std::to_string(i.param.window) : "");
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

// Long chunks of every N = 2..8 start at 16-byte boundaries (ringo_chunk_range's aligned cut), so the
// kernel's vectors cover them, and the kernel's results equal, bit for bit on every rank, the chunks
// combined in the ring's order by the host's reduce (what the host ring and the one-shot give:
// test_oneshot.cc): inexact floats, so another order or cut would change low bits. The counts are
// ones whose chunks the old cut started off a 16-byte boundary for every dtype (N = 3's 16 MiB of
// float32 was one), with N dividing the count and not.
TEST(CudaRingEmulatedAligned, LongChunksOfEveryNAreAlignedAndEqualTheRingsOrder) {
  const ringoDataType_t types[] = {ringoFloat32, ringoBfloat16, ringoFloat16, ringoFloat64, ringoInt8};
  for (int n = 2; n <= 8; n++) {
    EmulatedRing ring(n, 3, 4, 8192);
    const size_t counts[] = {RINGO_CHUNK_ALIGN_MIN * n + 1, size_t{12289} * n};  // chunk 1 at an odd offset
    for (ringoDataType_t t : types)
      for (ringoRedOp_t op : {ringoSum, ringoAvg})
        for (size_t count : counts) {
          const size_t esz = ringo_cases::TypeSize(t);
          const Case c{Coll::kAllReduce, t, op, count, false, 0};
          ASSERT_TRUE(ringo_order::OldCutMisaligns(count, n, esz)) << ringo_cases::Label(c) << " n=" << n;
          const ringo_order::InexactPattern pat(t, n);
          std::vector<CaseBufs> bufs(static_cast<size_t>(n));
          std::vector<const unsigned char*> inputs;
          for (int r = 0; r < n; r++) {
            ringo_cases::Prepare(c, pat, n, r, &bufs[r]);
            inputs.push_back(bufs[r].send);
          }
          const std::vector<unsigned char> want = ringo_order::RingOrderAllReduce(inputs, count, t, op);
          std::vector<int> order(static_cast<size_t>(n));
          std::iota(order.begin(), order.end(), 0);
          const ringo_dev_coll dc = {RINGO_COLL_ALLREDUCE, t, op, count, n, 0, 0, order.data(), nullptr, nullptr, 3, 4,
                                     8192, 0, 0, 0};
          ringo_dev_ring d;
          ASSERT_EQ(ringo_dev_ring_describe(&dc, &d), ringoSuccess);
          for (int k = 0; k < n; k++)
            ASSERT_EQ(d.chunk[k].in_off * esz % 16, 0u) << ringo_cases::Label(c) << " n=" << n << " chunk " << k;
          const std::vector<int> codes = ring.Run(c, bufs);
          for (int r = 0; r < n; r++) {
            ASSERT_EQ(codes[r], RINGO_DEV_OK) << ringo_cases::Label(c) << " n=" << n << " rank " << r;
            ASSERT_EQ(0, memcmp(bufs[r].recv, want.data(), want.size()))
                << ringo_cases::Label(c) << " n=" << n << " rank " << r << ": not the ring's order's bits";
            ASSERT_TRUE(bufs[r].GuardsIntact()) << ringo_cases::Label(c) << " n=" << n << " rank " << r;
          }
        }
  }
}

// GPU-scope flags (every rank a thread of one process on one GPU) take the same path through the
// kernel's code: the same exact results.
TEST(CudaRingEmulatedLarge, GpuScopeFlagsGiveTheSameResults) {
  const int n = 3;
  EmulatedRing ring(n, 2, 4, 1024);
  ring.gpu_scope = 1;
  for (const Case& c : {Case{Coll::kAllReduce, ringoFloat32, ringoSum, 100003, false, 0},
                        Case{Coll::kReduceScatter, ringoInt32, ringoMax, 5001, true, 0}})
    ASSERT_EQ(RunAndCheck(ring, c, n), "") << ringo_cases::Label(c);
}

// Where the kernel syncs at GPU scope: by default exactly where every rank is a thread of this
// process on this GPU (InitAll with one device listed N times), the case PTX's .gpu scope covers;
// RINGO_CUDA_GPU_SCOPE=0 keeps system scope there, =1 takes GPU scope across processes on one GPU,
// and ranks on another GPU or host always get system scope.
TEST(CudaRingDescribe, FlagScopeIsGpuExactlyWhereEveryRankIsThisProcessOnThisGpu) {
  struct Want {
    int setting, same_gpu, same_process, gpu_scope;
  };
  const Want wants[] = {{-1, 1, 1, 1}, {-1, 1, 0, 0}, {-1, 0, 0, 0}, {-1, 0, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 0},
                        {1, 1, 1, 1},  {1, 1, 0, 1},  {1, 0, 0, 0},  {1, 0, 1, 0}};
  for (const Want& w : wants)
    EXPECT_EQ(ringo_dev_flag_scope(w.setting, w.same_gpu, w.same_process), w.gpu_scope)
        << "setting " << w.setting << " same_gpu " << w.same_gpu << " same_process " << w.same_process;
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

// Runs cases (rank r calls cases[r]; 2 s bound on every wait) on a fresh ring, or on ring when
// given, and checks what a disagreement must give: every rank stops on MISMATCH or on the poison a
// mismatched neighbour left, at least one rank saw the mismatch itself, and all of that long
// before any wait could have timed out.
void ExpectMismatch(const std::vector<Case>& cases, EmulatedRing* ring = nullptr) {
  const int n = static_cast<int>(cases.size());
  EmulatedRing fresh(n, 2, 2, 64);
  if (!ring) ring = &fresh;
  std::vector<CaseBufs> bufs(static_cast<size_t>(n));
  std::string what;
  for (int r = 0; r < n; r++) {
    const Case& c = cases[r];
    const Pattern pat(c.type, c.coll == Coll::kAllGather || c.coll == Coll::kBroadcast ? ringoSum : c.op, n);
    ringo_cases::Prepare(c, pat, n, r, &bufs[r]);
    what += " rank " + std::to_string(r) + ": " + ringo_cases::Label(c) + ";";
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int> codes = ring->RunEach(cases, bufs, /*skip_rank=*/-1, /*timeout_ns=*/2000000000ull);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 1.0) << what << " took as long as a timeout: the mismatch was not caught";
  int mismatches = 0;
  for (int r = 0; r < n; r++) {
    EXPECT_TRUE(codes[r] == RINGO_DEV_MISMATCH || codes[r] == RINGO_DEV_POISONED)
        << what << " rank " << r << " left with " << codes[r];
    EXPECT_TRUE(ring->error(r) == RINGO_DEV_MISMATCH || ring->error(r) == RINGO_DEV_POISONED)
        << what << " rank " << r << "'s error word holds " << ring->error(r);
    mismatches += ring->error(r) == RINGO_DEV_MISMATCH;
    EXPECT_TRUE(bufs[r].GuardsIntact()) << what << " rank " << r << ": written past a buffer";
  }
  EXPECT_GE(mismatches, 1) << what << " nobody saw the mismatch itself";
}

TEST(CudaRingEmulatedMismatch, DifferentCountsAreCaught) {
  const Case a{Coll::kAllReduce, ringoFloat32, ringoSum, 1000, false, 0};
  Case b = a;
  b.count = 999;
  ExpectMismatch({a, b});
  b.count = 4000;  // more rounds than the other rank runs
  ExpectMismatch({a, b});
  ExpectMismatch({a, a, b, a});  // one rank of four: only its links see it, the rest are poisoned
}

TEST(CudaRingEmulatedMismatch, DifferentOpsAreCaught) {
  const Case a{Coll::kAllReduce, ringoInt32, ringoSum, 1000, false, 0};
  Case b = a;
  b.op = ringoMax;
  ExpectMismatch({a, b});
  b.op = ringoAvg;
  ExpectMismatch({a, a, b});
}

// The other fields of the fingerprint: dtype (same count, so another slice length), collective
// kind (another schedule), root. (Only a slot that moves carries a stamp: a Reduce of three ranks
// where rank 1 alone names root 1 has every rank wait to receive first, which ends in a timeout.)
TEST(CudaRingEmulatedMismatch, DifferentTypesCollectivesAndRootsAreCaught) {
  const Case a{Coll::kAllReduce, ringoFloat32, ringoSum, 1000, false, 0};
  Case b = a;
  b.type = ringoInt32;
  ExpectMismatch({a, b});
  b = a;
  b.coll = Coll::kReduceScatter;
  ExpectMismatch({a, b, a});
  const Case r0{Coll::kReduce, ringoFloat32, ringoSum, 1000, false, 0};
  Case r1 = r0;
  r1.root = 1;
  ExpectMismatch({r0, r0, r1});
}

// A rank one collective ahead (it called one the others did not) calls the same thing as they do
// next; only the sequence number tells them apart. Run after good collectives on the same ring, so
// the stamps and counters of earlier collectives are in place, as on a live communicator.
TEST(CudaRingEmulatedMismatch, ARankACollectiveAheadIsCaught) {
  for (int ahead : {0, 1}) {
    EmulatedRing ring(3, 2, 2, 64);
    for (size_t count : {5, 300, 1001}) {
      const Case good{Coll::kAllReduce, ringoInt32, ringoSum, count, false, 0};
      ASSERT_EQ(RunAndCheck(ring, good, 3), "") << "no false mismatch across collectives";
    }
    ring.SkipCollective(ahead);
    const Case c{Coll::kAllReduce, ringoInt32, ringoSum, 1001, false, 0};
    ExpectMismatch({c, c, c}, &ring);
  }
}

// Slices: full slots by default; with a floor, as small as spreads the longest chunk over every
// channel (16-byte multiples), never below the floor nor above a slot; the same at every position.
TEST(CudaRingDescribe, SlicesSpreadShortChunksOverEveryChannel) {
  std::vector<int> ring(4);
  std::iota(ring.begin(), ring.end(), 0);
  ringo_dev_ring d;
  // All-reduce of 1000 floats on 4 ranks: chunks of 250 elements (1000 bytes), 4 channels.
  ringo_dev_coll c = {RINGO_COLL_ALLREDUCE, ringoFloat32, ringoSum, 1000, 4, 0, 0, ring.data(), nullptr, nullptr, 4, 2,
                      4096, 1, 0, 0};
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.slice_elems, 1024u) << "no floor: a full slot";
  EXPECT_EQ(d.rounds, 1u) << "one channel of four busy";
  c.min_slice_bytes = 16;
  for (int pos = 0; pos < 4; pos++) {
    c.pos = pos;
    ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
    EXPECT_EQ(d.slice_elems, 64u) << "1000 bytes over 4 channels, up to 16 bytes: 256 bytes";
    EXPECT_EQ(d.rounds, 4u) << "every channel busy";
  }
  c.min_slice_bytes = 500;
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.slice_elems, 128u) << "the floor, up to 16 bytes: 512 bytes";
  EXPECT_EQ(d.rounds, 2u);
  c.min_slice_bytes = 4096;
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.slice_elems, 1024u) << "a floor of a slot: full slots";
  c.min_slice_bytes = 16;
  c.count = 100000;  // chunks of 100000 bytes: over 4 channels still more than a slot
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.slice_elems, 1024u) << "long chunks: full slots";
  EXPECT_EQ(d.rounds, 25u);
  // The window: nslots / 2 rounds unless fewer are asked for; never more (the waits would cycle).
  EXPECT_EQ(d.window, 1) << "2 slots";
  c.nslots = 4;
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.window, 2);
  c.window = 1;
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.window, 1);
  c.window = 3;
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.window, 2) << "at most half the slots: one window fills while the previous one drains";
  c.nslots = 7;
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.window, 3);
  c.type = ringoInt8;
  c.count = 1000;  // chunks of 250 bytes: 63 over 4 channels, up to 64
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.slice_elems, 64u);
  EXPECT_EQ(d.rounds, 4u);
}

TEST(CudaRingDescribe, RefusesShapesTheKernelCannotRun) {
  std::vector<int> ring(65);
  std::iota(ring.begin(), ring.end(), 0);
  ringo_dev_ring d;
  ringo_dev_coll c = {RINGO_COLL_ALLREDUCE, ringoFloat32, ringoSum, 10, 65, 0, 0, ring.data(), nullptr, nullptr, 1, 2, 64,
                      7, 0, 0};
  EXPECT_EQ(ringo_dev_ring_describe(&c, &d), ringoInvalidUsage) << "65 ranks";
  c.nranks = 4;
  c.slot_bytes = 72;
  EXPECT_EQ(ringo_dev_ring_describe(&c, &d), ringoInvalidArgument) << "slot not a multiple of 16";
  c.slot_bytes = 64;
  c.nslots = 1;
  EXPECT_EQ(ringo_dev_ring_describe(&c, &d), ringoInvalidArgument) << "one slot: every step would wait for itself";
  c.nslots = 2;
  c.type = static_cast<ringoDataType_t>(RINGO_NUM_TYPES);
  EXPECT_EQ(ringo_dev_ring_describe(&c, &d), ringoInvalidArgument) << "bad dtype";
  c.type = ringoFloat32;
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.nsteps, 2 * 4 - 1);
  EXPECT_EQ(d.slice_elems, 16u);
  EXPECT_EQ(d.rounds, 1u);
  EXPECT_EQ(d.fence, 1) << "the fence before each release is the default";
  EXPECT_LE(sizeof(ringo_dev_ring), 4096u) << "a kernel parameter must fit 4 KiB";
  // The fingerprint: every field the ranks must agree on, exact.
  c.coll = RINGO_COLL_REDUCE;
  c.op = ringoMax;
  c.root_pos = 3;
  ASSERT_EQ(ringo_dev_ring_describe(&c, &d), ringoSuccess);
  EXPECT_EQ(d.fp.seq, 7u);
  EXPECT_EQ(d.fp.count, 10u);
  EXPECT_EQ(d.fp.call, static_cast<uint64_t>(RINGO_COLL_REDUCE) | static_cast<uint64_t>(ringoFloat32) << 8 |
                           static_cast<uint64_t>(ringoMax) << 16 | 3ull << 24 | 4ull << 32);
}

// Each channel's stamps follow its slots inside the region the host allocates, padded so every
// channel's payload starts 128-byte aligned (the slots themselves start on a page).
TEST(CudaRingDescribe, RegionLayoutLeavesRoomForStamps) {
  EXPECT_EQ(sizeof(ringo_dev_stamp), 32u);
  for (int nch : {1, 3, 32})
    for (int nslots : {1, 3, 4})
      for (size_t slot : {16, 64, 262144}) {
        const size_t slots = ringo_dev_slots_offset(nch), per = ringo_dev_channel_bytes(nslots, slot);
        EXPECT_EQ(slots % 4096, 0u);
        EXPECT_GE(slots, nch * sizeof(ringo_dev_flags));
        EXPECT_EQ(per % 128, 0u) << "channel " << nch << " x " << nslots << " x " << slot;
        EXPECT_GE(per, static_cast<size_t>(nslots) * (slot + sizeof(ringo_dev_stamp)));
        EXPECT_EQ(ringo_dev_region_bytes(nch, nslots, slot), slots + static_cast<size_t>(nch) * per);
      }
}

}  // namespace

#else  // !RINGO_HAVE_CUDA

TEST(CudaRingEmulated, NeedsACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA part (nvcc not found, or CUDA=0): the ring kernel is not built";
}

#endif
