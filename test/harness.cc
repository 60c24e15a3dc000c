// harness.cc — the multi-rank test harness: forks ranks, forwards their gtest failures through a
// shared mapping, bounds every job by a deadline. Depends on include/ringo.h, GoogleTest, POSIX.
// Its own behaviour is tested by the Harness* cases of test/test_api.cc.
#include "harness.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <sstream>
#include <thread>

namespace ringo_test {
namespace {

constexpr int kMaxProcs = Shared::kMaxRanks + 4;
constexpr size_t kLogBytes = 32 * 1024;

// Failures of one child process, appended by the child, read by the parent after the child ended.
// Records are [int32 rank][int32 line][uint32 file bytes][uint32 message bytes][file][message];
// `used` is published after a record is complete, so a crash mid-write loses only that record.
struct FailureLog {
  std::atomic<uint32_t> used;
  std::atomic<uint32_t> truncated;
  char data[kLogBytes];
};

// The one MAP_SHARED mapping of a job.
struct JobMemory {
  std::atomic<int> arrived;
  std::atomic<int> generation;
  std::atomic<int> left;
  int participants;
  FailureLog logs[kMaxProcs];
  uint64_t words[Shared::kMaxRanks * Shared::kSlots];
};

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void Pause(double seconds) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - static_cast<double>(ts.tv_sec)) * 1e9);
  nanosleep(&ts, nullptr);
}

JobMemory* MapJob(int participants) {
  void* p = mmap(nullptr, sizeof(JobMemory), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  // An anonymous mapping is zero-filled; constructing over it keeps the atomics well-defined.
  JobMemory* mem = new (p) JobMemory;
  mem->participants = participants;
  return mem;
}

void UnmapJob(JobMemory* mem) { munmap(mem, sizeof(JobMemory)); }

// ---- the child side: a gtest listener that copies each failed assertion into the log ----

thread_local int t_rank = -1;
FailureLog* g_child_log = nullptr;
std::mutex g_child_log_mutex;
std::atomic<bool> g_child_failed{false};

void AppendFailure(int rank, const char* file, int line, const char* message) {
  g_child_failed.store(true);
  if (g_child_log == nullptr) return;
  std::lock_guard<std::mutex> lock(g_child_log_mutex);
  const uint32_t flen = static_cast<uint32_t>(strlen(file));
  const uint32_t mlen = static_cast<uint32_t>(strlen(message));
  const int32_t head[4] = {rank, line, static_cast<int32_t>(flen), static_cast<int32_t>(mlen)};
  const uint32_t used = g_child_log->used.load();
  if (used + sizeof head + flen + mlen > kLogBytes) {
    g_child_log->truncated.store(1);
    return;
  }
  char* at = g_child_log->data + used;
  memcpy(at, head, sizeof head);
  memcpy(at + sizeof head, file, flen);
  memcpy(at + sizeof head + flen, message, mlen);
  g_child_log->used.store(used + static_cast<uint32_t>(sizeof head) + flen + mlen);
}

class FailureForwarder : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    AppendFailure(t_rank, result.file_name() ? result.file_name() : "(unknown file)",
                  result.line_number(), result.message());
  }
};

void ApplyEnv(const Options& opts) {
  if (opts.ringo_timeout_s > 0) {
    char buf[64];
    snprintf(buf, sizeof buf, "%g", opts.ringo_timeout_s);
    setenv("RINGO_TIMEOUT", buf, 1);
  }
  for (const auto& kv : opts.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
}

// Runs body in a freshly forked child and never returns. Failures go to the job's log instead of
// the console (the parent prints them once, with the rank), and the exit status says whether any
// assertion failed.
[[noreturn]] void ChildMain(JobMemory* mem, int proc, const Options& opts,
                            const std::function<void()>& body) {
  g_child_log = &mem->logs[proc];
  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  listeners.Release(listeners.default_result_printer());  // leaked: the child never returns
  listeners.Append(new FailureForwarder);
  ApplyEnv(opts);
  try {
    body();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "uncaught exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << "uncaught exception of unknown type";
  }
  fflush(nullptr);
  _exit(g_child_failed.load() ? 1 : 0);
}

// ---- the parent side: wait for the children within the deadline, then read their logs ----

struct Child {
  pid_t pid;
  std::string name;  // "rank 3", "process 1", ...
  bool done = false;
  int status = 0;
  enum { kNone, kDeadline, kGrace } killed = kNone;
};

bool FailedStatus(int status) {
  return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Reaps every child, SIGKILLing those still running at the deadline (or grace_s after another
// child failed). Busy-polls waitpid every 2 ms: this only bounds waiting, it orders nothing.
void Supervise(std::vector<Child>& kids, const Options& opts) {
  const double start = Now();
  double first_failure = -1;
  for (;;) {
    bool all_done = true;
    for (Child& c : kids) {
      if (c.done) continue;
      int st = 0;
      const pid_t r = waitpid(c.pid, &st, WNOHANG);
      if (r == c.pid || (r < 0 && errno == ECHILD)) {
        c.done = true;
        c.status = st;
        if (FailedStatus(st) && first_failure < 0) first_failure = Now();
      } else {
        all_done = false;
      }
    }
    if (all_done) return;
    const double t = Now();
    const bool deadline = t - start > opts.deadline_s;
    const bool grace = first_failure >= 0 && t - first_failure > opts.grace_s;
    if (deadline || grace) {
      for (Child& c : kids) {
        if (c.done) continue;
        kill(c.pid, SIGKILL);
        int st = 0;
        waitpid(c.pid, &st, 0);
        c.done = true;
        c.status = st;
        c.killed = deadline ? Child::kDeadline : Child::kGrace;
      }
      return;
    }
    Pause(0.002);
  }
}

void ReadLog(const FailureLog& log, const std::string& name, JobReport* report) {
  const uint32_t used = log.used.load();
  uint32_t at = 0;
  while (at + 16 <= used) {
    int32_t head[4];
    memcpy(head, log.data + at, sizeof head);
    at += sizeof head;
    Failure f;
    f.rank = head[0];
    f.line = head[1];
    f.file.assign(log.data + at, static_cast<size_t>(head[2]));
    at += static_cast<uint32_t>(head[2]);
    f.message.assign(log.data + at, static_cast<size_t>(head[3]));
    at += static_cast<uint32_t>(head[3]);
    report->failures.push_back(std::move(f));
  }
  if (log.truncated.load()) report->problems.push_back(name + ": more failures than the log holds; the rest were dropped");
}

JobReport Collect(JobMemory* mem, std::vector<Child>& kids, const Options& opts) {
  Supervise(kids, opts);
  JobReport report;
  std::vector<std::string> hung, stragglers, failed;
  for (size_t i = 0; i < kids.size(); i++) {
    const Child& c = kids[i];
    ReadLog(mem->logs[i], c.name, &report);
    if (c.killed == Child::kDeadline) {
      hung.push_back(c.name);
    } else if (c.killed == Child::kGrace) {
      stragglers.push_back(c.name);
    } else if (WIFSIGNALED(c.status)) {
      std::ostringstream os;
      os << c.name << " was killed by signal " << WTERMSIG(c.status) << " (" << strsignal(WTERMSIG(c.status)) << ")";
      report.problems.push_back(os.str());
    } else if (WIFEXITED(c.status) && WEXITSTATUS(c.status) != 0) {
      failed.push_back(c.name);
    }
  }
  std::ostringstream os;
  if (!hung.empty()) {
    os << "hung: " << JoinNames(hung) << " still running after the " << opts.deadline_s
       << " s deadline; SIGKILLed";
    report.problems.push_back(os.str());
  }
  if (!stragglers.empty()) {
    os.str("");
    os << JoinNames(stragglers) << " still running " << opts.grace_s
       << " s after another rank failed; SIGKILLed (probably blocked on the failed rank)";
    report.problems.push_back(os.str());
  }
  // A failing exit with nothing in the log means the log lost it; say so rather than pass.
  if (!failed.empty() && report.failures.empty()) {
    report.problems.push_back(JoinNames(failed) + " exited with status 1 but reported no failure");
  }
  return report;
}

// Forks one child per body; a fork failure kills the children already started.
JobReport ForkAll(JobMemory* mem, const std::vector<std::string>& names, const Options& opts,
                  const std::function<void(int)>& body) {
  std::vector<Child> kids;
  fflush(nullptr);  // or the children would print the parent's buffered output again
  for (size_t i = 0; i < names.size(); i++) {
    const pid_t pid = fork();
    if (pid == 0) ChildMain(mem, static_cast<int>(i), opts, [&] { body(static_cast<int>(i)); });
    if (pid < 0) {
      JobReport report;
      report.problems.push_back(std::string("fork failed: ") + strerror(errno));
      for (Child& c : kids) kill(c.pid, SIGKILL);
      for (Child& c : kids) waitpid(c.pid, nullptr, 0);
      return report;
    }
    Child c;
    c.pid = pid;
    c.name = names[i];
    kids.push_back(c);
  }
  return Collect(mem, kids, opts);
}

JobReport Problem(const std::string& what) {
  JobReport report;
  report.problems.push_back(what);
  return report;
}

// One rank of fork or thread mode: init, scenario, destroy.
void RankBody(JobMemory* mem, int nranks, const ringoUniqueId& id, int rank, const TeamFn& fn) {
  t_rank = rank;
  Shared shared(mem);
  ringoComm_t comm = nullptr;
  const ringoResult_t res = ringoCommInitRank(&comm, nranks, id, rank);
  if (res != ringoSuccess) {
    ADD_FAILURE() << "ringoCommInitRank(rank " << rank << " of " << nranks << ") returned "
                  << ResultName(res) << ": " << ringoGetLastError(nullptr);
    mem->left.fetch_add(1);
    return;
  }
  Team team;
  team.nranks = nranks;
  team.ranks = {rank};
  team.comms = {comm};
  team.shared = &shared;
  fn(team);
  mem->left.fetch_add(1);
  EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess) << ringoGetLastError(nullptr);
}

}  // namespace

// ---- Shared ----

uint64_t& Shared::Word(int rank, size_t slot) {
  JobMemory* mem = static_cast<JobMemory*>(mem_);
  if (rank < 0 || rank >= kMaxRanks || slot >= kSlots) {
    ADD_FAILURE() << "harness: Shared::Word(" << rank << ", " << slot << ") out of range";
    static uint64_t dummy;
    return dummy;
  }
  return mem->words[static_cast<size_t>(rank) * kSlots + slot];
}

int Shared::participants() const { return static_cast<JobMemory*>(mem_)->participants; }

bool Shared::Barrier(double timeout_s) {
  JobMemory* mem = static_cast<JobMemory*>(mem_);
  const int gen = mem->generation.load();
  if (mem->arrived.fetch_add(1) + 1 == mem->participants) {
    mem->arrived.store(0);
    mem->generation.fetch_add(1);
    return true;
  }
  const double start = Now();
  for (;;) {
    if (mem->generation.load() != gen) return true;
    // A participant may pass this barrier and leave between the two loads: look again.
    if (mem->left.load() > 0) return mem->generation.load() != gen;
    if (Now() - start > timeout_s) return false;
    sched_yield();
  }
}

// ---- the rendezvous root, in a process of its own ----
// ringoGetUniqueId starts the root as a thread. Were it a thread of this (parent) process, the
// ranks would be forked while it serves other jobs' leftovers or allocates, and a child can
// inherit a lock that thread held (AddressSanitizer's allocator lock, seen as rare hangs). So the
// root lives in a child forked while this process has no such thread; it is killed after the job.
struct RootProcess {
  pid_t pid = -1;
  ringoUniqueId id;
};

bool StartRoot(RootProcess* root, std::string* err) {
  struct Page { std::atomic<int> state; ringoUniqueId id; ringoResult_t res; };
  void* p = mmap(nullptr, sizeof(Page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return *err = "harness: mmap for the root failed", false;
  Page* page = new (p) Page();
  fflush(nullptr);
  root->pid = fork();
  if (root->pid == 0) {
    page->res = ringoGetUniqueId(&page->id);
    page->state.store(1);
    for (;;) pause();  // the root thread serves until the parent kills this process
  }
  const double start = Now();
  while (root->pid > 0 && page->state.load() == 0 && Now() - start < 30) usleep(1000);
  const bool ok = root->pid > 0 && page->state.load() == 1 && page->res == ringoSuccess;
  if (ok) root->id = page->id;
  else *err = "harness: the rendezvous root process did not start (ringoGetUniqueId failed or timed out)";
  munmap(p, sizeof(Page));
  return ok;
}

void StopRoot(RootProcess* root) {
  if (root->pid <= 0) return;
  kill(root->pid, SIGKILL);
  waitpid(root->pid, nullptr, 0);
  root->pid = -1;
}

// ---- the four ways to run a job ----

JobReport RunForkedCollect(int nranks, const TeamFn& fn, const Options& opts) {
  if (nranks < 1 || nranks > Shared::kMaxRanks) return Problem("harness: bad nranks");
  RootProcess root;
  std::string err;
  if (!StartRoot(&root, &err)) return Problem(err);
  JobMemory* mem = MapJob(nranks);
  if (mem == nullptr) return StopRoot(&root), Problem("harness: mmap failed");
  std::vector<std::string> names;
  for (int r = 0; r < nranks; r++) names.push_back("rank " + std::to_string(r));
  const ringoUniqueId id = root.id;
  JobReport report = ForkAll(mem, names, opts, [&](int r) { RankBody(mem, nranks, id, r, fn); });
  UnmapJob(mem);
  StopRoot(&root);
  return report;
}

void RunForked(int nranks, const TeamFn& fn, const Options& opts) {
  Report(RunForkedCollect(nranks, fn, opts));
}

void RunThreads(int nranks, const TeamFn& fn, const Options& opts) {
  if (nranks < 1 || nranks > Shared::kMaxRanks) return Report(Problem("harness: bad nranks"));
  JobMemory* mem = MapJob(nranks);
  if (mem == nullptr) return Report(Problem("harness: mmap failed"));
  JobReport report = ForkAll(mem, {"thread-mode process"}, opts, [&](int) {
    ringoUniqueId id;
    const ringoResult_t res = ringoGetUniqueId(&id);
    ASSERT_EQ(res, ringoSuccess) << "ringoGetUniqueId: " << ringoGetLastError(nullptr);
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks; r++) threads.emplace_back([&, r] { RankBody(mem, nranks, id, r, fn); });
    for (std::thread& t : threads) t.join();
  });
  UnmapJob(mem);
  Report(report);
}

void RunGroup(int nranks, const TeamFn& fn, const Options& opts) {
  if (nranks < 1 || nranks > Shared::kMaxRanks) return Report(Problem("harness: bad nranks"));
  JobMemory* mem = MapJob(1);
  if (mem == nullptr) return Report(Problem("harness: mmap failed"));
  JobReport report = ForkAll(mem, {"group-mode process"}, opts, [&](int) {
    Shared shared(mem);
    Team team;
    team.nranks = nranks;
    team.comms.assign(static_cast<size_t>(nranks), nullptr);
    for (int r = 0; r < nranks; r++) team.ranks.push_back(r);
    team.shared = &shared;
    const ringoResult_t res = ringoCommInitAll(team.comms.data(), nranks, nullptr);
    ASSERT_EQ(res, ringoSuccess) << "ringoCommInitAll(" << nranks << "): " << ringoGetLastError(nullptr);
    fn(team);
    mem->left.fetch_add(1);
    for (ringoComm_t c : team.comms) EXPECT_EQ(ringoCommDestroy(c), ringoSuccess) << ringoGetLastError(nullptr);
  });
  UnmapJob(mem);
  Report(report);
}

JobReport RunProcessesCollect(int nprocs, const ProcFn& fn, const Options& opts) {
  if (nprocs < 1 || nprocs > kMaxProcs) return Problem("harness: bad nprocs");
  RootProcess root;
  memset(&root.id, 0, sizeof root.id);
  std::string err;
  if (opts.make_id && !StartRoot(&root, &err)) return Problem(err);
  const ringoUniqueId id = root.id;
  JobMemory* mem = MapJob(nprocs);
  if (mem == nullptr) return StopRoot(&root), Problem("harness: mmap failed");
  std::vector<std::string> names;
  for (int i = 0; i < nprocs; i++) names.push_back("process " + std::to_string(i));
  JobReport report = ForkAll(mem, names, opts, [&](int i) {
    t_rank = i;
    Shared shared(mem);
    fn(i, id, shared);
    mem->left.fetch_add(1);
  });
  UnmapJob(mem);
  StopRoot(&root);
  return report;
}

void RunProcesses(int nprocs, const ProcFn& fn, const Options& opts) {
  Report(RunProcessesCollect(nprocs, fn, opts));
}

void Report(const JobReport& report) {
  for (const Failure& f : report.failures) {
    const std::string who = f.rank < 0 ? "[group] " : "[rank " + std::to_string(f.rank) + "] ";
    ADD_FAILURE_AT(f.file.c_str(), f.line) << who << f.message;
  }
  for (const std::string& p : report.problems) ADD_FAILURE() << p;
}

ringoResult_t TeamCall(Team& team, const std::function<ringoResult_t(size_t k)>& call) {
  if (!team.grouped()) return call(0);
  ringoResult_t first = ringoGroupStart();
  if (first != ringoSuccess) return first;
  for (size_t k = 0; k < team.size(); k++) {
    const ringoResult_t r = call(k);
    if (first == ringoSuccess) first = r;
  }
  const ringoResult_t end = ringoGroupEnd();
  return first != ringoSuccess ? first : end;
}

uint64_t Hash64(const void* data, size_t bytes) {
  // FNV-1a over 8-byte words, then a final avalanche; good enough to tell results apart.
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull ^ bytes;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

const char* ResultName(ringoResult_t res) {
  switch (res) {
    case ringoSuccess: return "ringoSuccess";
    case ringoUnhandledCudaError: return "ringoUnhandledCudaError";
    case ringoSystemError: return "ringoSystemError";
    case ringoInternalError: return "ringoInternalError";
    case ringoInvalidArgument: return "ringoInvalidArgument";
    case ringoInvalidUsage: return "ringoInvalidUsage";
    case ringoRemoteError: return "ringoRemoteError";
    case ringoInProgress: return "ringoInProgress";
    case ringoTimeout: return "ringoTimeout";
  }
  return "(unknown ringoResult_t)";
}

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
  const char* old = getenv(name);
  had_ = old != nullptr;
  if (had_) old_ = old;
  setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (had_) setenv(name_.c_str(), old_.c_str(), 1);
  else unsetenv(name_.c_str());
}

}  // namespace ringo_test
