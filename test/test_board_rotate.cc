// test_board_rotate.cc — rotating board slots (src/comm/board.c): ops of 2 KiB or more write at an
// offset that moves through a span of the slot and wraps; peers read at the offset published; every
// collective keeps the ring's bits. Run: make test (build/test/test_board_rotate).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "collective_cases.h"
#include "harness.h"
#include "internals.h"
#include "result_hashes.h"
#include "ringo.h"

using ringo_cases::Case;
using ringo_hashes::HashTable;
using ringo_test::Options;
using ringo_test::RunForked;
using ringo_test::Team;

namespace {

Options WithEnv(std::vector<std::pair<std::string, std::string>> env) {
  Options o;
  o.deadline_s = 120;
  o.env = std::move(env);
  return o;
}

// One in-place int32 sum all-reduce of count elements, each rank's input r + it; checks the sum.
void ExactSum(Team& t, size_t count, int it) {
  const int n = t.nranks, r = t.ranks[0];
  std::vector<int32_t> buf(count);
  for (size_t i = 0; i < count; i++) buf[i] = int32_t(r + it + int(i % 7));
  ASSERT_EQ(ringoSuccess, ringoAllReduce(buf.data(), buf.data(), count, ringoInt32, ringoSum, t.comms[0], nullptr))
      << ringoGetLastError(t.comms[0]);
  for (size_t i = 0; i < count; i++)
    ASSERT_EQ(int32_t(n * (n - 1) / 2 + n * (it + int(i % 7))), buf[i]) << "call " << it << " element " << i;
}

}  // namespace

// With a 64 KiB span, 16 KiB two-phase all-reduces start at 0, 16, 32 and 48 KiB and then wrap; an
// op under 2 KiB stays at 0 and leaves the cursor alone, a 4 KiB one-shot moves on like the rest; an
// op larger than the span stays at 0. The sums stay exact, so the peers read where each rank wrote.
TEST(BoardRotate, OffsetsMoveThroughTheSpanAndWrap) {
  RunForked(2, [](Team& t) {
    ASSERT_EQ(size_t(64) << 10, ringo_test_board_span(t.comms[0]));
    const size_t k16 = 4096, k4 = 1024, small = 256, big = 24 * 1024;  // int32s: 16, 4, 1 and 96 KiB
    const size_t expect[] = {0, 16 << 10, 32 << 10, 48 << 10, 0, 16 << 10};
    for (int it = 0; it < 6; it++) {
      ExactSum(t, k16, it);
      EXPECT_EQ(expect[it], ringo_test_board_last_offset(t.comms[0])) << "call " << it;
    }
    ExactSum(t, small, 6);
    EXPECT_EQ(0u, ringo_test_board_last_offset(t.comms[0]));
    ExactSum(t, k16, 7);
    EXPECT_EQ(size_t(32) << 10, ringo_test_board_last_offset(t.comms[0]));
    ExactSum(t, k4, 8);
    EXPECT_EQ(size_t(48) << 10, ringo_test_board_last_offset(t.comms[0]));
    ExactSum(t, big, 9);
    EXPECT_EQ(0u, ringo_test_board_last_offset(t.comms[0]));
  }, WithEnv({{"RINGO_BOARD_ROTATE", "64K"}, {"RINGO_ONESHOT_BYTES", "4K"}, {"RINGO_TWOPHASE_BYTES", "1M"}}));
}

// Posts under 16 KiB rotate through at most 1 MiB of a larger span (the most they were measured to
// gain in; 8 KiB posts lost 6x over 2 MiB); larger posts use all of it.
TEST(BoardRotate, SmallPostsStayInTheFirstMiB) {
  RunForked(2, [](Team& t) {
    ASSERT_EQ(size_t(2) << 20, ringo_test_board_span(t.comms[0]));
    size_t most = 0;
    for (int it = 0; it < 300; it++) {  // 4 KiB one-shots: 256 fit in 1 MiB, then back to 0
      ExactSum(t, 1024, it);
      most = std::max(most, ringo_test_board_last_offset(t.comms[0]));
      if (it == 256) {
        EXPECT_EQ(0u, ringo_test_board_last_offset(t.comms[0]));
      }
    }
    EXPECT_EQ((size_t(1) << 20) - 4096, most);
    most = 0;
    for (int it = 0; it < 200; it++) {  // 8 KiB two-phase posts: 128 fit in 1 MiB
      ExactSum(t, 2048, it);
      most = std::max(most, ringo_test_board_last_offset(t.comms[0]));
    }
    EXPECT_LT(most, size_t(1) << 20);
    most = 0;
    for (int it = 0; it < 80; it++) {  // 16 KiB two-phase posts go past 1 MiB
      ExactSum(t, 4096, it);
      most = std::max(most, ringo_test_board_last_offset(t.comms[0]));
    }
    EXPECT_GE(most, size_t(1) << 20);
  }, WithEnv({{"RINGO_BOARD_ROTATE", "2M"}, {"RINGO_ONESHOT_BYTES", "4K"}, {"RINGO_TWOPHASE_BYTES", "2M"}}));
}

// Setup makes and maps every page of the span, the ranks' own and their peers', so that no call
// takes page faults on its first trips through it.
TEST(BoardRotate, SetupMapsTheWholeSpan) {
  RunForked(3, [](Team& t) {
    ASSERT_EQ(size_t(256) << 10, ringo_test_board_span(t.comms[0]));
    EXPECT_EQ(0u, ringo_test_board_span_pages_absent(t.comms[0]));
  }, WithEnv({{"RINGO_BOARD_ROTATE", "256K"}}));
}

// Unset, the span is the L2's size where the ranks fit the host's online CPUs (at most the slot),
// else 0; RINGO_BOARD_ROTATE=0 turns it off.
TEST(BoardRotate, DefaultSpanFollowsTheCpus) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const size_t l2_span = l2 > 0 ? size_t(l2) : size_t(1) << 20;
  for (int n : {2, 3}) {
    RunForked(n, [&](Team& t) {
      const size_t span = ringo_test_board_span(t.comms[0]);
      if (n <= cpus) {
        EXPECT_EQ(std::min(l2_span, ringo_test_twophase_default_bytes(n)), span) << n << " ranks, " << cpus << " CPUs";
      } else {
        EXPECT_EQ(0u, span) << n << " ranks, " << cpus << " CPUs";
      }
    });
  }
  RunForked(2, [](Team& t) { EXPECT_EQ(0u, ringo_test_board_span(t.comms[0])); },
            WithEnv({{"RINGO_BOARD_ROTATE", "0"}}));
}

// Every collective, dtype, op and placement, one-shot and two-phase, with a span small enough that
// the offsets wrap every few calls (counts below, around and above the 2 KiB floor and above the span):
// the same bits as the ring on every rank.
std::vector<Case> RotatingCases(int n) {
  return ringo_cases::EveryCase(n, {size_t(509), size_t(2053), size_t(4099 * n)});
}
class BoardRotateBits : public testing::TestWithParam<int> {};
TEST_P(BoardRotateBits, EqualTheRingsWhileOffsetsWrap) {
  const int n = GetParam();
  const std::vector<Case> cases = RotatingCases(n);
  HashTable table(n, cases.size());
  ASSERT_NE(MAP_FAILED, static_cast<void*>(table.mem));
  RunForked(n, [&](Team& t) { ringo_hashes::HashCases(t, table.Row(0, n, t.ranks[0]), cases); },
            WithEnv({{"RINGO_ALGO", "ring"}}));
  RunForked(n, [&](Team& t) {
    ASSERT_EQ(size_t(48) << 10, ringo_test_board_span(t.comms[0]));
    size_t moved = 0;
    ringo_hashes::HashCases(t, table.Row(1, n, t.ranks[0]), cases, [&](const Case&, const ringoCommStats&) {
      moved += ringo_test_board_last_offset(t.comms[0]) != 0;
    });
    EXPECT_GT(moved, cases.size() / 8) << "offsets never moved";
  }, WithEnv({{"RINGO_BOARD_ROTATE", "48K"}, {"RINGO_ONESHOT_BYTES", "64K"}, {"RINGO_TWOPHASE_BYTES", "1M"}}));
  if (HasFailure()) return;
  table.ExpectModesEqual(n, cases, "rotating board");
}
INSTANTIATE_TEST_SUITE_P(N, BoardRotateBits, testing::Values(2, 3, 4));
