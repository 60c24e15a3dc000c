// test_ring_order.cc — the ring's order (src/comm/comm.c): hosts in order of their lowest rank, and
// within a host whose ranks outnumber its CPUs, under RINGO_RING_ORDER=cpu (the default), ranks by the
// lowest CPU each may run on, so ranks that share a CPU are neighbours; collectives stay exact in that
// order. Run: make test (build/test/test_ring_order).
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
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

TEST(RingOrder, RanksThatShareACpuAreNeighbours) {
  const std::vector<const char*> one_host(8, "a");
  const std::vector<int> cpu(8, 1);
  // Eight ranks dealt round-robin over two CPUs, as ringo-bench and Intel MPI bind them.
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
  // Ranks with a CPU each keep rank order, however they are bound (mpirun's mapping, a GPU's place).
  const std::vector<const char*> four(4, "a");
  const int own_cpus[4][9] = {{3, -1}, {2, -1}, {1, -1}, {0, -1}};
  EXPECT_EQ(Order(four, own_cpus, {1, 1, 1, 1}), (std::vector<int>{0, 1, 2, 3}));
}

TEST(RingOrder, HostsStayWholeAndOnlyACrowdedOneGoesByCpu) {
  // Host a: ranks 0, 2 and 5 on CPUs 1000 (in the mask's last word), 3 and 3 (two share CPU 3): by
  // CPU. Host b: ranks 1, 3 and 4, rank 3's CPUs unknown: not known to be crowded, rank order. Host c:
  // ranks 6 and 7 on CPUs 1 and 0, one each: rank order.
  const std::vector<const char*> hosts = {"a", "b", "a", "b", "b", "a", "c", "c"};
  const int cpus[8][9] = {{1000, -1}, {2, 5, -1}, {3, -1}, {-1}, {1000, -1}, {3, -1}, {1, -1}, {0, -1}};
  const std::vector<int> all_cpu(8, 1), all_rank(8, 0);
  EXPECT_EQ(Order(hosts, cpus, all_cpu), (std::vector<int>{2, 5, 0, 1, 3, 4, 6, 7}));
  EXPECT_EQ(Order(hosts, cpus, all_rank), (std::vector<int>{0, 2, 5, 1, 3, 4, 6, 7}));
}

// The sum over ranks r of (r + 1)·(i mod 97): exact in float32.
float Expected(size_t i, int n) { return static_cast<float>((i % 97) * n * (n + 1) / 2); }

// Every collective of comm on count elements a rank, checked exactly; each indexes its chunks by
// rank or root, not by ring position.
void CheckCollectives(ringoComm_t comm, int rank, int n, size_t count, const std::string& what) {
  std::vector<float> in(count * n), out(count * n);
  for (size_t i = 0; i < in.size(); i++) in[i] = static_cast<float>((rank + 1) * (i % 97));
  ASSERT_EQ(ringoSuccess, ringoAllReduce(in.data(), out.data(), count, ringoFloat32, ringoSum, comm, nullptr));
  for (size_t i = 0; i < count; i++) ASSERT_EQ(Expected(i, n), out[i]) << what << " all-reduce at " << i;
  ASSERT_EQ(ringoSuccess, ringoReduceScatter(in.data(), out.data(), count, ringoFloat32, ringoSum, comm, nullptr));
  for (size_t i = 0; i < count; i++) ASSERT_EQ(Expected(rank * count + i, n), out[i]) << what << " reduce-scatter at " << i;
  ASSERT_EQ(ringoSuccess, ringoAllGather(in.data() + rank * count, out.data(), count, ringoFloat32, comm, nullptr));
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i += 101)
      ASSERT_EQ(static_cast<float>((r + 1) * ((r * count + i) % 97)), out[r * count + i])
          << what << " all-gather, block of rank " << r << " at " << i;
  ASSERT_EQ(ringoSuccess, ringoBroadcast(in.data(), out.data(), count, ringoFloat32, 1, comm, nullptr));
  for (size_t i = 0; i < count; i++) ASSERT_EQ(static_cast<float>(2 * (i % 97)), out[i]) << what << " broadcast";
  std::fill(out.begin(), out.end(), -1.0f);
  ASSERT_EQ(ringoSuccess, ringoReduce(in.data(), out.data(), count, ringoFloat32, ringoSum, 1, comm, nullptr));
  if (rank == 1) {
    for (size_t i = 0; i < count; i++) ASSERT_EQ(Expected(i, n), out[i]) << what << " reduce to rank 1 at " << i;
  }
}

// Four processes, rank r pinned to the (r mod 2)-th of two CPUs: by default the ring is 0 2 1 3
// (RINGO_RING_ORDER=rank: 0 1 2 3), and every collective is exact on the ring and on the board's
// one-shot and two-phase paths, in either order.
TEST(RingOrder, PinnedRanksRingByCpuAndCollectivesStayExact) {
  cpu_set_t allowed;
  ASSERT_EQ(0, sched_getaffinity(0, sizeof allowed, &allowed));
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE && cores.size() < 2; c++)
    if (CPU_ISSET(c, &allowed)) cores.push_back(c);
  if (cores.size() < 2) GTEST_SKIP() << "one CPU: no two CPUs to deal the ranks over";
  constexpr int kN = 4;
  struct Path {
    const char* algo;
    size_t count;       // per rank
    const char* picks;  // what the engine must choose for the all-reduce
  };
  // 100003: several 128 KiB slices, chunks of unequal length; 1000 floats: under the one-shot's 12 KiB.
  const Path paths[] = {{"ring", 100003, "ring"}, {"auto", 1000, "one-shot"}, {"auto", 100003, "two-phase"}};
  for (const char* order : {"cpu", "rank"}) {
    for (const Path& path : paths) {
      RunProcesses(kN, [&](int rank, const ringoUniqueId& id, ringo_test::Shared&) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cores[rank % 2], &one);
        ASSERT_EQ(0, sched_setaffinity(0, sizeof one, &one));
        ringoComm_t comm = nullptr;
        ASSERT_EQ(ringoSuccess, ringoCommInitRank(&comm, kN, id, rank));
        const std::string what = std::string(order) + " order, " + path.picks;
        const int cpu_pos[kN] = {0, 2, 1, 3};
        EXPECT_EQ(std::string(order) == "cpu" ? cpu_pos[rank] : rank, ringo_test_ring_pos(comm)) << what;
        EXPECT_STREQ(path.picks, ringo_test_allreduce_algo(comm, path.count, ringoFloat32)) << what;
        CheckCollectives(comm, rank, kN, path.count, what);
        EXPECT_EQ(ringoSuccess, ringoCommDestroy(comm));
      }, Env("RINGO_RING_ORDER", order, "RINGO_ALGO", path.algo));
    }
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

// Set on one rank only, the bad value fails every rank at init, the others naming the rank, instead
// of leaving them waiting for it.
TEST(RingOrder, AnUnknownOrderOnOneRankFailsEveryRank) {
  RunProcesses(3, [](int rank, const ringoUniqueId& id, ringo_test::Shared&) {
    if (rank == 2) setenv("RINGO_RING_ORDER", "socket", 1);
    ringoComm_t comm = nullptr;
    EXPECT_EQ(ringoInvalidArgument, ringoCommInitRank(&comm, 3, id, rank));
    const std::string said = ringoGetLastError(nullptr);
    EXPECT_NE(std::string::npos, said.find(rank == 2 ? "RINGO_RING_ORDER=socket: expected cpu or rank"
                                                     : "rank 2 has RINGO_RING_ORDER set to a value other than cpu or rank"))
        << said;
  }, Env("RINGO_RING_ORDER", ""));
}

}  // namespace
