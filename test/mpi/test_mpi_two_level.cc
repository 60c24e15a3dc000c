// test_mpi_two_level.cc — the two-level ring's own checks under mpirun, across fake hosts
// (RINGO_HOSTNAME): a mismatch that reaches a rank blocked on another, RINGO_ALGO agreed through the
// rank infos, RINGO_TRACE's names for its walks and ringo-trace --timeline's drawing of them.
// Run: mpirun -np 8 build/test/mpi/test_mpi_two_level.

#define OMPI_SKIP_MPICXX 1
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

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
// the mismatch. 2 hosts of 3, the odd rank at each place; all-gather and reduce-scatter.
TEST(MpiTwoLevel, RankAmongRingRanksIsNamed) {
  if (CommSize(MPI_COMM_WORLD) < 6) GTEST_SKIP() << "needs 6 ranks";
  for (int odd : {0, 1, 2}) {
    for (bool gather : {true, false}) {
      ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 6, [](int r) { return r; }, [&](MPI_Comm sub) {
        ringoComm_t comm = InitRing(sub, {"hosts2x3", 6, nullptr, {0, 0, 0, 1, 1, 1}, "4K"});
        if (!comm) return;
        const int r = CommRank(sub);
        const size_t block = 65536;
        std::vector<float> in(6 * block, 1.0f), out(6 * block, 0.0f);
        const auto t0 = std::chrono::steady_clock::now();
        ringoResult_t res;
        if (r == odd) res = ringoAllReduce(in.data(), out.data(), 4 * block, ringoFloat32, ringoSum, comm, nullptr);
        else if (gather) res = ringoAllGather(in.data(), out.data(), block, ringoFloat32, comm, nullptr);
        else res = ringoReduceScatter(in.data(), out.data(), block, ringoFloat32, ringoSum, comm, nullptr);
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
      if (strcmp(odd, "naive") == 0) {
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

// RINGO_TRACE on the two-level ring: each step is named after its walk, and its peers are the
// rank's neighbours in that walk's ring: on the host ring (fake hosts {0, 1, 0, 1}, ring 0 2 1 3)
// 0 and 2, 1 and 3; across hosts the ranks at the same place, 0 and 1, 2 and 3.
TEST(MpiTwoLevel, TraceNamesItsWalks) {
  if (CommSize(MPI_COMM_WORLD) < 4) GTEST_SKIP() << "needs 4 ranks";
  ringo_mpi_test::OnFirstRanks(MPI_COMM_WORLD, 4, [](int r) { return r; }, [&](MPI_Comm sub) {
    const int r = CommRank(sub);
    char path[128] = "";
    if (r == 0) snprintf(path, sizeof path, "/tmp/ringo-two-level-trace-%d.json", (int)getpid());
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, sub);
    if (r == 0) unlink(path);
    MPI_Barrier(sub);
    setenv("RINGO_TRACE", path, 1);
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
    FILE* f = fopen(path, "r");
    ASSERT_NE(f, nullptr) << path;
    std::set<std::string> names;
    const int host_peer[4] = {2, 3, 0, 1}, net_peer[4] = {1, 0, 3, 2};
    char line[1024];
    int events = 0, sends = 0;
    while (fgets(line, sizeof line, f)) {
      const char* name = strstr(line, "\"name\":\"");
      const char *pid_at = strstr(line, "\"pid\":"), *from_at = strstr(line, "\"from\":");
      if (!name || !pid_at || !from_at || strstr(line, "\"ph\":\"X\"") == nullptr) continue;
      name += 8;
      const std::string label(name, strchr(name, '"') - name);
      int pid = -1, from = -2, to = -2;
      ASSERT_EQ(sscanf(pid_at, "\"pid\":%d", &pid), 1) << line;
      ASSERT_EQ(sscanf(from_at, "\"from\":%d,\"to\":%d", &from, &to), 2) << line;
      ASSERT_TRUE(pid >= 0 && pid < 4) << line;
      const int peer = label.rfind("across hosts ", 0) == 0 ? net_peer[pid] : host_peer[pid];
      EXPECT_TRUE(from == -1 || from == peer) << line;
      EXPECT_TRUE(to == -1 || to == peer) << line;
      names.insert(label);
      events++;
      sends += to >= 0;
    }
    fclose(f);
    // ringo-trace --timeline draws the three walks: a box per event, an arrow per slice handed on
    // (across hosts too), and each rank sent 2(N-1)/N of the 400000 bytes.
    const std::string svg = std::string(path) + ".svg";
    const ringo_test::ToolRun tl = ringo_test::RunTool("ringo-trace", std::string("--timeline ") + path + " --svg " + svg);
    EXPECT_EQ(tl.status, 0) << tl.out;
    EXPECT_NE(tl.out.find("4 ranks, " + std::to_string(events) + " step events of collective 0 (two-level ring"),
              std::string::npos) << tl.out;
    EXPECT_EQ(ringo_test::CountOf(tl.out, "      600000      600000 "), 4u) << tl.out;
    const std::string drawn = ringo_test::ReadFile(svg);
    EXPECT_EQ(ringo_test::CountOf(drawn, "<title>rank "), static_cast<size_t>(events));
    EXPECT_EQ(ringo_test::TimelineHandoffs(drawn), static_cast<size_t>(sends)) << "events " << events;
    // The walks' labels (h: host ring, x: across hosts) and the across-hosts colour (every rank's
    // reduce-scatter step across hosts, and the legend's); a file without args.step (steps from the
    // names: across hosts, all-gather follows H-1 reduce-scatter steps) draws the same arrows.
    for (const char* label : {"hrs0 c", "hrs1 c", "xrs0 c", "xag0 c", "xag1 c"})
      EXPECT_EQ(ringo_test::CountOf(tl.out, label) >= 4, true) << label << " on every rank:\n" << tl.out;
    EXPECT_GE(ringo_test::CountOf(drawn, "fill=\"#59a14f\""), static_cast<size_t>(4 + 1));
    const std::string old_path = std::string(path) + ".old";
    std::ofstream(old_path) << ringo_test::WithoutNumberArg(ringo_test::ReadFile(path), "step");
    const ringo_test::ToolRun old = ringo_test::RunTool("ringo-trace", "--timeline " + old_path + " --svg " + svg);
    EXPECT_EQ(old.status, 0) << old.out;
    EXPECT_EQ(ringo_test::TimelineHandoffs(ringo_test::ReadFile(svg)), static_cast<size_t>(sends));
    unlink(old_path.c_str());
    unlink(svg.c_str());
    unlink(path);
    const std::set<std::string> expected = {
        "host reduce-scatter step 0",      "host reduce-scatter step 1",   "across hosts reduce-scatter step 0",
        "across hosts all-gather step 0", "across hosts all-gather step 1", "host all-gather step 0",
        "host all-gather step 1"};
    EXPECT_EQ(names, expected);
    EXPECT_GT(events, 4 * 7);
  });
}

}  // namespace
