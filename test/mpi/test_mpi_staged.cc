// test_mpi_staged.cc — staged device collectives over MPI links: the path a device ring takes when
// it leaves the host (src/staged.c), with fake hosts (RINGO_HOSTNAME) and a worker thread standing
// in for ringo's CUDA stream (test/staged_fake.h); and MPI's turns at MPI_THREAD_MULTIPLE. Needs no GPU.
// Run: mpirun -np 4 build/test/mpi/test_mpi_staged.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "mpi_harness.h"
#include "ringo_mpi.h"
#include "../staged_fake.h"
#include "device/p2p_device.h"

// The host functions of a staged collective call MPI from the stream's thread.
int RingoTestMpiThreadLevel() { return MPI_THREAD_MULTIPLE; }

namespace {

using namespace ringo_mpi_test;
using namespace ringo_staged_test;

// A communicator over sub whose rank believes it runs on host `host` (so ranks on different fake
// hosts are joined by MPI links); nullptr if ringoCommInitMPI failed.
ringoComm_t InitOnFakeHost(MPI_Comm sub, int host) {
  setenv("RINGO_HOSTNAME", ("staged-host-" + std::to_string(host)).c_str(), 1);
  ringoComm_t comm = nullptr;
  const ringoResult_t res = ringoCommInitMPI(&comm, sub);
  unsetenv("RINGO_HOSTNAME");
  return res == ringoSuccess ? comm : nullptr;
}

// Runs body(comm, rank) on ranks 0..n-1 of the world, rank r on fake host hosts[r] (prepare, if
// given, first: a device to bind to), then destroys the communicator.
void OnFakeHosts(int n, const std::vector<int>& hosts, const std::function<void(ringoComm_t, int)>& body,
                 const std::function<void()>& prepare = nullptr) {
  if (CommSize(MPI_COMM_WORLD) < n) GTEST_SKIP() << "needs " << n << " MPI ranks";
  OnFirstRanks(MPI_COMM_WORLD, n, [](int r) { return r; }, [&](MPI_Comm sub) {
    const int r = CommRank(sub);
    if (prepare) prepare();
    ringoComm_t comm = InitOnFakeHost(sub, hosts[r]);
    ASSERT_NE(nullptr, comm) << ringoGetLastError(nullptr);
    body(comm, r);
    EXPECT_EQ(ringoSuccess, ringoCommDestroy(comm));
  });
}

// MPI's turns at MPI_THREAD_MULTIPLE (this suite's level; make test also runs this test over TCP,
// OMPI_MCA_btl=tcp,self): two communicators, the world of two fake hosts and each host's own (shared
// memory only). Rank 1 sends to rank 2 on the world, rank 2 forwards to rank 0, and ranks 0 and 1
// all-reduce on their host's communicator: rank 1 waits there on shm for rank 0, which waits for
// rank 2, which waits for rank 1's MPI send, which moves over TCP only in rank 1's MPI calls. The
// host communicator has no MPI links of its own, so its waits give MPI turns only at this level.
TEST(MpiTurns, AnotherCommunicatorsWaitsGiveMpiTurns) {
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 MPI ranks";
  OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
    const int r = CommRank(sub), host = r / 2;
    ringoComm_t world = InitOnFakeHost(sub, host);
    MPI_Comm local_mpi;
    MPI_Comm_split(sub, host, r, &local_mpi);
    ringoComm_t local = nullptr;
    ASSERT_EQ(ringoSuccess, ringoCommInitMPI(&local, local_mpi)) << ringoGetLastError(nullptr);
    ASSERT_NE(nullptr, world) << ringoGetLastError(nullptr);
    const size_t count = 100000;  // 400 KB: far above Open MPI's eager limit
    std::vector<int32_t> a(count, r + 1), b(count, -1);
    if (r == 1) {
      EXPECT_EQ(ringoSuccess, ringoSend(a.data(), count, ringoInt32, 2, world, nullptr));
    } else if (r == 2) {
      EXPECT_EQ(ringoSuccess, ringoRecv(b.data(), count, ringoInt32, 1, world, nullptr)) << ringoGetLastError(world);
      EXPECT_EQ(ringoSuccess, ringoSend(b.data(), count, ringoInt32, 0, world, nullptr));
    } else if (r == 0) {
      EXPECT_EQ(ringoSuccess, ringoRecv(b.data(), count, ringoInt32, 2, world, nullptr)) << ringoGetLastError(world);
      EXPECT_EQ(2, b[count - 1]) << "rank 0 got rank 1's bytes through rank 2";
    }
    int64_t mine = r + 1, sum = 0;
    EXPECT_EQ(ringoSuccess, ringoAllReduce(&mine, &sum, 1, ringoInt64, ringoSum, local, nullptr))
        << ringoGetLastError(local);
    EXPECT_EQ(host == 0 ? 3 : 7, sum);
    SleepyBarrier(sub);
    EXPECT_EQ(ringoSuccess, ringoCommDestroy(local));
    EXPECT_EQ(ringoSuccess, ringoCommDestroy(world));
    MPI_Comm_free(&local_mpi);
  });
}

// Ranks 0..n-1 of the world, host of rank r = hosts[r]; every collective staged and on the host.
void StagedOnFakeHosts(int n, const std::vector<int>& hosts) {
  OnFakeHosts(n, hosts, [n](ringoComm_t comm, int r) {
    Stager s;
    EveryCollective(comm, n, r, s, 1000, ringoFloat32, ringoSum);
    EveryCollective(comm, n, r, s, 70000, ringoFloat64, ringoAvg);  // many slices over the MPI links
    EveryCollective(comm, n, r, s, 5, ringoInt32, ringoMax);
  });
}

// What rank `from` sends rank `to` in the all-to-all tests.
int32_t PairValue(int from, int to, size_t i) { return from * 1000000 + to * 10000 + (int32_t)(i % 9973); }

// Device point-to-point's proxy over MPI links (it calls MPI from its own thread): a batched
// all-to-all of `count` int32 per pair, itself included, checked against PairValue.
void ProxyAllToAllOnFakeHosts(int n, const std::vector<int>& hosts, size_t count) {
  OnFakeHosts(n, hosts, [n, count](ringoComm_t comm, int r) {
    Stager s;
    std::vector<int32_t> out(count * n), in(count * n, -1);
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++) out[p * count + i] = PairValue(r, p, i);
    std::vector<ringo_p2p_call> calls;
    for (int p = 0; p < n; p++) {
      calls.push_back({1, p, &out[p * count], count, ringoInt32});
      calls.push_back({0, p, &in[p * count], count, ringoInt32});
    }
    ASSERT_EQ(ringoSuccess, ringo_p2p_device_launch(comm, &s.stage, calls.data(), calls.size(), &s.ops))
        << ringo_thread_last_error();
    s.stream.Drain();
    EXPECT_EQ(ringoSuccess, AsyncError(comm)) << ringoGetLastError(comm);
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++)
        ASSERT_EQ(PairValue(p, r, i), in[p * count + i]) << "from rank " << p << ", element " << i;
  });
}

TEST(MpiProxy, AllToAllTwoHosts) { ProxyAllToAllOnFakeHosts(2, {0, 1}, 100000); }
TEST(MpiProxy, AllToAllTwoHostsTwoRanksEach) { ProxyAllToAllOnFakeHosts(4, {0, 0, 1, 1}, 30000); }

#ifdef RINGO_HAVE_CUDA
// Runs body(comm, stream, rank) on ranks 0..n-1 of the world, rank r on fake host hosts[r], each
// with a communicator bound to device 0 and a stream of its own; skips without a GPU.
void OnDeviceRanks(int n, const std::vector<int>& hosts,
                   const std::function<void(ringoComm_t, cudaStream_t, int)>& body) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    GTEST_SKIP() << "no CUDA device";
  }
  OnFakeHosts(n, hosts, [&](ringoComm_t comm, int r) {
    cudaStream_t stream;
    ASSERT_EQ(cudaSuccess, cudaStreamCreate(&stream));
    body(comm, stream, r);
    cudaStreamDestroy(stream);
  }, [] { ASSERT_EQ(cudaSuccess, cudaSetDevice(0)); });
}

// ringoSend/ringoRecv on device buffers across (fake) hosts, through the public API on a GPU: a
// grouped all-to-all. Run by make gpu-check.
void DeviceAllToAllOnFakeHosts(int n, const std::vector<int>& hosts) {
  OnDeviceRanks(n, hosts, [n](ringoComm_t comm, cudaStream_t stream, int r) {
    const size_t count = 200000, bytes = count * n * sizeof(int32_t);
    std::vector<int32_t> out(count * n), got(count * n);
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++) out[p * count + i] = PairValue(r, p, i);
    int32_t *dout = nullptr, *din = nullptr;
    ASSERT_EQ(cudaSuccess, cudaMalloc(reinterpret_cast<void**>(&dout), bytes));
    ASSERT_EQ(cudaSuccess, cudaMalloc(reinterpret_cast<void**>(&din), bytes));
    ASSERT_EQ(cudaSuccess, cudaMemcpy(dout, out.data(), bytes, cudaMemcpyHostToDevice));
    ASSERT_EQ(ringoSuccess, ringoGroupStart());
    for (int p = 0; p < n; p++) {
      EXPECT_EQ(ringoSuccess, ringoSend(dout + p * count, count, ringoInt32, p, comm, stream));
      EXPECT_EQ(ringoSuccess, ringoRecv(din + p * count, count, ringoInt32, p, comm, stream));
    }
    ASSERT_EQ(ringoSuccess, ringoGroupEnd()) << ringoGetLastError(comm);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
    ASSERT_EQ(ringoSuccess, AsyncError(comm)) << ringoGetLastError(comm);
    ASSERT_EQ(cudaSuccess, cudaMemcpy(got.data(), din, bytes, cudaMemcpyDeviceToHost));
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++) ASSERT_EQ(PairValue(p, r, i), got[p * count + i]) << "from rank " << p;
    cudaFree(dout);
    cudaFree(din);
  });
}

TEST(MpiStagedDevice, AllToAllFourHostsMixed) { DeviceAllToAllOnFakeHosts(4, {0, 0, 1, 1}); }

// The same through the public API on device buffers (a GPU, every rank on device 0): the ring
// leaves the (fake) host, so ringo stages the buffers through host memory on its stream. Results
// must equal the host path's on the same inputs. Run by make gpu-check.
void DeviceOnFakeHosts(int n, const std::vector<int>& hosts) {
  OnDeviceRanks(n, hosts, [n](ringoComm_t comm, cudaStream_t stream, int r) {
    const size_t count = 300000, es = sizeof(float);
    for (int c = RINGO_COLL_ALLREDUCE; c <= RINGO_COLL_REDUCE; c++) {
      const auto coll = (ringo_coll)c;
      const size_t in_elems = coll == RINGO_COLL_REDUCESCATTER ? count * n : count;
      const size_t out_elems = coll == RINGO_COLL_ALLGATHER ? count * n : count;
      std::vector<uint8_t> in = Input(in_elems * es, r, ringoFloat32), host(out_elems * es), got(out_elems * es);
      void *din = nullptr, *dout = nullptr;
      ASSERT_EQ(cudaSuccess, cudaMalloc(&din, in.size()));
      ASSERT_EQ(cudaSuccess, cudaMalloc(&dout, got.size()));
      ASSERT_EQ(cudaSuccess, cudaMemcpy(din, in.data(), in.size(), cudaMemcpyHostToDevice));
      ASSERT_EQ(cudaSuccess, cudaMemset(dout, 0, got.size()));
      const int root = n - 1;
      ringoResult_t call;
      switch (coll) {
        case RINGO_COLL_ALLREDUCE: call = ringoAllReduce(din, dout, count, ringoFloat32, ringoSum, comm, stream); break;
        case RINGO_COLL_REDUCESCATTER:
          call = ringoReduceScatter(din, dout, count, ringoFloat32, ringoSum, comm, stream);
          break;
        case RINGO_COLL_ALLGATHER: call = ringoAllGather(din, dout, count, ringoFloat32, comm, stream); break;
        case RINGO_COLL_BROADCAST: call = ringoBroadcast(din, dout, count, ringoFloat32, root, comm, stream); break;
        default: call = ringoReduce(din, dout, count, ringoFloat32, ringoSum, root, comm, stream); break;
      }
      ASSERT_EQ(ringoSuccess, call) << CollName(coll) << ": " << ringoGetLastError(comm);
      ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
      ASSERT_EQ(ringoSuccess, AsyncError(comm)) << CollName(coll) << ": " << ringoGetLastError(comm);
      ASSERT_EQ(cudaSuccess, cudaMemcpy(got.data(), dout, got.size(), cudaMemcpyDeviceToHost));
      ASSERT_EQ(ringoSuccess, HostCall(comm, coll, in.data(), host.data(), count, ringoFloat32, ringoSum, root))
          << ringoGetLastError(comm);
      if (coll != RINGO_COLL_REDUCE || r == root) {
        EXPECT_EQ(0, memcmp(got.data(), host.data(), got.size())) << CollName(coll) << " on device differs from the host path";
      }
      cudaFree(din);
      cudaFree(dout);
    }
  });
}

TEST(MpiStagedDevice, TwoHosts) { DeviceOnFakeHosts(2, {0, 1}); }
TEST(MpiStagedDevice, FourHostsMixed) { DeviceOnFakeHosts(4, {0, 0, 1, 1}); }
#endif

TEST(MpiStaged, TwoHostsOneRankEach) { StagedOnFakeHosts(2, {0, 1}); }
TEST(MpiStaged, TwoHostsTwoRanksEach) { StagedOnFakeHosts(4, {0, 0, 1, 1}); }
TEST(MpiStaged, FourHosts) { StagedOnFakeHosts(4, {0, 1, 2, 3}); }

}  // namespace
