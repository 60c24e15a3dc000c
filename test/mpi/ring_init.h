// ring_init.h — the MPI ring suites' ring configurations (who is on which fake host, which
// transport is forced) and communicator creation with the INIT log checked against them. Header-only,
// used by test/mpi/test_mpi_ring.cc and test/mpi/test_mpi_two_level.cc.
#ifndef RINGO_TEST_MPI_RING_INIT_H_
#define RINGO_TEST_MPI_RING_INIT_H_

#include <gtest/gtest.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "mpi_harness.h"
#include "ringo.h"
#include "ringo_mpi.h"

namespace ringo_mpi_ring {

using ringo_mpi_test::CommRank;
using ringo_mpi_test::CommSize;
using ringo_mpi_test::ResultName;

// Ring configurations: who is on which (fake) host, and which transport is forced.

struct RingConfig {
  const char* name;
  int n;
  const char* transport;  // RINGO_TRANSPORT for this ring, nullptr: chosen per link by host
  std::vector<int> hosts;  // fake host of each rank (RINGO_HOSTNAME), empty: the real host
  // RINGO_ONESHOT_BYTES of a ring on one real host, or nullptr: RINGO_ALGO=ring. Both paths are
  // run under mpirun, and the counters check the law of the one each case took.
  const char* oneshot = nullptr;
};

// GoogleTest names a failing parameter with this instead of the struct's bytes.
inline void PrintTo(const RingConfig& cfg, std::ostream* os) { *os << cfg.name; }

inline std::string HostName(const RingConfig& cfg, int r, const std::vector<std::string>& real) {
  return cfg.hosts.empty() ? real[r] : "fakehost" + std::to_string(cfg.hosts[r]);
}

// Every rank's real host name, indexed by rank of comm.
inline std::vector<std::string> RealHosts(MPI_Comm comm) {
  char mine[256] = {0};
  gethostname(mine, sizeof mine - 1);
  const int n = CommSize(comm);
  std::vector<char> all(static_cast<size_t>(n) * sizeof mine);
  MPI_Allgather(mine, sizeof mine, MPI_CHAR, all.data(), sizeof mine, MPI_CHAR, comm);
  std::vector<std::string> out;
  for (int r = 0; r < n; r++) out.emplace_back(&all[static_cast<size_t>(r) * sizeof mine]);
  return out;
}

// The ring ringo must build (hosts in order of their lowest rank, ranks ascending within a host).
inline std::vector<int> ExpectedRing(int n, const std::vector<std::string>& host) {
  std::vector<int> ring;
  for (int r = 0; r < n; r++) {
    if (std::find(host.begin(), host.begin() + r, host[r]) != host.begin() + r) continue;
    for (int q = r; q < n; q++)
      if (host[q] == host[r]) ring.push_back(q);
  }
  return ring;
}

// Whether ringo logs its INIT lines at INFO in this run (main.cc asks for it unless the user
// chose another RINGO_DEBUG).
inline bool LinkLogOn() {
  const char* level = getenv("RINGO_DEBUG");
  const char* subsys = getenv("RINGO_DEBUG_SUBSYS");
  const bool info = level && (strcasecmp(level, "INFO") == 0 || strcasecmp(level, "TRACE") == 0);
  return info && (!subsys || strcasestr(subsys, "INIT") || strcasestr(subsys, "ALL"));
}

// Ranks per host where every host of the ring holds as many (0 where they differ).
inline int RanksPerHost(const std::vector<int>& ring, const std::vector<std::string>& host) {
  const int n = static_cast<int>(ring.size());
  int per = 1;
  while (per < n && host[ring[per]] == host[ring[0]]) per++;
  if (n % per != 0) return 0;
  for (int p = per; p < n; p++)
    if (host[ring[p]] != host[ring[p - p % per]] || (p % per == 0 && host[ring[p]] == host[ring[p - 1]])) return 0;
  return per;
}

// The two-level ring is made exactly where RINGO_ALGO=auto meets hosts (two or more) that each hold
// the same number of ranks (two or more): then its line names this rank's place, its host, and
// the ranks at its place on the previous and next host.
inline void CheckTwoLevel(const std::string& log, const RingConfig& cfg, int r, const std::vector<std::string>& host,
                   const std::vector<int>& ring, int pos) {
  const int per = RanksPerHost(ring, host);
  const bool auto_algo = cfg.oneshot && !getenv("RINGO_ALGO");
  const size_t at = log.find("two-level ring, place ");
  if (!auto_algo || per < 2 || per == cfg.n) {
    EXPECT_EQ(at, std::string::npos) << "a two-level ring where none is due, rank " << r << ":\n" << log;
    return;
  }
  ASSERT_NE(at, std::string::npos) << "no two-level ring in the INIT log of rank " << r << ":\n" << log;
  const int hosts = cfg.n / per, h = pos / per, i = pos % per;
  int place = -1, of = -1, on = -1, of_hosts = -1, from = -1, to = -1;
  char hk[16] = "", nk[16] = "";
  ASSERT_EQ(sscanf(log.c_str() + at, "two-level ring, place %d of %d on host %d of %d: host ring over %15[a-z], "
                   "across hosts from rank %d to rank %d over %15[a-z]", &place, &of, &on, &of_hosts, hk, &from, &to, nk),
            8) << log;
  EXPECT_EQ(place, i);
  EXPECT_EQ(of, per);
  EXPECT_EQ(on, h);
  EXPECT_EQ(of_hosts, hosts);
  EXPECT_EQ(from, ring[(h + hosts - 1) % hosts * per + i]) << "rank " << r;
  EXPECT_EQ(to, ring[(h + 1) % hosts * per + i]) << "rank " << r;
  EXPECT_STREQ(hk, cfg.transport ? cfg.transport : "shm");
  EXPECT_STREQ(nk, cfg.transport ? cfg.transport : "mpi");
}

// Checks this rank's INIT log: its ring position and the peer and transport of both links.
inline void CheckLinks(const std::string& log, const RingConfig& cfg, int r, const std::vector<std::string>& host) {
  const std::vector<int> ring = ExpectedRing(cfg.n, host);
  const int pos = static_cast<int>(std::find(ring.begin(), ring.end(), r) - ring.begin());
  const int prev = ring[(pos + cfg.n - 1) % cfg.n], next = ring[(pos + 1) % cfg.n];
  auto kind = [&](int peer) { return cfg.transport ? cfg.transport : host[peer] == host[r] ? "shm" : "mpi"; };
  const size_t at = log.find("link from rank");
  ASSERT_NE(at, std::string::npos) << "no link line in the INIT log of rank " << r << ":\n" << log;
  int got_prev = -1, got_next = -1, got_pos = -1;
  char rk[16] = "", sk[16] = "";
  ASSERT_EQ(sscanf(log.c_str() + at, "link from rank %d over %15[a-z], link to rank %d over %15[a-z]", &got_prev, rk,
                   &got_next, sk), 4) << log;
  EXPECT_EQ(got_prev, prev) << "previous rank in the ring of rank " << r;
  EXPECT_EQ(got_next, next) << "next rank in the ring of rank " << r;
  EXPECT_STREQ(rk, kind(prev)) << "transport of the link from rank " << prev << " to rank " << r;
  EXPECT_STREQ(sk, kind(next)) << "transport of the link from rank " << r << " to rank " << next;
  CheckTwoLevel(log, cfg, r, host, ring, pos);
  const size_t ready = log.find("ready at ring position ");
  ASSERT_NE(ready, std::string::npos) << log;
  ASSERT_EQ(sscanf(log.c_str() + ready, "ready at ring position %d", &got_pos), 1);
  EXPECT_EQ(got_pos, pos) << "ring position of rank " << r;
}

// ringoCommInitMPI with the INIT log (8 ranks' worth of INFO lines) kept in *log instead of
// stderr; lines other than INFO still reach stderr.
inline ringoResult_t InitQuietly(ringoComm_t* comm, MPI_Comm mpicomm, std::string* log) {
  ringoResult_t res;
  {
    ringo_mpi_test::StderrCapture capture;
    res = ringoCommInitMPI(comm, mpicomm);
    *log = capture.Text();
  }
  std::istringstream lines(*log);
  for (std::string line; std::getline(lines, line);)
    if (line.find(" ringo INFO ") == std::string::npos) fprintf(stderr, "%s\n", line.c_str());
  return res;
}

// Creates the ring of cfg over sub with its environment set only for the call; nullptr (and a
// failure) unless it worked on every rank. *init_log, when given, gets this rank's INIT log.
inline ringoComm_t InitRing(MPI_Comm sub, const RingConfig& cfg, std::string* init_log = nullptr) {
  const int r = CommRank(sub);
  const std::vector<std::string> real = RealHosts(sub);
  std::vector<std::string> host;
  for (int q = 0; q < cfg.n; q++) host.push_back(HostName(cfg, q, real));
  if (cfg.transport) setenv("RINGO_TRANSPORT", cfg.transport, 1);
  if (!cfg.hosts.empty()) setenv("RINGO_HOSTNAME", host[r].c_str(), 1);
  const bool algo_given = getenv("RINGO_ALGO") != nullptr;  // by the test (naive)
  if (cfg.oneshot) setenv("RINGO_ONESHOT_BYTES", cfg.oneshot, 1);
  else if (!algo_given) setenv("RINGO_ALGO", "ring", 1);
  ringoComm_t comm = nullptr;
  std::string log;
  const ringoResult_t res = InitQuietly(&comm, sub, &log);
  unsetenv("RINGO_TRANSPORT");
  unsetenv("RINGO_HOSTNAME");
  unsetenv("RINGO_ONESHOT_BYTES");
  if (!algo_given) unsetenv("RINGO_ALGO");
  EXPECT_EQ(res, ringoSuccess) << "ringoCommInitMPI on rank " << r << ": " << ResultName(res) << ": "
                               << ringoGetLastError(nullptr) << "\n" << log;
  int ok = res == ringoSuccess, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, sub);
  if (!all_ok) {
    if (comm) ringoCommDestroy(comm);
    ADD_FAILURE() << "ringoCommInitMPI failed on some rank of the " << cfg.name << " ring";
    return nullptr;
  }
  if (LinkLogOn()) CheckLinks(log, cfg, r, host);
  if (init_log) *init_log = log;
  return comm;
}

}  // namespace ringo_mpi_ring

#endif  // RINGO_TEST_MPI_RING_INIT_H_
