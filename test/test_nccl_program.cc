// test_nccl_program.cc — runs test/nccl/nccl_program.c, an NCCL client built unchanged against
// ringo's nccl.h and libnccl.so.2, with forked ranks and with one thread initialising all ranks in
// a group, and checks that it loaded ringo's library even with a competing libnccl.so.2 on
// LD_LIBRARY_PATH. Paths come from the Makefile. Run: make tests && ./build/test/test_nccl_program
#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#ifndef RINGO_NCCL_PROGRAM
#error "the Makefile passes the built nccl_program as RINGO_NCCL_PROGRAM"
#endif

namespace {

struct ProgramRun {
  bool finished = false;  // false: SIGKILLed at the deadline
  int status = -1;        // waitpid status when finished
  std::string output;     // stdout and stderr together
  bool ok() const { return finished && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs nccl_program with args, and the environment plus `env` ("NAME=value"), collecting its
// output. The program bounds itself (alarm, its own deadline for its ranks); this deadline is the
// backstop: the whole process group is SIGKILLed after deadline_s.
ProgramRun RunProgram(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
               double deadline_s = 90) {
  ProgramRun run;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return run;
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    // RINGO_TIMEOUT makes a library wait fail well before any deadline.
    setenv("RINGO_TIMEOUT", "20", 1);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv{const_cast<char*>(RINGO_NCCL_PROGRAM)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return run;
  }
  setpgid(pid, pid);  // also here, so the kill below reaches the group whichever runs first
  const double deadline = Now() + deadline_s;
  char buf[4096];
  for (;;) {
    const double left = deadline - Now();
    if (left <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;  // every writer (the program and its ranks) has gone
    run.output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  // The output is closed; the program itself gets what is left of the deadline to be reaped.
  while (Now() < deadline) {
    if (waitpid(pid, &run.status, WNOHANG) == pid) {
      run.finished = true;
      return run;
    }
    const timespec ms = {0, 2000000};
    nanosleep(&ms, nullptr);
  }
  kill(-pid, SIGKILL);
  waitpid(pid, &run.status, 0);
  return run;
}

std::string Describe(const ProgramRun& run) {
  std::string s = !run.finished ? "killed at the deadline"
                  : WIFEXITED(run.status) ? "exit status " + std::to_string(WEXITSTATUS(run.status))
                                          : "signal " + std::to_string(WTERMSIG(run.status));
  return s + "; output:\n" + run.output;
}

struct Case {
  const char* mode;
  int nranks;
};

class NcclProgram : public testing::TestWithParam<Case> {};

TEST_P(NcclProgram, EveryCheckPasses) {
  const Case c = GetParam();
  const ProgramRun run = RunProgram({c.mode, std::to_string(c.nranks)});
  EXPECT_TRUE(run.ok()) << "nccl_program " << c.mode << " " << c.nranks << ": " << Describe(run);
}

INSTANTIATE_TEST_SUITE_P(Modes, NcclProgram,
                         testing::Values(Case{"procs", 2}, Case{"procs", 3}, Case{"procs", 4}, Case{"group", 2},
                                         Case{"group", 4}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.mode) + std::to_string(info.param.nranks);
                         });

// The value after "key: " on its own line of out, or "" if there is none.
std::string Field(const std::string& out, const std::string& key) {
  const size_t at = out.find(key + ": ");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 2;
  return out.substr(from, out.find('\n', from) - from);
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : "(" + path + " does not resolve)";
}

void ExpectRingoLibrary(const ProgramRun& run, const std::string& setting) {
  ASSERT_TRUE(run.ok()) << setting << ": " << Describe(run);
  EXPECT_EQ(Field(run.output, "header"), "ringo") << setting << ": " << run.output;
  EXPECT_EQ(RealPath(Field(run.output, "library")), RealPath(RINGO_NCCL_LIB)) << setting << ": " << run.output;
  EXPECT_EQ(Field(run.output, "version").substr(0, 5), "23007") << setting << ": " << run.output;
}

TEST(NcclProgramLinkage, LoadsRingosLibrary) {
  ExpectRingoLibrary(RunProgram({"where"}, {}, 30), "environment as is");
}

// A libnccl.so.2 on LD_LIBRARY_PATH (a copy of the shim in a scratch folder, and a CUDA
// install's folder when it holds one) must not shadow the library the program was linked with.
TEST(NcclProgramLinkage, LdLibraryPathDoesNotShadowIt) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/ringo-nccl-shadow-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path dir(tmpl);
  std::error_code ec;
  fs::copy_file(RINGO_NCCL_LIB, dir / "libnccl.so.2", ec);
  ASSERT_FALSE(ec) << ec.message();
  std::string path = dir.string();
  for (const char* cuda : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib"})
    if (fs::exists(fs::path(cuda) / "libnccl.so.2", ec)) path += std::string(":") + cuda;
  const ProgramRun run = RunProgram({"where"}, {"LD_LIBRARY_PATH=" + path}, 30);
  fs::remove_all(dir, ec);
  ExpectRingoLibrary(run, "LD_LIBRARY_PATH=" + path);
}

}  // namespace
