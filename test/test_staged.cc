// test_staged.cc — staged device collectives (src/staged.c), the path a device ring takes when it
// leaves the host, run without a GPU: a worker thread per rank stands in for ringo's CUDA stream
// (memcpy for the copies, a call for the host function). Run: make test, or build/test/test_staged.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "staged_fake.h"

namespace {

using ringo_test::Team;
using namespace ringo_staged_test;

class Staged : public testing::TestWithParam<int> {};

TEST_P(Staged, EveryCollectiveMatchesTheHostPath) {
  ringo_test::RunThreads(GetParam(), [](Team& t) {
    Stager s;
    const int n = t.nranks, r = t.ranks[0];
    EveryCollective(t.comms[0], n, r, s, 1000, ringoFloat32, ringoSum);
    EveryCollective(t.comms[0], n, r, s, 3, ringoInt32, ringoMax);
    EveryCollective(t.comms[0], n, r, s, 40000, ringoFloat64, ringoAvg);  // several slices; the staging grows
    EveryCollective(t.comms[0], n, r, s, 777, ringoUint8, ringoMin);
  });
}

INSTANTIATE_TEST_SUITE_P(N, Staged, testing::Values(2, 3, 4));

// Launch returns while the stream has not run anything; the result appears once it does.
TEST(StagedAsync, LaunchDoesNotWaitForTheCollective) {
  ringo_test::RunThreads(3, [](Team& t) {
    Stager s;
    ringoComm_t comm = t.comms[0];
    const size_t count = 5000;
    std::vector<float> in(count, (float)(t.ranks[0] + 1)), out(count, -1.0f);
    s.stream.SetGate(false);
    ASSERT_EQ(ringoSuccess, Launch(s, comm, RINGO_COLL_ALLREDUCE, in.data(), out.data(), count, ringoFloat32, ringoSum, 0))
        << ringo_thread_last_error();
    EXPECT_EQ(1, ringo_staged_pending(&s.stage));
    EXPECT_EQ(0u, s.stream.done());
    EXPECT_EQ(-1.0f, out[0]) << "the result arrived before the stream ran";
    s.stream.SetGate(true);
    s.stream.Drain();
    EXPECT_EQ(0, s.PendingSettled());
    for (size_t i = 0; i < count; i++) ASSERT_EQ(6.0f, out[i]) << "element " << i;
  });
}

// Several collectives enqueued back to back while the stream is held, growing the staging buffers on
// the way: each keeps its own result (a replaced buffer is retired, never reused or waited for).
TEST(StagedAsync, BackToBackLaunchesWithGrowingBuffers) {
  ringo_test::RunThreads(2, [](Team& t) {
    Stager s;
    ringoComm_t comm = t.comms[0];
    const size_t counts[] = {100, 300000, 17, 1000000, 5};
    std::vector<std::vector<int32_t>> ins, outs;
    for (size_t count : counts) {
      ins.emplace_back(count);
      outs.emplace_back(count, -1);
      for (size_t i = 0; i < count; i++) ins.back()[i] = (int32_t)(i % 1000) * (t.ranks[0] + 1);
    }
    s.stream.SetGate(false);  // a launch that waited for the stream would hang here
    for (size_t k = 0; k < ins.size(); k++) {
      ASSERT_EQ(ringoSuccess, Launch(s, comm, RINGO_COLL_ALLREDUCE, ins[k].data(), outs[k].data(), counts[k], ringoInt32,
                                     ringoSum, 0))
          << ringo_thread_last_error();
    }
    s.stream.SetGate(true);
    s.stream.Drain();
    for (size_t k = 0; k < ins.size(); k++)
      for (size_t i = 0; i < counts[k]; i++) ASSERT_EQ((int32_t)(i % 1000) * 3, outs[k][i]) << "call " << k << " element " << i;
    EXPECT_EQ(7, s.stream.allocs) << "the proxy's flag; in and out: made for 100 elements, grown for 300000 and 1000000";
    EXPECT_EQ(0, s.stream.drains) << "growing the staging never waits for the stream";
  });
}

// What a group does before launching anything (ringo_stage_reserve): the proxy started and the
// buffers made for the group's sizes, so its launches allocate nothing; nothing reserved, nothing made.
TEST(StagedAsync, AReservedStageAllocatesNothingAtLaunch) {
  ringo_test::RunThreads(2, [](Team& t) {
    Stager s;
    ringoComm_t comm = t.comms[0];
    ASSERT_EQ(ringoSuccess, ringo_stage_reserve(comm, &s.stage, 0, 0, 0, &s.ops));
    EXPECT_EQ(0, s.stream.allocs) << "nothing to reserve";
    EXPECT_EQ(nullptr, s.stage.proxy) << "no proxy for no work";
    const size_t count = 3000;
    size_t in = 0, out = 0;
    ringo_staged_extent(RINGO_COLL_ALLREDUCE, count, ringoInt32, 2, t.ranks[0], 0, &in, &out);
    ASSERT_EQ(ringoSuccess, ringo_stage_reserve(comm, &s.stage, in, out, 100, &s.ops));
    EXPECT_NE(nullptr, s.stage.proxy);
    EXPECT_EQ(4, s.stream.allocs) << "the proxy's flag, in, out and the sends' and receives' staging";
    EXPECT_GE(s.stage.p2p_cap, 100u);
    std::vector<int32_t> x(count, t.ranks[0] + 1), y(count, -1);
    ASSERT_EQ(ringoSuccess, Launch(s, comm, RINGO_COLL_ALLREDUCE, x.data(), y.data(), count, ringoInt32, ringoSum, 0))
        << ringo_thread_last_error();
    s.stream.Drain();
    EXPECT_EQ(4, s.stream.allocs) << "the launch allocated";
    for (size_t i = 0; i < count; i++) ASSERT_EQ(3, y[i]) << "element " << i;
  });
}

// RINGO_TRACE names each staged collective's slices with its own number (the collective's seq), not
// with how many had been launched by the time the proxy ran it: two launched back to back while the
// stream is held are 0 and 1 in the trace.
TEST(StagedTrace, EachCollectiveKeepsItsNumber) {
  const std::string path = ::testing::TempDir() + "ringo_staged_trace_" + std::to_string(getpid()) + ".json";
  unlink(path.c_str());
  ringo_test::Options opts;
  opts.env = {{"RINGO_TRACE", path}};
  ringo_test::RunThreads(2, [](Team& t) {
    Stager s;
    const size_t count = 4096;
    std::vector<float> in(count, 1.0f), out1(count), out2(count);
    s.stream.SetGate(false);
    ASSERT_EQ(ringoSuccess, Launch(s, t.comms[0], RINGO_COLL_ALLREDUCE, in.data(), out1.data(), count, ringoFloat32,
                                   ringoSum, 0));
    ASSERT_EQ(ringoSuccess, Launch(s, t.comms[0], RINGO_COLL_ALLREDUCE, in.data(), out2.data(), count, ringoFloat32,
                                   ringoSum, 0));
    s.stream.SetGate(true);
    s.stream.Drain();
    EXPECT_EQ(2.0f, out2[count - 1]);
  }, opts);
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  unlink(path.c_str());
  const std::string json = text.str();
  EXPECT_NE(std::string::npos, json.find("\"seq\":0,")) << json.substr(0, 400);
  EXPECT_NE(std::string::npos, json.find("\"seq\":1,")) << json.substr(0, 400);
  EXPECT_EQ(std::string::npos, json.find("\"seq\":2,")) << "a collective numbered by launches, not by itself";
}

// What a group's launch reserves for each communicator (ringo_stage_needs): its own device work only,
// collectives only when staged (largest extents), sends and receives summed at 64-byte rounding.
TEST(StagedReserve, EachCommunicatorNeedsItsOwnDeviceWork) {
  ringo_test::RunGroup(2, [](Team& t) {
    ringoComm_t a = t.comms[0], b = t.comms[1];
    const ringo_stage_call calls[] = {
        {a, 1, 0, RINGO_COLL_ALLREDUCE, 1000, ringoInt32, 0},     // 4000 bytes in and out
        {a, 1, 1, RINGO_COLL_ALLREDUCE, 100, ringoFloat32, 0},    // a send: 400 -> 448
        {b, 1, 1, RINGO_COLL_ALLREDUCE, 10, ringoInt8, 0},        // b's: 10 -> 64
        {a, 0, 1, RINGO_COLL_ALLREDUCE, 999999, ringoInt8, 0},    // host memory: not staged
        {a, 1, 2, RINGO_COLL_ALLREDUCE, 50, ringoFloat64, 0},     // a receive: 400 -> 448
        {a, 1, 0, RINGO_COLL_ALLGATHER, 300, ringoInt32, 0},      // in 1200, out 2400
        {b, 1, 0, RINGO_COLL_ALLREDUCE, 1 << 20, ringoInt32, 0},  // b's
    };
    size_t need[3];
    ringo_stage_needs_call(a, 1, calls, 7, need);
    EXPECT_EQ(4000u, need[0]);
    EXPECT_EQ(4000u, need[1]);
    EXPECT_EQ(896u, need[2]);
    ringo_stage_needs_call(a, 0, calls, 7, need);
    EXPECT_EQ(0u, need[0]) << "a ring that stays on the host stages no collective";
    EXPECT_EQ(0u, need[1]);
    EXPECT_EQ(896u, need[2]);
    ringo_stage_needs_call(b, 1, calls, 7, need);
    EXPECT_EQ(4u << 20, need[0]);
    EXPECT_EQ(4u << 20, need[1]);
    EXPECT_EQ(64u, need[2]);
  });
}

// A collective the ranks disagree on fails in the host function: the error reaches the
// communicator on every rank (ringoCommGetAsyncError), nothing crashes or hangs, and the
// communicator refuses the next call.
TEST(StagedErrors, MismatchReachesEveryRankAsAnAsyncError) {
  ringo_test::Options opts;
  opts.ringo_timeout_s = 5;
  ringo_test::RunThreads(3, [](Team& t) {
    Stager s;
    ringoComm_t comm = t.comms[0];
    const size_t count = t.ranks[0] == 1 ? 4096 : 2048;
    std::vector<float> in(count, 1.0f), out(count);
    ASSERT_EQ(ringoSuccess, Launch(s, comm, RINGO_COLL_ALLREDUCE, in.data(), out.data(), count, ringoFloat32, ringoSum, 0));
    s.stream.Drain();
    EXPECT_NE(ringoSuccess, AsyncError(comm)) << "rank " << t.ranks[0] << " saw no error";
    EXPECT_NE(ringoSuccess, ringoAllReduce(in.data(), out.data(), 2048, ringoFloat32, ringoSum, comm, nullptr));
  }, opts);
}

// Small slots and pieces, so that collectives of a few thousand elements take many rounds and the
// staging is pipelined in several phases (src/staged.c); restored when the test ends.
struct ManyPhases {
  ringo_test::ScopedEnv slice{"RINGO_SLICE_BYTES", "1024"};  // 960 payload bytes: 240 floats a slice
  ringo_test::ScopedEnv ring{"RINGO_TWOPHASE_BYTES", "0"};   // the ring's rounds are what is cut in phases
  ringo_test::ScopedEnv piece{"RINGO_STAGED_PIECE_BYTES", "256"};
  ringo_test::ScopedEnv phases;
  explicit ManyPhases(int n) : phases("RINGO_STAGED_PHASES", std::to_string(n)) {}
};

class StagedPipeline : public testing::TestWithParam<int> {};

// Every collective, in and out of place, with odd counts (uneven chunks, chunks shorter than a
// phase) and counts a single slice holds, pipelined: the same bytes as the host path.
TEST_P(StagedPipeline, EveryCollectiveMatchesTheHostPath) {
  ManyPhases env(5);
  ringo_test::RunThreads(GetParam(), [](Team& t) {
    Stager s;
    const int n = t.nranks, r = t.ranks[0];
    EveryCollective(t.comms[0], n, r, s, 4000, ringoFloat32, ringoSum);
    EveryCollective(t.comms[0], n, r, s, 2, ringoInt32, ringoMax);
    EveryCollective(t.comms[0], n, r, s, 9001, ringoFloat64, ringoAvg);
    EveryCollective(t.comms[0], n, r, s, 1777, ringoUint8, ringoMin);
  });
}

INSTANTIATE_TEST_SUITE_P(N, StagedPipeline, testing::Values(2, 3, 4));

// Phases change only when this rank's copies happen, never what crosses the links: a staged rank
// and host-memory ranks share one collective.
TEST(StagedPipelineMixed, StagedAndHostRanksShareOneCollective) {
  ManyPhases env(4);
  ringo_test::RunThreads(3, [](Team& t) {
    Stager s;
    ringoComm_t comm = t.comms[0];
    const int r = t.ranks[0];
    const size_t count = 5000;
    for (int c : {RINGO_COLL_ALLREDUCE, RINGO_COLL_REDUCESCATTER, RINGO_COLL_ALLGATHER}) {
      const auto coll = (ringo_coll)c;
      const size_t in_elems = coll == RINGO_COLL_REDUCESCATTER ? 3 * count : count;
      const size_t out_elems = coll == RINGO_COLL_ALLGATHER ? 3 * count : count;
      std::vector<int32_t> in(in_elems), out(out_elems, -1);
      for (size_t i = 0; i < in_elems; i++) in[i] = (int32_t)(i % 977) + 10 * r;
      if (r == 1) {
        ASSERT_EQ(ringoSuccess, Launch(s, comm, coll, in.data(), out.data(), count, ringoInt32, ringoSum, 0))
            << ringo_thread_last_error();
        s.stream.Drain();
        ASSERT_EQ(ringoSuccess, AsyncError(comm)) << ringoGetLastError(comm);
      } else {
        ASSERT_EQ(ringoSuccess, HostCall(comm, coll, in.data(), out.data(), count, ringoInt32, ringoSum, 0))
            << ringoGetLastError(comm);
      }
      for (size_t i = 0; i < out_elems; i++) {
        // block b of an all-gather is rank b's input; the sums add 0 + 10 + 20 to three copies
        const size_t b = i / count, k = coll == RINGO_COLL_REDUCESCATTER ? (size_t)r * count + i : i % count;
        const int32_t want = coll == RINGO_COLL_ALLGATHER ? (int32_t)(k % 977) + 10 * (int32_t)b
                                                          : 3 * (int32_t)(k % 977) + 30;
        ASSERT_EQ(want, out[i]) << CollName(coll) << " rank " << r << " element " << i;
      }
    }
  });
}

// A fake stream that holds every input copy of phase hold_from and later until release_when()
// (bounded: a copy held 10 s is counted in timed_out and let go), and calls on_output when a copy
// back to the device runs.
struct PhaseProbe {
  FakeStream stream;
  ringo_stage stage{};
  int hold_from = 1;
  int fail_mark = -1;  // the marker (counted from 0) whose enqueue fails, once
  std::function<bool()> release_when;
  std::function<void()> on_output = [] {};
  int marks = 0, held = 0;         // the launching thread's: markers and held copies enqueued
  const uint64_t* flag = nullptr;  // the proxy's flag and its value once phase 0 is done, from the
  uint64_t phase0 = 0;             // stream's first wait (enqueued before the gate opens)
  std::atomic<int> released{0}, timed_out{0};
  std::vector<int> running_at_output;  // the stream's: ringo_staged_running as each copy back ran
  ringo_stage_ops ops{this, ToHost, ToDevice, HostFn, Alloc, FakeFree, Drain, WaitFlag};
  ~PhaseProbe() { ringo_staged_free(&stage, &ops); }

  bool Phase0Done() const { return __atomic_load_n(flag, __ATOMIC_ACQUIRE) >= phase0; }
  static PhaseProbe* Of(void* ctx) { return static_cast<PhaseProbe*>(ctx); }
  static ringoResult_t ToHost(void* ctx, void* dst, const void* src, size_t bytes) {
    PhaseProbe* p = Of(ctx);
    if (p->marks >= p->hold_from) {
      p->held++;
      p->stream.Enqueue([p] {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!p->release_when()) {
          if (std::chrono::steady_clock::now() > deadline) {
            p->timed_out++;
            return;
          }
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        p->released++;
      });
    }
    return FakeCopy(&p->stream, dst, src, bytes);
  }
  static ringoResult_t ToDevice(void* ctx, void* dst, const void* src, size_t bytes) {
    PhaseProbe* p = Of(ctx);
    p->stream.Enqueue([p] {
      p->running_at_output.push_back(ringo_staged_running(&p->stage));
      p->on_output();
    });
    return FakeCopy(&p->stream, dst, src, bytes);
  }
  static ringoResult_t HostFn(void* ctx, void (*fn)(void*), void* arg) {
    if (Of(ctx)->marks == Of(ctx)->fail_mark) {
      Of(ctx)->fail_mark = -1;
      return ringoSystemError;
    }
    Of(ctx)->marks++;
    return FakeHostFn(&Of(ctx)->stream, fn, arg);
  }
  static ringoResult_t Alloc(void* ctx, void** ptr, size_t bytes) { return FakeAlloc(&Of(ctx)->stream, ptr, bytes); }
  static ringoResult_t Drain(void* ctx) { return FakeDrain(&Of(ctx)->stream); }
  static ringoResult_t WaitFlag(void* ctx, const uint64_t* flag, uint64_t value) {
    PhaseProbe* p = Of(ctx);
    if (!p->flag) p->flag = flag, p->phase0 = value;
    return FakeWaitFlag(&p->stream, flag, value);
  }
};

constexpr size_t kFourPhases = 2 * 240 * 8;  // 2 ranks, float32: chunks of 8 slices, 4 phases of 2 rounds

ringoResult_t LaunchProbed(ringoComm_t comm, PhaseProbe& p, const std::vector<float>& in, std::vector<float>& out) {
  return ringo_staged_launch_call(comm, RINGO_COLL_ALLREDUCE, in.data(), out.data(), in.size(), ringoFloat32, ringoSum,
                                  0, &p.stage, &p.ops);
}

// The input side overlaps: the proxy runs the ring's phase 0 while the stream has not yet copied
// the input of the later phases. Whole-buffer staging would hold those copies for ever (the proxy
// would wait for the last one): each would time out instead of seeing phase 0 done.
TEST(StagedPipelineOverlap, RingRunsBeforeTheLastInputIsCopied) {
  ManyPhases env(4);
  ringo_test::RunThreads(2, [](Team& t) {
    PhaseProbe p;
    p.release_when = [&p] { return p.Phase0Done(); };
    std::vector<float> in(kFourPhases, (float)(t.ranks[0] + 1)), out(kFourPhases, -1.0f);
    p.stream.SetGate(false);
    ASSERT_EQ(ringoSuccess, LaunchProbed(t.comms[0], p, in, out)) << ringo_thread_last_error();
    EXPECT_EQ(4, p.marks) << "one marker per phase";
    EXPECT_EQ(6, p.held) << "phases 1-3: one input copy per chunk";
    p.stream.SetGate(true);
    p.stream.Drain();
    EXPECT_EQ(0, p.timed_out.load()) << "a later phase's input was needed before phase 0 could finish";
    EXPECT_EQ(6, p.released.load());
    ASSERT_EQ(8u, p.running_at_output.size()) << "phases 0-3: one output copy per chunk";
    EXPECT_EQ(0, p.running_at_output.back()) << "the last phase went back before the ring (and its flush) ended";
    EXPECT_EQ(ringoSuccess, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
    for (size_t i = 0; i < kFourPhases; i++) ASSERT_EQ(3.0f, out[i]) << "element " << i;
  });
}

// The output side overlaps: rank 0 copies phase 0's result back while its ring still runs. Rank 1
// holds its last phase's input until that copy ran, so rank 0's ring cannot end before it; output
// that waited for the whole ring would time out.
TEST(StagedPipelineOverlap, OutputGoesBackBeforeTheRingEnds) {
  ManyPhases env(4);
  std::atomic<bool> rank0_output{false};
  ringo_test::RunThreads(2, [&rank0_output](Team& t) {
    PhaseProbe p;
    const int r = t.ranks[0];
    p.hold_from = r == 1 ? 3 : 99;
    p.release_when = [&rank0_output] { return rank0_output.load(); };
    if (r == 0) p.on_output = [&rank0_output] { rank0_output = true; };
    std::vector<float> in(kFourPhases, (float)(r + 1)), out(kFourPhases, -1.0f);
    ASSERT_EQ(ringoSuccess, LaunchProbed(t.comms[0], p, in, out)) << ringo_thread_last_error();
    p.stream.Drain();
    EXPECT_EQ(0, p.timed_out.load()) << "rank 0's output waited for its whole ring";
    EXPECT_EQ(r == 1 ? 2 : 0, p.released.load());
    EXPECT_EQ(ringoSuccess, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
    for (size_t i = 0; i < kFourPhases; i++) ASSERT_EQ(3.0f, out[i]) << "element " << i;
  });
}

// The ring waits for phase 1's input, which a stream that failed never copies: then either the
// stream's failure is reported to the proxy (what ringo's device teardown does when
// cudaStreamQuery returns an error) or the staging is torn down. Either way the collective ends
// with an error naming the phase and nothing hangs.
void StuckBetweenPhases(bool report_stream_failure) {
  ManyPhases env(4);
  ringo_test::Options opts;
  opts.ringo_timeout_s = 10;
  ringo_test::RunThreads(2, [report_stream_failure](Team& t) {
    ringoComm_t comm = t.comms[0];
    std::vector<float> in(kFourPhases, 1.0f), out(kFourPhases, -1.0f);
    {
      PhaseProbe p;
      std::atomic<bool> release{false};
      p.release_when = [&release] { return release.load(); };
      ASSERT_EQ(ringoSuccess, LaunchProbed(comm, p, in, out)) << ringo_thread_last_error();
      auto within = [](std::chrono::seconds bound, const std::function<bool()>& done) {
        const auto deadline = std::chrono::steady_clock::now() + bound;
        while (!done() && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return done();
      };
      ASSERT_TRUE(within(std::chrono::seconds(10), [&p] { return ringo_staged_running(&p.stage) == 1; }))
          << "the proxy never started phase 0";
      p.stream.Fail();  // the held copy is running; what follows it never will
      release = true;
      if (report_stream_failure) {
        ringo_staged_stream_failed(&p.stage);
        EXPECT_TRUE(within(std::chrono::seconds(5), [&p] { return ringo_staged_pending(&p.stage) == 0; }))
            << "the proxy still waits for a marker of a stream that failed";
      }
    }  // ringo_staged_free: the proxy is told to quit (if it still waits)
    EXPECT_NE(ringoSuccess, AsyncError(comm));
    EXPECT_NE(nullptr, strstr(ringoGetLastError(comm), "phase 1 of 4")) << ringoGetLastError(comm);
  }, opts);
}

TEST(StagedPipelineOverlap, TeardownWhileTheRingWaitsForAPhase) { StuckBetweenPhases(false); }
TEST(StagedPipelineOverlap, StreamFailureReleasesTheRingWaitingForAPhase) { StuckBetweenPhases(true); }

// A marker that cannot be enqueued fails its launch before the proxy hears of it; the markers that
// did go on the stream are counted, so the next launch's phases still wait for their own.
TEST(StagedPipelineOverlap, AFailedMarkerLeavesTheNextLaunchInStep) {
  ManyPhases env(4);
  ringo_test::RunThreads(2, [](Team& t) {
    PhaseProbe p;
    p.hold_from = 99;
    p.fail_mark = 1;
    std::vector<float> in(kFourPhases, (float)(t.ranks[0] + 1)), out(kFourPhases, -1.0f);
    EXPECT_EQ(ringoSystemError, LaunchProbed(t.comms[0], p, in, out));
    ASSERT_EQ(ringoSuccess, LaunchProbed(t.comms[0], p, in, out)) << ringo_thread_last_error();
    ASSERT_TRUE(p.stream.WaitFor(p.stream.enqueued(), std::chrono::seconds(20))) << "the proxy lost count of markers";
    EXPECT_EQ(ringoSuccess, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
    for (size_t i = 0; i < kFourPhases; i++) ASSERT_EQ(3.0f, out[i]) << "element " << i;
  });
}

TEST(StagedExtent, BytesEachRankStages) {
  for (int r = 0; r < 4; r++) {
    size_t in = 0, out = 0;
    auto extent = [&](ringo_coll c, int root) { ringo_staged_extent(c, 10, ringoFloat64, 4, r, root, &in, &out); };
    extent(RINGO_COLL_ALLREDUCE, 0);
    EXPECT_EQ(80u, in);
    EXPECT_EQ(80u, out);
    extent(RINGO_COLL_REDUCESCATTER, 0);
    EXPECT_EQ(320u, in);
    EXPECT_EQ(80u, out);
    extent(RINGO_COLL_ALLGATHER, 0);
    EXPECT_EQ(80u, in);
    EXPECT_EQ(320u, out);
    extent(RINGO_COLL_BROADCAST, 2);
    EXPECT_EQ(r == 2 ? 80u : 0u, in);
    EXPECT_EQ(80u, out);
    extent(RINGO_COLL_REDUCE, 2);
    EXPECT_EQ(80u, in);
    EXPECT_EQ(r == 2 ? 80u : 0u, out);
  }
}

}  // namespace
