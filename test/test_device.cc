// test_device.cc — device-pointer collectives on a GPU: ringoCommInitAll with one device listed N times
// (N = 2, 4, 8 ranks on one GPU, driven from one thread in groups, one stream per rank), forked ranks
// over CUDA IPC (N = 2, 4), every collective checked exactly on the host; refusals. Every GPU test
// skips, with the reason, where no GPU answers. CUDA is only touched in forked children (CUDA does
// not survive fork). Run: make test, and on a GPU make gpu-check.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "collective_cases.h"
#include "harness.h"
#include "ringo.h"

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

using ringo_cases::Case;
using ringo_cases::CaseBufs;
using ringo_cases::Coll;
using ringo_test::Options;
using ringo_test::Shared;

// Asked in a child process, so this process never initialises CUDA before the harness forks.
std::string NoGpuReason() {
#ifndef RINGO_HAVE_CUDA
  return "this build has no CUDA part (nvcc not found, or CUDA=0)";
#else
  static std::string cached = "?";
  if (cached != "?") return cached;
  int fds[2];
  if (pipe(fds) != 0) return cached = "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    std::string why = e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(e)
                      : n == 0         ? "no CUDA device: cudaGetDeviceCount reports 0"
                                       : "";
    if (write(fds[1], why.data(), why.size()) < 0) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  char buf[256];
  const ssize_t got = read(fds[0], buf, sizeof buf);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  cached = got > 0 ? std::string(buf, static_cast<size_t>(got)) : "";
  return cached;
#endif
}

#ifdef RINGO_HAVE_CUDA
using Pattern = ringo_cases::ExactPattern<ringo_cases::SmallIntData>;

// One rank's buffers of a case, mirrored in device memory (same layout, same in-place aliasing).
struct DeviceCase {
  CaseBufs host;
  char* base_a = nullptr;
  char* base_b = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  size_t bytes_a = 0, bytes_b = 0;
};

#define CU_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

void ToDevice(DeviceCase* d) {
  d->bytes_a = d->host.a.mem.size();
  d->bytes_b = d->host.b.mem.size();
  // Every Buf holds at least its guard bytes, so both allocations are non-empty.
  CU_OK(cudaMalloc(reinterpret_cast<void**>(&d->base_a), d->bytes_a));
  CU_OK(cudaMalloc(reinterpret_cast<void**>(&d->base_b), d->bytes_b));
  CU_OK(cudaMemcpy(d->base_a, d->host.a.mem.data(), d->bytes_a, cudaMemcpyHostToDevice));
  CU_OK(cudaMemcpy(d->base_b, d->host.b.mem.data(), d->bytes_b, cudaMemcpyHostToDevice));
  auto map = [&](unsigned char* p) -> void* {
    if (!p) return nullptr;
    if (p >= d->host.a.mem.data() && p < d->host.a.mem.data() + d->bytes_a)
      return d->base_a + (p - d->host.a.mem.data());
    return d->base_b + (p - d->host.b.mem.data());
  };
  d->send = map(d->host.send);
  d->recv = map(d->host.recv);
}

void ToHostAndFree(DeviceCase* d) {
  CU_OK(cudaMemcpy(d->host.a.mem.data(), d->base_a, d->bytes_a, cudaMemcpyDeviceToHost));
  CU_OK(cudaMemcpy(d->host.b.mem.data(), d->base_b, d->bytes_b, cudaMemcpyDeviceToHost));
  cudaFree(d->base_a);
  cudaFree(d->base_b);
}

ringoResult_t CallDevice(const Case& c, const DeviceCase& d, ringoComm_t comm, cudaStream_t s) {
  const ringoStream_t st = reinterpret_cast<ringoStream_t>(s);
  switch (c.coll) {
    case Coll::kAllReduce: return ringoAllReduce(d.send, d.recv, c.count, c.type, c.op, comm, st);
    case Coll::kReduceScatter: return ringoReduceScatter(d.send, d.recv, c.count, c.type, c.op, comm, st);
    case Coll::kAllGather: return ringoAllGather(d.send, d.recv, c.count, c.type, comm, st);
    case Coll::kBroadcast: return ringoBroadcast(d.send, d.recv, c.count, c.type, c.root, comm, st);
    case Coll::kReduce: return ringoReduce(d.send, d.recv, c.count, c.type, c.op, c.root, comm, st);
  }
  return ringoInternalError;
}

std::vector<Case> DeviceCases(int n) {
  std::vector<Case> cases;
  for (size_t count : {size_t{1}, static_cast<size_t>(n) + 1, size_t{1000003}}) {
    cases.push_back({Coll::kAllReduce, ringoFloat32, ringoSum, count, false, 0});
    cases.push_back({Coll::kAllReduce, ringoBfloat16, ringoAvg, count, true, 0});
    cases.push_back({Coll::kAllReduce, ringoInt64, ringoProd, count, false, 0});
    cases.push_back({Coll::kReduceScatter, ringoInt32, ringoMax, count, false, 0});
    cases.push_back({Coll::kAllGather, ringoUint8, ringoSum, count, true, 0});
    cases.push_back({Coll::kBroadcast, ringoFloat64, ringoSum, count, false, n - 1});
    cases.push_back({Coll::kReduce, ringoFloat16, ringoMin, count, true, n / 2});
  }
  return cases;
}

// The ranks ranks[] of a case, driven by this thread: buffers, one group of calls on each rank's
// stream, synchronise, check every rank's result exactly on the host.
void RunCaseOnDevice(const Case& c, int n, const std::vector<int>& ranks, const std::vector<ringoComm_t>& comms,
                     const std::vector<cudaStream_t>& streams) {
  const Pattern pat(c.type, c.coll == Coll::kAllGather || c.coll == Coll::kBroadcast ? ringoSum : c.op, n);
  std::vector<DeviceCase> d(ranks.size());
  for (size_t k = 0; k < ranks.size(); k++) {
    ringo_cases::Prepare(c, pat, n, ranks[k], &d[k].host);
    ToDevice(&d[k]);
  }
  if (ranks.size() > 1) {
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  }
  for (size_t k = 0; k < ranks.size(); k++)
    EXPECT_EQ(CallDevice(c, d[k], comms[k], streams[k]), ringoSuccess) << ringoGetLastError(comms[k]);
  if (ranks.size() > 1) {
    ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  }
  for (size_t k = 0; k < ranks.size(); k++) {
    CU_OK(cudaStreamSynchronize(streams[k]));
    ringoResult_t async = ringoInternalError;
    EXPECT_EQ(ringoCommGetAsyncError(comms[k], &async), ringoSuccess);
    EXPECT_EQ(async, ringoSuccess) << ringoGetLastError(comms[k]);
    ToHostAndFree(&d[k]);
    EXPECT_EQ(ringo_cases::CheckRecv(c, pat, n, ranks[k], d[k].host), "") << ringo_cases::Label(c) << " rank "
                                                                          << ranks[k];
  }
}

class DeviceInitAll : public testing::TestWithParam<int> {};

// N ranks on one GPU, in one process: the same device listed N times.
TEST_P(DeviceInitAll, EveryCollectiveOnOneGpuIsExact) {
  const std::string why = NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
  const int n = GetParam();
  Options o;  // one GPU, every kernel resident: a wait past 10 s is a bug, not slowness
  o.deadline_s = 60;
  o.ringo_timeout_s = 10;
  ringo_test::RunProcesses(1, [n](int, const ringoUniqueId&, Shared&) {
    std::vector<int> devlist(n, 0), ranks(n);
    std::vector<ringoComm_t> comms(n);
    std::vector<cudaStream_t> streams(n);
    ASSERT_EQ(ringoCommInitAll(comms.data(), n, devlist.data()), ringoSuccess) << ringoGetLastError(nullptr);
    for (int r = 0; r < n; r++) {
      ranks[r] = r;
      int dev = -1;
      EXPECT_EQ(ringoCommCuDevice(comms[r], &dev), ringoSuccess);
      EXPECT_EQ(dev, 0);
      CU_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    }
    for (const Case& c : DeviceCases(n)) {
      RunCaseOnDevice(c, n, ranks, comms, streams);
      if (testing::Test::HasFailure()) break;
    }
    ringoCommStats st;
    ASSERT_EQ(ringoCommGetStats(comms[0], &st), ringoSuccess);
    EXPECT_GT(st.bytesSent, 0u) << "device collectives count their bytes too";
    for (int r = 0; r < n; r++) {
      cudaStreamDestroy(streams[r]);
      EXPECT_EQ(ringoCommDestroy(comms[r]), ringoSuccess);
    }
  }, o);
}

INSTANTIATE_TEST_SUITE_P(N, DeviceInitAll, testing::Values(2, 4, 8));

// Ranks in different processes on one GPU: each maps its next rank's FIFO through CUDA IPC.
// Without MPS their kernels time-slice, slowly but correctly; gpu-check runs it with MPS too.
class DeviceProcesses : public testing::TestWithParam<int> {};

TEST_P(DeviceProcesses, AllReduceOverCudaIpcIsExact) {
  const std::string why = NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
  const int n = GetParam();
  Options o;  // time-sliced without MPS: slower, but every hand-over comes within a slice
  o.deadline_s = 60;
  o.ringo_timeout_s = 30;
  ringo_test::RunForked(n, [n](ringo_test::Team& t) {
    cudaStream_t s;
    CU_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (const Case& c : {Case{Coll::kAllReduce, ringoFloat32, ringoSum, 1000003, false, 0},
                          Case{Coll::kAllReduce, ringoBfloat16, ringoAvg, 4097, true, 0},
                          Case{Coll::kBroadcast, ringoInt32, ringoSum, 300001, false, 1}}) {
      RunCaseOnDevice(c, n, t.ranks, t.comms, {s});
      if (testing::Test::HasFailure()) break;
    }
    cudaStreamDestroy(s);
  }, o);
}

INSTANTIATE_TEST_SUITE_P(N, DeviceProcesses, testing::Values(2, 4));

// Refusals that need a GPU to be reached: mixed host/device buffers, device point-to-point, a
// device number out of range, ranks sharing the legacy stream outside a group (and the same
// inside a group, where it is safe).
TEST(DeviceRefusals, MixedBuffersDevicePointToPointAndBadDevices) {
  const std::string why = NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId&, Shared&) {
    int ndev = 0;
    CU_OK(cudaGetDeviceCount(&ndev));
    std::vector<ringoComm_t> comms(2);
    const int bad[2] = {0, ndev};
    EXPECT_EQ(ringoCommInitAll(comms.data(), 2, bad), ringoInvalidArgument);
    const int devs[2] = {0, 0};
    ASSERT_EQ(ringoCommInitAll(comms.data(), 2, devs), ringoSuccess) << ringoGetLastError(nullptr);
    float* dbuf = nullptr;
    CU_OK(cudaMalloc(reinterpret_cast<void**>(&dbuf), 1024 * sizeof(float)));
    std::vector<float> hbuf(1024);
    EXPECT_EQ(ringoAllReduce(dbuf, hbuf.data(), 1024, ringoFloat32, ringoSum, comms[0], nullptr), ringoInvalidArgument);
    EXPECT_EQ(ringoSend(dbuf, 1024, ringoFloat32, 1, comms[0], nullptr), ringoInvalidUsage);
    // Two ranks of this process on one GPU sharing the legacy stream would wait for each other in
    // stream order: refused outside a group, and safe inside one (every launch before any wait).
    EXPECT_EQ(ringoAllReduce(dbuf, dbuf, 1024, ringoFloat32, ringoSum, comms[0], nullptr), ringoInvalidUsage);
    ringoResult_t async = ringoInternalError;
    EXPECT_EQ(ringoCommGetAsyncError(comms[0], &async), ringoSuccess);
    EXPECT_EQ(async, ringoSuccess) << "refused calls leave the communicator usable";
    float* dbuf2 = nullptr;
    CU_OK(cudaMalloc(reinterpret_cast<void**>(&dbuf2), 1024 * sizeof(float)));
    std::vector<float> ones(1024, 1.0f), twos(1024, 2.0f), out(1024, 0.0f);
    CU_OK(cudaMemcpy(dbuf, ones.data(), 4096, cudaMemcpyHostToDevice));
    CU_OK(cudaMemcpy(dbuf2, twos.data(), 4096, cudaMemcpyHostToDevice));
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    EXPECT_EQ(ringoAllReduce(dbuf, dbuf, 1024, ringoFloat32, ringoSum, comms[0], nullptr), ringoSuccess);
    EXPECT_EQ(ringoAllReduce(dbuf2, dbuf2, 1024, ringoFloat32, ringoSum, comms[1], nullptr), ringoSuccess);
    ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
    CU_OK(cudaDeviceSynchronize());
    CU_OK(cudaMemcpy(out.data(), dbuf2, 4096, cudaMemcpyDeviceToHost));
    EXPECT_EQ(out[0], 3.0f);
    EXPECT_EQ(out[1023], 3.0f);
    cudaFree(dbuf2);
    cudaFree(dbuf);
    for (ringoComm_t c : comms) EXPECT_EQ(ringoCommDestroy(c), ringoSuccess);
  });
}
#endif  // RINGO_HAVE_CUDA

// Runs everywhere: a devlist with no GPU behind it is a clear error, never a crash.
TEST(DeviceNoGpu, InitAllWithADevlistWithoutAGpuIsAnError) {
  if (NoGpuReason().empty()) GTEST_SKIP() << "a GPU is present: DeviceRefusals covers devlist errors there";
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId&, Shared&) {
    ringoComm_t comms[2] = {nullptr, nullptr};
    const int devs[2] = {0, 0};
    EXPECT_EQ(ringoCommInitAll(comms, 2, devs), ringoUnhandledCudaError);
    EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("CUDA"), std::string::npos) << ringoGetLastError(nullptr);
  });
}

}  // namespace
