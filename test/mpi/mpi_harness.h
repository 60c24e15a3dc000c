// mpi_harness.h — helpers for the MPI test binaries: waits that sleep instead of spinning (8 ranks
// share 2 cores), a sub-communicator runner, and capture of ringo's INIT log to check ring links.
// Header-only (the Makefile builds test/mpi/test_*.cc with test/mpi/main.cc); used by both.
#ifndef RINGO_TEST_MPI_HARNESS_H_
#define RINGO_TEST_MPI_HARNESS_H_

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only: Open MPI's C++ bindings fail -Wextra -Werror
#endif
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>

#include "ringo.h"

namespace ringo_mpi_test {

// Completes req by polling with naps. Open MPI's blocking calls spin, and a rank that spins while
// waiting for its turn takes a core away from the ranks that do the work.
inline int SleepyWait(MPI_Request* req, MPI_Status* status = MPI_STATUS_IGNORE) {
  const struct timespec nap = {0, 200000};
  for (;;) {
    int done = 0;
    const int err = MPI_Test(req, &done, status);
    if (err != MPI_SUCCESS || done) return err;
    nanosleep(&nap, nullptr);
  }
}

inline int SleepyBarrier(MPI_Comm comm) {
  MPI_Request req;
  const int err = MPI_Ibarrier(comm, &req);
  return err != MPI_SUCCESS ? err : SleepyWait(&req);
}

inline int CommRank(MPI_Comm comm) {
  int r = -1;
  MPI_Comm_rank(comm, &r);
  return r;
}

inline int CommSize(MPI_Comm comm) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  return n;
}

// 64-bit FNV-1a, for comparing buffers and test lists across ranks.
inline uint64_t Hash64(const void* data, size_t bytes, uint64_t h = 0xcbf29ce484222325ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

inline const char* ResultName(ringoResult_t res) {
  static const char* const names[] = {"ringoSuccess",     "ringoUnhandledCudaError", "ringoSystemError",
                                      "ringoInternalError", "ringoInvalidArgument",  "ringoInvalidUsage",
                                      "ringoRemoteError", "ringoInProgress",         "ringoTimeout"};
  return res >= 0 && res <= ringoTimeout ? names[res] : "unknown ringoResult_t";
}

// Runs fn(sub) on ranks 0..n-1 of world, with sub their own communicator from MPI_Comm_split (key
// `key(rank)`, so a test can renumber them); the other ranks wait. Every rank of world returns
// from here together, whatever fn did, so the next test starts in step.
inline void OnFirstRanks(MPI_Comm world, int n, const std::function<int(int)>& key,
                         const std::function<void(MPI_Comm)>& fn) {
  const int rank = CommRank(world);
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(world, rank < n ? 0 : MPI_UNDEFINED, key(rank), &sub);
  if (sub != MPI_COMM_NULL) {
    fn(sub);
    MPI_Comm_free(&sub);
  }
  SleepyBarrier(world);
}

// Sends what the library writes to stderr (fd 2) into a temporary file while the object lives;
// Text() ends the capture and returns it. Used to read the INIT log's link lines.
class StderrCapture {
 public:
  StderrCapture() {
    fflush(stderr);
    file_ = tmpfile();
    saved_ = dup(2);
    if (file_ && saved_ >= 0) dup2(fileno(file_), 2);
  }
  ~StderrCapture() { Text(); }
  std::string Text() {
    if (saved_ >= 0) {
      fflush(stderr);
      dup2(saved_, 2);
      close(saved_);
      saved_ = -1;
    }
    if (file_) {
      rewind(file_);
      char buf[4096];
      size_t got;
      while ((got = fread(buf, 1, sizeof buf, file_)) > 0) text_.append(buf, got);
      fclose(file_);
      file_ = nullptr;
    }
    return text_;
  }

 private:
  FILE* file_ = nullptr;
  int saved_ = -1;
  std::string text_;
};

}  // namespace ringo_mpi_test

#endif  // RINGO_TEST_MPI_HARNESS_H_
