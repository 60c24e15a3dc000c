// test_spin.cc — RINGO_SPIN's default (src/comm/comm.c): waiters poll RINGO_SPIN_FIT times before
// they yield where a host's ranks each have a CPU, never where they outnumber the CPUs or the host is
// pretended (RINGO_HOSTNAME); a value set is kept. Where they outnumber the CPUs the communicator is
// crowded: its waits keep yielding however slow a yield. Run: make test (build/test/test_spin).
#include <gtest/gtest.h>
#include <sched.h>

#include <string>
#include <utility>
#include <vector>

#include "harness.h"
#include "internals.h"
#include "ringo.h"

using ringo_test::Options;
using ringo_test::RunForked;
using ringo_test::RunProcesses;
using ringo_test::Team;

namespace {

constexpr int kSpinFit = 2000;  // RINGO_SPIN_FIT, core/core.h

Options WithEnv(std::vector<std::pair<std::string, std::string>> env) {
  Options o;
  o.env = std::move(env);
  return o;
}

// The CPUs this process (and the ranks it forks) may run on.
int Cpus() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

// Runs fn with this process, and so the ranks it forks, bound to the first `keep` CPUs it may use.
template <typename Fn>
void WithCpus(int keep, Fn fn) {
  cpu_set_t old, fewer;
  ASSERT_EQ(0, sched_getaffinity(0, sizeof old, &old));
  CPU_ZERO(&fewer);
  for (int c = 0, kept = 0; c < CPU_SETSIZE && kept < keep; c++)
    if (CPU_ISSET(c, &old)) CPU_SET(c, &fewer), kept++;
  ASSERT_EQ(0, sched_setaffinity(0, sizeof fewer, &fewer));
  fn();
  ASSERT_EQ(0, sched_setaffinity(0, sizeof old, &old));
}

TEST(Spin, PollsWhereTheHostsRanksFitItsCpus) {
  if (Cpus() < 2) GTEST_SKIP() << "one CPU: two ranks never fit";
  WithCpus(2, [] {
    RunForked(2, [](Team& t) {
      EXPECT_EQ(kSpinFit, ringo_test_spin(t.comms[0]));
      EXPECT_EQ(0, ringo_test_crowded(t.comms[0]));
    }, WithEnv({{"RINGO_SPIN", ""}}));
  });
}

TEST(Spin, YieldsAtOnceWhereRanksOutnumberCpus) {
  WithCpus(1, [] {
    RunForked(2, [](Team& t) {
      EXPECT_EQ(0, ringo_test_spin(t.comms[0]));
      EXPECT_EQ(1, ringo_test_crowded(t.comms[0]));
    }, WithEnv({{"RINGO_SPIN", ""}}));
  });
  if (Cpus() >= 2) {
    WithCpus(2, [] {
      RunForked(3, [](Team& t) {
        EXPECT_EQ(0, ringo_test_spin(t.comms[0]));
        EXPECT_EQ(1, ringo_test_crowded(t.comms[0]));
      }, WithEnv({{"RINGO_SPIN", ""}}));
    });
  }
}

// The default's question: can each rank have a CPU of its own among those it may run on?
TEST(Spin, RanksFitWhenEachCanHaveItsOwnCpu) {
  const int distinct[2][9] = {{0, -1}, {1, -1}};  // pinned to two cores, as mpirun binds them
  const int same[2][9] = {{3, -1}, {3, -1}};  // both pinned to one core
  const int shared_set[2][9] = {{0, 1, -1}, {0, 1, -1}};  // two ranks, two CPUs between them
  const int three_on_two[3][9] = {{0, 1, -1}, {0, 1, -1}, {0, 1, -1}};
  const int pinned_first[2][9] = {{0, 1, -1}, {0, -1}};  // the pinned one takes 0, the other 1
  const int crowded[3][9] = {{0, -1}, {0, -1}, {0, 1, 2, -1}};  // two ranks on CPU 0, however the third goes
  const int high[2][9] = {{1000, -1}, {1001, -1}};  // CPUs in the last word of the mask
  const int none[2][9] = {{-1}, {0, -1}};  // a rank whose CPUs are unknown: not known (no polling, not crowded)
  EXPECT_EQ(1, ringo_test_cpus_fit(distinct, 2));
  EXPECT_EQ(0, ringo_test_cpus_fit(same, 2));
  EXPECT_EQ(1, ringo_test_cpus_fit(shared_set, 2));
  EXPECT_EQ(0, ringo_test_cpus_fit(three_on_two, 3));
  EXPECT_EQ(1, ringo_test_cpus_fit(pinned_first, 2));
  EXPECT_EQ(0, ringo_test_cpus_fit(crowded, 3));
  EXPECT_EQ(1, ringo_test_cpus_fit(high, 2));
  EXPECT_EQ(-1, ringo_test_cpus_fit(none, 2));
}

// Ranks each pinned to a core of their own poll (mpirun's default binding at N <= cores); ranks
// pinned to one core do not. Each process pins itself before it makes its communicator.
TEST(Spin, PinnedRanksPollOnlyOnDistinctCores) {
  if (Cpus() < 2) GTEST_SKIP() << "one CPU: no two distinct cores to pin to";
  cpu_set_t allowed;
  ASSERT_EQ(0, sched_getaffinity(0, sizeof allowed, &allowed));
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE && cores.size() < 2; c++)
    if (CPU_ISSET(c, &allowed)) cores.push_back(c);
  for (const bool distinct : {true, false}) {
    RunProcesses(2, [&](int rank, const ringoUniqueId& id, ringo_test::Shared&) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cores[distinct ? rank : 0], &one);
      ASSERT_EQ(0, sched_setaffinity(0, sizeof one, &one));
      ringoComm_t comm = nullptr;
      ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, 2, id, rank));
      EXPECT_EQ(distinct ? kSpinFit : 0, ringo_test_spin(comm)) << (distinct ? "distinct cores" : "one core");
      EXPECT_EQ(distinct ? 0 : 1, ringo_test_crowded(comm)) << (distinct ? "distinct cores" : "one core");
      EXPECT_EQ(ringoSuccess, ringoCommDestroy(comm));
    }, WithEnv({{"RINGO_SPIN", ""}}));
  }
}

TEST(Spin, YieldsAtOnceOnPretendedHosts) {
  // Not known to be crowded either: their waits still stop yielding to a busy stranger.
  RunForked(2, [](Team& t) {
    EXPECT_EQ(0, ringo_test_spin(t.comms[0]));
    EXPECT_EQ(0, ringo_test_crowded(t.comms[0]));
  }, WithEnv({{"RINGO_SPIN", ""}, {"RINGO_HOSTNAME", "pretended-host"}}));
}

TEST(Spin, ASetValueIsKept) {
  const int crowded = Cpus() < 2;  // two ranks on one CPU
  for (const char* v : {"0", "5"}) {
    RunForked(2, [v, crowded](Team& t) {
      EXPECT_EQ(std::stoi(v), ringo_test_spin(t.comms[0]));
      EXPECT_EQ(crowded, ringo_test_crowded(t.comms[0])) << "the CPUs decide, not RINGO_SPIN";
    },
              WithEnv({{"RINGO_SPIN", v}}));
  }
}

}  // namespace
