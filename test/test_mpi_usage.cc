// test_mpi_usage.cc — ringoCommInitMPI's checks of its arguments and of MPI's state, without mpirun:
// each case runs in a forked child (test/harness.h), so MPI state never reaches the test process.
// Needs a libringo built with MPI (else it skips). Run: make tests && ./build/test/test_mpi_usage

// The C API only: Open MPI's C++ bindings (mpicxx.h) do not compile under -Wextra -Werror.
#define OMPI_SKIP_MPICXX 1
#include <gtest/gtest.h>

#ifdef RINGO_HAVE_MPI
#include <mpi.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "harness.h"
#include "ringo.h"
#include "ringo_mpi.h"

namespace {

using ringo_test::Options;
using ringo_test::Shared;

Options ChildOptions() {
  Options opts;
  opts.make_id = false;  // no TCP rendezvous: these children make no ringoCommInitRank
  opts.deadline_s = 60.0;
  return opts;
}

// Runs body in one forked child; its failures become this test's.
void InChild(const std::function<void()>& body) {
  ringo_test::RunProcesses(1, [&](int, const ringoUniqueId&, Shared&) { body(); }, ChildOptions());
}

// Whether Open MPI can start a singleton (a process not launched by mpirun) here: some sandboxes
// forbid what it needs. Probed once, in a child, without ringo.
const std::string& SingletonProblem() {
  static const std::string problem = [] {
    const ringo_test::JobReport report = ringo_test::RunProcessesCollect(1, [](int, const ringoUniqueId&, Shared&) {
      int argc = 0, provided = 0;
      char** argv = nullptr;
      if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) _exit(3);
      MPI_Finalize();
    }, ChildOptions());
    std::string text;
    for (const auto& f : report.failures) text += f.message + "; ";
    for (const auto& p : report.problems) text += p + "; ";
    return text;
  }();
  return problem;
}

#define SKIP_WITHOUT_SINGLETON()                                                                 \
  do {                                                                                           \
    if (!SingletonProblem().empty())                                                             \
      GTEST_SKIP() << "Open MPI cannot start a singleton process here (outside mpirun): "        \
                   << SingletonProblem();                                                        \
  } while (0)

// Initialises MPI in this (child) process at `level`; returns the level MPI gave.
int InitMpi(int level) {
  int argc = 0, provided = -1;
  char** argv = nullptr;
  EXPECT_EQ(MPI_Init_thread(&argc, &argv, level, &provided), MPI_SUCCESS);
  return provided;
}

TEST(MpiUsage, BeforeMpiInitIsInvalidUsageSayingWhatToCall) {
  InChild([] {
    ringoComm_t comm = reinterpret_cast<ringoComm_t>(0x1);
    EXPECT_EQ(ringoCommInitMPI(&comm, MPI_COMM_WORLD), ringoInvalidUsage);
    EXPECT_EQ(comm, nullptr) << "a failed init must leave no communicator behind";
    const std::string msg = ringoGetLastError(nullptr);
    EXPECT_NE(msg.find("MPI_Init_thread"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MPI_THREAD_SERIALIZED"), std::string::npos) << msg;
    int initialized = 1;
    MPI_Initialized(&initialized);
    EXPECT_EQ(initialized, 0) << "ringoCommInitMPI must not initialise MPI itself";
  });
}

TEST(MpiUsage, NullCommPointerIsInvalidArgument) {
  InChild([] {  // before MPI_Init: the argument is checked first
    EXPECT_EQ(ringoCommInitMPI(nullptr, MPI_COMM_WORLD), ringoInvalidArgument);
    EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("NULL"), std::string::npos) << ringoGetLastError(nullptr);
  });
  SKIP_WITHOUT_SINGLETON();
  InChild([] {  // and with MPI ready
    InitMpi(MPI_THREAD_SERIALIZED);
    EXPECT_EQ(ringoCommInitMPI(nullptr, MPI_COMM_WORLD), ringoInvalidArgument);
    MPI_Finalize();
  });
}

// MPI_Init gives MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED is one short too: both are refused with
// a message naming the level ringo needs.
TEST(MpiUsage, ThreadLevelBelowSerializedIsInvalidUsage) {
  SKIP_WITHOUT_SINGLETON();
  for (int level : {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED}) {
    InChild([level] {
      const int provided = InitMpi(level);
      if (provided >= MPI_THREAD_SERIALIZED) {  // MPI may give more than asked: nothing to refuse
        MPI_Finalize();
        return;
      }
      ringoComm_t comm = nullptr;
      EXPECT_EQ(ringoCommInitMPI(&comm, MPI_COMM_WORLD), ringoInvalidUsage) << "thread level " << provided;
      EXPECT_EQ(comm, nullptr);
      const std::string msg = ringoGetLastError(nullptr);
      EXPECT_NE(msg.find("MPI_THREAD_SERIALIZED"), std::string::npos) << msg;
      MPI_Finalize();
    });
  }
}

TEST(MpiUsage, MpiCommNullIsInvalidArgument) {
  SKIP_WITHOUT_SINGLETON();
  InChild([] {
    InitMpi(MPI_THREAD_SERIALIZED);
    ringoComm_t comm = reinterpret_cast<ringoComm_t>(0x1);
    EXPECT_EQ(ringoCommInitMPI(&comm, MPI_COMM_NULL), ringoInvalidArgument);
    EXPECT_EQ(comm, nullptr);
    const std::string msg = ringoGetLastError(nullptr);
    EXPECT_NE(msg.find("MPI_COMM_NULL"), std::string::npos) << msg;
    MPI_Finalize();
  });
}

TEST(MpiUsage, AfterMpiFinalizeIsInvalidUsage) {
  SKIP_WITHOUT_SINGLETON();
  InChild([] {
    InitMpi(MPI_THREAD_SERIALIZED);
    MPI_Finalize();
    ringoComm_t comm = nullptr;
    EXPECT_EQ(ringoCommInitMPI(&comm, MPI_COMM_WORLD), ringoInvalidUsage);
    EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("finalized"), std::string::npos)
        << ringoGetLastError(nullptr);
  });
}

// The control for the cases above: with MPI ready, the same call makes a working ring of one.
TEST(MpiUsage, SingletonAtSerializedMakesARingOfOne) {
  SKIP_WITHOUT_SINGLETON();
  InChild([] {
    ASSERT_GE(InitMpi(MPI_THREAD_SERIALIZED), MPI_THREAD_SERIALIZED);
    ringoComm_t comm = nullptr;
    ASSERT_EQ(ringoCommInitMPI(&comm, MPI_COMM_WORLD), ringoSuccess) << ringoGetLastError(nullptr);
    int count = 0, rank = -1;
    EXPECT_EQ(ringoCommCount(comm, &count), ringoSuccess);
    EXPECT_EQ(ringoCommUserRank(comm, &rank), ringoSuccess);
    EXPECT_EQ(count, 1);
    EXPECT_EQ(rank, 0);
    const float in[3] = {1.5f, -2.0f, 4.0f};
    float out[3] = {0, 0, 0};
    EXPECT_EQ(ringoAllReduce(in, out, 3, ringoFloat32, ringoAvg, comm, nullptr), ringoSuccess);
    for (int i = 0; i < 3; i++) EXPECT_EQ(out[i], in[i]);
    EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
    MPI_Finalize();
  });
}

}  // namespace

#else  // !RINGO_HAVE_MPI

TEST(MpiUsage, NeedsAnMpiBuild) {
  GTEST_SKIP() << "libringo was built without MPI (no mpicc found, or MPI=0): ringoCommInitMPI does not exist";
}

#endif  // RINGO_HAVE_MPI
