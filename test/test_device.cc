// test_device.cc — device-pointer collectives on a GPU: ringoCommInitAll with one device listed N times
// (N = 2, 4, 8 ranks on one GPU, driven from one thread in groups, one stream per rank), forked ranks
// over CUDA IPC (N = 2, 4), every collective checked exactly on the host; device ringoSend/ringoRecv
// (all-to-all, ring shift; one process and three); refusals. Every GPU test
// skips, with the reason, where no GPU answers. CUDA is only touched in forked children (CUDA does
// not survive fork). Run: make test, and on a GPU make gpu-check.
#include <gtest/gtest.h>

#include <chrono>

#include <functional>
#include <string>
#include <vector>

#include "collective_cases.h"
#include "gpu_probe.h"
#include "harness.h"
#include "ringo.h"

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

using ringo_cases::Case;
using ringo_cases::CaseBufs;
using ringo_cases::Coll;
using ringo_test::NoGpuReason;  // test/gpu_probe.h
using ringo_test::Options;
using ringo_test::Shared;

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

// cudaMemcpy from pageable memory may return before its DMA lands, and cudaMemset is asynchronous;
// both run on the legacy stream, which the non-blocking streams of the tests and of ringo do not
// wait for. So uploads are settled before any call that reads them (other ranks' non-blocking work,
// which may be waiting for this rank, is not waited for).
void SettleUploads() { CU_OK(cudaStreamSynchronize(cudaStreamLegacy)); }

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
    // The integer types and ops the ones above leave out, through the ring kernel too.
    cases.push_back({Coll::kAllReduce, ringoInt8, ringoAvg, count, false, 0});
    cases.push_back({Coll::kAllReduce, ringoUint32, ringoSum, count, true, 0});
    cases.push_back({Coll::kAllReduce, ringoUint64, ringoMax, count, false, 0});
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
  SettleUploads();
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
    EXPECT_TRUE(d[k].host.GuardsIntact()) << ringo_cases::Label(c) << " rank " << ranks[k] << " wrote past a buffer";
    if (!c.inplace) {
      EXPECT_EQ(ringo_cases::CheckSendUnchanged(c, pat, n, ranks[k], d[k].host), "")
          << ringo_cases::Label(c) << " rank " << ranks[k];
    }
  }
}

// N ranks on GPU 0 in one (forked) process, from ringoCommInitAll with device 0 listed N times, each
// with a stream of its own: body(ranks, comms, streams), then everything destroyed. One GPU, every
// kernel resident: a wait past 10 s is a bug, not slowness.
using RanksFn = std::function<void(const std::vector<int>&, const std::vector<ringoComm_t>&,
                                   const std::vector<cudaStream_t>&)>;
void OnOneGpu(int n, const RanksFn& body, double timeout_s = 10) {
  Options o;
  o.deadline_s = 60;
  o.ringo_timeout_s = timeout_s;
  // More ranks' streams than CUDA's 8 hardware queues would share queues, and a spinning ring kernel
  // at the head of one could hold back the kernel it waits for (cuda/README.md).
  o.env = {{"CUDA_DEVICE_MAX_CONNECTIONS", "32"}};
  ringo_test::RunProcesses(1, [&](int, const ringoUniqueId&, Shared&) {
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
    body(ranks, comms, streams);
    for (int r = 0; r < n; r++) {
      cudaStreamDestroy(streams[r]);
      EXPECT_EQ(ringoCommDestroy(comms[r]), ringoSuccess);
    }
  }, o);
}

class DeviceInitAll : public testing::TestWithParam<int> {};

// N ranks on one GPU, in one process: the same device listed N times.
TEST_P(DeviceInitAll, EveryCollectiveOnOneGpuIsExact) {
  const std::string why = NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
  const int n = GetParam();
  OnOneGpu(n, [n](const std::vector<int>& ranks, const std::vector<ringoComm_t>& comms,
                  const std::vector<cudaStream_t>& streams) {
    for (const Case& c : DeviceCases(n)) {
      RunCaseOnDevice(c, n, ranks, comms, streams);
      if (testing::Test::HasFailure()) break;
    }
    ringoCommStats st;
    ASSERT_EQ(ringoCommGetStats(comms[0], &st), ringoSuccess);
    EXPECT_GT(st.bytesSent, 0u) << "device collectives count their bytes too";
  });
}

INSTANTIATE_TEST_SUITE_P(N, DeviceInitAll, testing::Values(2, 4, 8));

// The ring kernel's own ways out, on a real GPU (the CPU tests run their code emulated): a rank
// whose neighbour never calls gives up at RINGO_TIMEOUT (%globaltimer) with the code
// ringoCommGetAsyncError reports, and its stream goes on; ranks that disagree on the op stop at the
// first slot (its stamp), long before any timeout.
TEST(DeviceFailures, ATimeoutAndAMismatchEndAsErrorsOnTheGpu) {
  const std::string why = NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
  const size_t count = 1 << 20;
  OnOneGpu(2, [count](const std::vector<int>&, const std::vector<ringoComm_t>& comms,
                      const std::vector<cudaStream_t>& streams) {
    float* buf = nullptr;
    CU_OK(cudaMalloc(reinterpret_cast<void**>(&buf), count * sizeof(float)));
    CU_OK(cudaMemset(buf, 0, count * sizeof(float)));
    SettleUploads();
    EXPECT_EQ(ringoAllReduce(buf, buf, count, ringoFloat32, ringoSum, comms[0], (ringoStream_t)streams[0]),
              ringoSuccess) << ringoGetLastError(comms[0]);
    CU_OK(cudaStreamSynchronize(streams[0]));  // ends: the kernel gives up by itself
    ringoResult_t async = ringoSuccess;
    EXPECT_EQ(ringoCommGetAsyncError(comms[0], &async), ringoSuccess);
    EXPECT_EQ(async, ringoTimeout) << ringoGetLastError(comms[0]);
    cudaFree(buf);
  }, 1);
  OnOneGpu(2, [count](const std::vector<int>&, const std::vector<ringoComm_t>& comms,
                      const std::vector<cudaStream_t>& streams) {
    std::vector<float*> buf(2);
    for (float*& b : buf) {
      CU_OK(cudaMalloc(reinterpret_cast<void**>(&b), count * sizeof(float)));
      CU_OK(cudaMemset(b, 0, count * sizeof(float)));
    }
    SettleUploads();
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    EXPECT_EQ(ringoAllReduce(buf[0], buf[0], count, ringoFloat32, ringoSum, comms[0], (ringoStream_t)streams[0]),
              ringoSuccess);
    EXPECT_EQ(ringoAllReduce(buf[1], buf[1], count, ringoFloat32, ringoMax, comms[1], (ringoStream_t)streams[1]),
              ringoSuccess);
    ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
    ringoResult_t async[2] = {ringoSuccess, ringoSuccess};
    for (int r = 0; r < 2; r++) {
      CU_OK(cudaStreamSynchronize(streams[r]));
      EXPECT_EQ(ringoCommGetAsyncError(comms[r], &async[r]), ringoSuccess);
      EXPECT_NE(async[r], ringoSuccess) << "rank " << r << " did not see the mismatch";
    }
    EXPECT_TRUE(async[0] == ringoInvalidUsage || async[1] == ringoInvalidUsage)
        << "no rank named the mismatch: " << ringoGetLastError(comms[0]) << " / " << ringoGetLastError(comms[1]);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0)
        << "found by the slot stamps, not by the 10 s timeout";
    for (float* b : buf) cudaFree(b);
  });
}

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

// What rank `from` sends rank `to` in the point-to-point tests: distinct for every pair.
float P2pValue(int from, int to, size_t i) { return (float)(from * 64 + to) + (float)(i % 1021) * 0.25f; }

// The ranks ranks[] (comms[k], streams[k]) driven by this thread: a grouped all-to-all of `count`
// floats per pair on device buffers, itself included, checked on the host. A second round shows
// the staging and proxy reused.
void DeviceAllToAll(int n, const std::vector<int>& ranks, const std::vector<ringoComm_t>& comms,
                    const std::vector<cudaStream_t>& streams, size_t count) {
  const size_t bytes = count * sizeof(float);
  std::vector<float*> out(ranks.size()), in(ranks.size());
  for (size_t k = 0; k < ranks.size(); k++) {
    std::vector<float> h(count * (size_t)n);
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++) h[(size_t)p * count + i] = P2pValue(ranks[k], p, i);
    CU_OK(cudaMalloc(reinterpret_cast<void**>(&out[k]), bytes * (size_t)n));
    CU_OK(cudaMalloc(reinterpret_cast<void**>(&in[k]), bytes * (size_t)n));
    CU_OK(cudaMemcpy(out[k], h.data(), bytes * (size_t)n, cudaMemcpyHostToDevice));
  }
  for (int round = 0; round < 2; round++) {
    for (size_t k = 0; k < ranks.size(); k++) CU_OK(cudaMemset(in[k], 0xff, bytes * (size_t)n));
    SettleUploads();
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    for (size_t k = 0; k < ranks.size(); k++)
      for (int p = 0; p < n; p++) {
        const ringoStream_t st = reinterpret_cast<ringoStream_t>(streams[k]);
        EXPECT_EQ(ringoSend(out[k] + (size_t)p * count, count, ringoFloat32, p, comms[k], st), ringoSuccess);
        EXPECT_EQ(ringoRecv(in[k] + (size_t)p * count, count, ringoFloat32, p, comms[k], st), ringoSuccess);
      }
    ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
    for (size_t k = 0; k < ranks.size(); k++) {
      CU_OK(cudaStreamSynchronize(streams[k]));
      ringoResult_t async = ringoInternalError;
      EXPECT_EQ(ringoCommGetAsyncError(comms[k], &async), ringoSuccess);
      ASSERT_EQ(async, ringoSuccess) << ringoGetLastError(comms[k]);
      std::vector<float> got(count * (size_t)n);
      CU_OK(cudaMemcpy(got.data(), in[k], bytes * (size_t)n, cudaMemcpyDeviceToHost));
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < count; i++)
          ASSERT_EQ(got[(size_t)p * count + i], P2pValue(p, ranks[k], i))
              << "round " << round << ": rank " << ranks[k] << " from rank " << p << ", element " << i;
    }
  }
  for (size_t k = 0; k < ranks.size(); k++) {
    cudaFree(out[k]);
    cudaFree(in[k]);
  }
}

class DeviceP2pInitAll : public testing::TestWithParam<int> {};

// ringoSend/ringoRecv on device buffers, N ranks on one GPU in one process: a grouped all-to-all,
// then a shift along the ring, one group per rank, from this one thread (a group of device calls
// only enqueues, so rank 0's returns before rank 1 has called anything: with host buffers this
// would need a thread per rank), then a host collective on the same communicators (it waits for
// their device sends and receives first).
TEST_P(DeviceP2pInitAll, AllToAllAndAShiftOnOneGpu) {
  const std::string why = NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
  const int n = GetParam();
  OnOneGpu(n, [n](const std::vector<int>& ranks, const std::vector<ringoComm_t>& comms,
                  const std::vector<cudaStream_t>& streams) {
    DeviceAllToAll(n, ranks, comms, streams, (1u << 20) / sizeof(float));  // 1 MiB per pair
    const size_t count = 300001;
    std::vector<float*> buf(n);
    for (int r = 0; r < n; r++) {
      std::vector<float> h(count);
      for (size_t i = 0; i < count; i++) h[i] = P2pValue(r, (r + 1) % n, i);
      CU_OK(cudaMalloc(reinterpret_cast<void**>(&buf[r]), 2 * count * sizeof(float)));
      CU_OK(cudaMemcpy(buf[r], h.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    }
    SettleUploads();
    for (int r = 0; r < n; r++) { /* one group per rank: its send and receive progress together */
      const ringoStream_t st = reinterpret_cast<ringoStream_t>(streams[r]);
      ASSERT_EQ(ringoGroupStart(), ringoSuccess);
      EXPECT_EQ(ringoSend(buf[r], count, ringoFloat32, (r + 1) % n, comms[r], st), ringoSuccess);
      EXPECT_EQ(ringoRecv(buf[r] + count, count, ringoFloat32, (r + n - 1) % n, comms[r], st), ringoSuccess);
      // Count 0 is a no-op, never a wait for the communicator's device work (rank r + 1 has not
      // called yet, so that would wait for ever).
      EXPECT_EQ(ringoSend(buf[r], 0, ringoFloat32, (r + 1) % n, comms[r], nullptr), ringoSuccess);
      ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(comms[r]);
    }
    // Before any stream is synchronised: the host collective waits for the proxies' batches.
    std::vector<std::vector<int32_t>> hin(n, std::vector<int32_t>(1000)), hout(n, std::vector<int32_t>(1000));
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    for (int r = 0; r < n; r++) {
      for (auto& x : hin[r]) x = r + 1;
      EXPECT_EQ(ringoAllReduce(hin[r].data(), hout[r].data(), 1000, ringoInt32, ringoSum, comms[r], nullptr), ringoSuccess);
    }
    ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
    for (int r = 0; r < n; r++) EXPECT_EQ(hout[r][999], n * (n + 1) / 2);
    for (int r = 0; r < n; r++) {
      CU_OK(cudaStreamSynchronize(streams[r]));
      std::vector<float> got(count);
      CU_OK(cudaMemcpy(got.data(), buf[r] + count, count * sizeof(float), cudaMemcpyDeviceToHost));
      const int prev = (r + n - 1) % n;
      for (size_t i = 0; i < count; i++) ASSERT_EQ(got[i], P2pValue(prev, r, i)) << "rank " << r << " element " << i;
      cudaFree(buf[r]);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(N, DeviceP2pInitAll, testing::Values(2, 4));

// The same all-to-all with one rank per process (shm links between the proxies).
TEST(DeviceP2pProcesses, AllToAllAcrossProcessesOnOneGpu) {
  const std::string why = NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
  Options o;
  o.deadline_s = 60;
  o.ringo_timeout_s = 30;
  ringo_test::RunForked(3, [](ringo_test::Team& t) {
    cudaStream_t s;
    CU_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    DeviceAllToAll(t.nranks, t.ranks, t.comms, {s}, 100003);
    cudaStreamDestroy(s);
  }, o);
}

// Refusals that need a GPU to be reached: mixed host/device buffers (in a collective, and device
// and host sends of one communicator in one group), a device number out of range, ranks sharing
// the legacy stream outside a group (collective and send; the same inside a group is safe).
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
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    EXPECT_EQ(ringoSend(dbuf, 1024, ringoFloat32, 1, comms[0], nullptr), ringoSuccess);
    EXPECT_EQ(ringoSend(hbuf.data(), 1024, ringoFloat32, 1, comms[0], nullptr), ringoSuccess);
    EXPECT_EQ(ringoGroupEnd(), ringoInvalidUsage);
    EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("mix device and host"), std::string::npos)
        << ringoGetLastError(nullptr);
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
