// test_naive.cc — RINGO_ALGO=naive, the gather-to-rank-0 baseline: same results as the ring, and the
// counters show rank 0 moving (N-1)·D each way while the ring moves 2(N-1)/N·D. Run: make test.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"
#include "ringo.h"

using ringo_test::Options;
using ringo_test::RunForked;
using ringo_test::Team;

namespace {

// Each rank holds small integers, so every op's result is exact in float32 and int32.
template <typename T>
void check_all_ops(Team& t, ringoDataType_t type, size_t count) {
  const int n = t.nranks, me = t.ranks[0];
  std::vector<T> in(count), out(count);
  for (size_t i = 0; i < count; i++) in[i] = T(1 + (i + size_t(me)) % 2);
  for (ringoRedOp_t op : {ringoSum, ringoProd, ringoMax, ringoMin, ringoAvg}) {
    ASSERT_EQ(ringoSuccess, ringoAllReduce(in.data(), out.data(), count, type, op, t.comms[0], nullptr))
        << ringoGetLastError(t.comms[0]);
    for (size_t i = 0; i < count; i++) {
      double sum = 0, prod = 1, mx = 1, mn = 2;
      for (int r = 0; r < n; r++) {
        double v = double(1 + (i + size_t(r)) % 2);
        sum += v, prod *= v, mx = v > mx ? v : mx, mn = v < mn ? v : mn;
      }
      double expect = op == ringoSum ? sum : op == ringoProd ? prod : op == ringoMax ? mx : op == ringoMin ? mn
                                                                                      : sum / n;
      if (type == ringoInt32 && op == ringoAvg) expect = double(int64_t(sum) / n);
      ASSERT_EQ(T(expect), out[i]) << "op " << op << " element " << i << " rank " << me;
    }
  }
}

}  // namespace

TEST(Naive, ResultsMatchTheRingsAndRankZeroCarriesEverything) {
  Options opts;
  opts.env = {{"RINGO_ALGO", "naive"}};
  for (int n : {2, 3, 5}) {
    RunForked(n, [](Team& t) {
      check_all_ops<float>(t, ringoFloat32, 1000003);
      check_all_ops<int32_t>(t, ringoInt32, 7);
      // The counters: rank 0 receives and sends (N-1)·D, every other rank D each way.
      const size_t count = 1 << 16, bytes = count * sizeof(float);
      std::vector<float> buf(count, 1.0f);
      ringoCommStats before, after;
      ASSERT_EQ(ringoSuccess, ringoCommGetStats(t.comms[0], &before));
      ASSERT_EQ(ringoSuccess, ringoAllReduce(buf.data(), buf.data(), count, ringoFloat32, ringoSum, t.comms[0], nullptr));
      ASSERT_EQ(ringoSuccess, ringoCommGetStats(t.comms[0], &after));
      const uint64_t expect = t.ranks[0] == 0 ? uint64_t(t.nranks - 1) * bytes : bytes;
      EXPECT_EQ(expect, after.bytesSent - before.bytesSent);
      EXPECT_EQ(expect, after.bytesReceived - before.bytesReceived);
      EXPECT_EQ(float(t.nranks), buf[count - 1]);
    }, opts);
  }
}

// Set on one rank only, an unknown algorithm fails every rank at init (the others name the rank),
// checked once the ranks have met, so under ringoCommInitMPI no rank is left in the exchange.
TEST(Naive, UnknownAlgorithmOnOneRankFailsEveryRank) {
  Options opts;
  opts.make_id = true;
  ringo_test::RunProcesses(3, [](int index, const ringoUniqueId& id, ringo_test::Shared&) {
    if (index == 1) setenv("RINGO_ALGO", "tree", 1);
    ringoComm_t comm = nullptr;
    EXPECT_EQ(ringoInvalidArgument, ringoCommInitRank(&comm, 3, id, index));
    const std::string said = ringoGetLastError(nullptr);
    EXPECT_NE(said.find(index == 1 ? "RINGO_ALGO=tree: expected auto, ring or naive"
                                   : "rank 1 has RINGO_ALGO set to a value other than auto, ring or naive"),
              std::string::npos) << said;
  }, opts);
}

TEST(Naive, UnknownAlgorithmIsRefused) {
  Options opts;
  opts.env = {{"RINGO_ALGO", "tree"}};
  opts.make_id = true;
  ringo_test::RunProcesses(2, [](int index, const ringoUniqueId& id, ringo_test::Shared&) {
    ringoComm_t comm = nullptr;
    EXPECT_EQ(ringoInvalidArgument, ringoCommInitRank(&comm, 2, id, index));
    EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("RINGO_ALGO"), std::string::npos);
  }, opts);
}
