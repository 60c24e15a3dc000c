// test_failures.cc — never hang, never corrupt: a peer killed mid-collective, mismatched calls, a
// rank that never comes (timeout names the step, link and peer), abort from another thread, and a
// communicator that refuses work after an error. Real multi-process jobs; run: make test.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "internals.h"
#include "ringo.h"

using namespace ringo_test;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Segments of this process id left in /dev/shm (the shm transport names them /ringo-<pid>-...).
int shm_leftovers(pid_t pid) {
  int n = 0;
  std::string prefix = "ringo-" + std::to_string(pid) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) n += std::string(e->d_name).rfind(prefix, 0) == 0;
    closedir(d);
  }
  return n;
}

Options short_timeout(double timeout_s) {
  Options o;
  o.ringo_timeout_s = timeout_s;
  o.grace_s = timeout_s + 5;
  o.deadline_s = 60;
  return o;
}

// A peer whose rank info reports a slice size env.c would never let through (another process's
// word: a bug or an attacker) fails the communicator's creation with ringoRemoteError naming it,
// before any link is sized by it: a 64-byte slice held no element after its header (SIGFPE), a
// 1-byte one wrapped the payload size (SIGSEGV). Rank 0 of 2 here, over a rendezvous (comm.h's
// struct ringo_rendezvous, which C++ cannot include) that hands it its own info back as rank 1's
// with one field forged.
extern "C" {
struct RendezvousShim {
  void* ctx;
  ringoResult_t (*allgather)(void* ctx, const void* mine, size_t bytes, void* all);
  ringoResult_t (*barrier)(void* ctx);
};
ringoResult_t ringo_lifecycle_create(ringoComm_t* out, int nranks, int rank, const RendezvousShim* rv, void* tctx,
                                void (*tctx_free)(void*));
}

// comm.h's struct ringo_rank_info, mirrored; the tests check the size the allgather sees.
struct RankInfoShim {
  char host[256];
  int32_t pid, rank;
  uint64_t oneshot_bytes, slice_bytes;
  int32_t algo;         // RINGO_ALGO: 0 auto, 1 ring, 2 naive, -1 a value the rank did not know
  int32_t ring_by_cpu;  // RINGO_RING_ORDER: 1 cpu, 0 rank, -1 a value the rank did not know
  uint64_t twophase_bytes, twophase_round_bytes;
  uint64_t cpus[16];  // RINGO_CPU_WORDS: the CPUs it may run on
};

// Rank 1's rank info, as rank 0 receives it, with one field forged (offset and bytes of it).
struct ForgedInfo {
  size_t at, len;
  uint64_t value;
  size_t info_bytes = 0;  // the rank info's size, as the first allgather saw it
  static ringoResult_t Allgather(void* ctx, const void* mine, size_t bytes, void* all) {
    auto* f = static_cast<ForgedInfo*>(ctx);
    if (f->info_bytes == 0) f->info_bytes = bytes;
    memcpy(all, mine, bytes);
    memcpy(static_cast<char*>(all) + bytes, mine, bytes);
    if (bytes == sizeof(RankInfoShim)) memcpy(static_cast<char*>(all) + bytes + f->at, &f->value, f->len);
    return ringoSuccess;
  }
  static ringoResult_t Barrier(void*) { return ringoSuccess; }
};

TEST(Failures, ForgedSliceSizeFromAPeerIsRefused) {
  for (uint64_t slice : {uint64_t{1}, uint64_t{64}, uint64_t{4097}, uint64_t{1} << 40}) {
    ForgedInfo forged{offsetof(RankInfoShim, slice_bytes), 8, slice};
    const RendezvousShim rv = {&forged, ForgedInfo::Allgather, ForgedInfo::Barrier};
    ringoComm_t comm = nullptr;
    EXPECT_EQ(ringo_lifecycle_create(&comm, 2, 0, &rv, nullptr, nullptr), ringoRemoteError) << slice;
    ASSERT_EQ(forged.info_bytes, sizeof(RankInfoShim)) << "struct ringo_rank_info changed: update RankInfoShim";
    EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("rank 1 reports a slice of"), std::string::npos)
        << slice << ": " << ringoGetLastError(nullptr);
    EXPECT_EQ(comm, nullptr);
  }
}

// The ranks agree on RINGO_ALGO through their infos (it decides which links they make): a code
// that is none of auto, ring and naive is refused, -1 (a value that rank did not know) by name;
// naive on one rank only is refused by every rank.
TEST(Failures, ForgedOrUnevenAlgoFromAPeerIsRefused) {
  const std::pair<int32_t, const char*> cases[] = {
      {7, "rank 1 reports RINGO_ALGO code 7"},
      {-1, "rank 1 has RINGO_ALGO set to a value other than auto, ring or naive"},
      {2, "RINGO_ALGO=naive is set on 1 of the 2 ranks"}};
  for (const auto& [code, says] : cases) {
    ForgedInfo forged{offsetof(RankInfoShim, algo), 4, static_cast<uint32_t>(code)};
    const RendezvousShim rv = {&forged, ForgedInfo::Allgather, ForgedInfo::Barrier};
    ringoComm_t comm = nullptr;
    EXPECT_NE(ringo_lifecycle_create(&comm, 2, 0, &rv, nullptr, nullptr), ringoSuccess) << code;
    ASSERT_EQ(forged.info_bytes, sizeof(RankInfoShim)) << "struct ringo_rank_info changed: update RankInfoShim";
    EXPECT_NE(std::string(ringoGetLastError(nullptr)).find(says), std::string::npos)
        << code << ": " << ringoGetLastError(nullptr);
    EXPECT_EQ(comm, nullptr);
  }
}

// A peer's RINGO_RING_ORDER decides the ring every rank must make alike: -1 (a value that rank did
// not know) is refused by name, any other code but 0 (rank) or 1 (cpu) as the peer's word; 0 beside
// this rank's cpu is accepted (rank order for all, with a warning: the unit test of test_ring_order
// checks that order).
TEST(Failures, ForgedOrUnevenRingOrderFromAPeer) {
  const std::pair<int32_t, const char*> refused[] = {
      {5, "rank 1 reports RINGO_RING_ORDER code 5 (expected 0 or 1)"},
      {-1, "rank 1 has RINGO_RING_ORDER set to a value other than cpu or rank"}};
  for (const auto& [code, says] : refused) {
    ForgedInfo forged{offsetof(RankInfoShim, ring_by_cpu), 4, static_cast<uint32_t>(code)};
    const RendezvousShim rv = {&forged, ForgedInfo::Allgather, ForgedInfo::Barrier};
    ringoComm_t comm = nullptr;
    EXPECT_EQ(ringo_lifecycle_create(&comm, 2, 0, &rv, nullptr, nullptr), code == -1 ? ringoInvalidArgument : ringoRemoteError);
    ASSERT_EQ(forged.info_bytes, sizeof(RankInfoShim)) << "struct ringo_rank_info changed: update RankInfoShim";
    EXPECT_NE(std::string(ringoGetLastError(nullptr)).find(says), std::string::npos) << code << ": " << ringoGetLastError(nullptr);
    EXPECT_EQ(comm, nullptr);
  }
  ForgedInfo forged{offsetof(RankInfoShim, ring_by_cpu), 4, 0};
  const RendezvousShim rv = {&forged, ForgedInfo::Allgather, ForgedInfo::Barrier};
  ringoComm_t comm = nullptr;
  ASSERT_EQ(ringo_lifecycle_create(&comm, 2, 0, &rv, nullptr, nullptr), ringoSuccess) << ringoGetLastError(nullptr);
  EXPECT_EQ(ringoSuccess, ringoCommAbort(comm));
}

// A peer's two-phase round (RINGO_TWOPHASE_ROUND_BYTES) is another process's word too: 0 or 1 (env.c
// allows 4 KiB up) must leave the two-phase path unused, not divide by zero or run a million
// rounds; a huge one is outvoted by this rank's own (the ranks use the smallest).
TEST(Failures, ForgedTwoPhaseRoundFromAPeerIsHarmless) {
  const std::pair<uint64_t, const char*> cases[] = {{0, "ring"}, {1, "ring"}, {~uint64_t{0}, "two-phase"}};
  for (const auto& [round, algo] : cases) {
    ForgedInfo forged{offsetof(RankInfoShim, twophase_round_bytes), 8, round};
    const RendezvousShim rv = {&forged, ForgedInfo::Allgather, ForgedInfo::Barrier};
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringo_lifecycle_create(&comm, 2, 0, &rv, nullptr, nullptr), ringoSuccess) << ringoGetLastError(nullptr);
    ASSERT_EQ(forged.info_bytes, sizeof(RankInfoShim)) << "struct ringo_rank_info changed: update RankInfoShim";
    EXPECT_STREQ(algo, ringo_test_allreduce_algo(comm, size_t(1) << 18, ringoFloat32)) << round;
    EXPECT_EQ(ringoSuccess, ringoCommAbort(comm));
  }
}

}  // namespace

// Rank 2 of 4 is SIGKILLed in the middle of a stream of all-reduces. Every other rank's call must
// fail with ringoRemoteError (or ringoTimeout) well within RINGO_TIMEOUT + 1 s, naming rank 2,
// and nothing may be left in /dev/shm.
TEST(Failures, KilledPeerFailsEveryLiveRankQuickly) {
  const double timeout = 5.0;
  Options opts = short_timeout(timeout);
  JobReport report = RunProcessesCollect(4, [&](int rank, const ringoUniqueId& id, Shared& shared) {
    shared.Word(rank, 0) = uint64_t(getpid());
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 4, id, rank)) << ringoGetLastError(nullptr);
    std::vector<float> buf(1 << 22, 1.0f);
    ASSERT_TRUE(shared.Barrier());
    if (rank == 2) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        raise(SIGKILL);
      }).detach();
    }
    double failed_at = 0;
    ringoResult_t res = ringoSuccess;
    for (int i = 0; i < 100000 && res == ringoSuccess; i++) {
      res = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoMax, comm, nullptr);
      failed_at = now_s();
    }
    // How long after rank 2 died did this rank notice? Rank 2's death time is unknown here, but
    // it died 50 ms after the barrier; everything after that is detection time.
    EXPECT_TRUE(res == ringoRemoteError || res == ringoTimeout) << "got " << ResultName(res);
    const std::string msg = ringoGetLastError(comm);
    EXPECT_TRUE(contains(msg, "rank 2")) << msg;
    shared.Word(rank, 1) = uint64_t(failed_at * 1e3);
    ringoResult_t async = ringoSuccess;
    EXPECT_EQ(ringoSuccess, ringoCommGetAsyncError(comm, &async));
    EXPECT_EQ(res, async);
    EXPECT_EQ(ringoInvalidUsage, ringoAllReduce(buf.data(), buf.data(), 1, ringoFloat32, ringoSum, comm, nullptr))
        << "a communicator in error must refuse new work";
    EXPECT_TRUE(contains(ringoGetLastError(comm), "unusable after an earlier error")) << ringoGetLastError(comm);
    ringoCommDestroy(comm);
  }, opts);
  // The only problem allowed is the rank we killed.
  ASSERT_EQ(1u, report.problems.size());
  EXPECT_TRUE(contains(report.problems[0], "signal 9")) << report.problems[0];
  EXPECT_TRUE(report.failures.empty()) << report.failures[0].message;
}

TEST(Failures, KilledPeerLeavesNothingInDevShm) {
  Options opts = short_timeout(5.0);
  JobReport report = RunProcessesCollect(3, [&](int rank, const ringoUniqueId& id, Shared& shared) {
    shared.Word(rank, 0) = uint64_t(getpid());
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 3, id, rank));
    if (rank == 1) raise(SIGKILL);  // dies holding its links
    std::vector<int32_t> buf(1 << 20, 1);
    EXPECT_NE(ringoSuccess, ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoInt32, ringoSum, comm, nullptr));
    ringoCommDestroy(comm);
    // Names are unlinked once every rank has attached, so even the killed rank's are gone.
    for (int r = 0; r < 3; r++) EXPECT_EQ(0, shm_leftovers(pid_t(shared.Word(r, 0)))) << "rank " << r;
  }, opts);
  ASSERT_EQ(1u, report.problems.size()) << report.problems[0];
  EXPECT_TRUE(report.failures.empty()) << report.failures[0].message;
}

// Calls that do not match across ranks end in ringoInvalidUsage on every rank, with a message
// that shows both fingerprints and both ranks — never a hang or wrong data.
TEST(Failures, MismatchedCollectivesFailOnEveryRank) {
  struct Case {
    const char* name;
    std::function<ringoResult_t(ringoComm_t, int rank, std::vector<float>&)> call;
    const char* expect;  // a part of the message
  };
  const std::vector<Case> cases = {
      {"count", [](ringoComm_t c, int r, std::vector<float>& b) {
         return ringoAllReduce(b.data(), b.data(), r == 1 ? 1000 : 1024, ringoFloat32, ringoSum, c, nullptr);
       }, "count 1000"},
      {"op", [](ringoComm_t c, int r, std::vector<float>& b) {
         return ringoAllReduce(b.data(), b.data(), 4096, ringoFloat32, r == 2 ? ringoMax : ringoSum, c, nullptr);
       }, "max"},
      {"collective", [](ringoComm_t c, int r, std::vector<float>& b) {
         return r == 0 ? ringoBroadcast(b.data(), b.data(), 4096, ringoFloat32, 0, c, nullptr)
                       : ringoAllReduce(b.data(), b.data(), 4096, ringoFloat32, ringoSum, c, nullptr);
       }, "ringoBroadcast"},
      {"type", [](ringoComm_t c, int r, std::vector<float>& b) {
         return ringoAllReduce(b.data(), b.data(), 4096, r == 1 ? ringoInt32 : ringoFloat32, ringoSum, c, nullptr);
       }, "int32"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    RunForked(3, [&](Team& t) {
      std::vector<float> buf(4096, 1.0f);
      const double t0 = now_s();
      ringoResult_t res = k.call(t.comms[0], t.ranks[0], buf);
      EXPECT_EQ(ringoInvalidUsage, res) << ResultName(res) << ": " << ringoGetLastError(t.comms[0]);
      EXPECT_LT(now_s() - t0, 5.0) << "found by the fingerprint, not by the 20 s timeout";
      const std::string msg = ringoGetLastError(t.comms[0]);
      EXPECT_TRUE(contains(msg, "collective mismatch")) << msg;
      EXPECT_TRUE(contains(msg, k.expect)) << msg;
    }, short_timeout(20.0));
  }
}

// A rank that skips a collective is caught at the next one: the sequence numbers disagree. The
// rank that called #0 with a count may instead read the other's count-0 post of #0 on the board
// first (it is there until #1 replaces it): then its message, which its poison may pass to the
// other rank, names that difference.
TEST(Failures, SkippedCollectiveIsCaughtBySequenceNumber) {
  RunForked(2, [](Team& t) {
    std::vector<float> buf(4096, 1.0f);
    ringoResult_t res = ringoSuccess;
    if (t.ranks[0] == 0) res = ringoAllReduce(buf.data(), buf.data(), 0, ringoFloat32, ringoSum, t.comms[0], nullptr);
    EXPECT_EQ(ringoSuccess, res);  // count 0 moves nothing: nobody can tell yet
    res = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, t.comms[0], nullptr);
    EXPECT_EQ(ringoInvalidUsage, res) << ringoGetLastError(t.comms[0]);
    const std::string msg = ringoGetLastError(t.comms[0]);
    EXPECT_TRUE(contains(msg, "collective mismatch")) << msg;
    EXPECT_TRUE(contains(msg, "#1") || contains(msg, "#0 (count 0,")) << msg;
  }, short_timeout(20.0));
}

// A rank that never calls: the waiting rank times out after RINGO_TIMEOUT, and its message says
// which step, which link and which peer did not arrive.
TEST(Failures, TimeoutNamesStepLinkAndPeer) {
  RunForked(2, [](Team& t) {
    std::vector<float> buf(1 << 16, 1.0f);
    if (t.ranks[0] == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      // By now rank 0 has given up and poisoned the links: the late call fails at once.
      ringoResult_t res = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, t.comms[0], nullptr);
      EXPECT_EQ(ringoTimeout, res) << ringoGetLastError(t.comms[0]);
      return;
    }
    const double t0 = now_s();
    ringoResult_t res = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, t.comms[0], nullptr);
    const double waited = now_s() - t0;
    EXPECT_EQ(ringoTimeout, res);
    EXPECT_GE(waited, 1.0);
    EXPECT_LT(waited, 2.0);
    const std::string msg = ringoGetLastError(t.comms[0]);
    for (const char* part : {"rank 1", "link 1->0", "reduce-scatter step", "ringoAllReduce #0"})
      EXPECT_TRUE(contains(msg, part)) << "missing '" << part << "' in: " << msg;
  }, [] {  // the ring's steps are what is named: not the two-phase path of this size
    Options o = short_timeout(1.0);
    o.env = {{"RINGO_TWOPHASE_BYTES", "0"}};
    return o;
  }());
}

// Rooted collectives that disagree on the ring path (large counts, one host): their slices never
// meet, so before the board's check each rank waited out RINGO_TIMEOUT. Now a rank waiting on the
// ring compares its board post with the peers' (ringo_board_check_peers) and names the mismatch at
// once; a rank upstream of it may finish its own part with correct data and fail at its next call.
TEST(Failures, RootedCollectivesThatDifferOnTheRingAreNamedAtOnce) {
  // Each case leaves every rank waiting to receive: no slice of the two collectives ever meets.
  struct Case { const char* name; int roots[3]; bool reduce_on_2; };
  for (const Case& c : {Case{"different roots", {1, 2, 0}, false}, Case{"different roots, two agree", {1, 1, 0}, false},
                        Case{"broadcast against reduce", {2, 2, 0}, true}}) {
    SCOPED_TRACE(c.name);
    RunProcesses(3, [&c](int rank, const ringoUniqueId& id, Shared& shared) {
      ringoComm_t comm = nullptr;
      ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 3, id, rank));
      std::vector<float> buf(size_t(1) << 18, 1.0f);  // 1 MiB: the ring, not the one-shot board
      const double t0 = now_s();
      ringoResult_t res = c.reduce_on_2 && rank == 2
                              ? ringoReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, c.roots[rank], comm, nullptr)
                              : ringoBroadcast(buf.data(), buf.data(), buf.size(), ringoFloat32, c.roots[rank], comm, nullptr);
      if (res == ringoSuccess)  // finished early upstream: the next call says so
        res = ringoAllReduce(buf.data(), buf.data(), 16, ringoFloat32, ringoSum, comm, nullptr);
      const double waited = now_s() - t0;
      EXPECT_NE(res, ringoSuccess);
      EXPECT_LT(waited, 2.0) << "named by the board, not by the 20 s RINGO_TIMEOUT";
      const std::string msg = ringoGetLastError(comm);
      EXPECT_TRUE(contains(msg, "collective mismatch")) << msg;
      EXPECT_TRUE(shared.Barrier(30));
      ringoCommDestroy(comm);
    }, short_timeout(20.0));
  }
}

// ringoCommAbort poisons the links before it frees anything, so a peer stuck in a collective on
// the aborting rank fails at once with ringoRemoteError naming it, while that process still
// lives (before, the peer waited until the aborting process exited or its own timeout ran out).
TEST(Failures, AbortPoisonsThePeersOfTheSameCollective) {
  // 256 KiB waits on a ring link; 64 B on the one-shot board (RINGO_ALGO=auto, one host).
  for (size_t count : {size_t(1) << 16, size_t(16)}) {
    SCOPED_TRACE(count);
    RunProcesses(2, [count](int rank, const ringoUniqueId& id, Shared& shared) {
      ringoComm_t comm = nullptr;
      ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 2, id, rank));
      if (rank == 1) {  // the aborting rank: never calls, aborts from a thread, stays alive 3 s
        std::thread aborter([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          EXPECT_EQ(ringoSuccess, ringoCommAbort(comm));
        });
        aborter.join();
        std::this_thread::sleep_for(std::chrono::seconds(3));
        EXPECT_TRUE(shared.Barrier(30));
        return;
      }
      std::vector<float> buf(count, 1.0f);
      const double t0 = now_s();
      const ringoResult_t res = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, comm, nullptr);
      const double waited = now_s() - t0;
      EXPECT_EQ(res, ringoRemoteError) << ringoGetLastError(comm);
      // 0.2 s until the abort, then a few of the waiter's naps; the aborting process lives 3 s more.
      EXPECT_LT(waited, 1.0) << "the peer must not wait for the aborting process to exit";
      const std::string msg = ringoGetLastError(comm);
      EXPECT_TRUE(contains(msg, "rank 1")) << msg;
      EXPECT_TRUE(contains(msg, "ringoCommAbort")) << msg;
      EXPECT_EQ(ringoSuccess, ringoCommDestroy(comm));
      EXPECT_TRUE(shared.Barrier(30));
    }, short_timeout(20.0));
  }
}

// ringoCommAbort from another thread unblocks a rank stuck in a collective.
TEST(Failures, AbortFromAnotherThreadUnblocks) {
  // 256 KiB waits on a ring link; 64 B on the one-shot board (RINGO_ALGO=auto, one host).
  for (size_t count : {size_t(1) << 16, size_t(16)}) {
    SCOPED_TRACE(count);
    Options opts = short_timeout(20.0);
    RunProcesses(2, [count](int rank, const ringoUniqueId& id, Shared& shared) {
      ringoComm_t comm = nullptr;
      ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 2, id, rank));
      std::vector<float> buf(count, 1.0f);
      if (rank == 1) {  // never takes part; leaves once rank 0 has aborted
        EXPECT_TRUE(shared.Barrier(30));
        EXPECT_EQ(ringoSuccess, ringoCommDestroy(comm));
        return;
      }
      std::atomic<bool> returned{false};
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        EXPECT_FALSE(returned.load()) << "the collective should still be blocked";
        EXPECT_EQ(ringoSuccess, ringoCommAbort(comm));  // frees comm once the collective has left
      });
      const double t0 = now_s();
      ringoResult_t res = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, comm, nullptr);
      returned = true;
      const double waited = now_s() - t0;
      aborter.join();
      EXPECT_NE(ringoSuccess, res);
      EXPECT_LT(waited, 2.0) << "abort must unblock within a few sleeps, not the 20 s timeout";
      EXPECT_TRUE(shared.Barrier(30));
    }, opts);
  }
}
