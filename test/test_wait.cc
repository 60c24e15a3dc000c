// test_wait.cc — the one waiter (src/core/wait.c): deadline and abort, the yield-then-sleep policy,
// the liveness schedule, backoff, the network hook, and process liveness. Run: make test.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/wait.h"

namespace {

ringo_wait_policy Policy() {
  ringo_wait_policy p{};
  p.timeout_s = 10.0;
  p.sleep_ns = 1000;
  p.net = RINGO_WAIT_NET_NONE;
  return p;
}

TEST(Waiter, DeadlineCountsFromTheWaitsStart) {
  ringo_wait_policy p = Policy();
  ringo_waiter w;
  ringo_waiter_start(&w, &p, 100.0);
  EXPECT_EQ(ringo_waiter_check(&w, 109.9), RINGO_WAIT_GO_ON);
  EXPECT_EQ(ringo_waiter_check(&w, 110.0), RINGO_WAIT_TIMED_OUT);
  ringo_waiter_start(&w, &p, 200.0);  // a later wait has its own RINGO_TIMEOUT
  EXPECT_EQ(ringo_waiter_check(&w, 209.9), RINGO_WAIT_GO_ON);
  EXPECT_EQ(ringo_waiter_check(&w, 210.0), RINGO_WAIT_TIMED_OUT);
}

TEST(Waiter, AbortWinsOverTheDeadline) {
  atomic_int flag;
  atomic_init(&flag, 0);
  ringo_wait_policy p = Policy();
  p.abort_flag = &flag;
  ringo_waiter w;
  ringo_waiter_start(&w, &p, 0.0);
  EXPECT_EQ(ringo_waiter_check(&w, 1.0), RINGO_WAIT_GO_ON);
  atomic_store(&flag, 1);
  EXPECT_EQ(ringo_waiter_check(&w, 1.0), RINGO_WAIT_ABORTED);
  EXPECT_EQ(ringo_waiter_check(&w, 20.0), RINGO_WAIT_ABORTED);
}

TEST(Waiter, YieldsAtLeastMinYieldsTimesThenAsksForASleep) {
  ringo_wait_policy p = Policy();
  p.min_yields = 3;
  ringo_waiter w;
  ringo_waiter_start(&w, &p, 0.0);
  int yields = 0;
  // ringo_yield may refuse (a stranger holds the core): then the waiter says sleep early, never later.
  for (int i = 0; i < 3; i++) yields += ringo_waiter_yield(&w, 0.0);
  EXPECT_LE(yields, 3);
  EXPECT_EQ(ringo_waiter_yield(&w, 0.0), 0) << "past min_yields and yield_s the caller must sleep";
}

TEST(Waiter, YieldsForYieldSecondsFromTheStart) {
  ringo_wait_policy p = Policy();
  p.yield_s = 1.0;
  ringo_waiter w;
  ringo_waiter_start(&w, &p, 50.0);
  for (int i = 0; i < 100; i++) (void)ringo_waiter_yield(&w, 50.5);  // within the yield phase: no sleep asked
  EXPECT_EQ(ringo_waiter_yield(&w, 51.0), 0);
}

TEST(Waiter, SleepIsCutToTheTimeLeftAndBacksOffToItsBound) {
  ringo_wait_policy p = Policy();
  p.timeout_s = 1.0;
  p.sleep_ns = 4000;
  p.max_sleep_ns = 16000;
  ringo_waiter w;
  ringo_waiter_start(&w, &p, 0.0);
  EXPECT_EQ(ringo_waiter_sleep_ns(&w, 0.0), 4000);
  EXPECT_EQ(ringo_waiter_sleep_ns(&w, 1.0 - 1e-6), 1001) << "one microsecond left: sleep no longer";
  ringo_waiter_sleep(&w, 0.0);
  EXPECT_EQ(ringo_waiter_sleep_ns(&w, 0.0), 8000);
  ringo_waiter_sleep(&w, 0.0);
  ringo_waiter_sleep(&w, 0.0);
  EXPECT_EQ(ringo_waiter_sleep_ns(&w, 0.0), 16000);
}

TEST(Waiter, LivenessIsDueOncePerPeriod) {
  ringo_wait_policy p = Policy();
  p.liveness_s = 0.1;
  ringo_waiter w;
  ringo_waiter_start(&w, &p, 0.0);
  EXPECT_FALSE(ringo_waiter_liveness_due(&w, 0.05));
  EXPECT_TRUE(ringo_waiter_liveness_due(&w, 0.1));
  EXPECT_FALSE(ringo_waiter_liveness_due(&w, 0.15));
  EXPECT_TRUE(ringo_waiter_liveness_due(&w, 0.21));
  p.liveness_s = 0;  // never
  ringo_waiter_start(&w, &p, 0.0);
  EXPECT_FALSE(ringo_waiter_liveness_due(&w, 1e9));
}

int hook_waiting_calls, hook_progress_calls, hook_last_own;
int HookWaiting(int own) {
  hook_waiting_calls++;
  hook_last_own = own;
  return 1;
}
void HookProgress(int own) {
  hook_progress_calls++;
  hook_last_own = own;
}

TEST(Waiter, NetworkTurnsGoThroughTheRegisteredHookAsThePolicySays) {
  // No MPI link lives in this process, so no other hook is registered here.
  static const ringo_net_hook hook = {HookWaiting, HookProgress};
  ringo_wait_register_net(&hook);
  ringo_wait_policy p = Policy();
  p.min_yields = 100;
  p.sleep_ns = 5000000;
  p.net_sleep_ns = 20000;
  ringo_waiter w;
  p.net = RINGO_WAIT_NET_OWN;
  ringo_waiter_start(&w, &p, 0.0);
  (void)ringo_waiter_yield(&w, 0.0);
  EXPECT_EQ(hook_progress_calls, 1);
  EXPECT_EQ(hook_last_own, 1);
  EXPECT_EQ(ringo_waiter_sleep_ns(&w, 0.0), 20000) << "a wait that takes turns naps briefly";
  p.net = RINGO_WAIT_NET_SHARED;
  ringo_waiter_start(&w, &p, 0.0);
  (void)ringo_waiter_yield(&w, 0.0);
  EXPECT_EQ(hook_progress_calls, 2);
  EXPECT_EQ(hook_last_own, 0);
  p.net = RINGO_WAIT_NET_NONE;  // MPI's own wait: no other turn, the plain sleep
  ringo_waiter_start(&w, &p, 0.0);
  (void)ringo_waiter_yield(&w, 0.0);
  EXPECT_EQ(hook_progress_calls, 2);
  EXPECT_EQ(ringo_waiter_sleep_ns(&w, 0.0), 5000000);
  ringo_wait_register_net(nullptr);
  EXPECT_EQ(ringo_wait_net_waiting(1), 0);
}

TEST(Waiter, PidGoneForAReapedChildAndAZombieNotForALiveOne) {
  EXPECT_FALSE(ringo_wait_pid_gone(getpid()));
  const pid_t zombie = fork();
  ASSERT_GE(zombie, 0);
  if (zombie == 0) _exit(0);
  // Not reaped yet: a zombie, which will never move a counter again.
  for (int i = 0; i < 200 && !ringo_wait_pid_gone(zombie); i++) usleep(5000);
  EXPECT_TRUE(ringo_wait_pid_gone(zombie));
  ASSERT_EQ(waitpid(zombie, nullptr, 0), zombie);
  EXPECT_TRUE(ringo_wait_pid_gone(zombie));
  const pid_t live = fork();
  ASSERT_GE(live, 0);
  if (live == 0) {
    pause();
    _exit(0);
  }
  EXPECT_FALSE(ringo_wait_pid_gone(live));
  kill(live, SIGKILL);
  waitpid(live, nullptr, 0);
}

}  // namespace
