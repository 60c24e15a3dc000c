// main.cc — the one main() of the MPI test binaries: MPI at MPI_THREAD_SERIALIZED, GoogleTest output
// from rank 0 only, and after every test each rank's failures folded into rank 0's result.
// Linked into each build/test/mpi/test_* by the Makefile; run: mpirun -np 8 build/test/mpi/test_mpi_ring.

// The C API only: Open MPI's C++ bindings (mpicxx.h) do not compile under -Wextra -Werror.
#define OMPI_SKIP_MPICXX 1
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mpi_harness.h"

namespace {

using ringo_mpi_test::SleepyBarrier;

// Ends the whole job when one test runs past its deadline: a rank stuck in an MPI call (a peer
// left a collective early) would otherwise hang every rank until the outer timeout.
class Watchdog {
 public:
  explicit Watchdog(int rank, double limit_s) : rank_(rank), limit_(limit_s), thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Arm(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    name_ = name;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(limit_));
    armed_ = true;
  }
  void Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(500));
      if (armed_ && std::chrono::steady_clock::now() > deadline_) {
        fprintf(stderr, "[ WATCHDOG ] rank %d: test %s still running after %.0f s; ending the job\n", rank_,
                name_.c_str(), limit_);
        fflush(stderr);
        fflush(stdout);
        _exit(1);  // mpirun then ends the other ranks; the exit status fails the run
      }
    }
  }

  const int rank_;
  const double limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, armed_ = false;
  std::string name_;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;  // last: starts once the fields above exist
};

std::string FullName(const testing::TestInfo& info) {
  return std::string(info.test_suite_name()) + "." + info.name();
}

// After each test every rank learns which ranks failed, and rank 0 records one more failure per
// failing rank carrying that rank's messages, so rank 0's printed summary covers the whole job.
class AgreeListener : public testing::EmptyTestEventListener {
 public:
  AgreeListener(MPI_Comm comm, Watchdog* dog) : comm_(comm), dog_(dog) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  // Every rank must run the same tests in the same order, or the first collective of a test
  // would match another test's: compare a hash of the list before any test runs.
  void OnTestIterationStart(const testing::UnitTest& unit, int) override {
    uint64_t h = ringo_mpi_test::Hash64(nullptr, 0);
    for (int s = 0; s < unit.total_test_suite_count(); s++) {
      const testing::TestSuite* suite = unit.GetTestSuite(s);
      for (int t = 0; t < suite->total_test_count(); t++) {
        const testing::TestInfo* info = suite->GetTestInfo(t);
        if (!info->should_run()) continue;
        const std::string name = FullName(*info) + ";";
        h = ringo_mpi_test::Hash64(name.data(), name.size(), h);
      }
    }
    uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm_);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm_);
    if (lo != hi) {
      if (rank_ == 0) fprintf(stderr, "ranks would run different tests (different --gtest_filter?); aborting\n");
      MPI_Abort(comm_, 1);
    }
  }

  void OnTestStart(const testing::TestInfo& info) override { dog_->Arm(FullName(info)); }

  void OnTestEnd(const testing::TestInfo& info) override {
    SleepyBarrier(comm_);  // ranks that finish early wait here without taking a core
    const testing::TestResult& result = *info.result();
    int failed = result.Failed() ? 1 : 0;
    std::string text;
    for (int i = 0; i < result.total_part_count(); i++) {
      const testing::TestPartResult& part = result.GetTestPartResult(i);
      if (!part.failed()) continue;
      std::ostringstream os;
      os << (part.file_name() ? part.file_name() : "?") << ":" << part.line_number() << ": " << part.message()
         << "\n";
      text += os.str();
    }
    if (text.size() > kMaxText) text = text.substr(0, kMaxText) + "... (cut)\n";
    std::vector<int> all_failed(size_);
    MPI_Allgather(&failed, 1, MPI_INT, all_failed.data(), 1, MPI_INT, comm_);
    const std::vector<std::string> texts = GatherText(text);
    std::ostringstream ranks;
    for (int r = 0; r < size_; r++)
      if (all_failed[r]) ranks << (ranks.tellp() > 0 ? ", " : "") << r;
    for (int r = 1; r < size_ && rank_ == 0; r++)
      if (all_failed[r]) ADD_FAILURE() << "rank " << r << " of " << size_ << " failed:\n" << texts[r];
    // The other ranks fail the test too, so every rank's exit status says the same.
    if (rank_ != 0 && !failed && !ranks.str().empty()) ADD_FAILURE() << "failed on rank(s) " << ranks.str();
    dog_->Disarm();
  }

 private:
  static constexpr size_t kMaxText = 8000;

  // Every rank's text, at rank 0 (empty strings elsewhere).
  std::vector<std::string> GatherText(const std::string& mine) {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(size_), offs(size_);
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm_);
    int total = 0;
    for (int r = 0; r < size_; r++) offs[r] = total, total += lens[r];
    std::vector<char> all(static_cast<size_t>(total) + 1);
    MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, 0, comm_);
    std::vector<std::string> out(size_);
    for (int r = 0; r < size_ && rank_ == 0; r++) out[r].assign(all.data() + offs[r], lens[r]);
    return out;
  }

  MPI_Comm comm_;
  Watchdog* dog_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

// The thread level a suite asks MPI for. test_mpi_staged.cc defines its own (MPI_THREAD_MULTIPLE:
// a staged device collective drives MPI links from another thread); the others take this one.
__attribute__((weak)) int RingoTestMpiThreadLevel() { return MPI_THREAD_SERIALIZED; }

int main(int argc, char** argv) {
  // A peer that dies must show up as an error code, never as SIGPIPE killing the test.
  std::signal(SIGPIPE, SIG_IGN);
  // A ringo call waiting for a rank that left a test early ends in ringoTimeout after 20 s
  // (read when a communicator is created; an explicit setting wins).
  setenv("RINGO_TIMEOUT", "20", 0);
  // The INIT log names each link's transport, and test_mpi_ring.cc reads it. A RINGO_DEBUG the
  // user set wins; the link checks then run only if it still logs INIT at INFO.
  if (!getenv("RINGO_DEBUG")) {
    setenv("RINGO_DEBUG", "INFO", 1);
    setenv("RINGO_DEBUG_SUBSYS", "INIT", 1);
  }
  int provided = MPI_THREAD_SINGLE;
  const int level = RingoTestMpiThreadLevel();
  MPI_Init_thread(&argc, &argv, level, &provided);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const int rank = ringo_mpi_test::CommRank(comm);
  if (provided < level) {
    if (rank == 0) fprintf(stderr, "MPI gave thread level %d, the tests need %d\n", provided, level);
    MPI_Abort(comm, 1);
  }
  testing::InitGoogleTest(&argc, argv);
  // A shuffled order must be the same on every rank: everyone takes rank 0's seed.
  int seed = GTEST_FLAG_GET(random_seed);
  if (rank == 0 && seed == 0) seed = static_cast<int>(time(nullptr) % 99999) + 1;
  MPI_Bcast(&seed, 1, MPI_INT, 0, comm);
  GTEST_FLAG_SET(random_seed, seed);
  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  const char* limit = getenv("RINGO_MPI_TEST_DEADLINE");
  int ret;
  {
    Watchdog dog(rank, limit ? atof(limit) : 300.0);
    listeners.Append(new AgreeListener(comm, &dog));  // owned by gtest from here
    ret = RUN_ALL_TESTS();
  }
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return ret;
}
