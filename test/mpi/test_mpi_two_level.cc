// test_mpi_two_level.cc — the two-level ring's own checks under mpirun, across fake hosts
// (RINGO_HOSTNAME): a mismatch that reaches a rank blocked on another, RINGO_ALGO agreed through the
// rank infos, RINGO_TRACE's names for its walks (all-reduce, reduce-scatter, all-gather) and
// ringo-trace --timeline's drawing of them.
// Run: mpirun -np 8 build/test/mpi/test_mpi_two_level.

#define OMPI_SKIP_MPICXX 1
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "mpi_harness.h"
#include "ring_init.h"
#include "ringo.h"
#include "ringo_mpi.h"
#include "../tool_run.h"

namespace {

using ringo_mpi_test::CommRank;
using ringo_mpi_test::CommSize;
using namespace ringo_mpi_ring;

// One rank on the two-level ring among ranks on the one ring (another collective): the rank after it
// names the mismatch from its mark, but the rank before it is blocked sending to it on the ring and
// it waits for that rank on its host ring, so neither hears of it through their own links. Its
// two-level waits watch its ring link to the next rank (comm.c), so every rank fails at once with
// the mismatch. 2 hosts of 3, the odd rank at each place; the others broadcast from it, or reduce
// to the rank before it (so the odd rank's next rank receives in both).
TEST(MpiTwoLevel, RankAmongRingRanksIsNamed) {
  if (CommSize(MPI_COMM_WORLD) < 6) GTEST_SKIP() << "needs 6 ranks";
  for (int odd : {0, 1, 2}) {
    for (bool bcast : {true, false}) {
      ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 6, [](int r) { return r; }, [&](MPI_Comm sub) {
        ringoComm_t comm = InitRing(sub, {"hosts2x3", 6, nullptr, {0, 0, 0, 1, 1, 1}, "4K"});
        if (!comm) return;
        const int r = CommRank(sub);
        const size_t count = 4 * 65536;
        std::vector<float> in(count, 1.0f), out(count, 0.0f);
        const auto t0 = std::chrono::steady_clock::now();
        ringoResult_t res;
        if (r == odd) res = ringoAllReduce(in.data(), out.data(), count, ringoFloat32, ringoSum, comm, nullptr);
        else if (bcast) res = ringoBroadcast(in.data(), out.data(), count, ringoFloat32, odd, comm, nullptr);
        else res = ringoReduce(in.data(), out.data(), count, ringoFloat32, ringoSum, (odd + 5) % 6, comm, nullptr);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const std::string msg = ringoGetLastError(comm);
        EXPECT_EQ(res, ringoInvalidUsage) << "odd rank " << odd << ", rank " << r << ": " << msg;
        EXPECT_NE(msg.find("collective mismatch"), std::string::npos) << "odd rank " << odd << ", rank " << r << ": " << msg;
        EXPECT_LT(took, 5.0) << "odd rank " << odd << ", rank " << r;
        ringoCommDestroy(comm);
      });
    }
  }
}

// Ranks on different collectives that all take the two-level ring: an all-gather starts across
// hosts, a reduce-scatter or all-reduce on the host ring, so two ranks of a host on different ones
// could each wait on the link the other does not use first, in a cycle through both hosts. The
// marks on the host ring name the mismatch at once. 2 hosts of 2 (ranks 0, 1 and 2, 3). Lower case:
// the same collective with 32 KiB blocks, below the two-level ring's threshold (the one ring).
TEST(MpiTwoLevel, TwoLevelCollectivesThatDifferAreNamed) {
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 ranks";
  for (const char* calls : {"GAAG", "GRRG", "RGGR", "AAGA", "AARR", "GGRR", "GgGG", "RRrR", "ggRR"}) {
    ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
      ringoComm_t comm = InitRing(sub, {"hosts2x2", 4, nullptr, {0, 0, 1, 1}, "4K"});
      if (!comm) return;
      const int r = CommRank(sub);
      const size_t block = std::islower(calls[r]) ? 8192 : 262144;
      std::vector<float> in(4 * block, 1.0f), out(4 * block, 0.0f);
      const auto t0 = std::chrono::steady_clock::now();
      ringoResult_t res;
      const char call = static_cast<char>(std::toupper(calls[r]));
      if (call == 'G') res = ringoAllGather(in.data(), out.data(), block, ringoFloat32, comm, nullptr);
      else if (call == 'R') res = ringoReduceScatter(in.data(), out.data(), block, ringoFloat32, ringoSum, comm, nullptr);
      else res = ringoAllReduce(in.data(), out.data(), block, ringoFloat32, ringoSum, comm, nullptr);
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string msg = ringoGetLastError(comm);
      EXPECT_EQ(res, ringoInvalidUsage) << calls << ", rank " << r << ": " << msg;
      EXPECT_NE(msg.find("collective mismatch"), std::string::npos) << calls << ", rank " << r << ": " << msg;
      EXPECT_LT(took, 5.0) << calls << ", rank " << r;
      ringoCommDestroy(comm);
    });
  }
}

// The links a communicator makes follow RINGO_ALGO, so the ranks agree on it through their rank
// infos: one rank with RINGO_ALGO=ring keeps every rank off the two-level ring (and all of them
// on the one ring, whose results and counters stay exact); RINGO_ALGO=naive on some ranks only is
// refused by every rank, with the reason, before any link is made.
TEST(MpiTwoLevel, RanksThatDifferOnRingoAlgoAgree) {
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 ranks";
  ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
    const int r = CommRank(sub);
    for (const char* odd : {"ring", "naive"}) {
      setenv("RINGO_HOSTNAME", r % 2 ? "fakehost1" : "fakehost0", 1);
      if (r == 3) setenv("RINGO_ALGO", odd, 1);
      ringoComm_t comm = nullptr;
      std::string log;
      const ringoResult_t res = InitQuietly(&comm, sub, &log);
      unsetenv("RINGO_HOSTNAME");
      unsetenv("RINGO_ALGO");
      if (strcmp(odd, "naive") == 0) {  // RINGO_RING_ORDER below is refused on every rank alike
        EXPECT_EQ(res, ringoInvalidUsage) << "rank " << r;
        EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("RINGO_ALGO=naive is set on 1 of the 4 ranks"),
                  std::string::npos) << ringoGetLastError(nullptr);
        if (comm) ringoCommDestroy(comm);
        continue;
      }
      ASSERT_EQ(res, ringoSuccess) << "rank " << r << ": " << ringoGetLastError(nullptr);
      if (LinkLogOn()) {
        EXPECT_EQ(log.find("two-level ring"), std::string::npos) << log;
      }
      const size_t count = 200000;
      std::vector<float> buf(count, float(r + 1));
      ringoCommStats before{}, after{};
      ringoCommGetStats(comm, &before);
      EXPECT_EQ(ringoAllReduce(buf.data(), buf.data(), count, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess)
          << ringoGetLastError(comm);
      ringoCommGetStats(comm, &after);
      EXPECT_EQ(buf[0], 10.0f);
      EXPECT_EQ(buf[count - 1], 10.0f);
      EXPECT_EQ(after.bytesSent - before.bytesSent, 2 * 3 * count * sizeof(float) / 4);
      EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
    }
  });
}

// A value ringo does not know, set on one rank only, fails ringoCommInitMPI on every rank by name
// once the ranks have exchanged their infos: none is left waiting in the exchange for the others.
TEST(MpiTwoLevel, AnUnknownSettingOnOneRankFailsEveryRank) {
  if (CommSize(MPI_COMM_WORLD) < 2) GTEST_SKIP() << "needs 2 ranks";
  ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 2, [](int r) { return r; }, [&](MPI_Comm sub) {
    const int r = CommRank(sub);
    for (const char* name : {"RINGO_RING_ORDER", "RINGO_ALGO"}) {
      if (r == 1) setenv(name, "bogus", 1);
      ringoComm_t comm = nullptr;
      std::string log;
      const ringoResult_t res = InitQuietly(&comm, sub, &log);
      unsetenv(name);
      EXPECT_EQ(res, ringoInvalidArgument) << name << ", rank " << r;
      const std::string said = ringoGetLastError(nullptr);
      EXPECT_NE(said.find(r == 1 ? std::string(name) + "=bogus: expected" : std::string("rank 1 has ") + name + " set to"),
                std::string::npos) << said;
      if (comm) ringoCommDestroy(comm);
    }
  });
}

// ---- RINGO_TRACE on the two-level ring ----
// Fake hosts {0, 1, 0, 1}: the ring is 0 2 1 3, so on the host ring 0 and 2, 1 and 3 are neighbours,
// across hosts the ranks at the same place, 0 and 1, 2 and 3.

// A trace file made by the 4 ranks of sub (every rank appends its events when it destroys comm).
std::string TracePath(MPI_Comm sub, const char* what) {
  char path[128] = "";
  if (CommRank(sub) == 0) snprintf(path, sizeof path, "/tmp/ringo-two-level-%s-%d.json", what, (int)getpid());
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, sub);
  if (CommRank(sub) == 0) unlink(path);
  MPI_Barrier(sub);
  return path;
}

struct TraceScan {
  std::set<std::string> names;
  std::set<int> parts;  // of the host walks
  int events = 0, sends = 0;
};

// Every step event of the file: each names its walk, and its peers are the rank's neighbours in
// that walk's ring.
TraceScan ScanTrace(const std::string& path) {
  TraceScan scan;
  FILE* f = fopen(path.c_str(), "r");
  EXPECT_NE(f, nullptr) << path;
  if (!f) return scan;
  const int host_peer[4] = {2, 3, 0, 1}, net_peer[4] = {1, 0, 3, 2};
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    const char* name = strstr(line, "\"name\":\"");
    const char *pid_at = strstr(line, "\"pid\":"), *from_at = strstr(line, "\"from\":");
    if (!name || !pid_at || !from_at || strstr(line, "\"ph\":\"X\"") == nullptr) continue;
    name += 8;
    const std::string label(name, strchr(name, '"') - name);
    int pid = -1, from = -2, to = -2, step = -1, part = -1;
    EXPECT_EQ(sscanf(pid_at, "\"pid\":%d", &pid), 1) << line;
    EXPECT_EQ(sscanf(from_at, "\"from\":%d,\"to\":%d,\"step\":%d,\"part\":%d", &from, &to, &step, &part), 4) << line;
    if (pid < 0 || pid >= 4) {
      ADD_FAILURE() << line;
      continue;
    }
    const bool across = label.rfind("across hosts ", 0) == 0;
    const int peer = across ? net_peer[pid] : host_peer[pid];
    EXPECT_TRUE(from == -1 || from == peer) << line;
    EXPECT_TRUE(to == -1 || to == peer) << line;
    if (!across) scan.parts.insert(part);
    scan.names.insert(label);
    scan.events++;
    scan.sends += to >= 0;
  }
  fclose(f);
  return scan;
}

// ringo-trace --timeline draws the walks of collective `seq`: a box per event, an arrow per slice
// handed on (across hosts too), and each rank's bytes sent and received as given. Returns its output.
std::string CheckTimeline(const std::string& path, int seq, const TraceScan& scan, long bytes_per_rank) {
  const std::string svg = path + ".svg";
  const ringo_test::ToolRun tl =
      ringo_test::RunTool("ringo-trace", "--timeline " + path + " --seq " + std::to_string(seq) + " --svg " + svg);
  EXPECT_EQ(tl.status, 0) << tl.out;
  EXPECT_NE(tl.out.find("4 ranks, " + std::to_string(scan.events) + " step events of collective " +
                        std::to_string(seq) + " (two-level ring"),
            std::string::npos) << tl.out;
  const std::string bytes = std::to_string(bytes_per_rank);
  EXPECT_EQ(ringo_test::CountOf(tl.out, std::string(12 - bytes.size(), ' ') + bytes + std::string(12 - bytes.size(), ' ') +
                                            bytes + " "), 4u) << tl.out;
  const std::string drawn = ringo_test::ReadFile(svg);
  EXPECT_EQ(ringo_test::CountOf(drawn, "<title>rank "), static_cast<size_t>(scan.events));
  EXPECT_EQ(ringo_test::TimelineHandoffs(drawn), static_cast<size_t>(scan.sends)) << "events " << scan.events;
  // Across hosts in green (two shades): a box or more per rank, and the legend's two.
  EXPECT_GE(ringo_test::CountOf(drawn, "fill=\"#59a14f\"") + ringo_test::CountOf(drawn, "fill=\"#8cd17d\""),
            static_cast<size_t>(4 + 2));
  unlink(svg.c_str());
  return tl.out;
}

TEST(MpiTwoLevel, TraceNamesItsWalks) {
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 ranks";
  ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
    const int r = CommRank(sub);
    const std::string path = TracePath(sub, "allreduce");
    setenv("RINGO_TRACE", path.c_str(), 1);
    ringoComm_t comm = InitRing(sub, {"hosts2x2", 4, nullptr, {0, 1, 0, 1}, "4K"});
    unsetenv("RINGO_TRACE");
    if (!comm) return;
    std::vector<float> buf(100000, float(r + 1));
    EXPECT_EQ(ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, comm, nullptr), ringoSuccess)
        << ringoGetLastError(comm);
    EXPECT_EQ(buf[0], 10.0f);
    EXPECT_EQ(buf.back(), 10.0f);
    EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
    MPI_Barrier(sub);  // every rank has appended its events
    if (r != 0) return;
    const TraceScan scan = ScanTrace(path);
    const std::set<std::string> expected = {
        "host reduce-scatter step 0",      "host reduce-scatter step 1",   "across hosts reduce-scatter step 0",
        "across hosts all-gather step 0", "across hosts all-gather step 1", "host all-gather step 0",
        "host all-gather step 1"};
    EXPECT_EQ(scan.names, expected);
    EXPECT_EQ(scan.parts, std::set<int>{0});
    EXPECT_GT(scan.events, 4 * 7);
    // Each rank sent 2(N-1)/N of the 400000 bytes. The walks' labels (h: host ring, x: across
    // hosts); a file without args.step (steps from the names: across hosts, all-gather follows
    // H-1 reduce-scatter steps) draws the same arrows.
    const std::string out = CheckTimeline(path, 0, scan, 600000);
    for (const char* label : {"hrs0 c", "hrs1 c", "xrs0 c", "xag0 c", "xag1 c"})
      EXPECT_EQ(ringo_test::CountOf(out, label) >= 4, true) << label << " on every rank:\n" << out;
    const std::string old_path = path + ".old", svg = path + ".svg";
    std::ofstream(old_path) << ringo_test::WithoutNumberArg(ringo_test::ReadFile(path), "step");
    const ringo_test::ToolRun old = ringo_test::RunTool("ringo-trace", "--timeline " + old_path + " --svg " + svg);
    EXPECT_EQ(old.status, 0) << old.out;
    EXPECT_EQ(ringo_test::TimelineHandoffs(ringo_test::ReadFile(svg)), static_cast<size_t>(scan.sends));
    unlink(old_path.c_str());
    unlink(svg.c_str());
    unlink(path.c_str());
  });
}

// A reduce-scatter and an all-gather on the two-level ring: the host ring's walks, one per host
// (parts 0 and 1), and one walk across hosts; each rank sends (N-1) blocks, as on the one ring.
TEST(MpiTwoLevel, ReduceScatterAndAllGatherWalkEveryHostThenAcross) {
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 ranks";
  ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
    const int r = CommRank(sub);
    const std::string rs_path = TracePath(sub, "reducescatter"), ag_path = TracePath(sub, "allgather");
    const size_t count = 50000;  // 200000 bytes a block: two slices on the host ring
    std::vector<float> in(4 * count), out(count, -1.0f), all(4 * count, -1.0f);
    for (size_t i = 0; i < in.size(); i++) in[i] = float(r + 1) * float(i % 7 + 1);
    for (const std::string& path : {rs_path, ag_path}) {
      setenv("RINGO_TRACE", path.c_str(), 1);
      ringoComm_t comm = InitRing(sub, {"hosts2x2", 4, nullptr, {0, 1, 0, 1}, "4K"});
      unsetenv("RINGO_TRACE");
      if (!comm) return;
      if (path == rs_path)
        EXPECT_EQ(ringoReduceScatter(in.data(), out.data(), count, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess)
            << ringoGetLastError(comm);
      else
        EXPECT_EQ(ringoAllGather(out.data(), all.data(), count, ringoFloat32, comm, nullptr), ringoSuccess)
            << ringoGetLastError(comm);
      EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
    }
    // Block r of every input, summed: 10 x (i % 7 + 1) at element r*count + i; then every block.
    for (size_t i = 0; i < 4 * count; i++)
      if (all[i] != 10.0f * float(i % 7 + 1)) {
        ADD_FAILURE() << "rank " << r << ": element " << i << " is " << all[i];
        break;
      }
    MPI_Barrier(sub);
    if (r != 0) return;
    const TraceScan rs = ScanTrace(rs_path), ag = ScanTrace(ag_path);
    EXPECT_EQ(rs.names, (std::set<std::string>{"host reduce-scatter step 0", "host reduce-scatter step 1",
                                               "across hosts reduce-scatter step 0", "across hosts reduce-scatter step 1"}));
    EXPECT_EQ(ag.names, (std::set<std::string>{"across hosts all-gather step 0", "across hosts all-gather step 1",
                                               "host all-gather step 0", "host all-gather step 1"}));
    EXPECT_EQ(rs.parts, (std::set<int>{0, 1}));
    EXPECT_EQ(ag.parts, (std::set<int>{0, 1}));
    CheckTimeline(rs_path, 0, rs, 3 * 200000);
    CheckTimeline(ag_path, 0, ag, 3 * 200000);
    unlink(rs_path.c_str());
    unlink(ag_path.c_str());
  });
}

}  // namespace
