// test_spin.cc — RINGO_SPIN's default (src/comm/comm.c): waiters poll RINGO_SPIN_FIT times before
// they yield where a host's ranks each have a CPU, never where they outnumber the CPUs or the host is
// pretended (RINGO_HOSTNAME); a value set is kept. Run: make test (build/test/test_spin).
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
    RunForked(2, [](Team& t) { EXPECT_EQ(kSpinFit, ringo_test_spin(t.comms[0])); }, WithEnv({{"RINGO_SPIN", ""}}));
  });
}

TEST(Spin, YieldsAtOnceWhereRanksOutnumberCpus) {
  WithCpus(1, [] {
    RunForked(2, [](Team& t) { EXPECT_EQ(0, ringo_test_spin(t.comms[0])); }, WithEnv({{"RINGO_SPIN", ""}}));
  });
  if (Cpus() >= 2) {
    WithCpus(2, [] {
      RunForked(3, [](Team& t) { EXPECT_EQ(0, ringo_test_spin(t.comms[0])); }, WithEnv({{"RINGO_SPIN", ""}}));
    });
  }
}

TEST(Spin, YieldsAtOnceOnPretendedHosts) {
  RunForked(2, [](Team& t) { EXPECT_EQ(0, ringo_test_spin(t.comms[0])); },
            WithEnv({{"RINGO_SPIN", ""}, {"RINGO_HOSTNAME", "pretended-host"}}));
}

TEST(Spin, ASetValueIsKept) {
  for (const char* v : {"0", "5"}) {
    RunForked(2, [v](Team& t) { EXPECT_EQ(std::stoi(v), ringo_test_spin(t.comms[0])); },
              WithEnv({{"RINGO_SPIN", v}}));
  }
}

}  // namespace
