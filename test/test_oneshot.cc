// test_oneshot.cc — small collectives on one host in one hand-off (src/oneshot.c, src/board.c): the
// same bits as the ring for every collective, dtype and op; the bytes counted; mismatches, timeouts
// and dead peers named, never a hang; the ranks agreeing on when. Run: make test (build/test/test_oneshot).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "collective_cases.h"
#include "harness.h"
#include "result_hashes.h"
#include "ring_order.h"
#include "ringo.h"

using ringo_cases::Case;
using ringo_cases::CaseBufs;
using ringo_cases::Coll;
using ringo_test::Options;
using ringo_test::RunForked;
using ringo_test::RunProcesses;
using ringo_test::Shared;
using ringo_test::Team;
using ringo_hashes::HashTable;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<Case> AllCases(int n) { return ringo_cases::EveryCase(n, {1, size_t(n + 1), size_t(37 * n + 3)}); }

// With N > 2, checks that each all-reduce read its N - 1 peers' inputs whole (the ring reads about
// 2(N-1)/N of one: the same at N = 2, where AbsentPeerTimesOut shows the one-shot path taken).
void ReadWhole(int n, const Case& c, const ringoCommStats& grew) {
  const uint64_t whole = uint64_t(n - 1) * c.count * ringo_cases::TypeSize(c.type);
  if (n > 2 && c.coll == Coll::kAllReduce) {
    EXPECT_EQ(whole, grew.bytesReceived) << ringo_cases::Label(c);
  }
}
void HashCases(Team& t, uint64_t* row, bool oneshot, const std::vector<Case>& cases) {
  const int n = t.nranks;
  ringo_hashes::HashCases(t, row, cases, [&](const Case& c, const ringoCommStats& grew) {
    if (oneshot) ReadWhole(n, c, grew);
  });
}
void HashEveryCase(Team& t, uint64_t* row, bool oneshot) { HashCases(t, row, oneshot, AllCases(t.nranks)); }

Options WithEnv(std::vector<std::pair<std::string, std::string>> env) {
  Options o;
  o.deadline_s = 120;
  o.env = std::move(env);
  return o;
}

// One in-place int32 sum all-reduce of buf on comm; *grew: how far its counters moved.
void CountedSum(ringoComm_t comm, std::vector<int32_t>* buf, ringoCommStats* grew) {
  ringoCommStats before{}, after{};
  ASSERT_EQ(ringoSuccess, ringoCommGetStats(comm, &before));
  ASSERT_EQ(ringoSuccess, ringoAllReduce(buf->data(), buf->data(), buf->size(), ringoInt32, ringoSum, comm, nullptr))
      << ringoGetLastError(comm);
  ASSERT_EQ(ringoSuccess, ringoCommGetStats(comm, &after));
  *grew = {after.bytesSent - before.bytesSent, after.bytesReceived - before.bytesReceived,
           after.collectives - before.collectives};
}

}  // namespace

// The one-shot path combines the inputs in the order the ring does (ringo_reduce_start), partial
// steps in the type, avg's division last: every collective, dtype, op, count and placement gives
// the same bits under RINGO_ALGO=ring and one-shot, on every rank.
class OneShotBits : public testing::TestWithParam<int> {};
TEST_P(OneShotBits, EqualTheRingsForEveryCollectiveTypeAndOp) {
  const int n = GetParam();
  HashTable table(n, AllCases(n).size());
  ASSERT_NE(MAP_FAILED, static_cast<void*>(table.mem));
  RunForked(n, [&](Team& t) { HashEveryCase(t, table.Row(0, n, t.ranks[0]), false); },
            WithEnv({{"RINGO_ALGO", "ring"}}));
  RunForked(n, [&](Team& t) { HashEveryCase(t, table.Row(1, n, t.ranks[0]), true); },
            WithEnv({{"RINGO_ONESHOT_BYTES", "1M"}}));
  if (HasFailure()) return;
  table.ExpectModesEqual(n, AllCases(n), "one-shot");
}
INSTANTIATE_TEST_SUITE_P(N, OneShotBits, testing::Values(2, 3, 4, 5, 8));

// Long chunks, cut at 16-element boundaries (ringo_chunk_range), are cut alike on the ring and
// one-shot: all-reduces of inexact floats whose chunks the old cut started off a 16-byte boundary
// (N dividing the count and not) give the same bits both ways on every rank, for N = 2..8.
std::vector<Case> LongCases(int n) {
  std::vector<Case> cases;
  for (ringoDataType_t t : {ringoFloat32, ringoBfloat16, ringoFloat16, ringoFloat64})
    for (ringoRedOp_t op : {ringoSum, ringoAvg})
      for (size_t count : {size_t{8192} * n + 1, size_t{12289} * n}) cases.push_back({Coll::kAllReduce, t, op, count, false, 0});
  return cases;
}
class OneShotLongBits : public testing::TestWithParam<int> {};
TEST_P(OneShotLongBits, AlignedChunksEqualTheRingsBits) {
  const int n = GetParam();
  const std::vector<Case> cases = LongCases(n);
  HashTable table(n, cases.size());
  ASSERT_NE(MAP_FAILED, static_cast<void*>(table.mem));
  RunForked(n, [&](Team& t) { HashCases(t, table.Row(0, n, t.ranks[0]), false, cases); },
            WithEnv({{"RINGO_ALGO", "ring"}}));
  RunForked(n, [&](Team& t) { HashCases(t, table.Row(1, n, t.ranks[0]), true, cases); },
            WithEnv({{"RINGO_ONESHOT_BYTES", "1M"}}));
  if (HasFailure()) return;
  table.ExpectModesEqual(n, cases, "one-shot");
}
INSTANTIATE_TEST_SUITE_P(N, OneShotLongBits, testing::Range(2, 9));

// What each collective moves one-shot: an input goes to every rank that reads it.
TEST(OneShot, CountersSayWhoReadWhat) {
  RunForked(4, [](Team& t) {
    const int n = t.nranks, r = t.ranks[0];
    const size_t count = 100, bytes = count * sizeof(int32_t);
    std::vector<int32_t> in(count * size_t(n), r + 1), out(count * size_t(n));
    struct Expect { const char* name; uint64_t sent, received; };
    const uint64_t others = uint64_t(n - 1) * bytes;
    auto moved = [&](const Expect& e, const std::function<ringoResult_t()>& call) {
      ringoCommStats before{}, after{};
      ASSERT_EQ(ringoSuccess, ringoCommGetStats(t.comms[0], &before));
      ASSERT_EQ(ringoSuccess, call()) << e.name << ": " << ringoGetLastError(t.comms[0]);
      ASSERT_EQ(ringoSuccess, ringoCommGetStats(t.comms[0], &after));
      EXPECT_EQ(e.sent, after.bytesSent - before.bytesSent) << e.name << " rank " << r;
      EXPECT_EQ(e.received, after.bytesReceived - before.bytesReceived) << e.name << " rank " << r;
      EXPECT_EQ(1u, after.collectives - before.collectives) << e.name;
    };
    ringoComm_t c = t.comms[0];
    moved({"all-reduce", others, others},
          [&] { return ringoAllReduce(in.data(), out.data(), count, ringoInt32, ringoSum, c, nullptr); });
    EXPECT_EQ(n * (n + 1) / 2, out[count - 1]);
    moved({"reduce-scatter", others, others},
          [&] { return ringoReduceScatter(in.data(), out.data(), count, ringoInt32, ringoMax, c, nullptr); });
    EXPECT_EQ(n, out[0]);
    moved({"all-gather", others, others}, [&] { return ringoAllGather(in.data(), out.data(), count, ringoInt32, c, nullptr); });
    for (int q = 0; q < n; q++) EXPECT_EQ(q + 1, out[size_t(q) * count]);
    moved({"broadcast", r == 2 ? others : 0, r == 2 ? 0 : bytes},
          [&] { return ringoBroadcast(in.data(), out.data(), count, ringoInt32, 2, c, nullptr); });
    EXPECT_EQ(3, out[count - 1]);
    moved({"reduce", r == 1 ? 0 : bytes, r == 1 ? others : 0},
          [&] { return ringoReduce(in.data(), out.data(), count, ringoInt32, ringoMin, 1, c, nullptr); });
    if (r == 1) {
      EXPECT_EQ(1, out[0]);
    }
  });
}

// RINGO_ONESHOT_BYTES is the largest input that runs one-shot, to the byte: 100 bytes do, 104 not.
TEST(OneShot, ThresholdIsExact) {
  RunForked(3, [](Team& t) {
    for (size_t count : {size_t(25), size_t(26)}) {
      std::vector<int32_t> buf(count, t.ranks[0]);
      ringoCommStats grew{};
      CountedSum(t.comms[0], &buf, &grew);
      EXPECT_EQ(3, buf[count - 1]);
      const uint64_t whole = 2 * count * sizeof(int32_t);  // one-shot: both peers' inputs
      if (count == 25) {
        EXPECT_EQ(whole, grew.bytesReceived) << "100 B: one-shot";
      } else {
        EXPECT_LT(grew.bytesReceived, whole) << "104 B: the ring";
      }
    }
  }, WithEnv({{"RINGO_ONESHOT_BYTES", "100"}}));
}

// Hundreds of calls in a row, one-shot and ring mixed (sizes around the 4 KiB threshold), in place:
// a side of the board is reused every second call, so a rank that ran ahead must wait for the
// slowest to finish reading it. Integer results are exact; forked, threads and one thread.
void MixedStream(Team& t) {
  const int n = t.nranks;
  std::vector<std::vector<int32_t>> buf(t.size());
  for (int it = 0; it < 300; it++) {
    const size_t count = size_t(1 + (it * 7919) % 2048);  // 4 B .. 8 KiB
    for (size_t k = 0; k < t.size(); k++) buf[k].assign(count, t.ranks[k] + it);
    ASSERT_EQ(ringoSuccess, ringo_test::TeamCall(t, [&](size_t k) {
      return ringoAllReduce(buf[k].data(), buf[k].data(), count, ringoInt32, ringoSum, t.comms[k], nullptr);
    })) << "call " << it;
    for (size_t k = 0; k < t.size(); k++) {
      const int32_t expect = n * (n - 1) / 2 + n * it;
      ASSERT_EQ(expect, buf[k][0]) << "call " << it << " rank " << t.ranks[k];
      ASSERT_EQ(expect, buf[k][count - 1]) << "call " << it << " rank " << t.ranks[k];
    }
  }
}
// (The two-phase path is left out here: test_twophase.cc mixes all three.)
Options OneShotAndRing() { return WithEnv({{"RINGO_ONESHOT_BYTES", "4K"}, {"RINGO_TWOPHASE_BYTES", "0"}}); }
TEST(OneShot, MixedStreamForked) { RunForked(4, MixedStream, OneShotAndRing()); }
TEST(OneShot, MixedStreamThreads) { ringo_test::RunThreads(3, MixedStream, OneShotAndRing()); }
TEST(OneShot, MixedStreamOneThread) { ringo_test::RunGroup(4, MixedStream, OneShotAndRing()); }

// A collective of count 0 moves nothing, so a rank finishes it without waiting for anyone and can
// run ahead into the next one-shot call while another rank still reads its slot from the one
// before: there it must wait (ringo_board_claim) before it writes that side of the board again.
// The all-reduce results are exact integers that change every call, so an overwritten slot shows.
TEST(OneShot, RankRunningAheadWaitsBeforeReusingItsSlot) {
  RunForked(4, [](Team& t) {
    const int n = t.nranks, r = t.ranks[0];
    const size_t count = 1024;  // 4 KiB: one-shot
    std::vector<int32_t> buf(count);
    for (int it = 0; it < 1000; it++) {
      for (size_t i = 0; i < count; i++) buf[i] = int32_t(size_t(it) * 7 + size_t(r) * 1000 + i % 13);
      ASSERT_EQ(ringoSuccess, ringoAllReduce(buf.data(), buf.data(), count, ringoInt32, ringoSum, t.comms[0], nullptr))
          << ringoGetLastError(t.comms[0]);
      for (size_t i = 0; i < count; i++)
        ASSERT_EQ(int32_t(n * (it * 7 + int(i % 13)) + 1000 * n * (n - 1) / 2), buf[i]) << "call " << it << " element " << i;
      ASSERT_EQ(ringoSuccess, ringoAllReduce(buf.data(), buf.data(), 0, ringoInt32, ringoSum, t.comms[0], nullptr));
    }
  }, WithEnv({{"RINGO_ONESHOT_BYTES", "4K"}}));
}

// Several collectives of one communicator queued in one group (one thread drives every rank; the
// group runs each communicator's calls in order): one-shot and ring calls mixed, all exact.
TEST(OneShot, SeveralCallsQueuedInOneGroup) {
  ringo_test::RunGroup(3, [](Team& t) {
    const int n = t.nranks;
    const size_t small = 16, big = size_t(1) << 16;  // 64 B one-shot, 256 KiB on the ring
    std::vector<std::vector<int32_t>> a(t.size()), b(t.size()), c(t.size()), d(t.size());
    for (size_t k = 0; k < t.size(); k++) {
      const int r = t.ranks[k];
      a[k].assign(small, r + 1), b[k].assign(big, r + 1), c[k].assign(small, 10 * r), d[k].assign(small, r);
    }
    ASSERT_EQ(ringoSuccess, ringo_test::TeamCall(t, [&](size_t k) {
      ringoComm_t comm = t.comms[k];
      ringoResult_t res = ringoAllReduce(a[k].data(), a[k].data(), small, ringoInt32, ringoSum, comm, nullptr);
      if (res == ringoSuccess) res = ringoAllReduce(b[k].data(), b[k].data(), big, ringoInt32, ringoMax, comm, nullptr);
      if (res == ringoSuccess) res = ringoBroadcast(c[k].data(), c[k].data(), small, ringoInt32, 1, comm, nullptr);
      if (res == ringoSuccess) res = ringoAllReduce(d[k].data(), d[k].data(), small, ringoInt32, ringoMin, comm, nullptr);
      return res;
    }));
    for (size_t k = 0; k < t.size(); k++) {
      EXPECT_EQ(n * (n + 1) / 2, a[k][small - 1]) << "rank " << t.ranks[k];
      EXPECT_EQ(n, b[k][big - 1]) << "rank " << t.ranks[k];
      EXPECT_EQ(10, c[k][0]) << "rank " << t.ranks[k];
      EXPECT_EQ(0, d[k][small - 1]) << "rank " << t.ranks[k];
    }
  }, WithEnv({}));
}

// A mismatch is named on every rank within a moment, never found by RINGO_TIMEOUT (20 s): both
// ranks one-shot with another count, and one rank's call on the ring while the others run
// one-shot (its fingerprint on the board tells them; its ring links are poisoned for it).
TEST(OneShot, MismatchFailsEveryRankQuickly) {
  for (size_t odd_count : {size_t(9), size_t(1) << 16}) {
    SCOPED_TRACE(odd_count);
    Options o = WithEnv({{"RINGO_ONESHOT_BYTES", "4K"}});
    o.ringo_timeout_s = 20;
    RunForked(3, [&](Team& t) {
      std::vector<float> buf(size_t(1) << 16, 1.0f);
      const double t0 = now_s();
      const size_t count = t.ranks[0] == 1 ? odd_count : 10;
      const ringoResult_t res = ringoAllReduce(buf.data(), buf.data(), count, ringoFloat32, ringoSum, t.comms[0], nullptr);
      const std::string msg = ringoGetLastError(t.comms[0]);
      EXPECT_EQ(ringoInvalidUsage, res) << msg;
      EXPECT_LT(now_s() - t0, 5.0) << "found by the fingerprint, not by the timeout";
      EXPECT_TRUE(contains(msg, "collective mismatch")) << msg;
      EXPECT_TRUE(contains(msg, "count " + std::to_string(odd_count))) << msg;
    }, o);
  }
}

// A rank that never calls: the others time out after RINGO_TIMEOUT naming it and the call; a rank
// that exits is named at once.
TEST(OneShot, AbsentPeerTimesOutAndDeadPeerIsNamed) {
  Options o = WithEnv({{"RINGO_ONESHOT_BYTES", "4K"}});
  o.ringo_timeout_s = 1.0;
  RunForked(2, [](Team& t) {
    std::vector<float> buf(16, 1.0f);
    if (t.ranks[0] == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      return;
    }
    const double t0 = now_s();
    const ringoResult_t res = ringoAllReduce(buf.data(), buf.data(), 16, ringoFloat32, ringoSum, t.comms[0], nullptr);
    const double waited = now_s() - t0;
    const std::string msg = ringoGetLastError(t.comms[0]);
    EXPECT_EQ(ringoTimeout, res) << msg;
    EXPECT_GE(waited, 1.0);
    EXPECT_LT(waited, 2.0);
    for (const char* part : {"rank 1 to join", "ringoAllReduce #0", "one-shot"})
      EXPECT_TRUE(contains(msg, part)) << "missing '" << part << "' in: " << msg;
  }, o);
  o.ringo_timeout_s = 20.0;
  RunProcesses(3, [](int rank, const ringoUniqueId& id, Shared& shared) {
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 3, id, rank)) << ringoGetLastError(nullptr);
    ASSERT_TRUE(shared.Barrier());
    if (rank == 2) _exit(0);  // leaves without a word
    std::vector<int32_t> buf(8, 1);
    const double t0 = now_s();
    const ringoResult_t res = ringoAllReduce(buf.data(), buf.data(), 8, ringoInt32, ringoSum, comm, nullptr);
    const std::string msg = ringoGetLastError(comm);
    EXPECT_EQ(ringoRemoteError, res) << msg;
    EXPECT_LT(now_s() - t0, 5.0) << "a dead peer is noticed, not waited out";
    EXPECT_TRUE(contains(msg, "rank 2")) << msg;
    ringoCommDestroy(comm);
  }, o);
}

// One rank's error reaches the ranks waiting on the board: rank 2 (RINGO_TIMEOUT 1 s) gives up on
// rank 1, which comes late; rank 0 (20 s) must learn it from the poisoned board at once, with rank
// 2's message, and rank 1's late call must fail at once too.
TEST(OneShot, FailureOnOneRankReachesTheOthersThroughTheBoard) {
  Options o = WithEnv({{"RINGO_ONESHOT_BYTES", "4K"}});
  o.ringo_timeout_s = 0;  // set per rank below
  RunProcesses(3, [](int rank, const ringoUniqueId& id, Shared& shared) {
    setenv("RINGO_TIMEOUT", rank == 2 ? "1" : "20", 1);
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 3, id, rank)) << ringoGetLastError(nullptr);
    ASSERT_TRUE(shared.Barrier());
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    std::vector<float> buf(16, 1.0f);
    const double t0 = now_s();
    const ringoResult_t res = ringoAllReduce(buf.data(), buf.data(), 16, ringoFloat32, ringoSum, comm, nullptr);
    const double waited = now_s() - t0;
    const std::string msg = ringoGetLastError(comm);
    EXPECT_EQ(ringoTimeout, res) << "rank " << rank << ": " << msg;
    EXPECT_TRUE(contains(msg, "rank 2 timed out")) << "rank " << rank << ": " << msg;
    EXPECT_LT(waited, rank == 1 ? 0.5 : 2.0) << "rank " << rank << ": " << msg;
    ringoCommDestroy(comm);
  }, o);
}

// Ranks set to different thresholds all use the smallest, and one rank with RINGO_ALGO=ring keeps
// every rank on the ring, so they never disagree on the path: a 4 KiB all-reduce runs on the ring
// (its law) in both. (Ranks on several hosts have no board: test_mpi_ring's hosts rings.)
TEST(OneShot, RanksAgreeOnTheSmallestThreshold) {
  for (const char* which : {"RINGO_ONESHOT_BYTES", "RINGO_ALGO"}) {
    SCOPED_TRACE(which);
    const bool algo = std::string(which) == "RINGO_ALGO";
    RunProcesses(4, [&](int rank, const ringoUniqueId& id, Shared&) {
      if (algo) setenv("RINGO_ALGO", rank == 3 ? "ring" : "auto", 1);
      else setenv("RINGO_ONESHOT_BYTES", rank == 3 ? "1K" : "64K", 1);
      ringoComm_t comm = nullptr;
      ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 4, id, rank)) << ringoGetLastError(nullptr);
      const size_t count = 1024, bytes = count * sizeof(int32_t);  // 4 KiB: above 1K, below 64K
      std::vector<int32_t> buf(count, rank);
      ringoCommStats grew{};
      CountedSum(comm, &buf, &grew);
      EXPECT_EQ(6, buf[count - 1]);
      EXPECT_EQ(2 * 3 * bytes / 4, grew.bytesSent) << "rank " << rank << ": the ring's law";
      ringoCommDestroy(comm);
    }, WithEnv({}));
  }
}

// The board only saves time: when rank 0 cannot make it (here a file-size limit stands in for a
// full /dev/shm), every rank goes on without it, small collectives on the ring (its law), and says
// why in a warning; ringoCommInitRank still succeeds.
TEST(OneShot, NoBoardWhenSharedMemoryRunsOut) {
  Options o = WithEnv({{"RINGO_ONESHOT_BYTES", "1M"}, {"RINGO_SLICE_BYTES", "4K"}});
  RunProcesses(3, [](int rank, const ringoUniqueId& id, Shared&) {
    if (rank == 0) {
      signal(SIGXFSZ, SIG_IGN);  // the limit then fails the reservation with EFBIG
      const struct rlimit lim = {1 << 20, 1 << 20};  // the links' segments fit; a 6 MiB board does not
      ASSERT_EQ(0, setrlimit(RLIMIT_FSIZE, &lim));
    }
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 3, id, rank)) << ringoGetLastError(nullptr);
    const size_t count = 300, bytes = count * sizeof(int32_t);
    std::vector<int32_t> buf(count, rank + 1);
    ringoCommStats grew{};
    CountedSum(comm, &buf, &grew);
    EXPECT_EQ(6, buf[count - 1]);
    EXPECT_EQ(2 * 2 * bytes / 3, grew.bytesSent) << "the ring's law (one-shot: 2·D)";
    ringoCommDestroy(comm);
  }, o);
}
