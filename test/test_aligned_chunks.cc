// test_aligned_chunks.cc — the host engine walks every element of the aligned cut (ringo_chunk_range's
// long chunks): chunk 0 may be up to 31 elements longer than count / N rounded up, so the rounds of a
// walk must come from its longest chunk, not from count / N. Forked ranks on the host ring.
// Run: make test (build/test/test_aligned_chunks).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "harness.h"
#include "ringo.h"

extern "C" {
#include "sched/schedule.h"
}

namespace {

// 4 KiB slots carry (4096 - 64) / 8 = 504 float64 elements a slice (the 64-byte slice header),
// 8 more than a multiple of 16. 17130 elements over 2 ranks: 1071 units of 16, so chunk 0 is 536
// units (8576 elements) while count / 2 rounded up is 8565: 17 slices of 504 (8568) would leave
// chunk 0's last 8 elements behind.
TEST(AlignedChunks, HostRingMovesAllOfALongerFirstChunk) {
  constexpr size_t kCount = 17130, kSlice = (4096 - 64) / sizeof(double);
  size_t off, len;
  ringo_chunk_range(kCount, 2, 0, &off, &len);
  ASSERT_EQ(len, 8576u);
  ASSERT_GT(len, ((kCount + 1) / 2 + kSlice - 1) / kSlice * kSlice) << "count / N's slices end inside chunk 0";
  ringo_test::Options opts;
  opts.env = {{"RINGO_ALGO", "ring"}, {"RINGO_SLICE_BYTES", "4K"}};
  ringo_test::RunForked(2, [&](ringo_test::Team& t) {
    const int r = t.ranks[0];
    std::vector<double> in(kCount), out(kCount, -1.0);
    for (size_t j = 0; j < kCount; j++) in[j] = double(j % 1000) + r;
    ASSERT_EQ(ringoSuccess, ringoAllReduce(in.data(), out.data(), kCount, ringoFloat64, ringoSum, t.comms[0], nullptr))
        << ringoGetLastError(t.comms[0]);
    size_t wrong = 0, first = kCount;
    for (size_t j = 0; j < kCount; j++)
      if (out[j] != 2.0 * double(j % 1000) + 1.0 && wrong++ == 0) first = j;
    EXPECT_EQ(wrong, 0u) << "rank " << r << ": first wrong element " << first;
  }, opts);
}

}  // namespace
