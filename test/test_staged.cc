// test_staged.cc — staged device collectives (src/staged.c), the path a device ring takes when it
// leaves the host, run without a GPU: a worker thread per rank stands in for ringo's CUDA stream
// (memcpy for the copies, a call for the host function). Run: make test, or build/test/test_staged.
#include <gtest/gtest.h>

#include <cstring>
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
    EXPECT_EQ(0, ringo_staged_pending(&s.stage));
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
