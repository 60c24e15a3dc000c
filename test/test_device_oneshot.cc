// test_device_oneshot.cc — the device one-shot's pure half (src/sched/device_oneshot.c), without CUDA:
// when a device collective takes it (the one threshold, agreed as the smallest), and its descriptor
// (the ring's chunks, each started where the ring starts it). Run: make test (build/test/test_device_oneshot).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

extern "C" {
#include "include/cuda_oneshot.h"
#include "sched/schedule.h"
}

namespace {

constexpr size_t kDefault = RINGO_DEV_ONESHOT_BYTES_DEFAULT;

// All-reduces of 1 .. threshold bytes over 2 .. 16 ranks that reach each other's buffers; nothing else.
TEST(DeviceOneshot, FitsSmallAllReducesOfRanksThatReachEachOther) {
  EXPECT_TRUE(ringo_dev_oneshot_fits(RINGO_COLL_ALLREDUCE, 1, 2, 1, kDefault));
  EXPECT_TRUE(ringo_dev_oneshot_fits(RINGO_COLL_ALLREDUCE, kDefault, 8, 1, kDefault)) << "the threshold itself";
  EXPECT_FALSE(ringo_dev_oneshot_fits(RINGO_COLL_ALLREDUCE, kDefault + 1, 8, 1, kDefault)) << "a byte over";
  EXPECT_FALSE(ringo_dev_oneshot_fits(RINGO_COLL_ALLREDUCE, 0, 2, 1, kDefault)) << "nothing to do";
  EXPECT_FALSE(ringo_dev_oneshot_fits(RINGO_COLL_ALLREDUCE, 4096, 2, 0, kDefault)) << "a peer's buffer out of reach";
  EXPECT_FALSE(ringo_dev_oneshot_fits(RINGO_COLL_ALLREDUCE, 4096, 1, 1, kDefault)) << "one rank: a copy";
  EXPECT_TRUE(ringo_dev_oneshot_fits(RINGO_COLL_ALLREDUCE, 4096, RINGO_DEV_ONESHOT_MAX_RANKS, 1, kDefault));
  EXPECT_FALSE(ringo_dev_oneshot_fits(RINGO_COLL_ALLREDUCE, 4096, RINGO_DEV_ONESHOT_MAX_RANKS + 1, 1, kDefault));
  for (int coll : {RINGO_COLL_REDUCESCATTER, RINGO_COLL_ALLGATHER, RINGO_COLL_BROADCAST, RINGO_COLL_REDUCE})
    EXPECT_FALSE(ringo_dev_oneshot_fits(coll, 4096, 4, 1, kDefault)) << "collective " << coll;
  EXPECT_FALSE(ringo_dev_oneshot_fits(RINGO_COLL_ALLREDUCE, 1, 4, 1, 0)) << "threshold 0: the path is off";
}

// The threshold is one number, the unmeasured default until a GPU run picks it, and ranks that are set
// differently take the smallest, so no two of them choose different paths for one collective.
TEST(DeviceOneshot, RanksAgreeOnTheSmallestThreshold) {
  EXPECT_EQ(kDefault, size_t{1} << 20);
  const std::vector<int64_t> unset = {-1, -1, -1};
  EXPECT_EQ(ringo_dev_oneshot_agree(unset.data(), 3), kDefault);
  const std::vector<int64_t> one_lower = {-1, 65536, -1, int64_t{4} << 20};
  EXPECT_EQ(ringo_dev_oneshot_agree(one_lower.data(), 4), 65536u);
  const std::vector<int64_t> one_higher = {int64_t{4} << 20, -1};
  EXPECT_EQ(ringo_dev_oneshot_agree(one_higher.data(), 2), kDefault);
  const std::vector<int64_t> one_off = {-1, 0, -1};
  EXPECT_EQ(ringo_dev_oneshot_agree(one_off.data(), 3), 0u) << "one rank with the path off turns it off for all";
}

// The descriptor carries ringo_chunk_range's chunks (the aligned cut of long ones included) and
// ringo_reduce_start's first position of each, and position p's input at in[p].
TEST(DeviceOneshot, DescriptorIsTheRingsChunksAndOrders) {
  std::vector<char> bufs(8);
  for (int n = 2; n <= 8; n++)
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{8192} * n + 1, size_t{1} << 20}) {
      std::vector<const void*> in;
      for (int p = 0; p < n; p++) in.push_back(&bufs[p]);
      ringo_dev_oneshot d;
      ASSERT_EQ(ringo_dev_oneshot_describe(ringoFloat32, ringoAvg, count, n, in.data(), &bufs[7], &d), ringoSuccess);
      EXPECT_EQ(d.nranks, n);
      EXPECT_EQ(d.count, count);
      EXPECT_EQ(d.out, &bufs[7]);
      for (int p = 0; p < n; p++) {
        size_t off, len;
        ringo_chunk_range(count, n, p, &off, &len);
        EXPECT_EQ(d.chunk[p].off, off) << count << " over " << n << ", chunk " << p;
        EXPECT_EQ(d.chunk[p].len, len) << count << " over " << n << ", chunk " << p;
        EXPECT_EQ(d.chunk[p].start, ringo_reduce_start(RINGO_COLL_ALLREDUCE, n, 0, p));
        EXPECT_EQ(d.in[p], in[p]);
      }
    }
}

TEST(DeviceOneshot, RefusesWhatTheKernelCannotRun) {
  const void* in[RINGO_DEV_ONESHOT_MAX_RANKS + 1] = {};
  ringo_dev_oneshot d;
  EXPECT_EQ(ringo_dev_oneshot_describe(ringoFloat32, ringoSum, 4, 1, in, nullptr, &d), ringoInvalidUsage);
  EXPECT_EQ(ringo_dev_oneshot_describe(ringoFloat32, ringoSum, 4, RINGO_DEV_ONESHOT_MAX_RANKS + 1, in, nullptr, &d),
            ringoInvalidUsage);
  EXPECT_EQ(ringo_dev_oneshot_describe(static_cast<ringoDataType_t>(RINGO_NUM_TYPES), ringoSum, 4, 2, in, nullptr, &d),
            ringoInvalidArgument);
  EXPECT_EQ(ringo_dev_oneshot_describe(ringoFloat32, static_cast<ringoRedOp_t>(RINGO_NUM_OPS), 4, 2, in, nullptr, &d),
            ringoInvalidArgument);
  EXPECT_LE(sizeof(ringo_dev_oneshot), 4096u) << "a kernel parameter must fit 4 KiB";
}

}  // namespace
