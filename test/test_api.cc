// test_api.cc — the public API's contract outside the data path: version, error strings, queries,
// every invalid-argument path, rendezvous refusals, and self-tests of the multi-rank harness.
// Depends on include/ringo.h and test/harness.h. Run: make tests && ./build/test/test_api
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "ringo.h"

namespace {

using ringo_test::Options;
using ringo_test::ResultName;
using ringo_test::Shared;
using ringo_test::Team;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Options for jobs that need no unique id (no rendezvous root in the parent).
Options NoId() {
  Options o;
  o.make_id = false;
  o.deadline_s = 30;
  return o;
}

// A small all-reduce with a known answer on every rank of the team: proves the comm still works.
void ExpectAllReduceWorks(Team& team, const char* after) {
  const size_t count = 7;
  const int n = team.nranks;
  std::vector<std::vector<int32_t>> send(team.size()), recv(team.size());
  for (size_t k = 0; k < team.size(); k++) {
    for (size_t i = 0; i < count; i++) send[k].push_back(team.ranks[k] + 1 + static_cast<int32_t>(i));
    recv[k].assign(count, -1);
  }
  const ringoResult_t res = ringo_test::TeamCall(team, [&](size_t k) {
    return ringoAllReduce(send[k].data(), recv[k].data(), count, ringoInt32, ringoSum, team.comms[k], nullptr);
  });
  ASSERT_EQ(res, ringoSuccess) << "a correct AllReduce after " << after << " failed: "
                               << ringoGetLastError(team.comms[0]);
  for (size_t k = 0; k < team.size(); k++)
    for (size_t i = 0; i < count; i++)
      EXPECT_EQ(recv[k][i], n * (n + 1) / 2 + n * static_cast<int32_t>(i))
          << "rank " << team.ranks[k] << " element " << i << ", AllReduce after " << after;
}

// ---------------------------------------------------------------------------------------------
// Library-wide functions.

TEST(Version, MatchesHeader) {
  int version = -1;
  EXPECT_EQ(ringoGetVersion(&version), ringoSuccess);
  EXPECT_EQ(version, RINGO_VERSION_CODE);
  EXPECT_EQ(RINGO_VERSION_CODE, RINGO_MAJOR * 10000 + RINGO_MINOR * 100 + RINGO_PATCH);
  EXPECT_EQ(ringoGetVersion(nullptr), ringoInvalidArgument);
}

TEST(ErrorStrings, EveryCodeHasItsOwnNonEmptyString) {
  std::set<std::string> seen;
  for (int code = ringoSuccess; code <= ringoTimeout; code++) {
    const char* s = ringoGetErrorString(static_cast<ringoResult_t>(code));
    ASSERT_NE(s, nullptr) << "code " << code;
    EXPECT_GT(strlen(s), 0u) << "code " << code;
    EXPECT_TRUE(seen.insert(s).second) << "code " << code << " shares its string \"" << s << "\"";
  }
  const char* unknown = ringoGetErrorString(static_cast<ringoResult_t>(99));
  ASSERT_NE(unknown, nullptr);
  EXPECT_GT(strlen(unknown), 0u);
  ASSERT_NE(ringoGetLastError(nullptr), nullptr);
}

TEST(Group, EndWithoutStartIsInvalidUsage) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId&, Shared&) {
    EXPECT_EQ(ringoGroupEnd(), ringoInvalidUsage);
    EXPECT_GT(strlen(ringoGetLastError(nullptr)), 0u);
    // An empty group, and empty nested groups (as NCCL allows), end cleanly.
    EXPECT_EQ(ringoGroupStart(), ringoSuccess);
    EXPECT_EQ(ringoGroupEnd(), ringoSuccess);
    int depth = -1;
    EXPECT_EQ(ringoGroupStart(), ringoSuccess);
    EXPECT_EQ(ringoGroupStart(), ringoSuccess);
    EXPECT_EQ(ringoGroupDepth(&depth), ringoSuccess);
    EXPECT_EQ(depth, 2);
    EXPECT_EQ(ringoGroupEnd(), ringoSuccess);
    EXPECT_EQ(ringoGroupEnd(), ringoSuccess);
    EXPECT_EQ(ringoGroupEnd(), ringoInvalidUsage);
    EXPECT_EQ(ringoGroupDepth(&depth), ringoSuccess);
    EXPECT_EQ(depth, 0);
    EXPECT_EQ(ringoGroupDepth(nullptr), ringoInvalidArgument);
    // A group belongs to the thread that started it: ending it from another is refused by saying so
    // (the message named no thread), and the starting thread still ends its own.
    EXPECT_EQ(ringoGroupStart(), ringoSuccess);
    std::thread other([] {
      EXPECT_EQ(ringoGroupEnd(), ringoInvalidUsage);
      EXPECT_NE(strstr(ringoGetLastError(nullptr), "in this thread"), nullptr) << ringoGetLastError(nullptr);
    });
    other.join();
    EXPECT_EQ(ringoGroupDepth(&depth), ringoSuccess);
    EXPECT_EQ(depth, 1);
    EXPECT_EQ(ringoGroupEnd(), ringoSuccess);
  }, NoId());
}

TEST(NullComm, EveryFunctionRejectsIt) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId&, Shared&) {
    float buf[4] = {1, 2, 3, 4};
    int v = 0;
    ringoResult_t async;
    ringoCommStats stats;
    auto expect_rejected = [](ringoResult_t res, const char* what) {
      EXPECT_EQ(res, ringoInvalidArgument) << what << " with a NULL comm returned " << ResultName(res);
      const char* msg = ringoGetLastError(nullptr);
      ASSERT_NE(msg, nullptr) << what;
      EXPECT_GT(strlen(msg), 0u) << what << ": no message in ringoGetLastError(NULL)";
    };
    expect_rejected(ringoAllReduce(buf, buf, 4, ringoFloat32, ringoSum, nullptr, nullptr), "ringoAllReduce");
    expect_rejected(ringoReduceScatter(buf, buf, 1, ringoFloat32, ringoSum, nullptr, nullptr), "ringoReduceScatter");
    expect_rejected(ringoAllGather(buf, buf, 1, ringoFloat32, nullptr, nullptr), "ringoAllGather");
    expect_rejected(ringoBroadcast(buf, buf, 4, ringoFloat32, 0, nullptr, nullptr), "ringoBroadcast");
    expect_rejected(ringoReduce(buf, buf, 4, ringoFloat32, ringoSum, 0, nullptr, nullptr), "ringoReduce");
    expect_rejected(ringoCommCount(nullptr, &v), "ringoCommCount");
    expect_rejected(ringoCommUserRank(nullptr, &v), "ringoCommUserRank");
    expect_rejected(ringoCommCuDevice(nullptr, &v), "ringoCommCuDevice");
    expect_rejected(ringoCommLocalRanks(nullptr, &v), "ringoCommLocalRanks");
    expect_rejected(ringoSend(buf, 4, ringoFloat32, 0, nullptr, nullptr), "ringoSend");
    expect_rejected(ringoRecv(buf, 4, ringoFloat32, 0, nullptr, nullptr), "ringoRecv");
    expect_rejected(ringoCommGetAsyncError(nullptr, &async), "ringoCommGetAsyncError");
    expect_rejected(ringoCommGetStats(nullptr, &stats), "ringoCommGetStats");
    expect_rejected(ringoCommDestroy(nullptr), "ringoCommDestroy");
    expect_rejected(ringoCommAbort(nullptr), "ringoCommAbort");
  }, NoId());
}

// ---------------------------------------------------------------------------------------------
// Communicator creation.

TEST(InitRank, BadArgumentsAreRejectedAndTheIdStaysUsable) {
  Options o;
  o.deadline_s = 30;
  o.ringo_timeout_s = 5;
  ringo_test::ScopedEnv timeout("RINGO_TIMEOUT", "5");  // for the root in this process
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared&) {
    ringoComm_t comm = nullptr;
    struct Bad { int nranks, rank; const char* what; };
    for (const Bad& b : {Bad{0, 0, "nranks 0"}, Bad{-1, 0, "nranks -1"}, Bad{1, -1, "rank -1"},
                         Bad{1, 1, "rank == nranks"}, Bad{2, 5, "rank > nranks"},
                         Bad{65537, 0, "past the rendezvous's 65536"},
                         Bad{2147483647, 0, "INT_MAX (sized the tables before, seconds of CPU)"}}) {
      EXPECT_EQ(ringoCommInitRank(&comm, b.nranks, id, b.rank), ringoInvalidArgument) << b.what;
      EXPECT_GT(strlen(ringoGetLastError(nullptr)), 0u) << b.what;
      if (b.nranks < 1 || b.nranks > 65536) {  // refused at the call, before anything is sized by it
        EXPECT_NE(strstr(ringoGetLastError(nullptr), "is not in [1, 65536]"), nullptr) << ringoGetLastError(nullptr);
      }
    }
    EXPECT_EQ(ringoCommInitRank(nullptr, 1, id, 0), ringoInvalidArgument) << "NULL comm pointer";
    EXPECT_GT(strlen(ringoGetLastError(nullptr)), 0u);
    ringoUniqueId zero;
    memset(&zero, 0, sizeof zero);
    const double t0 = Now();
    EXPECT_EQ(ringoCommInitRank(&comm, 1, zero, 0), ringoInvalidArgument) << "an all-zero id";
    EXPECT_LT(Now() - t0, 7.0) << "rejecting an all-zero id took longer than RINGO_TIMEOUT";
    EXPECT_GT(strlen(ringoGetLastError(nullptr)), 0u);
    // None of the rejected calls may have consumed the id.
    ASSERT_EQ(ringoCommInitRank(&comm, 1, id, 0), ringoSuccess) << ringoGetLastError(nullptr);
    EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
  }, o);
}

// A config names what it sets: a size short of its fields or a timeout out of RINGO_TIMEOUT's range is
// refused before anything is made, and the id stays usable; NULL is ringoCommInitRank.
TEST(InitRankConfig, BadConfigsAreRefusedAndTheIdStaysUsable) {
  Options o;
  o.deadline_s = 30;
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared&) {
    ringoComm_t comm = nullptr;
    struct Bad { size_t size; double timeout; const char* what; };
    for (const Bad& b : {Bad{0, 1.0, "size 0"}, Bad{sizeof(size_t), 1.0, "size without the timeout"},
                         Bad{sizeof(ringoConfig_t), -1.0, "timeoutSeconds -1"},
                         Bad{sizeof(ringoConfig_t), 1e-4, "timeoutSeconds below 0.001"},
                         Bad{sizeof(ringoConfig_t), 2e9, "timeoutSeconds above 1e9"},
                         Bad{sizeof(ringoConfig_t), NAN, "timeoutSeconds NaN"}}) {
      ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
      config.size = b.size;
      config.timeoutSeconds = b.timeout;
      EXPECT_EQ(ringoCommInitRankConfig(&comm, 1, id, 0, &config), ringoInvalidArgument) << b.what;
      EXPECT_NE(strstr(ringoGetLastError(nullptr), "ringoCommInitRankConfig: config->"), nullptr)
          << b.what << ": " << ringoGetLastError(nullptr);
      EXPECT_EQ(comm, nullptr) << b.what;
    }
    ASSERT_EQ(ringoCommInitRankConfig(&comm, 1, id, 0, nullptr), ringoSuccess) << ringoGetLastError(nullptr);
    EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
  }, o);
}

// config->timeoutSeconds is this communicator's RINGO_TIMEOUT, whatever the environment says: with
// RINGO_TIMEOUT=30 in the environment and 1 s in the config, a peer that does not come is a
// ringoTimeout after about 1 s. A config of 0 leaves the environment's (test_failures.cc covers it).
TEST(InitRankConfig, TimeoutOverridesTheEnvironmentForThisCommunicator) {
  Options o;
  o.deadline_s = 60;
  o.ringo_timeout_s = 30;
  ringo_test::RunProcesses(2, [](int rank, const ringoUniqueId& id, Shared& shared) {
    ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
    config.timeoutSeconds = 1.0;
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoCommInitRankConfig(&comm, 2, id, rank, &config), ringoSuccess) << ringoGetLastError(nullptr);
    ASSERT_TRUE(shared.Barrier());
    if (rank == 0) {
      float x = 1.0f;
      const double t0 = Now();
      EXPECT_EQ(ringoAllReduce(&x, &x, 1, ringoFloat32, ringoSum, comm, nullptr), ringoTimeout);
      const double waited = Now() - t0;
      EXPECT_GE(waited, 0.9);
      EXPECT_LT(waited, 10.0) << "the environment's RINGO_TIMEOUT=30 bounded the wait, not the config's 1 s";
    }
    ASSERT_TRUE(shared.Barrier(40));  // rank 1 comes only after rank 0 gave up
    ringoCommAbort(comm);
  }, o);
}

TEST(InitAll, BadArgumentsAreRejected) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId&, Shared&) {
    ringoComm_t comms[2] = {nullptr, nullptr};
    EXPECT_EQ(ringoCommInitAll(nullptr, 2, nullptr), ringoInvalidArgument);
    EXPECT_GT(strlen(ringoGetLastError(nullptr)), 0u);
    EXPECT_EQ(ringoCommInitAll(comms, 0, nullptr), ringoInvalidArgument);
    EXPECT_EQ(ringoCommInitAll(comms, -1, nullptr), ringoInvalidArgument);
    EXPECT_GT(strlen(ringoGetLastError(nullptr)), 0u);
    // Past the rendezvous's bound, refused by name before anything is made: INT_MAX said "out of
    // memory" (ringoSystemError); 65537 started a thread per rank, then said "pthread_create failed".
    for (const int ndev : {65537, 2147483647}) {
      EXPECT_EQ(ringoCommInitAll(comms, ndev, nullptr), ringoInvalidArgument) << "ndev " << ndev;
      EXPECT_NE(strstr(ringoGetLastError(nullptr), "is not in [1, 65536]"), nullptr) << ringoGetLastError(nullptr);
    }
    // A device list needs CUDA: without it the answer is ringoUnhandledCudaError.
    const int devlist[1] = {0};
    const ringoResult_t res = ringoCommInitAll(comms, 1, devlist);
    if (res == ringoSuccess) {
      int dev = -2;
      EXPECT_EQ(ringoCommCuDevice(comms[0], &dev), ringoSuccess);
      EXPECT_EQ(dev, 0);
      EXPECT_EQ(ringoCommDestroy(comms[0]), ringoSuccess);
    } else {
      EXPECT_EQ(res, ringoUnhandledCudaError) << ringoGetLastError(nullptr);
    }
  }, NoId());
}

TEST(Abort, FreesAGoodCommunicator) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared&) {
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoCommInitRank(&comm, 1, id, 0), ringoSuccess) << ringoGetLastError(nullptr);
    EXPECT_EQ(ringoCommAbort(comm), ringoSuccess);
  });
}

// Destroy refuses while this thread's open group holds calls on the communicator (they would run on
// freed memory at ringoGroupEnd); abort drops them. Both leave the group usable.
TEST(Destroy, RefusedWhileTheOpenGroupHoldsItsCallsAndAbortDropsThem) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared&) {
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoCommInitRank(&comm, 1, id, 0), ringoSuccess) << ringoGetLastError(nullptr);
    float x[4] = {1, 2, 3, 4};
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    ASSERT_EQ(ringoAllReduce(x, x, 4, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess);
    EXPECT_EQ(ringoCommDestroy(comm), ringoInvalidUsage);
    EXPECT_NE(std::string(ringoGetLastError(comm)).find("ringoGroupEnd"), std::string::npos) << ringoGetLastError(comm);
    EXPECT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(comm);
    EXPECT_EQ(x[3], 4.0f);
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    ASSERT_EQ(ringoAllReduce(x, x, 4, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess);
    EXPECT_EQ(ringoCommAbort(comm), ringoSuccess);
    EXPECT_EQ(ringoGroupEnd(), ringoSuccess) << "the aborted communicator's call was dropped, not run";
  });
}

TEST(Destroy, AbortDropsAQueuedInit) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared&) {
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    ASSERT_EQ(ringoCommInitRank(&comm, 1, id, 0), ringoSuccess) << ringoGetLastError(nullptr);
    EXPECT_EQ(ringoCommDestroy(comm), ringoInvalidUsage);
    EXPECT_EQ(ringoCommAbort(comm), ringoSuccess);
    EXPECT_EQ(ringoGroupEnd(), ringoSuccess);
  });
}

// Another thread's destroy or abort of a communicator whose init is queued in this thread's group is
// refused and frees nothing: before, it freed the communicator that ringoGroupEnd then made. So is
// the abort of a thread whose own group holds only calls on it (it was let through).
TEST(Destroy, RefusedFromAnotherThreadWhileTheInitIsQueued) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared&) {
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    ASSERT_EQ(ringoCommInitRank(&comm, 1, id, 0), ringoSuccess) << ringoGetLastError(nullptr);
    std::thread other([comm] {
      float y[2] = {1, 2};
      for (const int how : {0, 1, 2}) {
        if (how == 2) {  // abort with a call of this thread's own group queued on comm
          ASSERT_EQ(ringoGroupStart(), ringoSuccess);
          EXPECT_EQ(ringoAllReduce(y, y, 2, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess);
        }
        EXPECT_EQ(how == 0 ? ringoCommDestroy(comm) : ringoCommAbort(comm), ringoInvalidUsage) << how;
        EXPECT_NE(strstr(ringoGetLastError(nullptr), "still being created by another thread"), nullptr)
            << ringoGetLastError(nullptr);
      }
      EXPECT_EQ(ringoGroupEnd(), ringoInvalidUsage) << "its all-reduce meets a communicator not made yet";
    });
    other.join();
    ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
    float x[2] = {1, 2};
    EXPECT_EQ(ringoAllReduce(x, x, 2, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess) << ringoGetLastError(comm);
    EXPECT_EQ(x[1], 2.0f);
    EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
  });
}

// A queued init that fails is still read by its ringoGroupEnd after the failure (its message, the
// root's last word): another thread's destroy is refused until that ringoGroupEnd is done with it. It
// was let through once the init had failed and freed the communicator under those reads: a
// use-after-free that only the sanitizer build can see, so in the normal build this test passes either way.
TEST(Destroy, RefusedWhileTheGroupEndOfAFailedInitStillRuns) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared&) {
    setenv("RINGO_TIMEOUT", "1", 1);
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    ASSERT_EQ(ringoCommInitRank(&comm, 2, id, 0), ringoSuccess) << ringoGetLastError(nullptr);  // rank 1 never comes
    std::thread other([comm] {
      ringoResult_t state = ringoSuccess;
      while (ringoCommGetAsyncError(comm, &state) == ringoSuccess && state == ringoSuccess) usleep(200);
      while (ringoCommDestroy(comm) != ringoSuccess) {
        EXPECT_NE(strstr(ringoGetLastError(nullptr), "still being created by another thread"), nullptr)
            << ringoGetLastError(nullptr);
        usleep(200);
      }
    });
    EXPECT_NE(ringoGroupEnd(), ringoSuccess);
    other.join();
  });
}

// Calls queued in another thread's open group would run on freed memory at its ringoGroupEnd (a
// segfault, before): destroy from this thread refuses; abort fails them and waits for that thread's
// ringoGroupEnd to let go of them, then frees.
TEST(Destroy, AnotherThreadsGroupHoldingItsCallsIsWaitedForOrRefused) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared&) {
    setenv("RINGO_TIMEOUT", "20", 1);
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoCommInitRank(&comm, 1, id, 0), ringoSuccess) << ringoGetLastError(nullptr);
    float x[4] = {1, 2, 3, 4};
    std::atomic<int> queued{0}, destroy_refused{0};
    ringoResult_t group_end = ringoInternalError;
    std::thread grouping([&] {
      ASSERT_EQ(ringoGroupStart(), ringoSuccess);
      ASSERT_EQ(ringoAllReduce(x, x, 4, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess);
      queued = 1;
      while (!destroy_refused) usleep(1000);
      usleep(200000);  // the abort below is waiting for this group by now
      group_end = ringoGroupEnd();
    });
    while (!queued) usleep(1000);
    EXPECT_EQ(ringoCommDestroy(comm), ringoInvalidUsage);
    EXPECT_NE(strstr(ringoGetLastError(nullptr), "another thread's group holds 1 call"), nullptr)
        << ringoGetLastError(nullptr);
    destroy_refused = 1;
    EXPECT_EQ(ringoCommAbort(comm), ringoSuccess) << ringoGetLastError(nullptr);
    grouping.join();
    EXPECT_EQ(group_end, ringoInvalidUsage) << "the aborted communicator's call fails at that ringoGroupEnd";
  });
}

// Destroy while another thread is inside a collective on the communicator waits for that call.
TEST(Destroy, WaitsForACallInAnotherThread) {
  ringo_test::RunProcesses(2, [](int rank, const ringoUniqueId& id, Shared&) {
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoCommInitRank(&comm, 2, id, rank), ringoSuccess) << ringoGetLastError(nullptr);
    std::vector<float> x(1000, static_cast<float>(rank + 1));
    ringoResult_t res = ringoInternalError;
    if (rank == 1) {
      usleep(1500000);  // rank 0's call waits for this one
      res = ringoAllReduce(x.data(), x.data(), x.size(), ringoFloat32, ringoSum, comm, nullptr);
    } else {
      std::thread caller([&] { res = ringoAllReduce(x.data(), x.data(), x.size(), ringoFloat32, ringoSum, comm, nullptr); });
      usleep(300000);  // the caller is blocked in the all-reduce by now
      EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
      caller.join();
      comm = nullptr;
    }
    EXPECT_EQ(res, ringoSuccess);
    EXPECT_EQ(x[999], 3.0f);
    if (comm) {
      EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
    }
  });
}

// A communicator takes one call at a time: another thread's call while one runs (rank 0's
// all-reduce waits for rank 1 here) is refused at once and touches nothing, so the running call
// and the ones after it still match the peer's. Before, the second call drove the same links and
// collective numbers: it waited out RINGO_TIMEOUT or returned success with the data mixed up.
TEST(Overlap, SecondThreadsCallIsRefusedAndTheRunningOneCompletes) {
  Options o;
  o.ringo_timeout_s = 3;
  o.deadline_s = 30;
  ringo_test::RunForked(2, [](Team& team) {
    ringoComm_t comm = team.comms[0];
    const int rank = team.ranks[0];
    std::vector<int32_t> x(1000, rank + 1), y(1000, -1);
    ringoResult_t res = ringoInternalError;
    if (rank == 1) {
      usleep(1000000);  // rank 0's first call waits for this one meanwhile
      res = ringoAllReduce(x.data(), x.data(), x.size(), ringoInt32, ringoSum, comm, nullptr);
    } else {
      std::thread caller([&] { res = ringoAllReduce(x.data(), x.data(), x.size(), ringoInt32, ringoSum, comm, nullptr); });
      usleep(300000);  // the caller is blocked in the all-reduce by now
      const double t0 = Now();
      EXPECT_EQ(ringoAllReduce(y.data(), y.data(), y.size(), ringoInt32, ringoSum, comm, nullptr), ringoInvalidUsage);
      EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("another thread is inside a call"), std::string::npos)
          << ringoGetLastError(nullptr);
      EXPECT_EQ(ringoRecv(y.data(), y.size(), ringoInt32, 1, comm, nullptr), ringoInvalidUsage);
      EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("another thread is inside a call"), std::string::npos)
          << ringoGetLastError(nullptr);
      EXPECT_LT(Now() - t0, 0.5) << "refused at once, not after the running call";
      EXPECT_EQ(y[0], -1) << "a refused call wrote its buffer";
      caller.join();
    }
    EXPECT_EQ(res, ringoSuccess) << ringoGetLastError(comm);
    EXPECT_EQ(x[999], 3);
    ExpectAllReduceWorks(team, "a call refused on rank 0 while another ran");
  }, o);
}

// A group takes the one-call guard of each of its communicators before anything moves: with one of
// them inside another thread's call, the whole group is refused and nothing of it runs (before, the
// other communicator's calls ran, and a call of the other thread could slip in between two of the
// group's and be ordered differently than on the peers).
TEST(Overlap, GroupWithABusyCommunicatorIsRefusedBeforeAnythingMoves) {
  ringo_test::RunProcesses(2, [](int rank, const ringoUniqueId& id, Shared&) {
    setenv("RINGO_TIMEOUT", "10", 1);
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoCommInitRank(&comm, 2, id, rank), ringoSuccess) << ringoGetLastError(nullptr);
    std::vector<int32_t> x(1000, rank + 1);
    ringoResult_t res = ringoInternalError;
    if (rank == 1) {
      usleep(1000000);  // rank 0's caller waits for this one meanwhile
      res = ringoAllReduce(x.data(), x.data(), x.size(), ringoInt32, ringoSum, comm, nullptr);
    } else {
      ringoUniqueId own;
      ringoComm_t alone = nullptr;
      ASSERT_EQ(ringoGetUniqueId(&own), ringoSuccess);
      ASSERT_EQ(ringoCommInitRank(&alone, 1, own, 0), ringoSuccess) << ringoGetLastError(nullptr);
      std::thread caller([&] { res = ringoAllReduce(x.data(), x.data(), x.size(), ringoInt32, ringoSum, comm, nullptr); });
      usleep(300000);  // the caller is blocked in the all-reduce by now
      int32_t y[4] = {1, 2, 3, 4}, z[4] = {-1, -1, -1, -1};
      ASSERT_EQ(ringoGroupStart(), ringoSuccess);
      EXPECT_EQ(ringoAllReduce(y, z, 4, ringoInt32, ringoSum, alone, nullptr), ringoSuccess);
      EXPECT_EQ(ringoAllReduce(y, y, 4, ringoInt32, ringoSum, comm, nullptr), ringoSuccess);
      EXPECT_EQ(ringoGroupEnd(), ringoInvalidUsage);
      EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("another thread is inside a call"), std::string::npos)
          << ringoGetLastError(nullptr);
      EXPECT_EQ(z[0], -1) << "the free communicator's call of the refused group ran";
      ringoCommStats stats{};
      EXPECT_EQ(ringoCommGetStats(alone, &stats), ringoSuccess);
      EXPECT_EQ(stats.collectives, 0u);
      EXPECT_EQ(ringoAllReduce(y, z, 4, ringoInt32, ringoSum, alone, nullptr), ringoSuccess) << ringoGetLastError(alone);
      EXPECT_EQ(z[3], 4);
      EXPECT_EQ(ringoCommDestroy(alone), ringoSuccess);
      caller.join();
    }
    EXPECT_EQ(res, ringoSuccess) << ringoGetLastError(comm);
    EXPECT_EQ(x[999], 3);
    std::vector<int32_t> w(10, rank + 1);  // still in step: nothing of the refused group moved
    EXPECT_EQ(ringoAllReduce(w.data(), w.data(), w.size(), ringoInt32, ringoSum, comm, nullptr), ringoSuccess)
        << ringoGetLastError(comm);
    EXPECT_EQ(w[9], 3);
    EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
  });
}

// ---------------------------------------------------------------------------------------------
// Queries.

void QueriesScenario(Team& team) {
  for (size_t k = 0; k < team.size(); k++) {
    ringoComm_t comm = team.comms[k];
    int v = -7;
    EXPECT_EQ(ringoCommCount(comm, &v), ringoSuccess);
    EXPECT_EQ(v, team.nranks);
    EXPECT_EQ(ringoCommUserRank(comm, &v), ringoSuccess);
    EXPECT_EQ(v, team.ranks[k]);
    EXPECT_EQ(ringoCommCuDevice(comm, &v), ringoSuccess);
    EXPECT_EQ(v, -1) << "a host communicator has no CUDA device";
    ringoCommStats stats;
    EXPECT_EQ(ringoCommGetStats(comm, &stats), ringoSuccess);
    EXPECT_EQ(stats.collectives, 0u) << "a new communicator has completed no collective";
    for (const char* what : {"ringoCommCount", "ringoCommUserRank", "ringoCommCuDevice", "ringoCommGetAsyncError",
                             "ringoCommGetStats"}) {
      const std::string w = what;
      const ringoResult_t res = w == "ringoCommCount"      ? ringoCommCount(comm, nullptr)
                                : w == "ringoCommUserRank" ? ringoCommUserRank(comm, nullptr)
                                : w == "ringoCommCuDevice" ? ringoCommCuDevice(comm, nullptr)
                                : w == "ringoCommGetStats" ? ringoCommGetStats(comm, nullptr)
                                                           : ringoCommGetAsyncError(comm, nullptr);
      EXPECT_EQ(res, ringoInvalidArgument) << what << " with a NULL result pointer";
      EXPECT_GT(strlen(ringoGetLastError(comm)), 0u) << what << ": no message in ringoGetLastError(comm)";
    }
  }
  ExpectAllReduceWorks(team, "the queries");
  for (size_t k = 0; k < team.size(); k++) {
    ringoResult_t async = ringoInternalError;
    EXPECT_EQ(ringoCommGetAsyncError(team.comms[k], &async), ringoSuccess);
    EXPECT_EQ(async, ringoSuccess) << "rank " << team.ranks[k] << " after good work";
    ringoCommStats stats;
    EXPECT_EQ(ringoCommGetStats(team.comms[k], &stats), ringoSuccess);
    EXPECT_EQ(stats.collectives, 1u);
  }
}

TEST(Queries, ForkedRanks) { ringo_test::RunForked(3, QueriesScenario); }
TEST(Queries, OneRank) { ringo_test::RunForked(1, QueriesScenario); }
TEST(Queries, GroupOfTwo) { ringo_test::RunGroup(2, QueriesScenario); }

// ---------------------------------------------------------------------------------------------
// Invalid arguments of the collectives: every rank makes the same rejected calls, and after each
// one a correct all-reduce must still give the right answer.

struct BadCall {
  const char* what;
  std::function<ringoResult_t(ringoComm_t comm, int nranks, float* s, float* r)> call;
};

std::vector<BadCall> BadCalls() {
  const auto t42 = static_cast<ringoDataType_t>(42);
  const auto tneg = static_cast<ringoDataType_t>(-1);
  const auto op42 = static_cast<ringoRedOp_t>(42);
  const auto opneg = static_cast<ringoRedOp_t>(-1);
  const size_t huge = SIZE_MAX;          // count * 4 bytes overflows
  const size_t half = SIZE_MAX / 2 + 1;  // int8: count * nranks overflows once nranks >= 2
  const ringoDataType_t f32 = ringoFloat32;
  using C = ringoComm_t;
  return {
      {"AllReduce NULL sendbuff", [=](C c, int, float*, float* r) { return ringoAllReduce(nullptr, r, 4, f32, ringoSum, c, nullptr); }},
      {"AllReduce NULL recvbuff", [=](C c, int, float* s, float*) { return ringoAllReduce(s, nullptr, 4, f32, ringoSum, c, nullptr); }},
      {"AllReduce dtype 42", [=](C c, int, float* s, float* r) { return ringoAllReduce(s, r, 4, t42, ringoSum, c, nullptr); }},
      {"AllReduce dtype -1", [=](C c, int, float* s, float* r) { return ringoAllReduce(s, r, 4, tneg, ringoSum, c, nullptr); }},
      {"AllReduce op 42", [=](C c, int, float* s, float* r) { return ringoAllReduce(s, r, 4, f32, op42, c, nullptr); }},
      {"AllReduce op -1", [=](C c, int, float* s, float* r) { return ringoAllReduce(s, r, 4, f32, opneg, c, nullptr); }},
      {"AllReduce count SIZE_MAX", [=](C c, int, float* s, float* r) { return ringoAllReduce(s, r, huge, f32, ringoSum, c, nullptr); }},
      {"ReduceScatter NULL sendbuff", [=](C c, int, float*, float* r) { return ringoReduceScatter(nullptr, r, 4, f32, ringoSum, c, nullptr); }},
      {"ReduceScatter NULL recvbuff", [=](C c, int, float* s, float*) { return ringoReduceScatter(s, nullptr, 4, f32, ringoSum, c, nullptr); }},
      {"ReduceScatter dtype 42", [=](C c, int, float* s, float* r) { return ringoReduceScatter(s, r, 4, t42, ringoSum, c, nullptr); }},
      {"ReduceScatter op 42", [=](C c, int, float* s, float* r) { return ringoReduceScatter(s, r, 4, f32, op42, c, nullptr); }},
      {"ReduceScatter count SIZE_MAX", [=](C c, int, float* s, float* r) { return ringoReduceScatter(s, r, huge, f32, ringoSum, c, nullptr); }},
      {"ReduceScatter int8 count*nranks overflow", [=](C c, int, float* s, float* r) { return ringoReduceScatter(s, r, half, ringoInt8, ringoSum, c, nullptr); }},
      {"AllGather NULL sendbuff", [=](C c, int, float*, float* r) { return ringoAllGather(nullptr, r, 4, f32, c, nullptr); }},
      {"AllGather NULL recvbuff", [=](C c, int, float* s, float*) { return ringoAllGather(s, nullptr, 4, f32, c, nullptr); }},
      {"AllGather dtype 42", [=](C c, int, float* s, float* r) { return ringoAllGather(s, r, 4, t42, c, nullptr); }},
      {"AllGather count SIZE_MAX", [=](C c, int, float* s, float* r) { return ringoAllGather(s, r, huge, f32, c, nullptr); }},
      {"AllGather int8 count*nranks overflow", [=](C c, int, float* s, float* r) { return ringoAllGather(s, r, half, ringoInt8, c, nullptr); }},
      {"Broadcast NULL recvbuff", [=](C c, int, float* s, float*) { return ringoBroadcast(s, nullptr, 4, f32, 0, c, nullptr); }},
      {"Broadcast dtype 42", [=](C c, int, float* s, float* r) { return ringoBroadcast(s, r, 4, t42, 0, c, nullptr); }},
      {"Broadcast root -1", [=](C c, int, float* s, float* r) { return ringoBroadcast(s, r, 4, f32, -1, c, nullptr); }},
      {"Broadcast root N", [=](C c, int n, float* s, float* r) { return ringoBroadcast(s, r, 4, f32, n, c, nullptr); }},
      {"Broadcast count SIZE_MAX", [=](C c, int, float* s, float* r) { return ringoBroadcast(s, r, huge, f32, 0, c, nullptr); }},
      {"Reduce NULL sendbuff", [=](C c, int, float*, float* r) { return ringoReduce(nullptr, r, 4, f32, ringoSum, 0, c, nullptr); }},
      {"Reduce dtype 42", [=](C c, int, float* s, float* r) { return ringoReduce(s, r, 4, t42, ringoSum, 0, c, nullptr); }},
      {"Reduce op 42", [=](C c, int, float* s, float* r) { return ringoReduce(s, r, 4, f32, op42, 0, c, nullptr); }},
      {"Reduce root -1", [=](C c, int, float* s, float* r) { return ringoReduce(s, r, 4, f32, ringoSum, -1, c, nullptr); }},
      {"Reduce root N", [=](C c, int n, float* s, float* r) { return ringoReduce(s, r, 4, f32, ringoSum, n, c, nullptr); }},
      {"Reduce count SIZE_MAX", [=](C c, int, float* s, float* r) { return ringoReduce(s, r, huge, f32, ringoSum, 0, c, nullptr); }},
      // Buffers that share bytes without being the in-place layout (on any rank).
      {"AllReduce recvbuff one element past sendbuff", [=](C c, int, float* s, float*) { return ringoAllReduce(s, s + 1, 4, f32, ringoSum, c, nullptr); }},
      {"AllReduce recvbuff one element before sendbuff", [=](C c, int, float* s, float*) { return ringoAllReduce(s + 1, s, 3, f32, ringoSum, c, nullptr); }},
      {"ReduceScatter recvbuff at an odd element of sendbuff", [=](C c, int, float* s, float*) { return ringoReduceScatter(s, s + 1, 2, f32, ringoSum, c, nullptr); }},
      {"ReduceScatter recvbuff straddling sendbuff's start", [=](C c, int, float*, float* r) { return ringoReduceScatter(r + 1, r, 2, f32, ringoSum, c, nullptr); }},
      {"AllGather sendbuff at an odd element of recvbuff", [=](C c, int, float*, float* r) { return ringoAllGather(r + 1, r, 2, f32, c, nullptr); }},
  };
}

// Every rank makes the same rejected calls; after each, a correct all-reduce must still work.
void InvalidArgumentsScenario(Team& team) {
  ringoComm_t comm = team.comms[0];
  const int n = team.nranks;
  std::vector<float> a(static_cast<size_t>(n) * 4, 1.0f), b(static_cast<size_t>(n) * 4, 0.0f);
  for (const BadCall& bad : BadCalls()) {
    const ringoResult_t res = bad.call(comm, n, a.data(), b.data());
    EXPECT_EQ(res, ringoInvalidArgument) << bad.what << " returned " << ResultName(res);
    const char* msg = ringoGetLastError(comm);
    ASSERT_NE(msg, nullptr);
    EXPECT_GT(strlen(msg), 0u) << bad.what << ": no message in ringoGetLastError(comm)";
    if (res == ringoSuccess) return;  // the ranks may now be out of step: stop here
    ExpectAllReduceWorks(team, bad.what);
    if (testing::Test::HasFatalFailure()) return;
  }
  // NULL buffers are fine when there is nothing to move (a real collective, on every rank).
  EXPECT_EQ(ringoAllReduce(nullptr, nullptr, 0, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess);
  EXPECT_EQ(ringoReduceScatter(nullptr, nullptr, 0, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess);
  EXPECT_EQ(ringoAllGather(nullptr, nullptr, 0, ringoFloat32, comm, nullptr), ringoSuccess);
  EXPECT_EQ(ringoBroadcast(nullptr, nullptr, 0, ringoFloat32, n - 1, comm, nullptr), ringoSuccess);
  EXPECT_EQ(ringoReduce(nullptr, nullptr, 0, ringoFloat32, ringoMax, 0, comm, nullptr), ringoSuccess);
  ExpectAllReduceWorks(team, "count-0 collectives with NULL buffers");
  ringoResult_t async = ringoInternalError;
  EXPECT_EQ(ringoCommGetAsyncError(comm, &async), ringoSuccess);
  EXPECT_EQ(async, ringoSuccess) << "rejected calls must not put the communicator in error";
}

TEST(InvalidArguments, EveryCollectiveTwoRanks) { ringo_test::RunForked(2, InvalidArgumentsScenario); }
TEST(InvalidArguments, EveryCollectiveThreeRanks) { ringo_test::RunForked(3, InvalidArgumentsScenario); }

// Buffers only the root uses, NULL on the root itself (one rank, so no rank can disagree).
TEST(InvalidArguments, RootOnlyBuffers) {
  ringo_test::RunForked(1, [](Team& team) {
    float x[4] = {1, 2, 3, 4};
    EXPECT_EQ(ringoBroadcast(nullptr, x, 4, ringoFloat32, 0, team.comms[0], nullptr), ringoInvalidArgument)
        << "Broadcast with a NULL sendbuff on the root";
    EXPECT_EQ(ringoReduce(x, nullptr, 4, ringoFloat32, ringoSum, 0, team.comms[0], nullptr), ringoInvalidArgument)
        << "Reduce with a NULL recvbuff on the root";
    EXPECT_GT(strlen(ringoGetLastError(team.comms[0])), 0u);
    EXPECT_EQ(ringoBroadcast(x, x + 1, 3, ringoFloat32, 0, team.comms[0], nullptr), ringoInvalidArgument)
        << "Broadcast on the root with overlapping buffers";
    EXPECT_EQ(ringoReduce(x + 1, x, 3, ringoFloat32, ringoSum, 0, team.comms[0], nullptr), ringoInvalidArgument)
        << "Reduce on the root with overlapping buffers";
    EXPECT_NE(std::string(ringoGetLastError(team.comms[0])).find("overlap"), std::string::npos)
        << ringoGetLastError(team.comms[0]);
    ExpectAllReduceWorks(team, "root-only NULL buffers");
  });
}

// A call rejected on one rank only moves nothing and uses no sequence number: the next
// collective still matches the other rank's.
TEST(InvalidArguments, RejectedOnOneRankOnly) {
  ringo_test::RunForked(2, [](Team& team) {
    std::vector<float> a(8, 1.0f), b(8, 0.0f);
    if (team.ranks[0] == 0) {
      for (const BadCall& bad : BadCalls())
        EXPECT_EQ(bad.call(team.comms[0], team.nranks, a.data(), b.data()), ringoInvalidArgument) << bad.what;
    }
    ExpectAllReduceWorks(team, "calls rejected on rank 0 only");
  });
}

// ---------------------------------------------------------------------------------------------
// Rendezvous refusals: a forged id and a duplicate rank end in an error within RINGO_TIMEOUT,
// never a hang, and the legitimate ranks of the id still form their communicator.

// This process's `rank` of a two-rank communicator (the other rank is another process doing the
// same): a correct all-reduce must work on it, then it is destroyed.
void ExpectTwoRankCommWorks(ringoComm_t comm, int rank, const char* after) {
  Team team;
  team.nranks = 2;
  team.ranks = {rank};
  team.comms = {comm};
  ExpectAllReduceWorks(team, after);
  EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
}

Options ShortTimeout() {
  Options o;
  o.ringo_timeout_s = 3;
  o.deadline_s = 40;
  o.grace_s = 15;
  return o;
}

TEST(Rendezvous, ForgedSecretIsRefused) {
  ringo_test::ScopedEnv timeout("RINGO_TIMEOUT", "3");  // for the root in this process
  ringo_test::RunProcesses(3, [](int index, const ringoUniqueId& id, Shared&) {
    ringoComm_t comm = nullptr;
    if (index < 2) {
      ASSERT_EQ(ringoCommInitRank(&comm, 2, id, index), ringoSuccess)
          << "legitimate rank " << index << ": " << ringoGetLastError(nullptr);
      ExpectTwoRankCommWorks(comm, index, "a forged join attempt");
      return;
    }
    // The intruder: same id with bytes 32..127 (the secret among them) changed, claiming rank 1.
    ringoUniqueId forged = id;
    for (size_t b = 32; b < RINGO_UNIQUE_ID_BYTES; b++) forged.internal[b] = static_cast<char>(forged.internal[b] ^ 0x5a);
    const double t0 = Now();
    const ringoResult_t res = ringoCommInitRank(&comm, 2, forged, 1);
    const double took = Now() - t0;
    EXPECT_NE(res, ringoSuccess) << "a rank with a forged id joined";
    EXPECT_LT(took, 3.0 + 2.0) << "refusing a forged id took " << took << " s with RINGO_TIMEOUT=3";
    EXPECT_GT(strlen(ringoGetLastError(nullptr)), 0u);
    if (res == ringoSuccess) ringoCommAbort(comm);
  }, ShortTimeout());
}

TEST(Rendezvous, DuplicateRankIsRefused) {
  ringo_test::ScopedEnv timeout("RINGO_TIMEOUT", "3");
  // Processes 0 and 2 both claim rank 0 of 2; process 1 is rank 1. Exactly one claimant of
  // rank 0 may join (whichever the root saw first); the other gets an error in bounded time.
  ringo_test::RunProcesses(3, [](int index, const ringoUniqueId& id, Shared& shared) {
    const int rank = index == 1 ? 1 : 0;
    ringoComm_t comm = nullptr;
    const double t0 = Now();
    const ringoResult_t res = ringoCommInitRank(&comm, 2, id, rank);
    EXPECT_LT(Now() - t0, 3.0 + 2.0) << "process " << index << " waited past RINGO_TIMEOUT=3";
    shared.Word(index, 0) = 1 + static_cast<uint64_t>(res);
    ASSERT_TRUE(shared.Barrier(30));
    const bool joined0 = shared.Word(0, 0) == 1, joined2 = shared.Word(2, 0) == 1;
    if (index == 1) {
      EXPECT_EQ(res, ringoSuccess) << "the only rank 1 was refused: " << ringoGetLastError(nullptr);
      EXPECT_NE(joined0, joined2) << "exactly one of the two rank-0 claimants must join (process 0 "
                                  << ResultName(static_cast<ringoResult_t>(shared.Word(0, 0) - 1))
                                  << ", process 2 " << ResultName(static_cast<ringoResult_t>(shared.Word(2, 0) - 1))
                                  << ")";
    }
    if (res != ringoSuccess) {
      EXPECT_GT(strlen(ringoGetLastError(nullptr)), 0u);
      return;
    }
    if (index != 1 && joined0 && joined2) {  // both joined: nobody to pair with reliably
      ringoCommAbort(comm);
      return;
    }
    ExpectTwoRankCommWorks(comm, rank, "a duplicate join attempt");
  }, ShortTimeout());
}

// A rank of the job refused at the join (another nranks, a rank already taken) is why the ranks
// already in wait: when their join times out, the root's message names that refusal. Before, it said
// only "missing ranks: 1", though that rank had come and been sent away.
TEST(Rendezvous, JoinTimeoutNamesTheRefusedClaim) {
  ringo_test::ScopedEnv timeout("RINGO_TIMEOUT", "1");  // for the root in this process
  struct Case { int nranks[2], rank[2]; const char* why; };
  for (const Case& c : {Case{{2, 3}, {0, 1}, "rank 1: nranks 3 disagrees with nranks 2"},
                        Case{{2, 2}, {0, 0}, "rank 0: rank 0 already joined"}}) {
    SCOPED_TRACE(c.why);
    Options o;
    o.ringo_timeout_s = 1;
    o.deadline_s = 20;
    ringo_test::RunProcesses(2, [&c](int index, const ringoUniqueId& id, Shared&) {
      if (index == 1) usleep(300000);  // process 0 joins first and fixes nranks
      ringoComm_t comm = nullptr;
      const double t0 = Now();
      const ringoResult_t res = ringoCommInitRank(&comm, c.nranks[index], id, c.rank[index]);
      const std::string msg = ringoGetLastError(nullptr);
      EXPECT_LT(Now() - t0, 1.0 + 1.5) << msg;
      if (index == 1) {
        EXPECT_EQ(res, ringoRemoteError) << msg;
        return;
      }
      EXPECT_EQ(res, ringoTimeout) << msg;
      EXPECT_NE(msg.find("missing ranks: 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string("1 join with this id refused meanwhile, the last: ") + c.why), std::string::npos)
          << msg;
    }, o);
  }
}

// ---------------------------------------------------------------------------------------------
// The harness itself: failures, hangs and crashes of children reach the parent.

TEST(Harness, ForwardsChildFailuresWithTheirRank) {
  const ringo_test::JobReport report = ringo_test::RunProcessesCollect(3, [](int index, const ringoUniqueId&, Shared&) {
    if (index == 1) {
      EXPECT_EQ(1 + 1, 3) << "marker-from-child";
    }
  }, NoId());
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_EQ(report.failures[0].rank, 1);
  EXPECT_NE(report.failures[0].message.find("marker-from-child"), std::string::npos);
  EXPECT_NE(report.failures[0].file.find("test_api.cc"), std::string::npos);
  EXPECT_GT(report.failures[0].line, 0);
  EXPECT_TRUE(report.problems.empty());
}

TEST(Harness, KillsAndNamesAHungChild) {
  Options o = NoId();
  o.deadline_s = 1;
  const double t0 = Now();
  const ringo_test::JobReport report = ringo_test::RunProcessesCollect(2, [](int index, const ringoUniqueId&, Shared&) {
    if (index == 1) for (;;) pause();
  }, o);
  EXPECT_LT(Now() - t0, 10.0);
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_NE(report.problems[0].find("hung"), std::string::npos) << report.problems[0];
  EXPECT_NE(report.problems[0].find("process 1"), std::string::npos) << report.problems[0];
  EXPECT_EQ(report.problems[0].find("process 0"), std::string::npos) << report.problems[0];
}

TEST(Harness, NamesTheSignalThatKilledAChild) {
  const ringo_test::JobReport report = ringo_test::RunProcessesCollect(2, [](int index, const ringoUniqueId&, Shared&) {
    if (index == 0) raise(SIGTERM);
  }, NoId());
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_NE(report.problems[0].find("process 0 was killed by signal 15"), std::string::npos) << report.problems[0];
}

TEST(Harness, BarrierSharesWordsAndNoticesALeaver) {
  ringo_test::RunProcesses(3, [](int index, const ringoUniqueId&, Shared& shared) {
    shared.Word(index, 7) = 100 + static_cast<uint64_t>(index);
    ASSERT_TRUE(shared.Barrier(20));
    for (int r = 0; r < 3; r++) EXPECT_EQ(shared.Word(r, 7), 100u + static_cast<uint64_t>(r));
    ASSERT_TRUE(shared.Barrier(20));
    if (index == 0) return;  // leaves: the next barrier can never complete
    const double t0 = Now();
    EXPECT_FALSE(shared.Barrier(20));
    EXPECT_LT(Now() - t0, 10.0) << "the barrier waited for a participant that had left";
  }, NoId());
}

}  // namespace
