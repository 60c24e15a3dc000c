// test_model.cc — checks src/model.c against the seed's worked example (4.0 GB, 1.75, 7.0 GB, 35 ms; at
// N = 64 ~1.97, ~7.9 GB vs 252 GB at a naive root), the latency term, the crossover and the units; and
// what the ringo-model tool refuses (what it would cut or could not print meaningfully).
// Run: make test (or build/test/test_model).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tool_run.h"

extern "C" {
#include "sched/model.h"
}

namespace {

std::string Report(const ringo_model_input& in) {
  std::vector<char> buf(8192);
  const size_t need = ringo_model_report(&in, buf.data(), buf.size());
  EXPECT_LT(need, buf.size()) << "report truncated";
  return std::string(buf.data());
}

ringo_model_input SeedExample(int nranks) {
  ringo_model_input in{};
  in.params = 1e9;
  in.elem_bytes = 4;
  in.dtype = "float32";
  in.bytes = 4e9;
  in.nranks = nranks;
  in.bw = 200e9;
  in.latency = -1;
  return in;
}

// All a formatter writes: the buffer is roomier than any text it should write, so a cut one shows.
std::string Formatted(void (*format)(double, char*, size_t), double v) {
  char buf[64];
  format(v, buf, sizeof buf);
  return buf;
}

std::string Bytes(double b) { return Formatted(ringo_model_format_bytes, b); }

std::string Seconds(double s) { return Formatted(ringo_model_format_seconds, s); }

TEST(Model, SeedWorkedExampleAtEightRanks) {
  const double d = 1e9 * 4;  // 1e9 fp32 parameters
  EXPECT_DOUBLE_EQ(ringo_model_factor(8), 1.75);
  EXPECT_DOUBLE_EQ(ringo_model_ring_bytes(d, 8), 7.0e9);
  EXPECT_DOUBLE_EQ(ringo_model_bw_time(d, 8, 200e9), 0.035);
  EXPECT_EQ(Bytes(d), "4.0 GB");
  EXPECT_EQ(Bytes(ringo_model_ring_bytes(d, 8)), "7.0 GB");
  EXPECT_EQ(Seconds(ringo_model_bw_time(d, 8, 200e9)), "35.0 ms");
}

TEST(Model, SeedSixtyFourRanksAgainstNaiveRoot) {
  const double d = 4e9;
  EXPECT_DOUBLE_EQ(ringo_model_factor(64), 2.0 * 63 / 64);
  EXPECT_NEAR(ringo_model_factor(64), 1.97, 0.005);
  EXPECT_EQ(Bytes(ringo_model_ring_bytes(d, 64)), "7.9 GB");
  EXPECT_DOUBLE_EQ(ringo_model_root_bytes(d, 64), 252e9);
  EXPECT_EQ(Bytes(ringo_model_root_bytes(d, 64)), "252.0 GB");
}

TEST(Model, FactorTendsToTwoAndNeverReachesIt) {
  EXPECT_DOUBLE_EQ(ringo_model_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(ringo_model_factor(4), 1.5);
  EXPECT_NEAR(ringo_model_factor(1000), 2.0, 0.0021);
  EXPECT_EQ(ringo_model_factor(1), 0.0);  // a ring of one moves nothing
  double prev = 0;
  for (int n = 2; n <= 4096; n++) {
    const double f = ringo_model_factor(n);
    EXPECT_GT(f, prev) << n;
    EXPECT_LT(f, 2.0) << n;
    prev = f;
  }
}

TEST(Model, LatencyTermIsTwoNMinusOneSteps) {
  EXPECT_EQ(ringo_model_steps(8), 14);
  EXPECT_EQ(ringo_model_steps(64), 126);
  EXPECT_EQ(ringo_model_steps(1), 0);
  EXPECT_DOUBLE_EQ(ringo_model_latency_time(8, 5e-6), 14 * 5e-6);
  EXPECT_DOUBLE_EQ(ringo_model_time(4e9, 8, 200e9, 5e-6), 0.035 + 14 * 5e-6);
  EXPECT_DOUBLE_EQ(ringo_model_time(4e9, 8, 200e9, -1), 0.035);  // no latency given
}

TEST(Model, BandwidthDominatesAboveNTimesLatencyTimesBandwidth) {
  const int n = 8;
  const double alpha = 5e-6, beta = 200e9;
  const double cross = ringo_model_bytes_for_share(n, alpha, beta, 0.5);
  EXPECT_DOUBLE_EQ(cross, n * alpha * beta);  // 8 MB
  EXPECT_NEAR(ringo_model_bw_time(cross, n, beta), ringo_model_latency_time(n, alpha), 1e-12);
  EXPECT_LT(ringo_model_bw_time(cross / 2, n, beta), ringo_model_latency_time(n, alpha));
  EXPECT_GT(ringo_model_bw_time(cross * 2, n, beta), ringo_model_latency_time(n, alpha));
  const double ninety = ringo_model_bytes_for_share(n, alpha, beta, 0.9);
  EXPECT_DOUBLE_EQ(ninety, 9 * cross);
  EXPECT_NEAR(ringo_model_bw_time(ninety, n, beta) / ringo_model_time(ninety, n, beta, alpha), 0.9, 1e-12);
  EXPECT_EQ(ringo_model_bytes_for_share(n, 0, beta, 0.5), 0.0);  // no latency: no crossover
}

TEST(Model, ReportReproducesTheSeedText) {
  const std::string r8 = Report(SeedExample(8));
  EXPECT_NE(r8.find("= 4.0 GB of gradient"), std::string::npos) << r8;
  EXPECT_NE(r8.find("2*7/8 = 1.75\n"), std::string::npos) << r8;
  EXPECT_NE(r8.find("1.75 x 4.0 GB = 7.0 GB"), std::string::npos) << r8;
  EXPECT_NE(r8.find("= 35.0 ms per all-reduce"), std::string::npos) << r8;
  EXPECT_NE(r8.find("1e9 params x 4 bytes (float32)"), std::string::npos) << r8;

  const std::string r64 = Report(SeedExample(64));
  EXPECT_NE(r64.find("2*63/64 = 1.96875 ~ 1.97"), std::string::npos) << r64;
  EXPECT_NE(r64.find("= 7.9 GB"), std::string::npos) << r64;
  EXPECT_NE(r64.find("63 x 4.0 GB = 252.0 GB"), std::string::npos) << r64;
}

TEST(Model, ReportAddsLatencyAndBucketsWhenGiven) {
  ringo_model_input in = SeedExample(8);
  EXPECT_EQ(Report(in).find("D* ="), std::string::npos);
  in.latency = 5e-6;
  const std::string r = Report(in);
  EXPECT_NE(r.find("14 x 5.0 us = 70.0 us"), std::string::npos) << r;
  EXPECT_NE(r.find("= 8.0 MB"), std::string::npos) << r;    // D* = 8 x 5 us x 200 GB/s
  EXPECT_NE(r.find("= 72.0 MB"), std::string::npos) << r;   // 9 x D*
}

TEST(Model, ReportTruncatesSafelyAndSaysHowMuchItNeeds) {
  const ringo_model_input in = SeedExample(8);
  char small[16];
  const size_t need = ringo_model_report(&in, small, sizeof small);
  EXPECT_GT(need, sizeof small);
  EXPECT_EQ(strlen(small), sizeof small - 1);
  EXPECT_EQ(need, Report(in).size());
}

TEST(Model, ParsesTheUnitsStudentsType) {
  double v = 0;
  size_t e = 0;
  ASSERT_EQ(ringo_model_parse_rate("200GB/s", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 200e9);
  ASSERT_EQ(ringo_model_parse_rate("100Gbit/s", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 12.5e9);
  ASSERT_EQ(ringo_model_parse_rate("25 GiB/s", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 25.0 * (1ull << 30));
  ASSERT_EQ(ringo_model_parse_seconds("5us", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 5e-6);
  ASSERT_EQ(ringo_model_parse_seconds("5\xc2\xb5s", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 5e-6);
  ASSERT_EQ(ringo_model_parse_seconds("800ns", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 800e-9);
  ASSERT_EQ(ringo_model_parse_seconds("2e-6", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 2e-6);
  ASSERT_EQ(ringo_model_parse_bytes("25MB", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 25e6);
  ASSERT_EQ(ringo_model_parse_bytes("64KiB", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 65536);
  ASSERT_EQ(ringo_model_parse_count("1e9", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 1e9);
  ASSERT_EQ(ringo_model_parse_count("7B", &v), ringoSuccess);
  EXPECT_DOUBLE_EQ(v, 7e9);
  ASSERT_EQ(ringo_model_parse_dtype("float32", &e), ringoSuccess);
  EXPECT_EQ(e, 4u);
  ASSERT_EQ(ringo_model_parse_dtype("bf16", &e), ringoSuccess);
  EXPECT_EQ(e, 2u);
}

TEST(Model, RejectsWhatItCannotRead) {
  double v = 123;
  size_t e = 7;
  EXPECT_EQ(ringo_model_parse_rate("fast", &v), ringoInvalidArgument);
  EXPECT_EQ(ringo_model_parse_rate("200GX/s", &v), ringoInvalidArgument);
  EXPECT_EQ(ringo_model_parse_rate("-5GB/s", &v), ringoInvalidArgument);
  EXPECT_EQ(ringo_model_parse_seconds("5 parsecs", &v), ringoInvalidArgument);
  EXPECT_EQ(ringo_model_parse_bytes("inf", &v), ringoInvalidArgument);
  EXPECT_EQ(ringo_model_parse_bytes("1e300P", &v), ringoInvalidArgument) << "finite, until the prefix";
  EXPECT_EQ(ringo_model_parse_rate("1e300PB/s", &v), ringoInvalidArgument);
  EXPECT_EQ(ringo_model_parse_count(nullptr, &v), ringoInvalidArgument);
  EXPECT_EQ(ringo_model_parse_dtype("float128", &e), ringoInvalidArgument);
  EXPECT_EQ(v, 123);  // untouched on error
  EXPECT_EQ(e, 7u);
}

// The tool refuses what it cannot model rather than cut it: 2.5 ranks are not 2, and a bandwidth of 0
// is not "no bandwidth given".
TEST(ModelTool, RefusesFractionalRanksAndAZeroBandwidth) {
  for (const char* args : {"-b 1MB -N 2.5", "-b 1MB -N 0", "-b 1MB -N x", "-b 1MB -B 0", "-b 0"}) {
    const ringo_test::ToolRun r = ringo_test::RunTool("ringo-model", args);
    EXPECT_EQ(r.status, 2) << args << ":\n" << r.out;
  }
  const ringo_test::ToolRun ok = ringo_test::RunTool("ringo-model", "-b 1MB -N 4 -B 1GB/s");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("N = 4 ranks"), std::string::npos) << ok.out;
}

// Whatever the magnitude, the formatters write the whole number and its unit within RINGO_MODEL_TEXT_CAP:
// 1e100 bytes was cut to 31 digits with no unit, a 1e100 s latency likewise.
TEST(Model, FormattersNeverCutANumberOrDropItsUnit) {
  const double inf = HUGE_VAL;
  for (double b : {0.0, 999.0, 999.96, 4e9, 999.96e24, 1e27, 1e100, 1e300, -1e300, inf, -inf, std::nan("")}) {
    EXPECT_LT(Bytes(b).size(), static_cast<size_t>(RINGO_MODEL_TEXT_CAP)) << b << ": " << Bytes(b);
    EXPECT_EQ(Bytes(b).back(), 'B') << b << ": " << Bytes(b);
  }
  EXPECT_EQ(Bytes(1e18), "1.0 EB");
  EXPECT_EQ(Bytes(1e21), "1.0 ZB");
  for (double s : {0.0, 1e-300, 1e-12, 5e-6, 0.035, 999999999.99, 1e9, 1e100, -1e300, inf, std::nan("")}) {
    EXPECT_LT(Seconds(s).size(), static_cast<size_t>(RINGO_MODEL_TEXT_CAP)) << s << ": " << Seconds(s);
    EXPECT_EQ(Seconds(s).back(), 's') << s << ": " << Seconds(s);
  }
  EXPECT_EQ(Seconds(1e100), "1e+100 s");
  EXPECT_EQ(Seconds(1e-12), "0.001 ns");
}

// What the tool cannot print meaningfully it refuses, saying why, instead of "inf PB", "0 B/s" or a
// number cut to 31 digits; and --bytes with --params is refused, not silently ignored.
TEST(ModelTool, RefusesValuesBeyondWhatItPrintsAndBothSizes) {
  for (const char* args : {"-p 1e308 -d float64 -B 200GB/s", "-b 1e100 -B 200GB/s", "-b 4GB -B 1e-300 -l 1us",
                           "-b 4GB -B 200GB/s -l 1e100", "-b 0.5", "-p 1e18 -d float64", "-b 4GB -B 1e300"}) {
    const ringo_test::ToolRun r = ringo_test::RunTool("ringo-model", args);
    EXPECT_EQ(r.status, 2) << args << ":\n" << r.out;
    EXPECT_NE(r.out.find("is outside what the model prints"), std::string::npos) << args << ":\n" << r.out;
  }
  const ringo_test::ToolRun both = ringo_test::RunTool("ringo-model", "-b 4GB -p 1e9 -B 200GB/s");
  EXPECT_EQ(both.status, 2) << both.out;
  EXPECT_NE(both.out.find("not both"), std::string::npos) << both.out;
  const ringo_test::ToolRun seed =
      ringo_test::RunTool("ringo-model", "--params 1e9 --dtype float32 --nranks 8 --bw 200GB/s");
  EXPECT_EQ(seed.status, 0) << seed.out;
  EXPECT_NE(seed.out.find("= 7.0 GB (and as much received)"), std::string::npos) << seed.out;
  EXPECT_NE(seed.out.find("= 35.0 ms per all-reduce"), std::string::npos) << seed.out;
}

}  // namespace
