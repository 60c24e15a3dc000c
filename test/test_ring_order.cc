// test_ring_order.cc — the ring's order (src/comm/comm.c): hosts in order of their lowest rank, and
// within a host, under RINGO_RING_ORDER=cpu (the default), ranks by the lowest CPU each may run on,
// so ranks bound to one core are neighbours; collectives stay exact in that order. Run: make test
// (build/test/test_ring_order).
#include <gtest/gtest.h>
#include <sched.h>

#include <string>
#include <vector>

#include "harness.h"
#include "internals.h"

namespace {

using ringo_test::Options;
using ringo_test::RunProcesses;

Options Env(const char* name, const char* value, const char* name2 = nullptr, const char* value2 = nullptr) {
  Options o;
  o.env = {{name, value}};
  if (name2) o.env.push_back({name2, value2});
  return o;
}

std::vector<int> Order(const std::vector<const char*>& hosts, const int (*cpus)[9], const std::vector<int>& by_cpu) {
  std::vector<int> ring(hosts.size(), -1);
  ringo_test_order_ring(hosts.data(), cpus, by_cpu.data(), static_cast<int>(hosts.size()), ring.data());
  return ring;
}

TEST(RingOrder, RanksOfOneCoreAreNeighbours) {
  const std::vector<const char*> one_host(8, "a");
  const std::vector<int> cpu(8, 1);
  // Eight ranks dealt round-robin over two cores, as ringo-bench and Intel MPI bind them.
  const int dealt[8][9] = {{0, -1}, {1, -1}, {0, -1}, {1, -1}, {0, -1}, {1, -1}, {0, -1}, {1, -1}};
  EXPECT_EQ(Order(one_host, dealt, cpu), (std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7}));
  // One rank asking for rank order puts every rank in rank order (all must agree on the links).
  std::vector<int> one_says_rank = cpu;
  one_says_rank[5] = 0;
  EXPECT_EQ(Order(one_host, dealt, one_says_rank), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // Unbound ranks share one CPU set: the lowest CPU ties and rank order stands.
  const int unbound[8][9] = {{0, 1, -1}, {0, 1, -1}, {0, 1, -1}, {0, 1, -1},
                             {0, 1, -1}, {0, 1, -1}, {0, 1, -1}, {0, 1, -1}};
  EXPECT_EQ(Order(one_host, unbound, cpu), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(RingOrder, HostsStayWholeAndEachGoesByItsCpus) {
  // Ranks 0 and 2 on host a, bound to CPUs 7 and 3; ranks 1, 3 and 4 on host b, rank 4 on CPU 1000
  // (the last word of the mask), rank 3's CPUs unknown (sorted first, before any CPU).
  const std::vector<const char*> hosts = {"a", "b", "a", "b", "b"};
  const int cpus[5][9] = {{7, -1}, {2, 5, -1}, {3, -1}, {-1}, {1000, -1}};
  EXPECT_EQ(Order(hosts, cpus, {1, 1, 1, 1, 1}), (std::vector<int>{2, 0, 3, 1, 4}));
  EXPECT_EQ(Order(hosts, cpus, {0, 0, 0, 0, 0}), (std::vector<int>{0, 2, 1, 3, 4}));
}

// The sum over ranks r of (r + 1)·(i mod 97): exact in float32.
float Expected(size_t i, int n) { return static_cast<float>((i % 97) * n * (n + 1) / 2); }

// Four processes, rank r pinned to the (r mod 2)-th of two cores: by default the ring is 0 2 1 3
// (RINGO_RING_ORDER=rank: 0 1 2 3), and all-reduce, reduce-scatter, all-gather and broadcast, which
// index their chunks by rank, not by ring position, give exact results either way.
TEST(RingOrder, PinnedRanksRingByCoreAndCollectivesStayExact) {
  cpu_set_t allowed;
  ASSERT_EQ(0, sched_getaffinity(0, sizeof allowed, &allowed));
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE && cores.size() < 2; c++)
    if (CPU_ISSET(c, &allowed)) cores.push_back(c);
  if (cores.size() < 2) GTEST_SKIP() << "one CPU: no two cores to deal the ranks over";
  constexpr int kN = 4;
  constexpr size_t kCount = 100003;  // several 128 KiB slices, chunks of unequal length
  for (const char* order : {"cpu", "rank"}) {
    RunProcesses(kN, [&](int rank, const ringoUniqueId& id, ringo_test::Shared&) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cores[rank % 2], &one);
      ASSERT_EQ(0, sched_setaffinity(0, sizeof one, &one));
      ringoComm_t comm = nullptr;
      ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, kN, id, rank));
      const int cpu_pos[kN] = {0, 2, 1, 3};
      EXPECT_EQ(std::string(order) == "cpu" ? cpu_pos[rank] : rank, ringo_test_ring_pos(comm)) << order;
      std::vector<float> in(kCount * kN), out(kCount * kN);
      for (size_t i = 0; i < in.size(); i++) in[i] = static_cast<float>((rank + 1) * (i % 97));
      ASSERT_EQ(ringoSuccess, ringoAllReduce(in.data(), out.data(), kCount, ringoFloat32, ringoSum, comm, nullptr));
      for (size_t i = 0; i < kCount; i++) ASSERT_EQ(Expected(i, kN), out[i]) << order << " all-reduce at " << i;
      ASSERT_EQ(ringoSuccess, ringoReduceScatter(in.data(), out.data(), kCount, ringoFloat32, ringoSum, comm, nullptr));
      for (size_t i = 0; i < kCount; i++)
        ASSERT_EQ(Expected(rank * kCount + i, kN), out[i]) << order << " reduce-scatter at " << i;
      ASSERT_EQ(ringoSuccess, ringoAllGather(in.data() + rank * kCount, out.data(), kCount, ringoFloat32, comm, nullptr));
      for (int r = 0; r < kN; r++)
        for (size_t i = 0; i < kCount; i += 101)
          ASSERT_EQ(static_cast<float>((r + 1) * ((r * kCount + i) % 97)), out[r * kCount + i])
              << order << " all-gather, block of rank " << r << " at " << i;
      ASSERT_EQ(ringoSuccess, ringoBroadcast(in.data(), out.data(), kCount, ringoFloat32, 1, comm, nullptr));
      for (size_t i = 0; i < kCount; i++) ASSERT_EQ(static_cast<float>(2 * (i % 97)), out[i]) << order << " broadcast";
      EXPECT_EQ(ringoSuccess, ringoCommDestroy(comm));
    }, Env("RINGO_RING_ORDER", order, "RINGO_ALGO", "ring"));
  }
}

TEST(RingOrder, AnUnknownOrderFailsInitByName) {
  RunProcesses(2, [](int rank, const ringoUniqueId& id, ringo_test::Shared&) {
    ringoComm_t comm = nullptr;
    EXPECT_EQ(ringoInvalidArgument, ringoCommInitRank(&comm, 2, id, rank));
    const std::string said = ringoGetLastError(nullptr);
    EXPECT_NE(std::string::npos, said.find("RINGO_RING_ORDER=socket: expected cpu or rank")) << said;
  }, Env("RINGO_RING_ORDER", "socket"));
}

}  // namespace
