// test_nccl_calls.cc — the NCCL 2.11-2.30 calls of ringo's libnccl.so.2 on host memory, with several
// ranks as threads of this process: config and non-blocking init, scalable init, split trees,
// all-to-all/gather/scatter, PreMulSum, groups and ncclGroupSimulateEnd, memory and registration,
// finalize and abort, and the messages of the calls ringo does not provide. Sees nccl.h only and
// links the built libnccl.so.2 (Makefile). Run: make tests && ./build/test/test_nccl_calls
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl/nccl_ranks.h"

namespace {

// ---- init ----

TEST_F(Calls, InitRankConfigBlocking) {
  const ncclUniqueId id = NewId();
  OnRanks(3, [&](int r) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    config.commName = "blocking-three";
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRankConfig(&comm, 3, id, r, &config), ncclSuccess) << ncclGetLastError(nullptr);
    ncclResult_t state = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    EXPECT_EQ(state, ncclSuccess);
    ExpectWorks(comm, 3);
    EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess);
    EXPECT_EQ(ncclCommFinalize(comm), ncclInvalidArgument) << "finalized twice (NCCL refuses it)";
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  EXPECT_EQ(ncclCommFinalize(nullptr), ncclSuccess) << "NULL is nothing to finalize, as in NCCL";
}

// A config that did not come from NCCL_CONFIG_INITIALIZER is refused, as NCCL refuses it.
TEST_F(Calls, InitRankConfigRefusesAnUninitialisedConfig) {
  ncclConfig_t config;
  std::memset(&config, 0, sizeof config);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, NewId(), 0, &config), ncclInvalidArgument);
  EXPECT_NE(std::strstr(ncclGetLastError(nullptr), "NCCL_CONFIG_INITIALIZER"), nullptr) << ncclGetLastError(nullptr);
  EXPECT_EQ(comm, nullptr);
  ncclConfig_t two = NCCL_CONFIG_INITIALIZER;
  two.blocking = 2;  // NCCL: "Invalid config blocking attribute value"
  comm = reinterpret_cast<ncclComm_t>(&two);  // a stale handle must not survive the refusal
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, NewId(), 0, &two), ncclInvalidArgument);
  EXPECT_NE(std::strstr(ncclGetLastError(nullptr), "blocking is 2"), nullptr) << ncclGetLastError(nullptr);
  EXPECT_EQ(comm, nullptr);
}

// Rank 2 joins late, so ranks 0 and 1 must see ncclInProgress before their communicator is ready.
TEST_F(Calls, NonBlockingInitPolledToCompletion) {
  const ncclUniqueId id = NewId();
  std::atomic<int> saw_progress{0};
  OnRanks(3, [&](int r) {
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRankConfig(&comm, 3, id, r, &config), ncclInProgress);
    ASSERT_NE(comm, nullptr);
    ncclResult_t state;
    if (PollReady(comm, &state) && r < 2) saw_progress++;
    ASSERT_EQ(state, ncclSuccess) << ncclGetLastError(comm);
    ExpectWorks(comm, 3);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  EXPECT_EQ(saw_progress.load(), 2);
}

// A non-blocking init that fails reports its error through ncclCommGetAsyncError.
TEST_F(Calls, NonBlockingInitFailureIsReported) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId bogus;
  std::memset(&bogus, 0x5a, sizeof bogus);
  ncclComm_t comm = nullptr;
  const ncclResult_t res = ncclCommInitRankConfig(&comm, 2, bogus, 1, &config);
  ASSERT_TRUE(res == ncclInProgress || res == ncclInvalidArgument) << ncclGetErrorString(res);
  if (res == ncclInProgress) {
    ncclResult_t state;
    PollReady(comm, &state);
    EXPECT_NE(state, ncclSuccess);
    EXPECT_NE(std::string(ncclGetLastError(comm)), "");
    // Every later call gets the init's own result and says so (NCCL's ncclCommEnsureReady).
    int n = 0;
    float x = 1;
    EXPECT_EQ(ncclCommCount(comm, &n), state);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("ncclCommCount: the communicator's non-blocking init failed"),
              std::string::npos) << ncclGetLastError(comm);
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), state);
    EXPECT_EQ(std::string(ncclGetLastError(comm)).find("ncclCommCount"), std::string::npos)
        << "the init's own message, not the last call's: " << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommFinalize(comm), state);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  }
}

// ncclCommAbort on a communicator whose non-blocking init waits for a rank that has not come
// returns at once, as NCCL's abort flag stops its init, instead of waiting out RINGO_TIMEOUT (20 s
// here). The rank that comes later gets a communicator that fails at its first call: the init that
// was given up aborts what it made.
TEST_F(Calls, AbortEndsANonBlockingInitAtOnce) {
  const ncclUniqueId id = NewId();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t early = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&early, 2, id, 0, &config), ncclInProgress);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(early, &state), ncclSuccess);
  ASSERT_EQ(state, ncclInProgress) << "rank 1 has not joined: the init must still be running";
  const auto begun = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(early), ncclSuccess);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  EXPECT_LT(took, 5.0) << "ncclCommAbort waited for the init it was to stop";
  int n = 0;
  EXPECT_EQ(ncclCommCount(early, &n), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(early)).find("aborted"), std::string::npos) << ncclGetLastError(early);
  EXPECT_EQ(ncclCommGetAsyncError(early, &state), ncclInvalidUsage) << "no longer in progress: aborted";
  EXPECT_EQ(std::string(ncclGetLastError(early)).find("destroy it"), std::string::npos)
      << "the abort freed it: nothing to destroy: " << ncclGetLastError(early);
  // The abort freed it: a destroy after it is refused (it freed the record the init's thread still used).
  EXPECT_EQ(ncclCommDestroy(early), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(early)).find("aborted"), std::string::npos) << ncclGetLastError(early);
  EXPECT_EQ(ncclCommAbort(early), ncclSuccess) << "a second abort has nothing left to end";

  ncclComm_t late = nullptr;  // joins the rendezvous rank 0's abandoned init is still in
  const ncclResult_t joined = ncclCommInitRank(&late, 2, id, 1);
  if (joined == ncclSuccess) {
    int32_t x = 1, sum = 0;
    EXPECT_NE(ncclAllReduce(&x, &sum, 1, ncclInt32, ncclSum, late, nullptr), ncclSuccess)
        << "rank 0 gave its communicator up: rank 1 must not get a result";
    EXPECT_NE(std::string(ncclGetLastError(late)).find("aborted"), std::string::npos) << ncclGetLastError(late);
    EXPECT_EQ(ncclCommDestroy(late), ncclSuccess);
  }
}

// Calls recorded in another thread's open group would run at its ncclGroupEnd on a freed communicator:
// destroy refuses while they are held (it freed both the record and ringo's communicator before).
TEST_F(Calls, DestroyRefusedWhileAnotherThreadsGroupHoldsCalls) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, NewId(), 0), ncclSuccess) << ncclGetLastError(nullptr);
  std::atomic<int> recorded{0}, refused{0};
  float x[2] = {1, 2};
  ncclResult_t group_end = ncclInternalError;
  std::thread grouping([&] {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(x, x, 2, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    recorded = 1;
    while (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    group_end = ncclGroupEnd();
  });
  while (!recorded) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("another thread's open group holds 1 call"), std::string::npos)
      << ncclGetLastError(comm);
  refused = 1;
  grouping.join();
  EXPECT_EQ(group_end, ncclSuccess) << ncclGetLastError(comm);
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(Calls, InitRankScalableWithSeveralIds) {
  ncclUniqueId ids[2] = {NewId(), NewId()};
  OnRanks(4, [&](int r) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRankScalable(&comm, 4, r, 2, ids, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    ExpectWorks(comm, 6);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRankScalable(&comm, 1, 0, 0, ids, nullptr), ncclInvalidArgument);
}

// ---- split ----

// Four ranks split by parity with reversed keys, then each half splits again with one rank opting
// out; every level is checked for size, order and a working all-reduce.
TEST_F(Calls, SplitTree) {
  const ncclUniqueId id = NewId();
  OnRanks(4, [&](int r) {
    ncclComm_t world = nullptr;
    ASSERT_EQ(ncclCommInitRank(&world, 4, id, r), ncclSuccess);
    ncclComm_t half = nullptr;
    ASSERT_EQ(ncclCommSplit(world, r % 2, -r, &half, nullptr), ncclSuccess) << ncclGetLastError(world);
    ASSERT_NE(half, nullptr);
    int n = 0, me = -1;
    EXPECT_EQ(ncclCommCount(half, &n), ncclSuccess);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(ncclCommUserRank(half, &me), ncclSuccess);
    EXPECT_EQ(me, r < 2 ? 1 : 0) << "keys -r put the higher parent rank first";
    int32_t mine = r, sum = 0;
    ASSERT_EQ(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, half, nullptr), ncclSuccess);
    EXPECT_EQ(sum, r % 2 == 0 ? 0 + 2 : 1 + 3);
    // Second level: rank 0 of each half opts out; the other gets a communicator of one.
    ncclComm_t leaf = reinterpret_cast<ncclComm_t>(&leaf);
    ASSERT_EQ(ncclCommSplit(half, me == 0 ? NCCL_SPLIT_NOCOLOR : 7, 0, &leaf, nullptr), ncclSuccess);
    if (me == 0) {
      EXPECT_EQ(leaf, nullptr);
    } else {
      ASSERT_NE(leaf, nullptr);
      EXPECT_EQ(ncclCommCount(leaf, &n), ncclSuccess);
      EXPECT_EQ(n, 1);
      ExpectWorks(leaf, 0);
      EXPECT_EQ(ncclCommDestroy(leaf), ncclSuccess);
    }
    // The parent still works after its children were made.
    ExpectWorks(world, 6);
    EXPECT_EQ(ncclCommDestroy(half), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(world), ncclSuccess);
  });
}

// A child made with config NULL inherits the parent's non-blocking mode (its init then returns
// ncclInProgress); an explicit blocking config overrides it.
TEST_F(Calls, SplitInheritsTheParentsConfig) {
  const ncclUniqueId id = NewId();
  OnRanks(3, [&](int r) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t world = nullptr;
    ASSERT_EQ(ncclCommInitRankConfig(&world, 3, id, r, &config), ncclInProgress);
    ncclResult_t state;
    PollReady(world, &state);
    ASSERT_EQ(state, ncclSuccess);
    ncclComm_t inherited = nullptr;
    ASSERT_EQ(ncclCommSplit(world, 0, r, &inherited, nullptr), ncclInProgress) << ncclGetLastError(world);
    PollReady(inherited, &state);
    ASSERT_EQ(state, ncclSuccess) << ncclGetLastError(inherited);
    ExpectWorks(inherited, 3);
    ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
    blocking.blocking = 1;
    ncclComm_t explicit_child = nullptr;
    EXPECT_EQ(ncclCommSplit(world, 0, r, &explicit_child, &blocking), ncclSuccess);
    ExpectWorks(explicit_child, 3);
    EXPECT_EQ(ncclCommDestroy(explicit_child), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(inherited), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(world), ncclSuccess);
  });
}

TEST_F(Calls, SplitArgumentErrors) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  ncclComm_t child = nullptr;
  EXPECT_EQ(ncclCommSplit(comm, -2, 0, &child, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommSplit(comm, 0, 0, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommSplit(nullptr, 0, 0, &child, nullptr), ncclInvalidArgument);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommSplit(comm, 0, 0, &child, nullptr), ncclInvalidUsage);
  EXPECT_NE(std::strstr(ncclGetLastError(comm), "ncclCommSplit"), nullptr) << ncclGetLastError(comm);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// ---- all-to-all, gather, scatter ----

constexpr int kRanks = 3;
constexpr size_t kCount = 5;

// The value rank `from` puts in the block for rank `to`.
int32_t Cell(int from, int to, size_t i) { return from * 1000 + to * 100 + static_cast<int32_t>(i); }

void CheckAlltoAll(ncclComm_t comm, int r, bool grouped) {
  std::vector<int32_t> send(kRanks * kCount), recv(kRanks * kCount, -1);
  for (int to = 0; to < kRanks; to++)
    for (size_t i = 0; i < kCount; i++) send[to * kCount + i] = Cell(r, to, i);
  if (grouped) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  }
  EXPECT_EQ(ncclAlltoAll(send.data(), recv.data(), kCount, ncclInt32, comm, nullptr), ncclSuccess)
      << ncclGetLastError(comm);
  if (grouped) {
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  }
  for (int from = 0; from < kRanks; from++)
    for (size_t i = 0; i < kCount; i++) EXPECT_EQ(recv[from * kCount + i], Cell(from, r, i)) << from << " " << i;
}

void CheckGather(ncclComm_t comm, int r, int root, bool in_place) {
  std::vector<int32_t> recv(kRanks * kCount, -1), own(kCount);
  for (size_t i = 0; i < kCount; i++) own[i] = Cell(r, root, i);
  const int32_t* send = own.data();
  if (in_place && r == root) {
    std::copy(own.begin(), own.end(), recv.begin() + root * kCount);
    send = recv.data() + root * kCount;
  }
  ASSERT_EQ(ncclGather(send, r == root ? recv.data() : nullptr, kCount, ncclInt32, root, comm, nullptr), ncclSuccess)
      << ncclGetLastError(comm);
  if (r != root) return;
  for (int from = 0; from < kRanks; from++)
    for (size_t i = 0; i < kCount; i++) EXPECT_EQ(recv[from * kCount + i], Cell(from, root, i));
}

void CheckScatter(ncclComm_t comm, int r, int root, bool in_place) {
  std::vector<int32_t> send(kRanks * kCount), recv(kCount, -1);
  for (int to = 0; to < kRanks; to++)
    for (size_t i = 0; i < kCount; i++) send[to * kCount + i] = Cell(root, to, i);
  int32_t* out = in_place && r == root ? send.data() + root * kCount : recv.data();
  ASSERT_EQ(ncclScatter(r == root ? send.data() : nullptr, out, kCount, ncclInt32, root, comm, nullptr), ncclSuccess)
      << ncclGetLastError(comm);
  for (size_t i = 0; i < kCount; i++) EXPECT_EQ(out[i], Cell(root, r, i));
}

TEST_F(Calls, AlltoAllGatherScatter) {
  const ncclUniqueId id = NewId();
  OnRanks(kRanks, [&](int r) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, kRanks, id, r), ncclSuccess);
    CheckAlltoAll(comm, r, false);
    CheckAlltoAll(comm, r, true);
    for (int root = 0; root < kRanks; root++) {
      CheckGather(comm, r, root, false);
      CheckGather(comm, r, root, true);
      CheckScatter(comm, r, root, false);
      CheckScatter(comm, r, root, true);
    }
    int32_t x = 0;
    EXPECT_EQ(ncclGather(&x, &x, 1, ncclInt32, kRanks, comm, nullptr), ncclInvalidArgument);
    EXPECT_NE(std::strstr(ncclGetLastError(comm), "root"), nullptr) << ncclGetLastError(comm);
    EXPECT_EQ(ncclScatter(&x, &x, 1, static_cast<ncclDataType_t>(ncclNumTypes), 0, comm, nullptr),
              ncclInvalidArgument);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

// float8 data moves as bytes through the data-moving calls, and is refused by reductions.
TEST_F(Calls, Float8MovesButDoesNotReduce) {
  const ncclUniqueId id = NewId();
  OnRanks(2, [&](int r) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, 2, id, r), ncclSuccess);
    uint8_t mine[2] = {static_cast<uint8_t>(0x38 + r), 0x7e}, all[4] = {0, 0, 0, 0};
    EXPECT_EQ(ncclAllGather(mine, all, 2, ncclFloat8e4m3, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(all[0], 0x38);
    EXPECT_EQ(all[2], 0x39);
    EXPECT_EQ(ncclAllReduce(mine, mine, 2, ncclFloat8e5m2, ncclSum, comm, nullptr), ncclInvalidArgument);
    EXPECT_NE(std::strstr(ncclGetLastError(comm), "float8"), nullptr) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

}  // namespace
