// test_bench.cc — ringo-bench (bench/ringo-bench.c) end to end: every collective, every dtype, a few
// sizes with forked ranks, must end with "# Out of bounds values : 0 OK" and the ring law met; bad
// flags must be refused. Runs the binary built beside this test (build/bin); the ASan stage runs
// the ASan-built one. Run: make test.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace {

// build/test/test_bench -> build/bin/ringo-bench (the Makefile builds it before this test).
std::string BenchPath() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  std::string dir(self, (size_t)n);
  dir = dir.substr(0, dir.rfind('/'));
  return dir.substr(0, dir.rfind('/')) + "/bin/ringo-bench";
}

struct BenchRun {
  int status = -1;  // exit code, or -1 if it did not exit normally
  std::string out;  // stdout and stderr
};

BenchRun RunBench(const std::string& args) {
  BenchRun r;
  const std::string cmd = BenchPath() + " " + args + " --timeout 60 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t got; (got = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, got);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The table's rows: lines that are not comments.
std::vector<std::vector<std::string>> Rows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.find_first_not_of(' ') == std::string::npos) continue;
    std::istringstream cols(line);
    std::vector<std::string> row;
    for (std::string c; cols >> c;) row.push_back(c);
    rows.push_back(row);
  }
  return rows;
}

class BenchCollective : public testing::TestWithParam<const char*> {};

// 3 forked ranks, every dtype, three sizes: every result right, and the busiest rank's bytes on the
// wire the collective's law (column 15, "law").
TEST_P(BenchCollective, EveryDtypeIsRightAndMeetsTheLaw) {
  ASSERT_EQ(0, access(BenchPath().c_str(), X_OK)) << BenchPath() << " was not built";
  const std::string coll = GetParam();
  const BenchRun r = RunBench("-N 3 -C " + coll + " -b 1K -e 256K -f 16 -n 2 -w 1 -d all -o sum --algo ring");
  ASSERT_EQ(0, r.status) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("# Out of bounds values : 0 OK")) << r.out;
  const auto rows = Rows(r.out);
  ASSERT_EQ(30u, rows.size()) << "10 dtypes x 3 sizes\n" << r.out;
  for (const auto& row : rows) {
    ASSERT_EQ(15u, row.size()) << r.out;
    // The busiest rank's bytes over the law: a count the ranks do not divide leaves one element
    // more in some chunks (1.002 at 1 KiB of int32 on 3 ranks).
    const double law = std::stod(row[14]);
    EXPECT_GE(law, 1.0) << coll << " " << row[2] << " " << row[0] << " bytes: fewer bytes sent than the law";
    EXPECT_LT(law, 1.01) << coll << " " << row[2] << " " << row[0] << " bytes: more bytes sent than the law";
    EXPECT_EQ("0", row[8]) << coll << " " << row[2] << " " << row[0] << " bytes: wrong elements out of place";
    EXPECT_EQ(coll == "sendrecv" ? "N/A" : "0", row[12]) << coll << " " << row[2] << " in place";
  }
}

INSTANTIATE_TEST_SUITE_P(C, BenchCollective,
                         testing::Values("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
                                         "sendrecv"));

// The default algorithm runs an all-reduce of at most 4 KiB per other rank one-shot on one host:
// the table says so, each rank sending its input to the N - 1 others (law N / 2 = 2 at N = 4), and
// the ring from there on (law 1).
TEST(Bench, AutoRunsSmallAllReducesOneShotAndSaysSo) {
  const BenchRun r = RunBench("-N 4 -b 3K -e 48K -f 4 -n 2 -w 1 -d int32 -o sum");
  ASSERT_EQ(0, r.status) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("# Algorithm: auto")) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("# Out of bounds values : 0 OK")) << r.out;
  const auto rows = Rows(r.out);
  ASSERT_EQ(3u, rows.size()) << r.out;
  const char* const expect[] = {"2.000", "2.000", "1.000"};  // 3 KiB, 12 KiB: one-shot; 48 KiB: the ring
  for (size_t i = 0; i < rows.size(); i++) {
    ASSERT_EQ(15u, rows[i].size()) << r.out;
    EXPECT_EQ(expect[i], rows[i][14]) << rows[i][0] << " bytes\n" << r.out;
    EXPECT_EQ("0", rows[i][8]) << rows[i][0] << " bytes: wrong elements";
  }
}

// Every op of the reductions, including avg of integers (truncated, as the library does).
TEST(Bench, EveryOpOfAllReduceIsRight) {
  const BenchRun r = RunBench("-N 4 -b 4K -e 64K -f 16 -n 2 -w 1 -d int32 -o all");
  ASSERT_EQ(0, r.status) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("# Out of bounds values : 0 OK")) << r.out;
  EXPECT_EQ(10u, Rows(r.out).size()) << "5 ops x 2 sizes\n" << r.out;
}

TEST(Bench, BadFlagsAreRefusedWithTheUsageCode) {
  for (const char* args : {"-C allreduce_typo", "-d float128", "-b 2M -e 1M", "-N 0"}) {
    const BenchRun r = RunBench(args);
    EXPECT_EQ(2, r.status) << args << ":\n" << r.out;
    EXPECT_FALSE(r.out.empty()) << args << ": refused without a word";
  }
}

}  // namespace
