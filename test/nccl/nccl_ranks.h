// nccl_ranks.h — what test/test_nccl_calls.cc and test/test_nccl_ops.cc share: ranks as threads of
// one process, fresh ids, polling a non-blocking communicator, and a one-line "does it work" check.
// Header-only; sees nccl.h only. Run through those suites (make test).
#ifndef RINGO_TEST_NCCL_RANKS_H_
#define RINGO_TEST_NCCL_RANKS_H_

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "nccl.h"

#ifndef RINGO_NCCL_COMPAT
#error "a real nccl.h was included instead of ringo's nccl/nccl.h"
#endif

namespace {

// Every library wait fails after RINGO_TIMEOUT seconds; the alarm is the backstop for a hang in a
// test itself (it kills the binary, which the suite then reports as failed).
class Calls : public testing::Test {
 protected:
  void SetUp() override {
    setenv("RINGO_TIMEOUT", "20", 1);
    alarm(120);
  }
  void TearDown() override { alarm(0); }
};

// Runs fn(rank) on n threads at once and waits for all of them.
inline void OnRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

inline ncclUniqueId NewId() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  return id;
}

// Waits for a non-blocking communicator; returns whether ncclInProgress was seen on the way.
inline bool PollReady(ncclComm_t comm, ncclResult_t* final_state) {
  bool saw_progress = false;
  ncclResult_t state = ncclInProgress;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    if (state == ncclInProgress) {
      saw_progress = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  *final_state = state;
  return saw_progress;
}

// An all-reduce of the rank (as int32) must give 0 + 1 + ... + (n-1) on every rank of comm.
inline void ExpectWorks(ncclComm_t comm, int expected_sum) {
  int rank = -1;
  ASSERT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
  int32_t mine = rank, sum = -1;
  ASSERT_EQ(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
  EXPECT_EQ(sum, expected_sum);
}

}  // namespace

#endif  // RINGO_TEST_NCCL_RANKS_H_
