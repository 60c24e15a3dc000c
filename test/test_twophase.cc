// test_twophase.cc — the two-phase all-reduce of ranks on one host (src/engine/twophase.c, the board's
// reduced marks in src/comm/board.c): the ring's bits for every dtype, op, count and placement; the
// ring's bytes; when it runs; mismatches and dead peers named. Run: make test (build/test/test_twophase).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <functional>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "collective_cases.h"
#include "harness.h"
#include "internals.h"
#include "result_hashes.h"
#include "ringo.h"

using ringo_cases::Case;
using ringo_cases::Coll;
using ringo_hashes::HashTable;
using ringo_test::Options;
using ringo_test::RunForked;
using ringo_test::Team;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Options WithEnv(std::vector<std::pair<std::string, std::string>> env) {
  Options o;
  o.deadline_s = 120;
  o.env = std::move(env);
  return o;
}
// Every all-reduce of at most 1 MiB per rank two-phase (none one-shot), as the tests below want.
Options TwoPhaseUpTo1M() { return WithEnv({{"RINGO_ONESHOT_BYTES", "0"}, {"RINGO_TWOPHASE_BYTES", "1M"}}); }

// The algorithm comm would run an all-reduce of count elements of type t on.
std::string AlgoFor(ringoComm_t comm, size_t count, ringoDataType_t t) { return ringo_test_allreduce_algo(comm, count, t); }

// The bytes a two-phase all-reduce moves each way on rank r of n (ranks of one host: ring position r):
// peers read its input but the chunk it reduces, and that chunk's result N-1 times (D + (N-2)·D/N:
// the ring's 2(N-1)/N·D when the chunks are even).
uint64_t TwoPhaseBytes(int n, int r, const Case& c) {
  size_t off, len;
  ringo_chunk_range(c.count, n, ringo_owned_chunk(n, r), &off, &len);
  const size_t esize = ringo_cases::TypeSize(c.type);
  return c.count * esize + uint64_t(n - 2) * len * esize;
}

// All-reduces of every dtype and op, in and out of place, with counts below N, uneven, and long
// (aligned 16-element cuts, ringo_chunk_range).
std::vector<Case> AllReduceCases(int n) {
  std::vector<Case> cases;
  for (const Case& c : ringo_cases::EveryCase(n, {size_t(n), size_t(n + 1), size_t(37 * n + 3), size_t(8192 * n + 1)}))
    if (c.coll == Coll::kAllReduce) cases.push_back(c);
  for (ringoDataType_t t : {ringoFloat32, ringoBfloat16, ringoFloat64})
    for (bool in_place : {false, true}) cases.push_back({Coll::kAllReduce, t, ringoAvg, size_t(12289) * n, in_place, 0});
  return cases;
}

// Runs cases on n ranks on the ring, then under env (every one two-phase), and expects the ring's
// bits on every rank and the ring's bytes; check_ops(c, k) looks at the k board ops a call took.
void ExpectTwoPhaseBitsEqualTheRings(int n, const std::vector<Case>& cases, const Options& env,
                                     const std::function<void(const Case&, unsigned long long)>& check_ops) {
  HashTable table(n, cases.size());
  ASSERT_NE(MAP_FAILED, static_cast<void*>(table.mem));
  RunForked(n, [&](Team& t) { ringo_hashes::HashCases(t, table.Row(0, n, t.ranks[0]), cases); },
            WithEnv({{"RINGO_ALGO", "ring"}}));
  RunForked(n, [&](Team& t) {
    unsigned long long ops = ringo_test_board_ops(t.comms[0]);
    ringo_hashes::HashCases(t, table.Row(1, n, t.ranks[0]), cases, [&](const Case& c, const ringoCommStats& grew) {
      EXPECT_EQ("two-phase", AlgoFor(t.comms[0], c.count, c.type)) << ringo_cases::Label(c);
      EXPECT_EQ(TwoPhaseBytes(n, t.ranks[0], c), grew.bytesSent) << ringo_cases::Label(c);
      EXPECT_EQ(TwoPhaseBytes(n, t.ranks[0], c), grew.bytesReceived) << ringo_cases::Label(c);
      const unsigned long long now = ringo_test_board_ops(t.comms[0]);
      check_ops(c, now - ops);
      ops = now;
    });
  }, env);
  if (!testing::Test::HasFailure()) table.ExpectModesEqual(n, cases, "two-phase");
}

}  // namespace

// Phase 1 reduces each chunk as the ring does (ringo_oneshot_reduce_piece: the ring's order, partial
// steps in the type, avg's division last), phase 2 only copies: every all-reduce gives the ring's
// bits on every rank, and the ring's bytes, in one round.
class TwoPhaseBits : public testing::TestWithParam<int> {};
TEST_P(TwoPhaseBits, EqualTheRingsForEveryTypeOpAndPlacement) {
  const int n = GetParam();
  ExpectTwoPhaseBitsEqualTheRings(n, AllReduceCases(n), TwoPhaseUpTo1M(), [](const Case& c, unsigned long long ops) {
    EXPECT_EQ(1u, ops) << ringo_cases::Label(c);
  });
}
INSTANTIATE_TEST_SUITE_P(N, TwoPhaseBits, testing::Values(2, 3, 4, 5, 8));

// An input larger than the round (RINGO_TWOPHASE_ROUND_BYTES) runs in rounds, one board op each,
// every ring chunk cut into as many pieces: still the ring's bits and bytes. Rounds of 16 KiB: the
// long cases take 2-48 of them, so both board sides are reused many times within one call.
class TwoPhaseRoundsBits : public testing::TestWithParam<int> {};
TEST_P(TwoPhaseRoundsBits, EqualTheRingsForEveryTypeOpAndPlacement) {
  const int n = GetParam();
  const size_t round = 16 << 10;
  Options env = TwoPhaseUpTo1M();
  env.env.push_back({"RINGO_TWOPHASE_ROUND_BYTES", "16K"});
  const std::vector<Case> cases = AllReduceCases(n);
  size_t multi = 0;
  for (const Case& c : cases) multi += c.count * ringo_cases::TypeSize(c.type) > round;
  ASSERT_GT(multi, cases.size() / 5);  // the 8192·N + 1 counts and the avg cases
  // ringo_chunk_range's 16-element cuts can make the first round a little longer than an even
  // share: one round more than the bytes alone need, at most.
  ExpectTwoPhaseBitsEqualTheRings(n, cases, env, [&](const Case& c, unsigned long long ops) {
    const size_t bytes = c.count * ringo_cases::TypeSize(c.type);
    const unsigned long long least = (bytes + round - 1) / round;
    EXPECT_TRUE(ops == least || ops == least + 1) << ringo_cases::Label(c) << ": " << ops << " rounds";
  });
}
INSTANTIATE_TEST_SUITE_P(N, TwoPhaseRoundsBits, testing::Values(2, 3, 4, 8));

// RINGO_TWOPHASE_BYTES is the largest input that runs two-phase, to the byte; fewer elements than
// ranks never do (a rank would have no chunk); RINGO_TWOPHASE_BYTES=0 and RINGO_ALGO=ring turn it off.
TEST(TwoPhase, ThresholdIsExact) {
  RunForked(3, [](Team& t) {
    EXPECT_EQ("two-phase", AlgoFor(t.comms[0], 25, ringoInt32));
    EXPECT_EQ("ring", AlgoFor(t.comms[0], 26, ringoInt32));
    EXPECT_EQ("ring", AlgoFor(t.comms[0], 2, ringoInt32));
    for (size_t count : {size_t(3), size_t(25), size_t(26)}) {
      std::vector<int32_t> buf(count, t.ranks[0] + 1);
      ASSERT_EQ(ringoSuccess, ringoAllReduce(buf.data(), buf.data(), count, ringoInt32, ringoSum, t.comms[0], nullptr));
      for (int32_t v : buf) ASSERT_EQ(6, v) << count;
    }
  }, WithEnv({{"RINGO_ONESHOT_BYTES", "0"}, {"RINGO_TWOPHASE_BYTES", "100"}}));
  RunForked(3, [](Team& t) { EXPECT_EQ("ring", AlgoFor(t.comms[0], 25, ringoInt32)); },
            WithEnv({{"RINGO_ONESHOT_BYTES", "0"}, {"RINGO_TWOPHASE_BYTES", "0"}}));
  RunForked(3, [](Team& t) { EXPECT_EQ("ring", AlgoFor(t.comms[0], 25, ringoInt32)); },
            WithEnv({{"RINGO_ALGO", "ring"}, {"RINGO_TWOPHASE_BYTES", "100"}}));
}

// Unset, it runs above the one-shot up to RINGO_TWOPHASE_MAX_BYTES per rank (1 MiB at N = 3), less
// where the board's 2·N slots would pass RINGO_TWOPHASE_BOARD_BYTES or the N inputs together 4 MiB
// (core/core.h): one round.
TEST(TwoPhase, DefaultRange) {
  EXPECT_EQ(size_t(2) << 20, ringo_test_twophase_default_bytes(2));
  EXPECT_EQ(size_t(1) << 20, ringo_test_twophase_default_bytes(3));
  EXPECT_EQ(size_t(1) << 20, ringo_test_twophase_default_bytes(4));
  EXPECT_EQ(size_t(512) << 10, ringo_test_twophase_default_bytes(8));
  EXPECT_EQ(size_t(256) << 10, ringo_test_twophase_default_bytes(16));
  // The round (the board slot) unset: the board's 32 MiB shared by 2·N slots.
  EXPECT_EQ(size_t(8) << 20, ringo_test_twophase_round_default_bytes(2));
  EXPECT_EQ(size_t(2) << 20, ringo_test_twophase_round_default_bytes(8));
  for (int n : {2, 3, 8}) {
    RunForked(n, [](Team& t) {
      const size_t max = ringo_test_twophase_default_bytes(t.nranks);
      EXPECT_EQ("one-shot", AlgoFor(t.comms[0], 16, ringoFloat32));
      EXPECT_EQ("two-phase", AlgoFor(t.comms[0], 1 << 14, ringoFloat32));
      EXPECT_EQ("two-phase", AlgoFor(t.comms[0], max, ringoInt8));
      EXPECT_EQ("ring", AlgoFor(t.comms[0], max + 1, ringoInt8));
    });
  }
}

// A rank whose call runs on the ring (another count) or is another collective is named at once by
// the ranks in the two-phase call, and fails too: every rank gets ringoInvalidUsage with both
// fingerprints, long before RINGO_TIMEOUT.
// In rounds too (RINGO_TWOPHASE_ROUND_BYTES=16K: the two-phase call takes 16 of them): named in the first.
TEST(TwoPhase, MismatchIsNamedOnEveryRank) {
  for (int variant = 0; variant < 4; variant++) {
    Options o = TwoPhaseUpTo1M();
    o.env.push_back({"RINGO_TIMEOUT", "20"});
    if (variant >= 2) o.env.push_back({"RINGO_TWOPHASE_ROUND_BYTES", "16K"});
    RunForked(4, [&](Team& t) {
      const int r = t.ranks[0];
      std::vector<float> buf(1 << 19, 1.0f);  // 2 MiB: the ring; 64 Ki elements: two-phase
      const size_t count = r == 2 && variant % 2 == 0 ? buf.size() : size_t(1) << 16;
      const auto t0 = std::chrono::steady_clock::now();
      const ringoResult_t res = r == 2 && variant % 2 == 1
                                    ? ringoBroadcast(buf.data(), buf.data(), count, ringoFloat32, 0, t.comms[0], nullptr)
                                    : ringoAllReduce(buf.data(), buf.data(), count, ringoFloat32, ringoSum, t.comms[0], nullptr);
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(ringoInvalidUsage, res) << "variant " << variant << " rank " << r;
      EXPECT_TRUE(contains(ringoGetLastError(t.comms[0]), "mismatch")) << ringoGetLastError(t.comms[0]);
      EXPECT_LT(took, 5.0) << "variant " << variant << " rank " << r;
    }, o);
  }
}

// A rank killed between the phases (it posted, then died before it reduced its chunk) fails the
// others with ringoRemoteError naming it, within the board's liveness checks, not RINGO_TIMEOUT.
TEST(TwoPhase, PeerDeadBeforeItsChunkIsNamed) {
  Options o = TwoPhaseUpTo1M();
  o.env.push_back({"RINGO_TIMEOUT", "30"});
  ringo_test::JobReport report = ringo_test::RunProcessesCollect(3, [&](int rank, const ringoUniqueId& id, ringo_test::Shared& shared) {
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 3, id, rank));
    ASSERT_EQ("two-phase", AlgoFor(comm, 1 << 16, ringoFloat32));
    ASSERT_TRUE(shared.Barrier());
    if (rank == 1) raise(SIGKILL);  // never posts: the others wait in phase 1 and find it gone
    std::vector<float> buf(1 << 16, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ringoRemoteError, ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, comm, nullptr));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
    EXPECT_TRUE(contains(ringoGetLastError(comm), "rank 1")) << ringoGetLastError(comm);
    ringoCommDestroy(comm);
  }, o);
  ASSERT_EQ(1u, report.problems.size());
  EXPECT_TRUE(contains(report.problems[0], "signal 9")) << report.problems[0];
  EXPECT_TRUE(report.failures.empty()) << report.failures[0].message;
}

// A rank that does not come within RINGO_TIMEOUT is named with the call, and so is the board.
TEST(TwoPhase, TimeoutNamesThePeerAndTheCall) {
  Options o = TwoPhaseUpTo1M();
  o.env.push_back({"RINGO_TIMEOUT", "1"});
  RunForked(3, [](Team& t) {
    std::vector<float> buf(1 << 16, 1.0f);
    if (t.ranks[0] == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      return;  // the others gave up long ago
    }
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ringoTimeout, ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, t.comms[0], nullptr));
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The first rank to time out poisons the board, so a rank that entered a little after it ends
    // with its error a little before its own RINGO_TIMEOUT (by the ranks' skew at entry).
    EXPECT_GE(waited, 0.9);
    EXPECT_LT(waited, 2.0);
    const std::string msg = ringoGetLastError(t.comms[0]);
    for (const char* part : {"rank 1 to join", "ringoAllReduce #0", "two-phase board"})
      EXPECT_TRUE(contains(msg, part)) << "missing '" << part << "' in: " << msg;
  }, o);
}

// Nanoseconds pid has run on a CPU (/proc/PID/schedstat's first field), or -1.
long long RunNs(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/schedstat";
  FILE* f = fopen(path.c_str(), "r");
  long long ns = -1;
  if (f && fscanf(f, "%lld", &ns) != 1) ns = -1;
  if (f) fclose(f);
  return ns;
}

// Stops pid `stalls` times for stall_us, letting it run about 20 us of CPU between (a window in which
// it surely moves on: its peer waits on it), then exits. Run in a child of the stopped rank; it polls
// without sleeping, so a window ends soon after the 20 us even on a busy machine.
[[noreturn]] void Stall(pid_t pid, int stalls, useconds_t stall_us) {
  for (int i = 0; i < stalls; i++) {
    kill(pid, SIGSTOP);
    usleep(stall_us);
    const long long ran = RunNs(pid);
    kill(pid, SIGCONT);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (ran >= 0 && RunNs(pid) < ran + 20000 && std::chrono::steady_clock::now() < until) {}
  }
  _exit(0);
}

// RINGO_TIMEOUT bounds each wait, as on a ring link, not a call's waits together: a peer stopped 12
// times for 0.3 s, a few rounds' work apart, within one call of 64 rounds, only slows it (a single
// wait would have to span 9 stops to reach 2.5 s). The board once counted the timeout from the
// call's first wait: this call then failed both ranks after 2.5 s. Skipped, saying so, where the
// machine was too busy for the stops to fall within one call.
TEST(TwoPhase, TimeoutBoundsEachWaitNotTheCall) {
  constexpr double kTimeout = 2.5;
  Options o = WithEnv({{"RINGO_ONESHOT_BYTES", "0"}, {"RINGO_TWOPHASE_BYTES", "1M"},
                       {"RINGO_TWOPHASE_ROUND_BYTES", "4K"}, {"RINGO_TIMEOUT", "2.5"}, {"RINGO_SPIN", "0"}});
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(MAP_FAILED, page);
  auto* longest_call = static_cast<double*>(page);  // rank 0's longest call, seen after the job
  ringo_test::JobReport report = ringo_test::RunProcessesCollect(2, [&](int rank, const ringoUniqueId& id, ringo_test::Shared& shared) {
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 2, id, rank));
    ASSERT_EQ("two-phase", AlgoFor(comm, 1 << 16, ringoFloat32));
    ASSERT_TRUE(shared.Barrier());
    pid_t staller = -1;
    if (rank == 1) {
      const pid_t me = getpid();
      staller = fork();
      ASSERT_GE(staller, 0);
      if (staller == 0) Stall(me, 12, 300000);
    }
    std::vector<float> buf(1 << 16);  // 256 KiB: 64 rounds of 4 KiB
    for (int it = 0;; it++) {
      std::fill(buf.begin(), buf.end(), 1.0f);
      // Element 0 carries whether rank 1's staller still runs, so both ranks make the same calls.
      buf[0] = rank == 1 && waitpid(staller, nullptr, WNOHANG) == 0 ? 1.0f : 0.0f;
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_EQ(ringoSuccess, ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, comm, nullptr))
          << "rank " << rank << " call " << it << ": " << ringoGetLastError(comm);
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rank == 0) *longest_call = std::max(*longest_call, took);
      ASSERT_EQ(2.0f, buf[1]);
      if (buf[0] == 0.0f) break;
    }
    if (rank == 1) waitpid(staller, nullptr, 0);
    ringoCommDestroy(comm);
  }, o);
  const double longest = *longest_call;
  munmap(page, 4096);
  EXPECT_TRUE(report.problems.empty()) << report.problems[0];
  ASSERT_TRUE(report.failures.empty()) << report.failures[0].message;
  if (longest <= kTimeout) GTEST_SKIP() << "the longest call took " << longest << " s: the stops did not fall within one call";
}

// Hundreds of calls in a row, one-shot, two-phase and ring mixed, in place, forked, as threads and
// from one thread in a group: the board's sides are reused every second call, so a rank that ran
// ahead must wait for the slowest to finish reading, in either phase.
void MixedStream(Team& t) {
  const int n = t.nranks;
  std::vector<std::vector<int32_t>> buf(t.size());
  for (int it = 0; it < 200; it++) {
    const size_t count = size_t(1 + (it * 7919) % 4096);  // 4 B .. 16 KiB: 1 K one-shot, 8 K two-phase
    for (size_t k = 0; k < t.size(); k++) {
      buf[k].resize(count);
      for (size_t j = 0; j < count; j++) buf[k][j] = t.ranks[k] + it + int32_t(j % 613);  // a misplaced piece shows
    }
    ASSERT_EQ(ringoSuccess, ringo_test::TeamCall(t, [&](size_t k) {
      return ringoAllReduce(buf[k].data(), buf[k].data(), count, ringoInt32, ringoSum, t.comms[k], nullptr);
    })) << "call " << it;
    for (size_t k = 0; k < t.size(); k++)
      for (size_t j = 0; j < count; j++)
        ASSERT_EQ(n * (n - 1) / 2 + n * (it + int32_t(j % 613)), buf[k][j]) << "call " << it << " rank " << t.ranks[k] << " element " << j;
  }
}
Options MixedEnv() { return WithEnv({{"RINGO_ONESHOT_BYTES", "1K"}, {"RINGO_TWOPHASE_BYTES", "8K"}}); }
TEST(TwoPhase, MixedStreamForked) { RunForked(4, MixedStream, MixedEnv()); }
TEST(TwoPhase, MixedStreamThreads) { ringo_test::RunThreads(3, MixedStream, MixedEnv()); }
TEST(TwoPhase, MixedStreamOneThread) { ringo_test::RunGroup(5, MixedStream, MixedEnv()); }

// Rounds of 4 KiB mixed with one-shot, one-round two-phase and ring calls: a call of several rounds
// takes several board ops, and the next call must still find both sides where the peers left them.
Options MixedInRoundsEnv() {
  Options o = MixedEnv();
  o.env.push_back({"RINGO_TWOPHASE_ROUND_BYTES", "4K"});
  return o;
}
TEST(TwoPhase, MixedStreamInRoundsForked) { RunForked(4, MixedStream, MixedInRoundsEnv()); }
TEST(TwoPhase, MixedStreamInRoundsThreads) { ringo_test::RunThreads(3, MixedStream, MixedInRoundsEnv()); }

// RINGO_TWOPHASE_BYTES beyond the board's share does not grow the board: the input runs in rounds of
// the share (4 MiB at N = 4), so /dev/shm holds the same 32 MiB whatever the limit.
TEST(TwoPhase, LargeLimitKeepsTheBoardAndRunsInRounds) {
  RunForked(4, [](Team& t) {
    EXPECT_LE(ringo_test_board_bytes(t.comms[0]), (size_t(32) << 20) + (size_t(1) << 20));
    EXPECT_GT(ringo_test_board_bytes(t.comms[0]), size_t(32) << 20);
    const size_t count = size_t(3) << 20;  // 12 MiB of int32: three rounds
    ASSERT_EQ("two-phase", AlgoFor(t.comms[0], count, ringoInt32));
    std::vector<int32_t> in(count), out(count, -1);
    for (size_t i = 0; i < count; i++) in[i] = int32_t(i % 1000) + t.ranks[0];
    const unsigned long long ops = ringo_test_board_ops(t.comms[0]);
    ASSERT_EQ(ringoSuccess, ringoAllReduce(in.data(), out.data(), count, ringoInt32, ringoSum, t.comms[0], nullptr));
    EXPECT_EQ(3u, ringo_test_board_ops(t.comms[0]) - ops);
    for (size_t i = 0; i < count; i++)
      if (out[i] != 4 * int32_t(i % 1000) + 6) FAIL() << "element " << i << ": " << out[i];
  }, WithEnv({{"RINGO_TWOPHASE_BYTES", "32M"}}));
}
