// test_p2p_device.cc — device ringoSend/ringoRecv (src/p2p_device.c, src/proxy.c) without a GPU: a
// worker thread per rank plays ringo's stream (staged_fake.h), the proxy thread runs each batch
// through the host engine. Checks data, that launching never waits, stream order, errors. Run: make test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "harness.h"
#include "device/p2p_device.h"
#include "staged_fake.h"

namespace {

using ringo_test::Team;
using namespace ringo_staged_test;

// One rank's device point-to-point: the fake stream and the staging with its proxy (freed, after
// the stream drained, by Stager's destructor, as device.c frees them).
struct DeviceP2p {
  Stager s;
  ringoResult_t Launch(ringoComm_t comm, const std::vector<ringo_p2p_call>& calls) {
    return ringo_p2p_device_launch(comm, &s.stage, calls.data(), calls.size(), &s.ops);
  }
  int Pending() { return ringo_staged_pending(&s.stage); }
  int PendingSettled() { return s.PendingSettled(); }
};

// What rank `from` sends rank `to`: distinct for every pair and element.
float Value(int from, int to, size_t i) { return (float)(from * 1000 + to * 10) + (float)(i % 997) * 0.5f; }

// Every rank sends a block to every rank, itself included, and receives one from each, as one
// batch (a grouped all-to-all), over `count` float32 elements per pair.
void AllToAll(Team& t, size_t count) {
  const int n = t.nranks, me = t.ranks[0];
  DeviceP2p dp;
  std::vector<std::vector<float>> out(n), in(n, std::vector<float>(count, -1.0f));
  std::vector<ringo_p2p_call> calls;
  for (int p = 0; p < n; p++) {
    out[p].resize(count);
    for (size_t i = 0; i < count; i++) out[p][i] = Value(me, p, i);
    calls.push_back({1, p, out[p].data(), count, ringoFloat32});
    calls.push_back({0, p, in[p].data(), count, ringoFloat32});
  }
  ASSERT_EQ(ringoSuccess, dp.Launch(t.comms[0], calls)) << ringo_thread_last_error();
  dp.s.stream.Drain();
  ASSERT_EQ(ringoSuccess, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < count; i++) ASSERT_EQ(Value(p, me, i), in[p][i]) << "from rank " << p << ", element " << i;
}

class DeviceP2pThreads : public testing::TestWithParam<int> {};

TEST_P(DeviceP2pThreads, AllToAllInOneBatch) {
  ringo_test::RunThreads(GetParam(), [](Team& t) {
    AllToAll(t, 1000);
    AllToAll(t, 300000);  // many slices per message: the engine interleaves them
  });
}

INSTANTIATE_TEST_SUITE_P(N, DeviceP2pThreads, testing::Values(2, 3, 4));

TEST(DeviceP2pProcesses, AllToAllAcrossProcesses) {
  ringo_test::RunForked(3, [](Team& t) { AllToAll(t, 50000); });
}

// The launch returns before the stream has run anything; the proxy waits for the stream to stage
// the sends (it must not read them earlier), and the receives land only once the stream goes on.
TEST(DeviceP2pAsync, LaunchDoesNotWaitAndTheProxyWaitsForTheStream) {
  ringo_test::RunThreads(2, [](Team& t) {
    const int me = t.ranks[0], peer = 1 - me;
    const size_t count = 4096;
    DeviceP2p dp;
    std::vector<float> out(count, 0.0f), in(count, -1.0f);
    dp.s.stream.SetGate(false);
    ASSERT_EQ(ringoSuccess, dp.Launch(t.comms[0], {{1, peer, out.data(), count, ringoFloat32},
                                                   {0, peer, in.data(), count, ringoFloat32}}))
        << ringo_thread_last_error();
    // Written after the launch but before the stream staged them: these are the bytes that go.
    for (size_t i = 0; i < count; i++) out[i] = Value(me, peer, i);
    EXPECT_EQ(1, dp.Pending());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(1, dp.Pending()) << "the proxy ran before the stream staged the sends";
    EXPECT_EQ(-1.0f, in[0]) << "a receive landed before the stream ran";
    dp.s.stream.SetGate(true);
    dp.s.stream.Drain();
    EXPECT_EQ(0, dp.PendingSettled());
    for (size_t i = 0; i < count; i++) ASSERT_EQ(Value(peer, me, i), in[i]) << "element " << i;
  });
}

// Batches enqueued back to back while the stream is held, the staging growing on the way (the old
// buffers retired, not waited for): every batch keeps its own data, in stream order.
TEST(DeviceP2pAsync, BackToBackBatchesWithGrowingStaging) {
  ringo_test::RunThreads(3, [](Team& t) {
    const int n = t.nranks, me = t.ranks[0], next = (me + 1) % n, prev = (me + n - 1) % n;
    const size_t counts[] = {100, 200000, 7, 500000};
    DeviceP2p dp;
    std::vector<std::vector<int32_t>> outs, ins;
    for (size_t count : counts) {
      outs.emplace_back(count);
      ins.emplace_back(count, -1);
      for (size_t i = 0; i < count; i++) outs.back()[i] = (int32_t)(count + i) * (me + 1);
    }
    dp.s.stream.SetGate(false);  // a launch that waited for the stream would hang here
    for (size_t k = 0; k < outs.size(); k++)
      ASSERT_EQ(ringoSuccess, dp.Launch(t.comms[0], {{1, next, outs[k].data(), counts[k], ringoInt32},
                                                     {0, prev, ins[k].data(), counts[k], ringoInt32}}))
          << "batch " << k << ": " << ringo_thread_last_error();
    dp.s.stream.SetGate(true);
    dp.s.stream.Drain();
    ASSERT_EQ(ringoSuccess, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
    for (size_t k = 0; k < ins.size(); k++)
      for (size_t i = 0; i < counts[k]; i++)
        ASSERT_EQ((int32_t)(counts[k] + i) * (prev + 1), ins[k][i]) << "batch " << k << " element " << i;
    EXPECT_EQ(4, dp.s.stream.allocs) << "the flag, then staging for 100, 200000 and 500000 elements";
    EXPECT_EQ(0, dp.s.stream.drains) << "growing the staging never waits for the stream";
  });
}

// ---- pipelined batches: RINGO_STAGED_PIECE_BYTES cuts every message into phases ----

// Every rank sends every rank (itself too) a message of its own length — some shorter than a
// piece, some of several — as one batch cut into 4 KiB phases: the data arrive whole and in place.
void UnevenAllToAll(Team& t) {
  const int n = t.nranks, me = t.ranks[0];
  auto count = [](int from, int to) { return (size_t)(700 + 3000 * ((from + 2 * to) % 4)); };
  DeviceP2p dp;
  std::vector<std::vector<float>> out(n), in(n);
  std::vector<ringo_p2p_call> calls;
  for (int p = 0; p < n; p++) {
    out[p].resize(count(me, p));
    in[p].assign(count(p, me), -1.0f);
    for (size_t i = 0; i < out[p].size(); i++) out[p][i] = Value(me, p, i);
    calls.push_back({1, p, out[p].data(), out[p].size(), ringoFloat32});
    calls.push_back({0, p, in[p].data(), in[p].size(), ringoFloat32});
  }
  ASSERT_EQ(ringoSuccess, dp.Launch(t.comms[0], calls)) << ringo_thread_last_error();
  dp.s.stream.Drain();
  ASSERT_EQ(ringoSuccess, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < in[p].size(); i++) ASSERT_EQ(Value(p, me, i), in[p][i]) << "from rank " << p << ", element " << i;
}

ringo_test::Options SmallPieces() {
  ringo_test::Options opts;
  opts.env = {{"RINGO_STAGED_PIECE_BYTES", "4096"}, {"RINGO_SLICE_BYTES", "8192"}};
  return opts;
}

TEST(DeviceP2pPipeline, UnevenAllToAllInPhases) {
  ringo_test::RunThreads(3, UnevenAllToAll, SmallPieces());
  ringo_test::RunForked(3, UnevenAllToAll, SmallPieces());
}

// The wire is the same for host and device ranks: rank 0 sends and receives device memory in 4 KiB
// phases (its slices cut where the staging ends), rank 1 host memory through ringoSend/ringoRecv
// in a group; both ways, several rounds, threads and processes.
void HostAndDeviceRanks(Team& t) {
  const int me = t.ranks[0], peer = 1 - me;
  const size_t count = 5000;  // 20000 bytes: five phases
  for (int round = 0; round < 3; round++) {
    std::vector<float> out(count), in(count, -1.0f);
    for (size_t i = 0; i < count; i++) out[i] = Value(me, peer, i + (size_t)round);
    if (me == 0) {
      DeviceP2p dp;
      // Slow copies to the staging: the engine starts with only the first phases staged, so it
      // cuts its slices (4 KiB phases, 8 KiB slots) where the staging ends.
      dp.s.ops.to_host = [](void* ctx, void* dst, const void* src, size_t bytes) {
        static_cast<FakeStream*>(ctx)->Enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
        return FakeCopy(ctx, dst, src, bytes);
      };
      ASSERT_EQ(ringoSuccess, dp.Launch(t.comms[0], {{1, peer, out.data(), count, ringoFloat32},
                                                     {0, peer, in.data(), count, ringoFloat32}}))
          << ringo_thread_last_error();
      dp.s.stream.Drain();
      ASSERT_EQ(ringoSuccess, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
    } else {
      ASSERT_EQ(ringoSuccess, ringoGroupStart());
      ASSERT_EQ(ringoSuccess, ringoSend(out.data(), count, ringoFloat32, peer, t.comms[0], nullptr));
      ASSERT_EQ(ringoSuccess, ringoRecv(in.data(), count, ringoFloat32, peer, t.comms[0], nullptr));
      ASSERT_EQ(ringoSuccess, ringoGroupEnd()) << ringoGetLastError(t.comms[0]);
    }
    for (size_t i = 0; i < count; i++)
      ASSERT_EQ(Value(peer, me, i + (size_t)round), in[i]) << "round " << round << ", element " << i;
  }
}

TEST(DeviceP2pPipeline, HostAndDeviceRanksShareTheWire) {
  ringo_test::RunThreads(2, HostAndDeviceRanks, SmallPieces());
  ringo_test::RunForked(2, HostAndDeviceRanks, SmallPieces());
}

// A device send in phases to a host receive of half its count: the receiver names the mismatch
// from the first slice's header, as without phases, and nothing hangs.
TEST(DeviceP2pPipeline, AMismatchIsCaughtUnderPhases) {
  ringo_test::Options opts = SmallPieces();
  opts.ringo_timeout_s = 5;
  ringo_test::RunThreads(2, [](Team& t) {
    const size_t count = 4096;
    std::vector<float> buf(count, 1.0f);
    if (t.ranks[0] == 0) {
      DeviceP2p dp;
      ASSERT_EQ(ringoSuccess, dp.Launch(t.comms[0], {{1, 1, buf.data(), count, ringoFloat32}}));
      dp.s.stream.Drain();
    } else {
      EXPECT_EQ(ringoInvalidUsage, ringoRecv(buf.data(), count / 2, ringoFloat32, 0, t.comms[0], nullptr));
      EXPECT_NE(nullptr, strstr(ringoGetLastError(t.comms[0]), "mismatch")) << ringoGetLastError(t.comms[0]);
    }
    // Neither destroys its communicator (unlinking its send link) before the other is done with it.
    EXPECT_TRUE(t.shared->Barrier());
  }, opts);
}

// A stream whose send copies after the first phase's marker are held until the peer's first copy
// back has run (bounded: held 5 s, they are let go and counted).
std::atomic<int> first_copy_back{0};
struct HoldingP2p {
  FakeStream stream;
  ringo_stage stage{};
  bool hold = false;
  int marks = 0;
  std::atomic<int> timed_out{0};
  ringo_stage_ops ops{this, ToHost, ToDevice, HostFn, Alloc, FakeFree, Drain, WaitFlag};
  ~HoldingP2p() { ringo_staged_free(&stage, &ops); }
  static HoldingP2p* Of(void* ctx) { return static_cast<HoldingP2p*>(ctx); }
  static ringoResult_t ToHost(void* ctx, void* dst, const void* src, size_t bytes) {
    HoldingP2p* h = Of(ctx);
    if (h->hold && h->marks >= 1)
      h->stream.Enqueue([h] {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!first_copy_back.load() && h->timed_out.load() == 0)
          if (std::chrono::steady_clock::now() > deadline) h->timed_out++;
          else std::this_thread::sleep_for(std::chrono::microseconds(50));
      });
    return FakeCopy(&h->stream, dst, src, bytes);
  }
  static ringoResult_t ToDevice(void* ctx, void* dst, const void* src, size_t bytes) {
    const ringoResult_t res = FakeCopy(&Of(ctx)->stream, dst, src, bytes);
    Of(ctx)->stream.Enqueue([] { first_copy_back = 1; });
    return res;
  }
  static ringoResult_t HostFn(void* ctx, void (*fn)(void*), void* arg) {
    Of(ctx)->marks++;
    return FakeHostFn(&Of(ctx)->stream, fn, arg);
  }
  static ringoResult_t Alloc(void* ctx, void** p, size_t bytes) { return FakeAlloc(&Of(ctx)->stream, p, bytes); }
  static ringoResult_t Drain(void* ctx) { return FakeDrain(&Of(ctx)->stream); }
  static ringoResult_t WaitFlag(void* ctx, const uint64_t* flag, uint64_t value) {
    return FakeWaitFlag(&Of(ctx)->stream, flag, value);
  }
};

// Rank 0 sends 16 KiB in four 4 KiB phases and its stream holds phases 1-3 until rank 1 has copied
// something back: rank 1's first phase must go back to its buffer while rank 0's later phases are
// still unstaged — the copies overlap the transfer. Whole-batch staging would wait the 5 s out.
TEST(DeviceP2pPipeline, TheFirstPhaseGoesBackBeforeTheLastIsStaged) {
  ringo_test::RunThreads(2, [](Team& t) {
    const int me = t.ranks[0];
    const size_t count = 4096;
    HoldingP2p h;
    h.hold = me == 0;
    std::vector<float> buf(count, -1.0f);
    if (me == 0)
      for (size_t i = 0; i < count; i++) buf[i] = Value(0, 1, i);
    const std::vector<ringo_p2p_call> calls = {{me == 0 ? 1 : 0, 1 - me, buf.data(), count, ringoFloat32}};
    ASSERT_EQ(ringoSuccess, ringo_p2p_device_launch(t.comms[0], &h.stage, calls.data(), 1, &h.ops))
        << ringo_thread_last_error();
    if (me == 0) {
      EXPECT_EQ(4, h.marks) << "four phases, a marker each";
    }
    h.stream.Drain();
    ASSERT_EQ(ringoSuccess, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
    EXPECT_EQ(0, h.timed_out.load()) << "rank 1 copied nothing back before rank 0 staged its last phase";
    for (size_t i = 0; me == 1 && i < count; i++) ASSERT_EQ(Value(0, 1, i), buf[i]) << "element " << i;
  }, SmallPieces());
}

// A stream that failed never reaches the proxy's marker: teardown must not wait for it (the proxy
// skips work the stream has not reached), nor run it over links about to close.
TEST(DeviceP2pTeardown, AFailedStreamDoesNotHoldTheProxy) {
  ringo_test::RunThreads(2, [](Team& t) {
    const int me = t.ranks[0], peer = 1 - me;
    DeviceP2p dp;
    dp.s.ops.drain = [](void*) { return ringoUnhandledCudaError; };  // as cudaStreamSynchronize on a failed stream
    std::vector<float> out(1000, 1.0f), in(1000, -1.0f);
    dp.s.stream.SetGate(false);
    ASSERT_EQ(ringoSuccess, dp.Launch(t.comms[0], {{1, peer, out.data(), 1000, ringoFloat32},
                                                   {0, peer, in.data(), 1000, ringoFloat32}}));
    const auto start = std::chrono::steady_clock::now();
    ringo_staged_free(&dp.s.stage, &dp.s.ops);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
    EXPECT_EQ(-1.0f, in[0]) << "the skipped batch moved data";
    dp.s.stream.Fail();  // its queued copies never run: the staging they name is gone
  });
}

// When the stream's wait cannot be enqueued the stream will not wait for the batch, so the proxy
// must not run it (it would write staging the stream may be reusing): the launch fails, the batch is
// skipped, nothing hangs.
TEST(DeviceP2pErrors, AWaitThatCannotBeEnqueuedCancelsTheBatch) {
  ringo_test::RunThreads(2, [](Team& t) {
    const int me = t.ranks[0], peer = 1 - me;
    DeviceP2p dp;
    dp.s.ops.wait_flag = [](void*, const uint64_t*, uint64_t) { return ringoUnhandledCudaError; };
    std::vector<float> out(1000, 1.0f), in(1000, -1.0f);
    EXPECT_EQ(ringoUnhandledCudaError, dp.Launch(t.comms[0], {{1, peer, out.data(), 1000, ringoFloat32},
                                                             {0, peer, in.data(), 1000, ringoFloat32}}));
    dp.s.stream.Drain();
    EXPECT_EQ(0, dp.PendingSettled()) << "the cancelled batch never left the proxy";
    ringoCommStats st;
    ASSERT_EQ(ringoSuccess, ringoCommGetStats(t.comms[0], &st));
    EXPECT_EQ(0u, st.bytesSent + st.bytesReceived) << "the cancelled batch ran";
  });
}

// Empty messages and a rank's message to itself inside a batch.
TEST(DeviceP2pBatch, EmptyMessagesAndSelf) {
  ringo_test::RunThreads(2, [](Team& t) {
    const int me = t.ranks[0], peer = 1 - me;
    DeviceP2p dp;
    std::vector<double> self_out(333), self_in(333, -1.0), out(10, me + 0.25), in(10, -1.0);
    for (size_t i = 0; i < self_out.size(); i++) self_out[i] = me * 1e6 + (double)i;
    ASSERT_EQ(ringoSuccess, dp.Launch(t.comms[0], {{1, peer, nullptr, 0, ringoFloat64},
                                                   {1, me, self_out.data(), 333, ringoFloat64},
                                                   {0, peer, nullptr, 0, ringoFloat64},
                                                   {0, me, self_in.data(), 333, ringoFloat64},
                                                   {1, peer, out.data(), 10, ringoFloat64},
                                                   {0, peer, in.data(), 10, ringoFloat64}}))
        << ringo_thread_last_error();
    dp.s.stream.Drain();
    ASSERT_EQ(ringoSuccess, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
    EXPECT_EQ(self_out, self_in);
    EXPECT_EQ(std::vector<double>(10, peer + 0.25), in);
  });
}

// Ranks that disagree on a message's size: both receivers see the mismatch, the stream still goes
// on (the proxy moves the flag whatever happened), and the communicator refuses the next call.
TEST(DeviceP2pErrors, MismatchBecomesAnAsyncErrorAndTheStreamGoesOn) {
  ringo_test::Options opts;
  opts.ringo_timeout_s = 5;
  ringo_test::RunThreads(2, [](Team& t) {
    const int me = t.ranks[0], peer = 1 - me;
    const size_t count = me == 0 ? 1000 : 2000;
    DeviceP2p dp;
    std::vector<float> out(count, 1.0f), in(count, -1.0f);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(ringoSuccess, dp.Launch(t.comms[0], {{1, peer, out.data(), count, ringoFloat32},
                                                   {0, peer, in.data(), count, ringoFloat32}}));
    dp.s.stream.Drain();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(ringoInvalidUsage, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
    EXPECT_NE(nullptr, strstr(ringoGetLastError(t.comms[0]), "mismatch")) << ringoGetLastError(t.comms[0]);
    EXPECT_LT(s, 3.0) << "found by the message header, not by a timeout";
    EXPECT_EQ(ringoInvalidUsage, ringoAllReduce(out.data(), in.data(), 10, ringoFloat32, ringoSum, t.comms[0], nullptr));
    // Neither rank destroys its communicator (unlinking its send link) before the other has read
    // the mismatch from it: a peer that found the link gone would report that instead.
    EXPECT_TRUE(t.shared->Barrier());
  }, opts);
}

// A receive whose sender never sends ends at RINGO_TIMEOUT as the communicator's error; the stream
// waiting for it is released.
TEST(DeviceP2pErrors, AMissingSenderTimesOutAndReleasesTheStream) {
  ringo_test::Options opts;
  opts.ringo_timeout_s = 1;
  ringo_test::RunThreads(2, [](Team& t) {
    if (t.ranks[0] != 0) return;
    DeviceP2p dp;
    std::vector<float> in(100, -1.0f);
    ASSERT_EQ(ringoSuccess, dp.Launch(t.comms[0], {{0, 1, in.data(), 100, ringoFloat32}}));
    dp.s.stream.Drain();
    EXPECT_EQ(ringoTimeout, AsyncError(t.comms[0])) << ringoGetLastError(t.comms[0]);
    EXPECT_EQ(0, dp.PendingSettled());
  }, opts);
}

}  // namespace
