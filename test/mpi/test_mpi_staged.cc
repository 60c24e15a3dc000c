// test_mpi_staged.cc — staged device collectives over MPI links: the path a device ring takes when
// it leaves the host (src/staged.c), with fake hosts (RINGO_HOSTNAME) and a worker thread standing
// in for ringo's CUDA stream (test/staged_fake.h). Needs no GPU. Run: mpirun -np 4 build/test/mpi/test_mpi_staged.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "mpi_harness.h"
#include "ringo_mpi.h"
#include "../staged_fake.h"

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

// Ranks 0..n-1 of the world, host of rank r = hosts[r]; every collective staged and on the host.
void StagedOnFakeHosts(int n, const std::vector<int>& hosts) {
  if (CommSize(MPI_COMM_WORLD) < n) GTEST_SKIP() << "needs " << n << " MPI ranks";
  OnFirstRanks(MPI_COMM_WORLD, n, [](int r) { return r; }, [&](MPI_Comm sub) {
    const int r = CommRank(sub);
    ringoComm_t comm = InitOnFakeHost(sub, hosts[r]);
    ASSERT_NE(nullptr, comm) << ringoGetLastError(nullptr);
    {
      Stager s;
      EveryCollective(comm, n, r, s, 1000, ringoFloat32, ringoSum);
      EveryCollective(comm, n, r, s, 70000, ringoFloat64, ringoAvg);  // many slices over the MPI links
      EveryCollective(comm, n, r, s, 5, ringoInt32, ringoMax);
    }
    EXPECT_EQ(ringoSuccess, ringoCommDestroy(comm));
  });
}

#ifdef RINGO_HAVE_CUDA
// The same through the public API on device buffers (a GPU, every rank on device 0): the ring
// leaves the (fake) host, so ringo stages the buffers through host memory on its stream. Results
// must equal the host path's on the same inputs. Run by make gpu-check.
void DeviceOnFakeHosts(int n, const std::vector<int>& hosts) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    GTEST_SKIP() << "no CUDA device";
  }
  if (CommSize(MPI_COMM_WORLD) < n) GTEST_SKIP() << "needs " << n << " MPI ranks";
  OnFirstRanks(MPI_COMM_WORLD, n, [](int r) { return r; }, [&](MPI_Comm sub) {
    const int r = CommRank(sub);
    ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
    ringoComm_t comm = InitOnFakeHost(sub, hosts[r]);
    ASSERT_NE(nullptr, comm) << ringoGetLastError(nullptr);
    cudaStream_t stream;
    ASSERT_EQ(cudaSuccess, cudaStreamCreate(&stream));
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
    cudaStreamDestroy(stream);
    EXPECT_EQ(ringoSuccess, ringoCommDestroy(comm));
  });
}

TEST(MpiStagedDevice, TwoHosts) { DeviceOnFakeHosts(2, {0, 1}); }
TEST(MpiStagedDevice, FourHostsMixed) { DeviceOnFakeHosts(4, {0, 0, 1, 1}); }
#endif

TEST(MpiStaged, TwoHostsOneRankEach) { StagedOnFakeHosts(2, {0, 1}); }
TEST(MpiStaged, TwoHostsTwoRanksEach) { StagedOnFakeHosts(4, {0, 0, 1, 1}); }
TEST(MpiStaged, FourHosts) { StagedOnFakeHosts(4, {0, 1, 2, 3}); }

}  // namespace
