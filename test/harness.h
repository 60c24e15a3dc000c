// harness.h — runs one test scenario as N ringo ranks (forked processes, threads, or one thread
// driving N communicators in a group) and brings every rank's GoogleTest failures back to the test.
// Depends on include/ringo.h and GoogleTest; used by test/test_collectives.cc and test/test_api.cc.
#ifndef RINGO_TEST_HARNESS_H_
#define RINGO_TEST_HARNESS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ringo.h"

namespace ringo_test {

// How a job is run and bounded. Every job runs in child processes, so a rank that hangs or crashes
// becomes a failed test instead of a hung or crashed suite.
struct Options {
  // Wall-clock bound for the whole job: processes still running then are SIGKILLed and the test
  // fails naming them.
  double deadline_s = 60.0;
  // Once one process has failed (bad exit status or signal), the others get this long to finish
  // before they are SIGKILLed: they are usually blocked on the rank that died.
  double grace_s = 5.0;
  // RINGO_TIMEOUT given to the ranks, so a library wait ends as an error before the deadline.
  // 0 leaves the environment alone.
  double ringo_timeout_s = 30.0;
  // More environment variables set in the rank processes before any ringo call.
  std::vector<std::pair<std::string, std::string>> env;
  // RunProcesses only: whether the parent makes a unique id (false for jobs that need no ringo).
  bool make_id = true;
};

// Memory every rank of one job sees (a MAP_SHARED mapping made before fork), for comparing data
// across ranks, and a barrier over the job's participants (processes or threads).
class Shared {
 public:
  static constexpr int kMaxRanks = 16;
  static constexpr size_t kSlots = 8192;

  explicit Shared(void* job_memory) : mem_(job_memory) {}
  // Slot `slot` of rank `rank`: each rank writes its own row, anyone may read after a Barrier.
  uint64_t& Word(int rank, size_t slot);
  // Waits until every participant has arrived. False (never a hang) when timeout_s passes or a
  // participant has already finished its scenario, so it can never arrive.
  bool Barrier(double timeout_s = 30.0);
  int participants() const;

 private:
  void* mem_;
};

// What one thread of a job drives: one rank (fork and thread modes) or all of them (group mode).
struct Team {
  int nranks = 0;
  std::vector<int> ranks;          // the ranks this thread drives
  std::vector<ringoComm_t> comms;  // comms[k] is rank ranks[k]
  Shared* shared = nullptr;
  size_t size() const { return ranks.size(); }
  bool grouped() const { return ranks.size() > 1; }
};

using TeamFn = std::function<void(Team&)>;
using ProcFn = std::function<void(int index, const ringoUniqueId& id, Shared& shared)>;

// One failure a rank reported, or one problem the parent saw (hang, signal, bad exit).
struct Failure {
  int rank;  // -1 for a group-mode thread
  std::string file;
  int line;
  std::string message;
};
struct JobReport {
  std::vector<Failure> failures;
  std::vector<std::string> problems;
  bool ok() const { return failures.empty() && problems.empty(); }
};

// Fork mode: the parent calls ringoGetUniqueId and forks nranks processes; each calls
// ringoCommInitRank(&comm, nranks, id, rank), runs fn and destroys its comm.
void RunForked(int nranks, const TeamFn& fn, const Options& opts = Options());
// Thread mode: one child process, ringoGetUniqueId, then one std::thread per rank, each calling
// ringoCommInitRank itself and running fn.
void RunThreads(int nranks, const TeamFn& fn, const Options& opts = Options());
// Group mode: one child process whose one thread calls ringoCommInitAll(comms, nranks, NULL) and
// runs fn once with every rank; fn drives collectives inside ringoGroupStart/End (see TeamCall).
void RunGroup(int nranks, const TeamFn& fn, const Options& opts = Options());
// nprocs processes and no communicator: fn(index, id, shared) with the id the parent made
// (all zero when opts.make_id is false). For rendezvous tests that create comms themselves.
void RunProcesses(int nprocs, const ProcFn& fn, const Options& opts = Options());

// The same, returning what happened instead of failing the current test (for harness self-tests).
JobReport RunForkedCollect(int nranks, const TeamFn& fn, const Options& opts = Options());
JobReport RunProcessesCollect(int nprocs, const ProcFn& fn, const Options& opts = Options());
// Fails the current test once per failure and problem of report, prefixed by the rank.
void Report(const JobReport& report);

// Calls call(k) for every rank k of team; for a grouped team inside ringoGroupStart/End, as the
// API requires for host collectives on several communicators of one thread. Returns the first
// error of the calls or of ringoGroupEnd.
ringoResult_t TeamCall(Team& team, const std::function<ringoResult_t(size_t k)>& call);

// 64-bit hash of bytes, for comparing results across ranks and runs.
uint64_t Hash64(const void* data, size_t bytes);

// Name of a result code for messages, e.g. "ringoTimeout".
const char* ResultName(ringoResult_t res);

// Sets an environment variable for the scope of the object and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  bool had_;
  std::string old_;
};

}  // namespace ringo_test

#endif  // RINGO_TEST_HARNESS_H_
