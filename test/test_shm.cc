// test_shm.cc — the shm link transport: streaming between processes and threads, an oversubscribed
// ring, timeouts, abort, peer death, hostile link info. Needs only src/transport/shm.c + core.
// Run: make test, or build/test/test_shm alone (--gtest_filter=Shm.* as usual).
#include <gtest/gtest.h>

#include <atomic>
extern "C" {
#include "core/core.h"
}
#include "core/wait.h"
#include "transport/transport.h"  // has its own extern "C" and maps atomic_int to std::atomic_int

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

const struct ringo_transport& T = ringo_transport_shm;

double now_s() { return ringo_now(); }

ringo_link_params make_params(size_t slot_bytes, int nslots, double timeout_s, int self, int peer,
                              const atomic_int* abort_flag = nullptr, int spin = 2000) {
  ringo_link_params p;
  memset(&p, 0, sizeof p);
  p.slot_bytes = slot_bytes;
  p.nslots = nslots;
  p.timeout_s = timeout_s;
  p.spin = spin;
  p.abort_flag = abort_flag;
  p.self_rank = self;
  p.peer_rank = peer;
  return p;
}

// Inside a forked child gtest assertions cannot report: print the reason and fail the exit code.
#define CHILD_REQUIRE(cond, ...)                                           \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "[child %d] %s:%d: ", (int)getpid(), __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                        \
      fputc('\n', stderr);                                                 \
      return 1;                                                            \
    }                                                                      \
  } while (0)
#define CHILD_OK(call) \
  CHILD_REQUIRE((call) == ringoSuccess, "%s failed: %s", #call, ringo_thread_last_error())

bool write_full(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}
bool read_full(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { EXPECT_EQ(0, pipe(fd)); }
  ~Pipe() { close_both(); }
  void close_both() {
    for (int& f : fd)
      if (f >= 0) close(f), f = -1;
  }
  int r() const { return fd[0]; }
  int w() const { return fd[1]; }
};

// Runs fn in a forked child whose exit status is fn's return value.
pid_t spawn(const std::function<int()>& fn) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = fn();
    fflush(stderr);
    _exit(rc);
  }
  return pid;
}

// Waits for every child; past the deadline kills those left, so a hang is a failure, not a
// hung suite. Returns each exit code (128 + signal when killed, -1 when the deadline hit).
std::vector<int> wait_all(const std::vector<pid_t>& pids, double deadline_s) {
  std::vector<int> codes(pids.size(), -2);
  double end = now_s() + deadline_s;
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); i++) {
      if (codes[i] != -2) continue;
      int st = 0;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        left--;
      }
    }
    if (left == 0) break;
    if (now_s() > end) {
      for (size_t i = 0; i < pids.size(); i++)
        if (codes[i] == -2) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], nullptr, 0);
          codes[i] = -1;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return codes;
}

// Segments in /dev/shm that a process with this pid created.
int count_segments(pid_t pid) {
  std::string prefix = "ringo-" + std::to_string(pid) + "-";
  int n = 0;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d))
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) n++;
  closedir(d);
  return n;
}

// ---- the slice stream both ends agree on ----
size_t slice_len(int i, size_t slot) {
  if (i % 97 == 0) return slot;
  if (i % 89 == 0) return 0;
  return (size_t)((unsigned)i * 7919u) % (slot + 1);
}
unsigned char pattern(int i, size_t j) { return (unsigned char)(i * 131 + j * 7 + (j >> 8)); }

// Writes slice i into the acquired slot s; returns its length.
size_t fill_slice(void* s, int i, size_t slot) {
  size_t n = slice_len(i, slot);
  unsigned char* b = static_cast<unsigned char*>(s);
  for (size_t j = 0; j < n; j++) b[j] = pattern(i, j);
  return n;
}

int stream_send(ringo_link* l, size_t slot, int count) {
  for (int i = 0; i < count; i++) {
    void* s = nullptr;
    CHILD_OK(T.send_acquire(l, &s));
    CHILD_OK(T.send_post(l, fill_slice(s, i, slot)));
  }
  return 0;
}

int check_slice(const void* s, size_t got, int i, size_t slot) {
  size_t n = slice_len(i, slot);
  CHILD_REQUIRE(got == n, "slice %d: %zu bytes, expected %zu", i, got, n);
  const unsigned char* b = static_cast<const unsigned char*>(s);
  for (size_t j = 0; j < n; j++)
    CHILD_REQUIRE(b[j] == pattern(i, j), "slice %d byte %zu: %u, expected %u", i, j, b[j], pattern(i, j));
  return 0;
}

int stream_recv(ringo_link* l, size_t slot, int count) {
  for (int i = 0; i < count; i++) {
    const void* s = nullptr;
    size_t got = 0;
    CHILD_OK(T.recv_acquire(l, &s, &got));
    if (check_slice(s, got, i, slot) != 0) return 1;
    CHILD_OK(T.recv_release(l));
  }
  return 0;
}

// ---- two processes: receiver creates, sender attaches, info and ack travel through pipes ----
int receiver_main(const ringo_link_params& p, int info_w, int ack_r, const std::function<int(ringo_link*)>& body) {
  ringo_link* l = nullptr;
  char info[RINGO_LINK_INFO_BYTES];
  CHILD_OK(T.recv_setup(&p, &l, info));
  CHILD_REQUIRE(write_full(info_w, info, sizeof info), "cannot pass the link info");
  char ack;
  CHILD_REQUIRE(read_full(ack_r, &ack, 1), "sender never attached");
  CHILD_OK(T.setup_done(l));
  int rc = body(l);
  T.close(l);
  return rc;
}

int sender_main(const ringo_link_params& p, int info_r, int ack_w, const std::function<int(ringo_link*)>& body) {
  char info[RINGO_LINK_INFO_BYTES];
  CHILD_REQUIRE(read_full(info_r, info, sizeof info), "no link info");
  ringo_link* l = nullptr;
  CHILD_OK(T.send_connect(&p, info, &l));
  CHILD_OK(T.setup_done(l));
  CHILD_REQUIRE(write_full(ack_w, "k", 1), "cannot ack");
  int rc = body(l);
  T.close(l);
  return rc;
}

TEST(Shm, TwoProcessesStreamEveryByte) {
  const size_t slot = 5000;  // not a page multiple, so the stride padding is exercised
  const int count = 10000;
  for (int nslots : {4, 8}) {
    Pipe info, ack;
    ringo_link_params rp = make_params(slot, nslots, 20.0, 1, 0), sp = make_params(slot, nslots, 20.0, 0, 1);
    pid_t recv = spawn([&] {
      return receiver_main(rp, info.w(), ack.r(), [&](ringo_link* l) { return stream_recv(l, slot, count); });
    });
    pid_t send = spawn([&] {
      return sender_main(sp, info.r(), ack.w(), [&](ringo_link* l) { return stream_send(l, slot, count); });
    });
    double t0 = now_s();
    std::vector<int> codes = wait_all({recv, send}, 30.0);
    EXPECT_EQ(0, codes[0]) << "receiver, nslots " << nslots;
    EXPECT_EQ(0, codes[1]) << "sender, nslots " << nslots;
    printf("[ shm ] nslots %d: %d slices in %.3f s\n", nslots, count, now_s() - t0);
    EXPECT_EQ(0, count_segments(recv)) << "segment left in /dev/shm";
    EXPECT_EQ(0, count_segments(send));
    EXPECT_EQ(0, count_segments(getpid()));
  }
}

TEST(Shm, TwoThreadsStreamEveryByte) {
  const size_t slot = 3000;
  const int count = 10000;
  for (int nslots : {4, 8}) {
    ringo_link_params rp = make_params(slot, nslots, 20.0, 1, 0), sp = make_params(slot, nslots, 20.0, 0, 1);
    ringo_link *rl = nullptr, *sl = nullptr;
    char info[RINGO_LINK_INFO_BYTES];
    ASSERT_EQ(ringoSuccess, T.recv_setup(&rp, &rl, info)) << ringo_thread_last_error();
    EXPECT_EQ(1, count_segments(getpid()));
    ASSERT_EQ(ringoSuccess, T.send_connect(&sp, info, &sl)) << ringo_thread_last_error();
    ASSERT_EQ(ringoSuccess, T.setup_done(sl));
    ASSERT_EQ(ringoSuccess, T.setup_done(rl));
    EXPECT_EQ(0, count_segments(getpid())) << "setup_done must unlink the name";
    // Every wait is bounded by the 20 s timeout, so a bug ends these threads with an error.
    int send_rc = -1, recv_rc = -1;
    std::thread sender([&] { send_rc = stream_send(sl, slot, count); });
    std::thread receiver([&] { recv_rc = stream_recv(rl, slot, count); });
    sender.join();
    receiver.join();
    EXPECT_EQ(0, send_rc);
    EXPECT_EQ(0, recv_rc);
    T.close(sl);
    T.close(rl);
  }
}

// ---- a ring of 8 processes on 2 cores: rank r receives from r-1 and sends to r+1 ----
int ring_rank(int r, int n, std::vector<Pipe>& info, std::vector<Pipe>& ack, size_t slot, int count) {
  // info[r] carries rank r's receiver description to rank r-1; ack[r] says rank r-1 attached.
  ringo_link_params rp = make_params(slot, 4, 20.0, r, (r + n - 1) % n);
  ringo_link_params sp = make_params(slot, 4, 20.0, r, (r + 1) % n);
  ringo_link *in = nullptr, *out = nullptr;
  char buf[RINGO_LINK_INFO_BYTES], a;
  CHILD_OK(T.recv_setup(&rp, &in, buf));
  CHILD_REQUIRE(write_full(info[r].w(), buf, sizeof buf), "info write");
  CHILD_REQUIRE(read_full(info[(r + 1) % n].r(), buf, sizeof buf), "info read");
  CHILD_OK(T.send_connect(&sp, buf, &out));
  CHILD_REQUIRE(write_full(ack[(r + 1) % n].w(), "k", 1), "ack write");
  CHILD_REQUIRE(read_full(ack[r].r(), &a, 1), "ack read");
  CHILD_OK(T.setup_done(in));
  CHILD_OK(T.setup_done(out));
  int posted = 0, got = 0;
  while (got < count) {
    // Rank 0 injects slices, keeping at most 16 in flight (the ring holds 4 per link); the
    // others check each slice and forward it.
    bool inject = r == 0 && posted < count && posted - got < 16;
    if (inject) {
      void* s;
      CHILD_OK(T.send_acquire(out, &s));
      CHILD_OK(T.send_post(out, fill_slice(s, posted, slot)));
      posted++;
      continue;
    }
    const void* s;
    size_t len;
    CHILD_OK(T.recv_acquire(in, &s, &len));
    if (check_slice(s, len, got, slot) != 0) return 1;
    if (r != 0) {
      void* d;
      CHILD_OK(T.send_acquire(out, &d));
      memcpy(d, s, len);
      CHILD_OK(T.send_post(out, len));
    }
    CHILD_OK(T.recv_release(in));
    got++;
  }
  T.close(in);
  T.close(out);
  return 0;
}

TEST(Shm, OversubscribedRingOfEightFinishesQuickly) {
  const int n = 8, count = 2000;
  const size_t slot = 1024;
  std::vector<Pipe> info(n), ack(n);
  std::vector<pid_t> pids;
  double t0 = now_s();
  for (int r = 0; r < n; r++) pids.push_back(spawn([&, r] { return ring_rank(r, n, info, ack, slot, count); }));
  std::vector<int> codes = wait_all(pids, 30.0);
  double dt = now_s() - t0;
  for (int r = 0; r < n; r++) EXPECT_EQ(0, codes[r]) << "rank " << r;
  printf("[ shm ] ring of %d processes, %d slices each: %.3f s\n", n, count, dt);
  // Unloaded this takes 0.1-0.4 s. Ranks that only woke on their 5 ms futex timeouts would need
  // about 2000 x 5 ms = 10 s, so 8 s separates starvation from a machine that is merely busy.
  EXPECT_LT(dt, 8.0) << "oversubscribed ranks starved each other";
  for (pid_t p : pids) EXPECT_EQ(0, count_segments(p));
}

// ---- yielding to a stranger ----
struct BusyLoopOnThisCore {  // pins this thread to its CPU and runs a busy thread there too
  cpu_set_t old_set, one;
  std::atomic<bool> stop{false}, spinning{false};
  std::thread loop;
  BusyLoopOnThisCore() {
    pthread_getaffinity_np(pthread_self(), sizeof old_set, &old_set);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    loop = std::thread([this] {
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
      spinning = true;
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
    while (!spinning) std::this_thread::yield();
  }
  ~BusyLoopOnThisCore() {
    stop = true;
    loop.join();
    pthread_setaffinity_np(pthread_self(), sizeof old_set, &old_set);
  }
};

// A busy loop sharing a waiter's core keeps the core for a whole scheduler slice at every
// yield; a waiter that sleeps on the futex instead is woken by the post and runs at once. One
// busy process on a rank's core made a 2-rank all-reduce 26x slower before ringo_yield learned
// to notice. Here the stranger and this thread share one CPU: ringo_yield must decline within a
// few calls, stay declined for the backoff, then probe again (and yield once the core is free).
TEST(Shm, WaiterStopsYieldingToABusyLoopOnItsCore) {
  int calls = 0, declined_calls = 0;  // declined_calls: answered 0 before the backoff ran out
  double declined_at, declined_for;
  {
    BusyLoopOnThisCore stranger;
    while (calls < 200 && ringo_yield(1) == 1) calls++;
    declined_at = now_s();
    while (ringo_yield(1) == 0 && now_s() - declined_at < 5.0) declined_calls++;
    declined_for = now_s() - declined_at;
  }
  ASSERT_LT(calls, 200) << "200 yields to a busy loop on the same core and ringo_yield still yields";
  EXPECT_GE(calls, 2) << "one slow yield is noise; it takes two close together to stop yielding";
  EXPECT_GT(declined_calls, 0);
  EXPECT_GE(declined_for, RINGO_YIELD_BACKOFF_S * 0.9) << "declined for less than the backoff";
  EXPECT_LT(declined_for, 5.0) << "never probed again after the backoff";
}

// Where a host's ranks outnumber its CPUs the busy process on a waiter's core is mostly the peer
// it waits for, at its own work: a waiter that blocked for the backoff then slept through the
// calls after it (N = 8 on 2 cores: 1.1-2.0x slower at 16 KiB-1 MiB). A crowded waiter's
// yields go on however slow, and leave no block behind for the next wait that watches.
TEST(Shm, CrowdedWaiterKeepsYieldingBesideABusyLoop) {
  ringo_wait_policy p{};
  p.timeout_s = 10.0;
  p.yield_s = 10.0;
  p.net = RINGO_WAIT_NET_NONE;
  p.crowded = 1;
  int yields = 0, slow = 0, declined = 0;
  {
    BusyLoopOnThisCore stranger;
    ringo_waiter w;
    ringo_waiter_start(&w, &p, now_s());
    for (double now = now_s(), end = now + 0.1; now < end && !declined;) {
      declined = !ringo_waiter_yield(&w, now);
      const double then = now_s();
      yields++;
      slow += then - now > RINGO_YIELD_SLOW_S;
      now = then;
    }
  }
  EXPECT_FALSE(declined) << "a crowded waiter stopped yielding after " << yields << " yields, " << slow << " slow";
  EXPECT_EQ(1, ringo_yield(1)) << "a crowded wait's slow yields blocked the next waiter that watches";
  if (slow < 2) GTEST_SKIP() << "only " << slow << " slow yields beside the busy loop: nothing to tell apart";
}

// ---- waits that must end without the peer ----
struct LocalLink {  // both ends in this thread, set up and unlinked
  ringo_link *recv = nullptr, *send = nullptr;
  LocalLink(size_t slot, int nslots, double timeout_s, const atomic_int* abort_flag = nullptr) {
    ringo_link_params rp = make_params(slot, nslots, timeout_s, 1, 0, abort_flag);
    ringo_link_params sp = make_params(slot, nslots, timeout_s, 0, 1, abort_flag);
    char info[RINGO_LINK_INFO_BYTES];
    EXPECT_EQ(ringoSuccess, T.recv_setup(&rp, &recv, info)) << ringo_thread_last_error();
    EXPECT_EQ(ringoSuccess, T.send_connect(&sp, info, &send)) << ringo_thread_last_error();
    EXPECT_EQ(ringoSuccess, T.setup_done(recv));
    EXPECT_EQ(ringoSuccess, T.setup_done(send));
  }
  ~LocalLink() {
    T.close(send);
    T.close(recv);
  }
};

TEST(Shm, ReceiverTimesOutNamingBothRanks) {
  LocalLink link(256, 4, 0.3);
  const void* s;
  size_t n;
  double t0 = now_s();
  EXPECT_EQ(ringoTimeout, T.recv_acquire(link.recv, &s, &n));
  double dt = now_s() - t0;
  EXPECT_GE(dt, 0.29);
  EXPECT_LT(dt, 1.3);
  std::string msg = ringo_thread_last_error();
  EXPECT_NE(std::string::npos, msg.find("rank 1 timed out after 0.3 s waiting for rank 0 to post data on shm link 0->1"))
      << msg;
}

TEST(Shm, SenderTimesOutWhenTheFifoStaysFull) {
  LocalLink link(256, 4, 0.3);
  void* s;
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(ringoSuccess, T.send_acquire(link.send, &s));
    ASSERT_EQ(ringoSuccess, T.send_post(link.send, 1));
  }
  double t0 = now_s();
  EXPECT_EQ(ringoTimeout, T.send_acquire(link.send, &s));
  EXPECT_LT(now_s() - t0, 1.3);
  std::string msg = ringo_thread_last_error();
  EXPECT_NE(std::string::npos, msg.find("rank 0 timed out")) << msg;
  EXPECT_NE(std::string::npos, msg.find("rank 1 to release a slot on shm link 0->1")) << msg;
  // Releasing one slot makes room again: the timeout broke nothing.
  const void* r;
  size_t n;
  ASSERT_EQ(ringoSuccess, T.recv_acquire(link.recv, &r, &n));
  EXPECT_EQ(1u, n);
  ASSERT_EQ(ringoSuccess, T.recv_release(link.recv));
  EXPECT_EQ(ringoSuccess, T.send_acquire(link.send, &s));
}

TEST(Shm, AbortFlagUnblocksAWaitingReceiver) {
  atomic_int abort_flag{0};
  LocalLink link(256, 4, 30.0, &abort_flag);
  double set_at = 0;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the receiver reach its sleep
    set_at = now_s();
    abort_flag.store(1);
  });
  const void* s;
  size_t n;
  EXPECT_EQ(ringoInvalidUsage, T.recv_acquire(link.recv, &s, &n));
  double returned = now_s();
  aborter.join();
  EXPECT_LT(returned - set_at, 0.2);
  EXPECT_NE(std::string::npos, std::string(ringo_thread_last_error()).find("aborted"));
}

// True once thread tid of this process is blocked in the futex system call.
bool thread_in_futex(pid_t tid) {
  std::string path = "/proc/self/task/" + std::to_string(tid) + "/syscall";
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return false;
  long nr = -1;
  bool blocked = fscanf(f, "%ld", &nr) == 1 && nr == SYS_futex;
  fclose(f);
  return blocked;
}

// A receiver asleep in the futex must be woken by the post, not find the data when its short
// sleep times out: the best of 20 hand-offs to a sleeping receiver takes far less than a sleep.
TEST(Shm, SleepingReceiverIsWokenByThePost) {
  const int trials = 20;
  LocalLink link(64, 4, 10.0);
  std::atomic<pid_t> tid{0};
  std::atomic<int> received{0};
  std::vector<double> got_at(trials);
  std::thread receiver([&] {
    tid = gettid();
    for (int i = 0; i < trials; i++) {
      const void* s;
      size_t n;
      if (T.recv_acquire(link.recv, &s, &n) != ringoSuccess) return;
      got_at[i] = now_s();
      T.recv_release(link.recv);
      received++;
    }
  });
  double best = 1e9;
  for (int i = 0; i < trials; i++) {
    double give_up = now_s() + 5.0;
    while ((tid == 0 || !thread_in_futex(tid)) && now_s() < give_up) std::this_thread::yield();
    void* s;
    ASSERT_EQ(ringoSuccess, T.send_acquire(link.send, &s));
    double posted = now_s();
    ASSERT_EQ(ringoSuccess, T.send_post(link.send, 1));
    while (received <= i && now_s() < give_up) std::this_thread::yield();
    ASSERT_GT(received, i) << "receiver never got slice " << i;
    best = std::min(best, got_at[i] - posted);
  }
  receiver.join();
  printf("[ shm ] post to a sleeping receiver: best wake-up %.1f us\n", best * 1e6);
  EXPECT_LT(best, 0.002);
}

// ---- peer death: the end in this process waits, the other end's process is SIGKILLed ----
// This process's end of a link whose other end lives in the already spawned child; for a sender,
// the FIFO is left full so that its next acquire must wait. nullptr (and a failure) on error.
ringo_link* attach_to_child(bool we_receive, const ringo_link_params& ours, Pipe& info, Pipe& ack) {
  ringo_link* l = nullptr;
  char buf[RINGO_LINK_INFO_BYTES], a;
  bool ok;
  if (we_receive) {
    ok = T.recv_setup(&ours, &l, buf) == ringoSuccess && write_full(info.w(), buf, sizeof buf) &&
         read_full(ack.r(), &a, 1);
  } else {
    ok = read_full(info.r(), buf, sizeof buf) && T.send_connect(&ours, buf, &l) == ringoSuccess &&
         write_full(ack.w(), "k", 1);
    void* s;
    for (int i = 0; ok && i < ours.nslots; i++)
      ok = T.send_acquire(l, &s) == ringoSuccess && T.send_post(l, 8) == ringoSuccess;
  }
  ok = ok && T.setup_done(l) == ringoSuccess;
  if (!ok) {
    ADD_FAILURE() << "link setup with the child failed: " << ringo_thread_last_error();
    T.close(l);
    return nullptr;
  }
  return l;
}

ringoResult_t wait_on(ringo_link* l, bool we_receive) {
  const void* rs;
  void* ss;
  size_t n;
  return we_receive ? T.recv_acquire(l, &rs, &n) : T.send_acquire(l, &ss);
}

// The end in this process waits; the other end's process is SIGKILLed meanwhile.
void peer_death(bool we_receive, bool reap_at_once) {
  Pipe info, ack;
  ringo_link_params ours = make_params(512, 4, 5.0, we_receive ? 1 : 0, we_receive ? 0 : 1);
  ringo_link_params theirs = make_params(512, 4, 5.0, we_receive ? 0 : 1, we_receive ? 1 : 0);
  auto idle = [](ringo_link*) {
    for (;;) pause();
    return 0;
  };
  pid_t child = we_receive ? spawn([&] { return sender_main(theirs, info.r(), ack.w(), idle); })
                           : spawn([&] { return receiver_main(theirs, info.w(), ack.r(), idle); });
  ringo_link* l = attach_to_child(we_receive, ours, info, ack);
  double killed_at = 0;
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the wait reach its sleep
    killed_at = now_s();
    kill(child, SIGKILL);
    if (reap_at_once) waitpid(child, nullptr, 0);  // otherwise it stays a zombie until below
  });
  ringoResult_t res = l ? wait_on(l, we_receive) : ringoInternalError;
  double returned = now_s();
  killer.join();
  if (!reap_at_once) waitpid(child, nullptr, 0);
  if (l == nullptr) return;
  EXPECT_EQ(ringoRemoteError, res);
  EXPECT_LT(returned - killed_at, 1.0);
  std::string msg = ringo_thread_last_error();
  EXPECT_NE(std::string::npos, msg.find("(pid " + std::to_string(child) + ") exited")) << msg;
  T.close(l);
  EXPECT_EQ(0, count_segments(getpid()));
  EXPECT_EQ(0, count_segments(child));
}

TEST(Shm, ReceiverNoticesKilledSender) { peer_death(true, true); }
TEST(Shm, ReceiverNoticesKilledSenderStillAZombie) { peer_death(true, false); }
TEST(Shm, SenderNoticesKilledReceiver) { peer_death(false, true); }

// ---- hostile or broken link info never crashes and never attaches ----
class ShmInfo : public ::testing::Test {
 protected:
  ringo_link_params rp = make_params(1024, 4, 5.0, 1, 0), sp = make_params(1024, 4, 5.0, 0, 1);
  ringo_link* rl = nullptr;
  char good[RINGO_LINK_INFO_BYTES];
  size_t name_off = 0;  // the name sits in the info as a NUL-terminated "/ringo-..." string

  void SetUp() override {
    ASSERT_EQ(ringoSuccess, T.recv_setup(&rp, &rl, good));
    const char* at = static_cast<const char*>(memmem(good, sizeof good, "/ringo-", 7));
    ASSERT_NE(nullptr, at);
    name_off = (size_t)(at - good);
  }
  void TearDown() override {
    // The genuine info still attaches after every rejection.
    ringo_link* sl = nullptr;
    EXPECT_EQ(ringoSuccess, T.send_connect(&sp, good, &sl)) << ringo_thread_last_error();
    T.close(sl);
    // close without setup_done (an error path) must still remove the name.
    EXPECT_EQ(1, count_segments(getpid()));
    T.close(rl);
    EXPECT_EQ(0, count_segments(getpid()));
  }
  void expect_rejected(const char* what, const std::function<void(char*)>& mutate, ringoResult_t want,
                       const ringo_link_params& p) {
    char bad[RINGO_LINK_INFO_BYTES];
    memcpy(bad, good, sizeof bad);
    mutate(bad);
    ringo_link* sl = reinterpret_cast<ringo_link*>(0x1);
    EXPECT_EQ(want, T.send_connect(&p, bad, &sl)) << what << ": " << ringo_thread_last_error();
    EXPECT_EQ(nullptr, sl) << what;
  }
  void set_name(char* b, const char* name) { strcpy(b + name_off, name); }
};

TEST_F(ShmInfo, MalformedInfoIsRejected) {
  expect_rejected("no NUL in the name", [&](char* b) { memset(b + name_off, 'a', sizeof good - name_off); },
                  ringoRemoteError, sp);
  expect_rejected("path outside the prefix", [&](char* b) { set_name(b, "/../../etc/passwd"); }, ringoRemoteError, sp);
  expect_rejected("bad characters", [&](char* b) { set_name(b, "/ringo-1/x"); }, ringoRemoteError, sp);
  expect_rejected("prefix only", [&](char* b) { set_name(b, "/ringo-"); }, ringoRemoteError, sp);
  expect_rejected("no such segment", [&](char* b) { set_name(b, "/ringo-1-0123456789abcdef"); }, ringoRemoteError, sp);
  expect_rejected("garbage", [&](char* b) { memset(b, 0xff, sizeof good); }, ringoRemoteError, sp);
  expect_rejected("zeros", [&](char* b) { memset(b, 0, sizeof good); }, ringoRemoteError, sp);
  // Sizes that disagree with this rank's: a configuration mismatch between ranks.
  expect_rejected("slot size mismatch", [](char*) {}, ringoInvalidUsage, make_params(2048, 4, 5.0, 0, 1));
  expect_rejected("slot count mismatch", [](char*) {}, ringoInvalidUsage, make_params(1024, 8, 5.0, 0, 1));
}

TEST_F(ShmInfo, SegmentThatDoesNotMatchIsRejected) {
  // A real segment of the same sizes, but not the one this info describes (its check value differs).
  ringo_link* other = nullptr;
  char other_info[RINGO_LINK_INFO_BYTES];
  ASSERT_EQ(ringoSuccess, T.recv_setup(&rp, &other, other_info));
  std::string other_name = other_info + name_off;
  expect_rejected("another link's segment", [&](char* b) { set_name(b, other_name.c_str()); }, ringoRemoteError, sp);
  // That segment with its own info, made readable by others, then grown: both must be refused.
  char own[RINGO_LINK_INFO_BYTES];
  memcpy(own, good, sizeof own);
  memcpy(good, other_info, sizeof good);  // expect_rejected starts from `good`
  int fd = shm_open(other_name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  struct stat st;
  ASSERT_EQ(0, fstat(fd, &st));
  ASSERT_EQ(0, fchmod(fd, 0644));
  expect_rejected("segment mode 0644", [](char*) {}, ringoRemoteError, sp);
  ASSERT_EQ(0, fchmod(fd, 0600));
  ASSERT_EQ(0, ftruncate(fd, st.st_size + 4096));
  expect_rejected("segment grown", [](char*) {}, ringoRemoteError, sp);
  ASSERT_EQ(0, ftruncate(fd, st.st_size));
  close(fd);
  ringo_link* sl = nullptr;  // restored, it attaches again: the rejections were for the tampering
  EXPECT_EQ(ringoSuccess, T.send_connect(&sp, good, &sl)) << ringo_thread_last_error();
  T.close(sl);
  T.close(other);
  expect_rejected("segment already gone", [](char*) {}, ringoRemoteError, sp);
  memcpy(good, own, sizeof good);  // TearDown checks this fixture's own link
}

TEST(Shm, CorruptedSegmentIsAnErrorNotACrash) {
  ringo_link_params rp = make_params(256, 4, 2.0, 1, 0);
  ringo_link* rl = nullptr;
  char info[RINGO_LINK_INFO_BYTES];
  ASSERT_EQ(ringoSuccess, T.recv_setup(&rp, &rl, info));
  const char* name = static_cast<const char*>(memmem(info, sizeof info, "/ringo-", 7));
  ASSERT_NE(nullptr, name);
  // A misbehaving peer scribbles over the header page (counters, flags, lengths).
  int fd = shm_open(name, O_RDWR, 0);
  ASSERT_GE(fd, 0);
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(MAP_FAILED, page);
  memset(page, 0xff, 4096);
  munmap(page, 4096);
  const void* s;
  size_t n;
  double t0 = now_s();
  EXPECT_EQ(ringoRemoteError, T.recv_acquire(rl, &s, &n));
  EXPECT_LT(now_s() - t0, 1.0) << "an impossible counter must fail at once, not time out";
  EXPECT_NE(std::string::npos, std::string(ringo_thread_last_error()).find("inconsistent"));
  T.close(rl);
}

TEST(Shm, BadParamsAndMisuseAreErrors) {
  ringo_link* l = nullptr;
  char info[RINGO_LINK_INFO_BYTES];
  ringo_link_params p = make_params(0, 4, 1.0, 0, 1);
  EXPECT_EQ(ringoInvalidArgument, T.recv_setup(&p, &l, info));
  p = make_params(256, 0, 1.0, 0, 1);
  EXPECT_EQ(ringoInvalidArgument, T.recv_setup(&p, &l, info));
  p = make_params(256, 4, 0.0, 0, 1);
  EXPECT_EQ(ringoInvalidArgument, T.recv_setup(&p, &l, info));
  EXPECT_EQ(ringoInvalidArgument, T.recv_setup(nullptr, &l, info));
  EXPECT_EQ(0, count_segments(getpid()));

  LocalLink link(256, 4, 1.0);
  void* s;
  EXPECT_EQ(ringoInvalidUsage, T.send_post(link.send, 1)) << "post before acquire";
  EXPECT_EQ(ringoInvalidUsage, T.recv_release(link.recv)) << "release before acquire";
  EXPECT_EQ(ringoInvalidUsage, T.send_acquire(link.recv, &s)) << "wrong end";
  ASSERT_EQ(ringoSuccess, T.send_acquire(link.send, &s));
  EXPECT_EQ(ringoInvalidArgument, T.send_post(link.send, 257));
  EXPECT_EQ(ringoSuccess, T.send_post(link.send, 256));
}

// ---- throughput, printed for the record, never asserted ----
TEST(Shm, MicrobenchmarkTwoProcesses) {
  for (size_t slot : {(size_t)64, (size_t)128 << 10}) {
    const int count = slot > 4096 ? 2000 : 20000;  // a fraction of a second unloaded
    Pipe info, ack, result;
    ringo_link_params rp = make_params(slot, 4, 20.0, 1, 0), sp = make_params(slot, 4, 20.0, 0, 1);
    pid_t recv = spawn([&] {
      return receiver_main(rp, info.w(), ack.r(), [&](ringo_link* l) {
        std::vector<char> sink(slot);
        double t0 = now_s();
        for (int i = 0; i < count; i++) {
          const void* s;
          size_t n;
          CHILD_OK(T.recv_acquire(l, &s, &n));
          memcpy(sink.data(), s, n);  // a real consumer reads the slice
          CHILD_OK(T.recv_release(l));
        }
        double dt = now_s() - t0;
        return write_full(result.w(), &dt, sizeof dt) ? 0 : 1;
      });
    });
    pid_t send = spawn([&] {
      return sender_main(sp, info.r(), ack.w(), [&](ringo_link* l) {
        std::vector<char> src(slot, 7);
        for (int i = 0; i < count; i++) {
          void* s;
          CHILD_OK(T.send_acquire(l, &s));
          memcpy(s, src.data(), slot);
          CHILD_OK(T.send_post(l, slot));
        }
        return 0;
      });
    });
    std::vector<int> codes = wait_all({recv, send}, 30.0);
    EXPECT_EQ(0, codes[0]);
    EXPECT_EQ(0, codes[1]);
    double dt = 0;
    if (codes[0] == 0 && read_full(result.r(), &dt, sizeof dt) && dt > 0)
      printf("[ shm ] %zu-byte slots: %.0f slices/s, %.2f GB/s\n", slot, count / dt, count * (double)slot / dt / 1e9);
  }
}

}  // namespace
