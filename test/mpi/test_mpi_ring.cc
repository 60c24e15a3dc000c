// test_mpi_ring.cc — ringoCommInitMPI rings under mpirun: MPI-only, mixed shm/MPI (fake hosts) and
// all-shm rings of 2..8 ranks, every collective/dtype/op checked exactly, counters, user MPI traffic. Depends
// on include/ringo_mpi.h, test/collective_cases.h, test/mpi/main.cc. Run: mpirun -np 8 build/test/mpi/test_mpi_ring.

// The C API only: Open MPI's C++ bindings (mpicxx.h) do not compile under -Wextra -Werror.
#define OMPI_SKIP_MPICXX 1
#include <gtest/gtest.h>
#include <mpi.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../collective_cases.h"
#include "mpi_harness.h"
#include "ring_init.h"
#include "ringo.h"
#include "ringo_mpi.h"

extern "C" {
#include "transport/transport.h"
}

namespace {

using ringo_mpi_test::CommRank;
using ringo_mpi_test::CommSize;
using ringo_mpi_test::ResultName;

using ringo_cases::Case;
using ringo_cases::CaseBufs;
using ringo_cases::Coll;
using ringo_cases::Label;

using namespace ringo_mpi_ring;

// ---------------------------------------------------------------------------------------------
// Exact data: collective_cases.h's small integers, exact in every type and op for N <= 8.
using Pattern = ringo_cases::ExactPattern<ringo_cases::SmallIntData>;

// ---------------------------------------------------------------------------------------------
// One collective call with buffers laid out as ringo.h says, checked in full on every rank.

// AllGather and Broadcast move data without an op: they use the sum pattern.
Pattern PatternFor(const Case& c, int n) {
  return Pattern(c.type, c.coll == Coll::kAllGather || c.coll == Coll::kBroadcast ? ringoSum : c.op, n);
}

std::string Verify(const Case& c, const Pattern& pat, int n, int r, const CaseBufs& b) {
  std::string err = ringo_cases::CheckRecv(c, pat, n, r, b);
  // sendbuff must stay as it was whenever it is not also (part of) recvbuff.
  if (!c.inplace) ringo_cases::Append(&err, ringo_cases::CheckSendUnchanged(c, pat, n, r, b));
  if (!b.GuardsIntact()) ringo_cases::Append(&err, "wrote past the end of a buffer");
  return err;
}

// Payload bytes one rank must put on its link for c (the ring's law), or -1 where it has none
// this test states: all-reduce with N | count sends 2(N-1)/N of the data, reduce-scatter and
// all-gather (N-1) blocks. One-shot (count > 0, input at most oneshot bytes): an all-reduce's
// input goes to each of the N-1 others.
int64_t LawBytes(const Case& c, int n, size_t oneshot) {
  const int64_t bytes = static_cast<int64_t>(c.count * ringo_cases::TypeSize(c.type));
  if (c.coll == Coll::kAllReduce && c.count > 0 && static_cast<size_t>(bytes) <= oneshot) return (n - 1) * bytes;
  if (c.coll == Coll::kAllReduce) return c.count % static_cast<size_t>(n) == 0 ? 2 * (n - 1) * bytes / n : -1;
  if (c.coll == Coll::kReduceScatter || c.coll == Coll::kAllGather) return (n - 1) * bytes;
  return -1;
}

// Runs c on this rank; "" or what went wrong. *hash gets the result's hash where every rank must
// end with the same bytes (0 elsewhere). False in *ok when the call itself failed: the ranks may be
// out of step then, and the caller must stop.
std::string RunCase(const Case& c, ringoComm_t comm, int n, int r, size_t oneshot, uint64_t* hash, bool* ok) {
  const Pattern pat = PatternFor(c, n);
  CaseBufs b;
  ringo_cases::Prepare(c, pat, n, r, &b);
  ringoCommStats before{}, after{};
  ringoCommGetStats(comm, &before);
  const ringoResult_t res = ringo_cases::Call(c, b, comm);
  *ok = res == ringoSuccess;
  if (!*ok) return std::string("returned ") + ResultName(res) + ": " + ringoGetLastError(comm);
  ringoCommGetStats(comm, &after);
  std::string err = Verify(c, pat, n, r, b);
  const int64_t law = LawBytes(c, n, oneshot);
  const int64_t sent = static_cast<int64_t>(after.bytesSent - before.bytesSent);
  const int64_t received = static_cast<int64_t>(after.bytesReceived - before.bytesReceived);
  if (law >= 0 && (sent != law || received != law))
    ringo_cases::Append(&err, "counters grew by " + std::to_string(sent) + " sent / " + std::to_string(received) +
                                  " received bytes, the ring law says " + std::to_string(law));
  if (after.collectives != before.collectives + 1) ringo_cases::Append(&err, "collectives counter did not grow by one");
  const size_t out = c.coll == Coll::kAllGather ? c.count * static_cast<size_t>(n) : c.count;
  const bool same_everywhere =
      c.coll == Coll::kAllReduce || c.coll == Coll::kAllGather || c.coll == Coll::kBroadcast;
  *hash = same_everywhere ? ringo_mpi_test::Hash64(b.recv, out * pat.size(), 1 + c.count) : 0;
  return err;
}

// The largest input a case of cfg runs one-shot with: on the board when every rank is on one real
// host, on the gather path (all-reduce only, which is all LawBytes asks about) across fake hosts.
size_t OneShotBytes(const RingConfig& cfg) {
  if (!cfg.oneshot || cfg.transport) return 0;
  return std::stoul(cfg.oneshot) << (std::string(cfg.oneshot).back() == 'K' ? 10 : 0);
}

// Every case one ring runs, identical on every rank.
std::vector<Case> Cases(const RingConfig& cfg) {
  const int n = cfg.n;
  std::vector<size_t> counts = {0, 1, static_cast<size_t>(n - 1), static_cast<size_t>(n + 1),
                                static_cast<size_t>(n) * 517};  // the last for the counter law
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  std::vector<Case> cases = ringo_cases::EveryCase(n, counts);
  // A few large cases: many slices per chunk, so the slot FIFOs wrap many times.
  const size_t big = 1000003;
  cases.push_back({Coll::kAllReduce, ringoFloat32, ringoSum, big, false, 0});
  cases.push_back({Coll::kAllReduce, ringoBfloat16, ringoAvg, big, true, 0});
  cases.push_back({Coll::kReduceScatter, ringoInt8, ringoMax, big, false, 0});
  cases.push_back({Coll::kAllGather, ringoUint8, ringoSum, big, true, 0});
  cases.push_back({Coll::kBroadcast, ringoFloat64, ringoSum, big, false, n - 1});
  cases.push_back({Coll::kReduce, ringoInt32, ringoProd, big, true, n / 2});
  // Reduce-scatters and all-gathers of blocks of 64 KiB and more (the two-level ring takes them on
  // the configs that have one), over more types and ops.
  cases.push_back({Coll::kReduceScatter, ringoFloat16, ringoAvg, 40000, false, 0});
  cases.push_back({Coll::kReduceScatter, ringoFloat64, ringoProd, 10000, true, 0});
  cases.push_back({Coll::kReduceScatter, ringoInt32, ringoMin, 20000, true, 0});
  cases.push_back({Coll::kAllGather, ringoBfloat16, ringoSum, 40000, false, 0});
  cases.push_back({Coll::kAllGather, ringoInt64, ringoSum, 10000, true, 0});
  return cases;
}

constexpr int kMaxReported = 10;

// Runs every case of cfg on this rank of sub's ring, then compares result hashes across ranks.
void RunRing(MPI_Comm sub, const RingConfig& cfg) {
  const int r = CommRank(sub);
  ringoComm_t comm = InitRing(sub, cfg);
  if (!comm) return;
  int count = -1, rank = -1;
  EXPECT_EQ(ringoCommCount(comm, &count), ringoSuccess);
  EXPECT_EQ(ringoCommUserRank(comm, &rank), ringoSuccess);
  EXPECT_EQ(count, cfg.n);
  EXPECT_EQ(rank, r);
  const std::vector<Case> cases = Cases(cfg);
  std::vector<uint64_t> hashes(cases.size(), 0);
  int reported = 0;
  for (size_t i = 0; i < cases.size(); i++) {
    bool ok = true;
    const std::string err = RunCase(cases[i], comm, cfg.n, r, OneShotBytes(cfg), &hashes[i], &ok);
    if (!err.empty() && (!ok || ++reported <= kMaxReported))
      ADD_FAILURE() << cfg.name << " ring, rank " << r << ": " << Label(cases[i]) << ": " << err;
    if (!ok) break;  // the ranks may be out of step: the others end in ringoTimeout
  }
  // Bit-identical results: the smallest and largest hash of each case must agree.
  std::vector<uint64_t> lo(hashes.size()), hi(hashes.size());
  MPI_Allreduce(hashes.data(), lo.data(), static_cast<int>(hashes.size()), MPI_UINT64_T, MPI_MIN, sub);
  MPI_Allreduce(hashes.data(), hi.data(), static_cast<int>(hashes.size()), MPI_UINT64_T, MPI_MAX, sub);
  int differ = 0;
  for (size_t i = 0; i < hashes.size() && r == 0; i++)
    if (lo[i] != hi[i] && ++differ <= kMaxReported)
      ADD_FAILURE() << cfg.name << " ring: " << Label(cases[i]) << ": results differ between ranks";
  EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
}


class MpiRingTest : public testing::TestWithParam<RingConfig> {};

TEST_P(MpiRingTest, EveryCollectiveTypeAndOpIsExact) {
  const RingConfig& cfg = GetParam();
  if (cfg.n > CommSize(MPI_COMM_WORLD)) GTEST_SKIP() << "needs " << cfg.n << " ranks: run with mpirun -np 8";
  ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, cfg.n, [](int r) { return r; },
                               [&](MPI_Comm sub) { RunRing(sub, cfg); });
}

// (a) every link over MPI; (b) fake hosts given to ranks out of order, so the ring is reordered
// and mixes shm and MPI links — both allow the one-shot path, but there is no board (the counters
// show the law of the path each case took): small all-reduces take the gather path, larger ones
// the two-level ring where every host holds as many ranks (hosts2x2, 4x2, 3x2, 2x3; _flat: with
// RINGO_ALGO=ring, the one ring); (c) one real host, every link shm, under mpirun: the ring
// alone, or small cases one-shot (up to 4 KiB of input; shm8: every case but the six large ones).
const RingConfig kRings[] = {
    {"mpi2", 2, "mpi", {}, "4K"},
    {"mpi3", 3, "mpi", {}, "4K"},
    {"mpi4", 4, "mpi", {}, "4K"},
    {"mpi8", 8, "mpi", {}, "4K"},
    {"hosts2x2", 4, nullptr, {0, 1, 0, 1}, "4K"},
    {"hosts1_2_3", 6, nullptr, {2, 1, 2, 0, 1, 2}, "4K"},
    {"hosts4x2", 8, nullptr, {0, 1, 0, 1, 0, 1, 0, 1}, "4K"},
    {"hosts3x2", 6, nullptr, {0, 1, 2, 0, 1, 2}, "4K"},      // two-level: 3 hosts of 2
    {"hosts2x3", 6, nullptr, {1, 0, 1, 0, 1, 0}, "4K"},      // two-level: 2 hosts of 3
    {"hosts2x2_flat", 4, nullptr, {0, 1, 0, 1}},              // RINGO_ALGO=ring: one ring across hosts
    {"hosts4x2_flat", 8, nullptr, {0, 1, 0, 1, 0, 1, 0, 1}},
    {"shm2", 2, nullptr, {}},
    {"shm3", 3, nullptr, {}},
    {"shm4", 4, nullptr, {}},
    {"shm8", 8, nullptr, {}},
    {"shm2_oneshot", 2, nullptr, {}, "4K"},
    {"shm3_oneshot", 3, nullptr, {}, "4K"},
    {"shm4_oneshot", 4, nullptr, {}, "4K"},
    {"shm8_oneshot", 8, nullptr, {}, "64K"},
    {"hosts2x2_gather", 4, nullptr, {0, 1, 0, 1}, "4K"},
    {"hosts1_2_3_gather", 6, nullptr, {2, 1, 2, 0, 1, 2}, "16K"},
    {"hosts4x2_gather", 8, nullptr, {0, 1, 0, 1, 0, 1, 0, 1}, "64K"},
};

INSTANTIATE_TEST_SUITE_P(Rings, MpiRingTest, testing::ValuesIn(kRings),
                         [](const testing::TestParamInfo<RingConfig>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------

// ringoCommInitMPI on a sub-communicator whose ranks are numbered backwards from MPI_COMM_WORLD's:
// each process is the ringo rank of its sub-communicator rank, as a broadcast from root 0 shows.
TEST(MpiRing, InitOnSplitCommunicatorUsesItsRanks) {
  for (int n : {2, 3, 4, 8}) {
    if (n > CommSize(MPI_COMM_WORLD)) continue;  // mpirun -np 8 runs them all
    ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, n, [n](int r) { return n - 1 - r; }, [&](MPI_Comm sub) {
      const int world = CommRank(MPI_COMM_WORLD), r = CommRank(sub);
      ASSERT_EQ(r, n - 1 - world);
      ringoComm_t comm = nullptr;
      std::string log;
      ASSERT_EQ(InitQuietly(&comm, sub, &log), ringoSuccess) << ringoGetLastError(nullptr);
      int count = -1, rank = -1, dev = 0;
      EXPECT_EQ(ringoCommCount(comm, &count), ringoSuccess);
      EXPECT_EQ(ringoCommUserRank(comm, &rank), ringoSuccess);
      EXPECT_EQ(ringoCommCuDevice(comm, &dev), ringoSuccess);
      EXPECT_EQ(count, n);
      EXPECT_EQ(rank, r) << "world rank " << world;
      EXPECT_EQ(dev, -1);
      int64_t mine = world, root_world = -1;
      EXPECT_EQ(ringoBroadcast(&mine, &root_world, 1, ringoInt64, 0, comm, nullptr), ringoSuccess)
          << ringoGetLastError(comm);
      EXPECT_EQ(root_world, n - 1) << "root 0 of the sub-communicator is world rank " << n - 1;
      std::vector<int32_t> gathered(static_cast<size_t>(n), -1);
      const int32_t w = world;
      EXPECT_EQ(ringoAllGather(&w, gathered.data(), 1, ringoInt32, comm, nullptr), ringoSuccess)
          << ringoGetLastError(comm);
      for (int q = 0; q < n; q++) EXPECT_EQ(gathered[q], n - 1 - q) << "block of ringo rank " << q;
      EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
    });
  }
}

// The user's own MPI messages on the communicator ringo was made from, pending across ringo
// collectives: a receive posted for ringo's own tag and a wildcard receive must get only the
// user's messages, and the collectives must still be right.
void UserTrafficAcrossCollectives(MPI_Comm sub, const RingConfig& cfg) {
  ringoComm_t comm = InitRing(sub, cfg);
  if (!comm) return;
  const int n = cfg.n, r = CommRank(sub), prev = (r + n - 1) % n, next = (r + 1) % n;
  constexpr int kLen = 4096, kTag = 0x52, kLateTag = 7;
  std::vector<int32_t> out(kLen), in(kLen, -1), late_out(kLen), late_in(kLen, -1);
  for (int i = 0; i < kLen; i++) out[i] = r * 100000 + i, late_out[i] = -(r * 100000 + i);
  MPI_Request reqs[3];
  // Posted in this order, the tagged receive matches the early message before the wildcard can.
  MPI_Irecv(in.data(), kLen, MPI_INT32_T, prev, kTag, sub, &reqs[0]);
  MPI_Irecv(late_in.data(), kLen, MPI_INT32_T, MPI_ANY_SOURCE, MPI_ANY_TAG, sub, &reqs[1]);
  MPI_Isend(out.data(), kLen, MPI_INT32_T, next, kTag, sub, &reqs[2]);
  for (size_t count : {size_t{1000}, size_t{300001}}) {
    const Case c{Coll::kAllReduce, ringoInt32, ringoSum, count, false, 0};
    uint64_t hash = 0;
    bool ok = true;
    const std::string err = RunCase(c, comm, n, r, OneShotBytes(cfg), &hash, &ok);
    EXPECT_EQ(err, "") << cfg.name << " ring, rank " << r << ": " << Label(c);
  }
  MPI_Request late;
  MPI_Isend(late_out.data(), kLen, MPI_INT32_T, next, kLateTag, sub, &late);
  MPI_Status wild;
  ringo_mpi_test::SleepyWait(&reqs[0]);
  ringo_mpi_test::SleepyWait(&reqs[1], &wild);
  ringo_mpi_test::SleepyWait(&reqs[2]);
  ringo_mpi_test::SleepyWait(&late);
  EXPECT_EQ(wild.MPI_SOURCE, prev) << "the wildcard receive of rank " << r << " matched a message of another rank";
  EXPECT_EQ(wild.MPI_TAG, kLateTag) << "the wildcard receive of rank " << r << " matched a message it was not sent";
  int early_wrong = 0, late_wrong = 0;
  for (int i = 0; i < kLen; i++) {
    early_wrong += in[i] != prev * 100000 + i;
    late_wrong += late_in[i] != -(prev * 100000 + i);
  }
  EXPECT_EQ(early_wrong, 0) << "elements of the user message on ringo's tag, rank " << r;
  EXPECT_EQ(late_wrong, 0) << "elements of the user message to the wildcard receive, rank " << r;
  EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
}

TEST(MpiRing, UserMpiTrafficOnTheSameCommunicatorDoesNotCollide) {
  const RingConfig rings[] = {{"mpi8", 8, "mpi", {}},
                              {"hosts1_2_3", 6, nullptr, {2, 1, 2, 0, 1, 2}}};
  if (CommSize(MPI_COMM_WORLD) < 8) GTEST_SKIP() << "needs 8 ranks: run with mpirun -np 8";
  for (const RingConfig& cfg : rings)
    ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, cfg.n, [](int r) { return r; },
                                 [&](MPI_Comm sub) { UserTrafficAcrossCollectives(sub, cfg); });
}

// The slot size every rank of a ring uses: 128 KiB on one host, 512 KiB where the ring leaves it
// (MPI over TCP pays a handshake per message), and where ranks set RINGO_SLICE_BYTES differently,
// the smallest, with a warning: the schedule slices chunks by it, so the ranks must agree, as a
// large all-reduce on the ring shows. Read from rank 0's INIT log.
TEST(MpiRing, SliceBytesFollowTheRingAndTheRanksAgree) {
  if (!LinkLogOn()) GTEST_SKIP() << "needs ringo's INIT log at INFO (RINGO_DEBUG=INFO RINGO_DEBUG_SUBSYS=INIT)";
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 ranks: run with mpirun -np 8";
  struct Want {
    RingConfig cfg;
    std::vector<const char*> slices;  // RINGO_SLICE_BYTES of each rank (nullptr: unset)
    const char* slots;
    bool warns;
  };
  const RingConfig shm4{"shm4", 4, nullptr, {}}, hosts{"hosts2x2", 4, nullptr, {0, 1, 0, 1}};
  const Want wants[] = {{shm4, {nullptr, nullptr, nullptr, nullptr}, "131072-byte slots", false},
                        {hosts, {nullptr, nullptr, nullptr, nullptr}, "524288-byte slots", false},
                        {hosts, {nullptr, "256K", nullptr, "64K"}, "65536-byte slots", true},
                        {shm4, {"1M", "1M", "1M", "1M"}, "1048576-byte slots", false}};
  for (const Want& w : wants)
    ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
      const int r = CommRank(sub);
      if (w.slices[r]) setenv("RINGO_SLICE_BYTES", w.slices[r], 1);
      std::string log;
      ringoComm_t comm = InitRing(sub, w.cfg, &log);
      unsetenv("RINGO_SLICE_BYTES");
      if (!comm) return;
      if (r == 0) {
        EXPECT_NE(log.find(w.slots), std::string::npos) << w.cfg.name << ", want " << w.slots << ":\n" << log;
        EXPECT_EQ(log.find("ranks set RINGO_SLICE_BYTES differently") != std::string::npos, w.warns) << log;
      }
      const Case c{Coll::kAllReduce, ringoFloat32, ringoSum, 1000003, false, 0};
      uint64_t hash = 0;
      bool ok = true;
      EXPECT_EQ(RunCase(c, comm, 4, r, 0, &hash, &ok), "") << w.cfg.name << ", rank " << r;
      EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
    });
}

// The gather path of rings that leave the host combines every input in the ring's own order, so
// its bits equal the ring's: all-reduces of random floats of many magnitudes (sums that round),
// every float type and op, on a ring (RINGO_ALGO=ring) and on the gather path (auto), compared
// byte for byte on every rank; the counters show the gather path ran ((N-1)·D each way).
std::vector<unsigned char> RandomFloats(ringoDataType_t t, size_t count, unsigned seed) {
  const size_t es = ringo_cases::TypeSize(t);
  std::vector<unsigned char> out(count * es);
  for (size_t i = 0; i < count; i++) {
    seed = seed * 1103515245u + 12345u;
    const double v = (static_cast<int>(seed >> 8) % 2001 - 1000) / 7.0 * std::ldexp(1.0, static_cast<int>(seed >> 24) % 9 - 4);
    const float f = static_cast<float>(v);
    const uint16_t half = ringo_cases::FloatToHalf(f), bf = ringo_cases::FloatToBf16(f);
    if (t == ringoFloat64) memcpy(&out[i * es], &v, 8);
    else if (t == ringoFloat32) memcpy(&out[i * es], &f, 4);
    else memcpy(&out[i * es], t == ringoFloat16 ? &half : &bf, 2);
  }
  return out;
}

void GatherBitsEqualRing(MPI_Comm sub, const RingConfig& cfg) {
  const int n = cfg.n, r = CommRank(sub);
  ringoComm_t ring = InitRing(sub, {cfg.name, n, nullptr, cfg.hosts});  // no threshold: RINGO_ALGO=ring
  ringoComm_t gather = InitRing(sub, {cfg.name, n, nullptr, cfg.hosts, "64K"});
  if (!ring || !gather) return;
  int shown = 0;
  for (ringoDataType_t t : {ringoFloat16, ringoFloat32, ringoFloat64, ringoBfloat16})
    for (ringoRedOp_t op : {ringoSum, ringoProd, ringoMax, ringoMin, ringoAvg})
      for (size_t count : {size_t{1}, static_cast<size_t>(n + 1), static_cast<size_t>(37 * n + 3)}) {
        const size_t bytes = count * ringo_cases::TypeSize(t);
        const std::vector<unsigned char> in = RandomFloats(t, count, 977u * static_cast<unsigned>(r) + count + 31u * t + op);
        std::vector<unsigned char> a(bytes, 0xee), b(bytes, 0xdd);
        ringoCommStats s0{}, s1{};
        ringoCommGetStats(gather, &s0);
        ASSERT_EQ(ringoAllReduce(in.data(), a.data(), count, t, op, ring, nullptr), ringoSuccess) << ringoGetLastError(ring);
        ASSERT_EQ(ringoAllReduce(in.data(), b.data(), count, t, op, gather, nullptr), ringoSuccess)
            << ringoGetLastError(gather);
        ringoCommGetStats(gather, &s1);
        EXPECT_EQ(s1.bytesSent - s0.bytesSent, (n - 1) * bytes) << cfg.name << ": the gather path did not run";
        if (a != b && ++shown <= 5)
          ADD_FAILURE() << cfg.name << " rank " << r << ": type " << t << " op " << op << " count " << count
                        << ": the gather path's bytes differ from the ring's";
      }
  EXPECT_EQ(ringoCommDestroy(ring), ringoSuccess);
  EXPECT_EQ(ringoCommDestroy(gather), ringoSuccess);
}

TEST(MpiRing, GatherPathBitsEqualTheRing) {
  const RingConfig rings[] = {{"hosts2x2", 4, nullptr, {0, 1, 0, 1}}, {"hosts1_2_3", 6, nullptr, {2, 1, 2, 0, 1, 2}},
                              {"hosts3", 3, nullptr, {0, 1, 2}}};
  for (const RingConfig& cfg : rings) {
    if (cfg.n > CommSize(MPI_COMM_WORLD)) continue;  // mpirun -np 8 runs them all
    ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, cfg.n, [](int r) { return r; },
                                 [&](MPI_Comm sub) { GatherBitsEqualRing(sub, cfg); });
  }
}

// ---------------------------------------------------------------------------------------------
// MPI's turns. Over TCP (make test's second run of this suite) a posted MPI send moves only while its
// rank calls into MPI. A rank must not leave a collective with its MPI sends in flight, nor wait on
// anything (a shm link, another communicator, the point-to-point engine) without giving MPI turns:
// each test below hung until RINGO_TIMEOUT before, over TCP; with shared memory they pass either way.
// (At MPI_THREAD_SERIALIZED, this suite's level, only waits of a communicator that has MPI links
// call MPI: transport.h.)

// Waits, calling neither MPI nor ringo, until all n ranks have touched their file under tag; false
// after 10 s. Stands for whatever else a program does between calls (Gloo's sockets, compute).
bool MeetOutsideMpi(const std::string& tag, int n, int r) {
  const std::string mine = tag + "-" + std::to_string(r);
  FILE* f = fopen(mine.c_str(), "w");
  if (f) fclose(f);
  for (int waited_ms = 0; waited_ms < 10000; waited_ms++) {
    int there = 0;
    for (int q = 0; q < n; q++) there += access((tag + "-" + std::to_string(q)).c_str(), F_OK) == 0;
    if (there == n) return true;
    usleep(1000);
  }
  return false;
}

std::string MeetingTag(MPI_Comm sub, const char* what) {
  int64_t id = getpid();
  MPI_Bcast(&id, 1, MPI_INT64_T, 0, sub);
  return "/dev/shm/ringo-test-" + std::string(what) + "-" + std::to_string(id);
}

TEST(MpiTurns, ACollectiveLeavesNoMpiSendBehind) {
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 ranks";
  // The ring (512 KiB and 4 MiB) and the gather path (16 KiB): each ends with MPI sends to the other host.
  const std::pair<RingConfig, size_t> runs[] = {{{"hosts2x2", 4, nullptr, {0, 0, 1, 1}}, 131072},
                                                 {{"hosts2x2", 4, nullptr, {0, 0, 1, 1}}, size_t{1} << 20},
                                                 {{"hosts2x2", 4, nullptr, {0, 0, 1, 1}, "64K"}, 4096}};
  for (const auto& [cfg, count] : runs)
    ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
      ringoComm_t comm = InitRing(sub, cfg);
      if (!comm) return;
      const int r = CommRank(sub);
      const std::string tag = MeetingTag(sub, cfg.oneshot ? "gather" : "ring");
      std::vector<float> buf(count, float(r + 1));
      EXPECT_EQ(ringoAllReduce(buf.data(), buf.data(), count, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess)
          << ringoGetLastError(comm);
      EXPECT_TRUE(MeetOutsideMpi(tag, 4, r)) << "rank " << r << ", " << count << " floats: a rank still waited for "
                                             << "a peer's MPI send";
      EXPECT_EQ(buf[count - 1], 10.0f);
      ringo_mpi_test::SleepyBarrier(sub);
      unlink((tag + "-" + std::to_string(r)).c_str());
      EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
    });
}

// Ranks 0 and 1 on one host, 2 and 3 on the other. Rank 1's group sends to rank 2 and then receives
// from rank 0; rank 2 forwards what it got to rank 0, which sends twice to rank 1 once that arrived.
// Rank 1 waits in the point-to-point engine on its shm link from rank 0 while its MPI send to rank 2
// needs turns.
TEST(MpiTurns, PointToPointEngineGivesMpiTurns) {
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 ranks";
  ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
    ringoComm_t comm = InitRing(sub, {"hosts2x2", 4, nullptr, {0, 0, 1, 1}});
    if (!comm) return;
    const int r = CommRank(sub);
    const size_t count = 100000;  // 400 KB: far above Open MPI's eager limit
    std::vector<int32_t> a(count), b(count, -1), c(count, -1);
    for (size_t i = 0; i < count; i++) a[i] = static_cast<int32_t>(i * 7 + 1);
    if (r == 1) {
      ASSERT_EQ(ringoGroupStart(), ringoSuccess);
      EXPECT_EQ(ringoSend(a.data(), count, ringoInt32, 2, comm, nullptr), ringoSuccess);
      EXPECT_EQ(ringoRecv(b.data(), count, ringoInt32, 0, comm, nullptr), ringoSuccess);
      EXPECT_EQ(ringoRecv(c.data(), count, ringoInt32, 0, comm, nullptr), ringoSuccess);
      EXPECT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(comm);
      EXPECT_TRUE(b == a && c == a) << "rank 1 got the wrong bytes from rank 0";
    } else if (r == 2) {
      EXPECT_EQ(ringoRecv(b.data(), count, ringoInt32, 1, comm, nullptr), ringoSuccess) << ringoGetLastError(comm);
      EXPECT_EQ(ringoSend(b.data(), count, ringoInt32, 0, comm, nullptr), ringoSuccess) << ringoGetLastError(comm);
    } else if (r == 0) {
      EXPECT_EQ(ringoRecv(b.data(), count, ringoInt32, 2, comm, nullptr), ringoSuccess) << ringoGetLastError(comm);
      ASSERT_EQ(ringoGroupStart(), ringoSuccess);
      EXPECT_EQ(ringoSend(b.data(), count, ringoInt32, 1, comm, nullptr), ringoSuccess);
      EXPECT_EQ(ringoSend(b.data(), count, ringoInt32, 1, comm, nullptr), ringoSuccess);
      EXPECT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(comm);
    }
    ringo_mpi_test::SleepyBarrier(sub);
    EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
  });
}

// A third case, another communicator's waits giving MPI turns, needs MPI_THREAD_MULTIPLE (below it
// only waits of a communicator with MPI links take turns): test_mpi_staged.cc, MpiTurns.*.

// ringoGroupEnd runs each communicator's work on a thread of its own. Below MPI_THREAD_MULTIPLE (this
// suite's level) MPI may be called by one thread at a time, so two communicators with MPI links in
// one group must take turns inside MPI: the transport counts how many threads were ever inside MPI
// at once. All-reduces of 4 MiB and point-to-point sends keep both threads polling MPI together.
TEST(MpiRing, GroupOfTwoMpiCommunicatorsCallsMpiOneThreadAtATime) {
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 ranks";
  ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
    ringoComm_t a = InitRing(sub, {"mpi", 4, "mpi", {}}), b = a ? InitRing(sub, {"hosts2x2", 4, nullptr, {0, 0, 1, 1}}) : nullptr;
    if (!a || !b) {
      if (a) ringoCommDestroy(a);
      return;
    }
    const int r = CommRank(sub);
    const size_t count = size_t{1} << 20;
    std::vector<float> x(count, float(r + 1)), y(count, float(2 * r + 1));
    std::vector<int32_t> out(count, r), in(count, -1);
    ringo_mpi_most_concurrent_calls(1);
    for (int round = 0; round < 3; round++) {
      ASSERT_EQ(ringoGroupStart(), ringoSuccess);
      EXPECT_EQ(ringoAllReduce(x.data(), x.data(), count, ringoFloat32, ringoSum, a, nullptr), ringoSuccess);
      EXPECT_EQ(ringoAllReduce(y.data(), y.data(), count, ringoFloat32, ringoSum, b, nullptr), ringoSuccess);
      EXPECT_EQ(ringoSend(out.data(), count, ringoInt32, (r + 2) % 4, a, nullptr), ringoSuccess);
      EXPECT_EQ(ringoRecv(in.data(), count, ringoInt32, (r + 2) % 4, a, nullptr), ringoSuccess);
      ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << "rank " << r << ": " << ringoGetLastError(a) << " / "
                                               << ringoGetLastError(b);
    }
    // x: 10, then 40, then 160 (exact in float); y: 1+3+5+7 = 16, 64, 256.
    EXPECT_EQ(x[0], 160.0f);
    EXPECT_EQ(x[count - 1], 160.0f);
    EXPECT_EQ(y[0], 256.0f);
    EXPECT_EQ(y[count - 1], 256.0f);
    EXPECT_EQ(in[0], (r + 2) % 4);
    EXPECT_EQ(in[count - 1], (r + 2) % 4);
    EXPECT_EQ(ringo_mpi_most_concurrent_calls(0), 1) << "rank " << r << ": two threads were inside MPI at once "
                                                     << "below MPI_THREAD_MULTIPLE";
    ringo_mpi_test::SleepyBarrier(sub);
    EXPECT_EQ(ringoCommDestroy(a), ringoSuccess);
    EXPECT_EQ(ringoCommDestroy(b), ringoSuccess);
  });
}

// ---------------------------------------------------------------------------------------------
// Point-to-point over every link kind: an all-to-all of grouped ringoSend/ringoRecv (links to
// every peer made on first use: MPI between fake hosts, shm within one), an AllReduce on the same
// communicator in between, and the all-to-all again over the links made the first time.

void AllToAll(ringoComm_t comm, int n, int r, size_t count, int round) {
  std::vector<int32_t> out(count * static_cast<size_t>(n)), in(out.size(), -1);
  for (size_t i = 0; i < out.size(); i++) out[i] = static_cast<int32_t>((r * 131 + round) * 1000003 + i);
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int p = 0; p < n; p++) {
    EXPECT_EQ(ringoSend(&out[count * p], count, ringoInt32, p, comm, nullptr), ringoSuccess);
    EXPECT_EQ(ringoRecv(&in[count * p], count, ringoInt32, p, comm, nullptr), ringoSuccess);
  }
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << "rank " << r << ": " << ringoGetLastError(comm);
  size_t wrong = 0;
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < count; i++)
      wrong += in[count * p + i] != static_cast<int32_t>((p * 131 + round) * 1000003 + count * r + i);
  EXPECT_EQ(wrong, 0u) << "rank " << r << ", round " << round;
}

void PointToPoint(MPI_Comm sub, const RingConfig& cfg) {
  ringoComm_t comm = InitRing(sub, cfg);
  if (!comm) return;
  const int n = cfg.n, r = CommRank(sub);
  const size_t count = 300001;  // over the 4-slot FIFO of every link: the group must interleave
  AllToAll(comm, n, r, count, 0);
  int64_t mine = r + 1, sum = 0;
  EXPECT_EQ(ringoAllReduce(&mine, &sum, 1, ringoInt64, ringoSum, comm, nullptr), ringoSuccess) << ringoGetLastError(comm);
  EXPECT_EQ(sum, int64_t(n) * (n + 1) / 2);
  AllToAll(comm, n, r, 7, 1);
  EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
}

TEST(MpiRing, GroupedSendRecvAllToAllOverEveryLinkKind) {
  const RingConfig rings[] = {{"mpi8", 8, "mpi", {}}, {"hosts1_2_3", 6, nullptr, {2, 1, 2, 0, 1, 2}},
                              {"shm4", 4, nullptr, {}}};
  if (CommSize(MPI_COMM_WORLD) < 8) GTEST_SKIP() << "needs 8 ranks: run with mpirun -np 8";
  for (const RingConfig& cfg : rings)
    ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, cfg.n, [](int r) { return r; },
                                 [&](MPI_Comm sub) { PointToPoint(sub, cfg); });
}

// Rank 1 calls with another count: its neighbours see the mismatch in the slice fingerprints, and
// the others must learn it through the poisoned links — every rank fails with the mismatch
// (ringoInvalidUsage naming it), none waits out RINGO_TIMEOUT (20 s here: ringoTimeout). On the
// ring over MPI, and on the gather path (both counts under its threshold) across fake hosts.
TEST(MpiRing, MismatchReachesEveryRankThroughPoisonedLinks) {
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 ranks";
  // The ring; the gather path (4 KiB and less); the two-level ring (hosts2x2 above 4 KiB). Rank 1
  // calls another count (odd), or a broadcast, which takes the ring while the others go two-level:
  // the mark a two-level all-reduce posts on the ring names it (collectives.c, run_two_level_marked).
  struct Run {
    RingConfig cfg;
    size_t count, odd;
    bool broadcast;
  };
  const RingConfig hosts2x2{"hosts2x2", 4, nullptr, {0, 1, 0, 1}, "4K"};
  const Run runs[] = {{RingConfig{"mpi4", 4, "mpi", {}}, 1024, 1000, false},
                      {hosts2x2, 1024, 1000, false},     // both gather
                      {hosts2x2, 200000, 199976, false}, // both two-level
                      {hosts2x2, 200000, 200000, true}}; // two-level against the ring
  for (const auto& [cfg, count, odd, broadcast] : runs)
  ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
    ringoComm_t comm = InitRing(sub, cfg);
    if (!comm) return;
    const int r = CommRank(sub);
    std::vector<float> buf(1 << 18, 1.0f);
    const ringoResult_t res =
        broadcast && r == 1 ? ringoBroadcast(buf.data(), buf.data(), count, ringoFloat32, 0, comm, nullptr)
                            : ringoAllReduce(buf.data(), buf.data(), r == 1 ? odd : count, ringoFloat32, ringoSum,
                                             comm, nullptr);
    const std::string msg = ringoGetLastError(comm);
    EXPECT_EQ(ringoInvalidUsage, res) << cfg.name << ", rank " << r << ": " << ringo_mpi_test::ResultName(res) << ": "
                                      << msg;
    EXPECT_NE(std::string::npos, msg.find("collective mismatch")) << cfg.name << ", rank " << r << ": " << msg;
    ringoCommDestroy(comm);
  });
}

// RINGO_ALGO=naive over MPI links: rank 0's star links to its ring neighbours run beside the ring
// links of the same pairs, on their own MPI tag, so no message lands on the wrong link.
TEST(MpiRing, NaiveStarBesideTheRingOverMpi) {
  if (CommSize(MPI_COMM_WORLD) < 3) GTEST_SKIP() << "needs 3 ranks";
  ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 3, [](int r) { return r; }, [&](MPI_Comm sub) {
    setenv("RINGO_ALGO", "naive", 1);
    ringoComm_t comm = InitRing(sub, {"mpi3", 3, "mpi", {}});
    unsetenv("RINGO_ALGO");
    if (!comm) return;
    const int r = CommRank(sub);
    std::vector<float> buf(300001);
    for (int round = 0; round < 2; round++) {
      for (size_t i = 0; i < buf.size(); i++) buf[i] = float(r + 1 + i % 7);
      EXPECT_EQ(ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, comm, nullptr),
                ringoSuccess) << ringoGetLastError(comm);
      size_t wrong = 0;
      for (size_t i = 0; i < buf.size(); i++) wrong += buf[i] != float(6 + 3 * (i % 7));
      EXPECT_EQ(wrong, 0u) << "naive all-reduce, rank " << r;
      std::vector<float> b(1000, r == 1 ? 5.0f : 0.0f);  // a ring collective between them
      EXPECT_EQ(ringoBroadcast(b.data(), b.data(), b.size(), ringoFloat32, 1, comm, nullptr), ringoSuccess);
      EXPECT_EQ(b[999], 5.0f);
    }
    EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
  });
}

}  // namespace
