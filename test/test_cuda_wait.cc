// test_cuda_wait.cc — the wait kernel of cuda/wait.cu (how a stream waits for device point-to-point's
// proxy), its exact code run on the CPU: released by the flag, not before; ended by an abort.
// Skips in a build without CUDA. Run: make test, or build/test/test_cuda_wait.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#ifdef RINGO_HAVE_CUDA
#include "include/cuda_ring.h"
#include "include/cuda_wait.h"
#endif

namespace {

#ifdef RINGO_HAVE_CUDA
using Clock = std::chrono::steady_clock;

TEST(CudaWaitEmulated, ReturnsOnceTheFlagReachesTheValueAndNotBefore) {
  uint64_t flag = 3;
  int32_t abort_word = 0;
  EXPECT_EQ(RINGO_DEV_OK, ringo_cuda_wait_flag_emulate(&flag, 3, &abort_word)) << "already there";
  EXPECT_EQ(RINGO_DEV_OK, ringo_cuda_wait_flag_emulate(&flag, 2, &abort_word)) << "past it";
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    EXPECT_EQ(RINGO_DEV_OK, ringo_cuda_wait_flag_emulate(&flag, 5, &abort_word));
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  __atomic_store_n(&flag, 4, __ATOMIC_RELEASE);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(returned) << "released at 4 of 5";
  __atomic_store_n(&flag, 5, __ATOMIC_RELEASE);
  waiter.join();
  EXPECT_TRUE(returned);
}

TEST(CudaWaitEmulated, AnAbortEndsTheWait) {
  uint64_t flag = 0;
  int32_t abort_word = 0;
  const auto start = Clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    __atomic_store_n(&abort_word, 1, __ATOMIC_RELEASE);
  });
  EXPECT_EQ(RINGO_DEV_ABORTED, ringo_cuda_wait_flag_emulate(&flag, 1, &abort_word));
  aborter.join();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
}
#else
TEST(CudaWaitEmulated, NeedsACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA part (nvcc not found, or CUDA=0): the wait kernel is not built";
}
#endif

}  // namespace
