// test_collectives.cc — real multi-rank jobs of every collective through the public API only, checked
// against references computed here. Depends on include/ringo.h, test/harness.h, test/collective_cases.h.
// Run: make tests && ./build/test/test_collectives (the whole binary takes about 90 s on 2 cores).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "collective_cases.h"
#include "harness.h"
#include "ringo.h"

namespace {

using ringo_test::Options;
using ringo_test::Team;
using ringo_test::TeamCall;

using ringo_cases::Buf;
using ringo_cases::Case;
using ringo_cases::CaseBufs;
using ringo_cases::Coll;
using ringo_cases::Decode;
using ringo_cases::Encode;
using ringo_cases::IsFloat;
using ringo_cases::IsUnsigned;
using ringo_cases::kAllOps;
using ringo_cases::kAllTypes;
using ringo_cases::kClasses;
using ringo_cases::Label;
using ringo_cases::OpName;
using ringo_cases::TypeName;
using ringo_cases::TypeSize;

// ---------------------------------------------------------------------------------------------
// Exact data (see collective_cases.h for how a pattern is built from it). The values keep every
// sum, product and average exact in every type:
//   sum/max/min/int avg: ((7c + 13r) mod 5) - 2, in [-2, 2] (unsigned: [0, 4]);
//   prod: 2, -1 (unsigned: 3) or 1 by (c + r) mod 4, so |product| <= 36 for N <= 8;
//   float avg: base(c) + (N-1 if r == c mod N else -1), whose sum is N*base(c): the average is
//   exact however the library divides, while each rank's values still differ.

struct ExactData {
  static uint32_t ClassOf(size_t i) {
    uint64_t x = (static_cast<uint64_t>(i) + 1) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 31;
    return static_cast<uint32_t>(x % kClasses);
  }

  static int64_t Input(ringoDataType_t t, ringoRedOp_t op, uint32_t c, int r, int n) {
    if (op == ringoProd) {
      const int m = static_cast<int>((c + static_cast<uint32_t>(r)) % 4);
      return m == 0 ? 2 : m == 1 ? (IsUnsigned(t) ? 3 : -1) : 1;
    }
    if (op == ringoAvg && IsFloat(t)) {
      const int64_t base = static_cast<int64_t>((c * 7) % 5) - 2;
      return base + (static_cast<uint32_t>(r) == c % static_cast<uint32_t>(n) ? n - 1 : -1);
    }
    const int64_t v = static_cast<int64_t>((c * 7 + static_cast<uint32_t>(r) * 13) % 5);
    return IsUnsigned(t) ? v : v - 2;
  }
};

using Pattern = ringo_cases::ExactPattern<ExactData>;

// ---------------------------------------------------------------------------------------------
// One collective call of every rank of a team with exact data, checked in full.

// Every property one rank's buffers must have after the call; "" when all hold. An out-of-place
// sendbuff is checked on every rank, except for Reduce, where only the root's is.
std::string Verify(const Case& c, const Pattern& pat, int n, int r, const CaseBufs& rb) {
  std::string err = ringo_cases::CheckRecv(c, pat, n, r, rb);
  if (!c.inplace && (c.coll != Coll::kReduce || r == c.root))
    ringo_cases::Append(&err, ringo_cases::CheckSendUnchanged(c, pat, n, r, rb));
  if (!rb.GuardsIntact()) ringo_cases::Append(&err, "wrote past the end of a buffer");
  return err;
}

// Runs cases on a team, checks every rank's buffers, and records result hashes of the
// collectives whose result must be identical on every rank, compared at the end.
class Runner {
 public:
  explicit Runner(Team& team) : team_(team) {}

  // False once a call has failed: the ranks may be out of step, so the caller must stop.
  bool Run(const Case& c) {
    const int n = team_.nranks;
    const Pattern pat(c.type, c.op, n);
    std::vector<CaseBufs> bufs(team_.size());
    for (size_t k = 0; k < team_.size(); k++) ringo_cases::Prepare(c, pat, n, team_.ranks[k], &bufs[k]);
    const ringoResult_t res =
        TeamCall(team_, [&](size_t k) { return ringo_cases::Call(c, bufs[k], team_.comms[k]); });
    if (res != ringoSuccess) {
      ADD_FAILURE() << Label(c) << " returned " << ringo_test::ResultName(res) << ": "
                    << ringoGetLastError(team_.comms[0]);
      return false;
    }
    for (size_t k = 0; k < team_.size(); k++) {
      const std::string err = Verify(c, pat, n, team_.ranks[k], bufs[k]);
      if (!err.empty() && ++failures_ <= kMaxReported)
        ADD_FAILURE() << Label(c) << " on rank " << team_.ranks[k] << ": " << err;
    }
    if (c.coll == Coll::kAllReduce || c.coll == Coll::kAllGather || c.coll == Coll::kBroadcast) {
      const size_t elems = c.coll == Coll::kAllGather ? c.count * static_cast<size_t>(n) : c.count;
      for (size_t k = 0; k < team_.size(); k++)
        Publish(team_.ranks[k], ringo_test::Hash64(bufs[k].recv, elems * TypeSize(c.type)));
      labels_.push_back(Label(c));
    }
    return true;
  }

  // Records a hash that must be the same on every rank (call once per rank of the team, then
  // push the label once).
  void Publish(int rank, uint64_t hash) {
    if (labels_.size() < ringo_test::Shared::kSlots) team_.shared->Word(rank, labels_.size()) = hash;
  }
  void PushLabel(const std::string& label) { labels_.push_back(label); }

  // Bit-identical check: waits for every participant, then the thread driving rank 0 compares
  // every rank's hashes with rank 0's.
  void CompareAcrossRanks() {
    ASSERT_TRUE(team_.shared->Barrier(120.0)) << "ranks did not all reach the hash comparison";
    if (team_.ranks[0] != 0) return;
    const size_t slots = std::min(labels_.size(), ringo_test::Shared::kSlots);
    int mismatches = 0;
    for (size_t s = 0; s < slots; s++)
      for (int r = 1; r < team_.nranks; r++)
        if (team_.shared->Word(r, s) != team_.shared->Word(0, s) && ++mismatches <= kMaxReported)
          ADD_FAILURE() << labels_[s] << ": result of rank " << r << " differs from rank 0's (hash)";
  }

 private:
  static constexpr int kMaxReported = 10;
  Team& team_;
  std::vector<std::string> labels_;
  int failures_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Random non-integer floats. Each rank's input is a deterministic function of (seed, i, rank),
// rounded to the type, so every rank can compute the reference. Tolerance, with u the unit
// roundoff of the type (2^-11 half, 2^-8 bfloat16, 2^-24 float, 2^-53 double) and S = sum_r |x_r|:
//   sum:  |got - ref| <= (N+1) u S      (N-1 rounded additions plus the reference's own error)
//   avg:  |got - ref| <= (N+1) u S / N + u |ref|      (one more rounding for the division)
//   prod: |got - ref| <= (N+1) u |ref|  (inputs have magnitude in [0.5, 1.5], no underflow)
//   max, min: exact.
// Plus N times the smallest subnormal of the type for sums that round near zero.
// With N = 2 each element takes exactly one operation, so sum, prod and avg must be the correctly
// rounded (nearest-even) result, bit for bit, whatever the library computes in internally.

double UnitRoundoff(ringoDataType_t t) {
  switch (t) {
    case ringoFloat16: return std::ldexp(1.0, -11);
    case ringoBfloat16: return std::ldexp(1.0, -8);
    case ringoFloat32: return std::ldexp(1.0, -24);
    default: return std::ldexp(1.0, -53);
  }
}

double Tiny(ringoDataType_t t) {
  return t == ringoFloat16 ? std::ldexp(1.0, -24) : t == ringoFloat64 ? 0x1p-1074 : 0x1p-149;
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// v rounded to nearest-even in type t.
double RoundTo(ringoDataType_t t, double v) {
  unsigned char b[8];
  Encode(v, t, b);
  return Decode(b, t);
}

// Rank r's input i, already rounded to t (as encoded bytes in *out).
double RandomInput(uint64_t seed, size_t i, int r, ringoDataType_t t, ringoRedOp_t op, unsigned char* out) {
  const uint64_t x = Mix(seed ^ Mix(static_cast<uint64_t>(i) * 64 + static_cast<uint64_t>(r)));
  const double u = static_cast<double>(x >> 11) * 0x1p-53;  // [0, 1)
  const double v = op == ringoProd ? ((x & 1) ? -1.0 : 1.0) * (0.5 + u) : 2.0 * u - 1.0;
  Encode(v, t, out);
  return Decode(out, t);
}

// The reference and tolerance of element i of a random all-reduce over n ranks (see above).
void RandomReference(int n, ringoDataType_t t, ringoRedOp_t op, uint64_t seed, size_t i, double* ref, double* tol) {
  const double u = UnitRoundoff(t);
  unsigned char scratch[8];
  long double acc = 0, abs_sum = 0;
  for (int r = 0; r < n; r++) {
    const long double x = RandomInput(seed, i, r, t, op, scratch);
    abs_sum += std::fabs(x);
    acc = r == 0 ? x : ringo_cases::Combine(op, acc, x);
  }
  if (op == ringoAvg) acc /= n;
  *ref = static_cast<double>(acc);
  const double s = static_cast<double>(abs_sum);
  *tol = op == ringoSum ? (n + 1) * u * s
       : op == ringoAvg ? (n + 1) * u * s / n + u * std::fabs(*ref)
       : op == ringoProd ? (n + 1) * u * std::fabs(*ref) : 0.0;
  if (*tol > 0) *tol += n * Tiny(t);
  if (n == 2 && op != ringoMax && op != ringoMin) {
    const double x0 = RandomInput(seed, i, 0, t, op, scratch);
    const double x1 = RandomInput(seed, i, 1, t, op, scratch);
    *ref = op == ringoProd ? RoundTo(t, x0 * x1)
         : op == ringoSum ? RoundTo(t, x0 + x1) : RoundTo(t, RoundTo(t, x0 + x1) / 2);
    *tol = 0;
  }
}

// All-reduces random data twice (second time into fresh buffers); checks both within tolerance,
// checks the two runs gave the same bits, and publishes the hash for the cross-rank comparison.
bool RunRandom(Team& team, Runner& runner, ringoDataType_t t, ringoRedOp_t op, size_t count, bool inplace,
               uint64_t seed) {
  const int n = team.nranks;
  const size_t sz = TypeSize(t);
  std::ostringstream label;
  label << "random AllReduce " << TypeName(t) << " " << OpName(op) << " count=" << count
        << (inplace ? " in-place" : " out-of-place");
  std::vector<std::vector<unsigned char>> inputs(team.size(), std::vector<unsigned char>(count * sz));
  std::vector<double> ref(count), tol(count);
  for (size_t i = 0; i < count; i++) RandomReference(n, t, op, seed, i, &ref[i], &tol[i]);
  for (size_t k = 0; k < team.size(); k++)
    for (size_t i = 0; i < count; i++) RandomInput(seed, i, team.ranks[k], t, op, &inputs[k][i * sz]);
  uint64_t first_hash[ringo_test::Shared::kMaxRanks] = {};
  for (int run = 0; run < 2; run++) {
    std::vector<Buf> send(team.size(), Buf(count * sz)), recv(team.size(), Buf(count * sz));
    for (size_t k = 0; k < team.size(); k++) memcpy(send[k].at(0), inputs[k].data(), count * sz);
    const ringoResult_t res = TeamCall(team, [&](size_t k) {
      void* out = inplace ? send[k].at(0) : recv[k].at(0);
      return ringoAllReduce(send[k].at(0), out, count, t, op, team.comms[k], nullptr);
    });
    if (res != ringoSuccess) {
      ADD_FAILURE() << label.str() << " returned " << ringo_test::ResultName(res);
      return false;
    }
    for (size_t k = 0; k < team.size(); k++) {
      const unsigned char* out = inplace ? send[k].at(0) : recv[k].at(0);
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < count; i++) {
        const double got = Decode(out + i * sz, t);
        if (!(std::fabs(got - ref[i]) <= tol[i]) && wrong++ == 0) first = i;
      }
      EXPECT_EQ(wrong, 0u) << label.str() << " rank " << team.ranks[k] << ": first at " << first << " expected "
                           << ref[first] << " +- " << tol[first] << ", got " << Decode(out + first * sz, t);
      const uint64_t h = ringo_test::Hash64(out, count * sz);
      if (run == 0) first_hash[k] = h;
      else EXPECT_EQ(h, first_hash[k]) << label.str() << " rank " << team.ranks[k] << ": same inputs, different bits";
      if (run == 0) runner.Publish(team.ranks[k], h);
    }
  }
  runner.PushLabel(label.str());
  return true;
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

constexpr size_t kLargePrime = 1000003;
constexpr size_t kHuge = 16u * 1024 * 1024;

// Under ThreadSanitizer every byte a copy moves costs several of shadow memory, and a race does not
// depend on how many bytes move: there the large counts run for one type of each element size (every
// op, both placements) and the huge count once, while every type still runs at the small counts.
// The other stages run them all.
#if defined(__SANITIZE_THREAD__)
constexpr bool kLargeCountsForEveryType = false;
#else
constexpr bool kLargeCountsForEveryType = true;
#endif
bool RunsLargeCounts(ringoDataType_t t) {
  return kLargeCountsForEveryType || t == ringoInt8 || t == ringoFloat16 || t == ringoFloat32 || t == ringoFloat64;
}

std::vector<size_t> Counts(int n, std::initializer_list<size_t> extra) {
  std::vector<size_t> out;
  for (size_t c : {size_t{0}, size_t{1}, static_cast<size_t>(n - 1), static_cast<size_t>(n),
                   static_cast<size_t>(n + 1)})
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  for (size_t c : extra) out.push_back(c);
  return out;
}

// Every dtype x op x count x placement with exact data, random floats with tolerance and the
// run-twice check, 16 Mi elements of float32 and int32, then the cross-rank bit comparison.
void AllReduceScenario(Team& team) {
  Runner runner(team);
  const int n = team.nranks;
  for (ringoDataType_t t : kAllTypes)
    for (ringoRedOp_t op : kAllOps)
      for (size_t count : Counts(n, {kLargePrime}))
        for (bool inplace : {false, true})
          if ((count != kLargePrime || RunsLargeCounts(t)) && !runner.Run({Coll::kAllReduce, t, op, count, inplace, 0}))
            return;
  for (ringoDataType_t t : {ringoFloat16, ringoBfloat16, ringoFloat32, ringoFloat64})
    for (ringoRedOp_t op : kAllOps)
      for (size_t count : {static_cast<size_t>(n + 1), size_t{65537}})
        if (!RunRandom(team, runner, t, op, count, (static_cast<int>(op) + count) % 2 == 0,
                       42 + static_cast<uint64_t>(op)))
          return;
  if (!runner.Run({Coll::kAllReduce, ringoFloat32, ringoSum, kHuge, false, 0})) return;
  if (kLargeCountsForEveryType && !runner.Run({Coll::kAllReduce, ringoInt32, ringoSum, kHuge, true, 0})) return;
  runner.CompareAcrossRanks();
}

// ReduceScatter, AllGather, Broadcast and Reduce (every root), a few types, ops and counts.
void OtherCollectivesScenario(Team& team) {
  Runner runner(team);
  const int n = team.nranks;
  const ringoDataType_t types[] = {ringoInt8, ringoUint32, ringoInt64, ringoFloat16, ringoFloat32,
                                   ringoFloat64, ringoBfloat16};
  for (bool inplace : {false, true}) {
    for (ringoDataType_t t : types)
      for (size_t count : {size_t{0}, size_t{1}, static_cast<size_t>(n + 1), size_t{4099}}) {
        for (ringoRedOp_t op : kAllOps)
          if (!runner.Run({Coll::kReduceScatter, t, op, count, inplace, 0})) return;
        if (!runner.Run({Coll::kAllGather, t, ringoSum, count, inplace, 0})) return;
        for (int root = 0; root < n; root++) {
          if (!runner.Run({Coll::kBroadcast, t, ringoSum, count, inplace, root})) return;
          const ringoRedOp_t op = kAllOps[(static_cast<int>(t) + root) % RINGO_NUM_OPS];
          if (!runner.Run({Coll::kReduce, t, op, count, inplace, root})) return;
        }
      }
    // One larger count each, so chunks and slices are many.
    if (!runner.Run({Coll::kReduceScatter, ringoFloat32, ringoSum, 300007, inplace, 0})) return;
    if (!runner.Run({Coll::kAllGather, ringoInt32, ringoSum, 300007, inplace, 0})) return;
    if (!runner.Run({Coll::kBroadcast, ringoFloat64, ringoSum, 300007, inplace, n - 1})) return;
    if (!runner.Run({Coll::kReduce, ringoFloat32, ringoMax, 300007, inplace, n / 2})) return;
  }
  runner.CompareAcrossRanks();
}

// The 2(N-1)/N law: one all-reduce of D bytes with N | count adds exactly 2(N-1)/N * D to the
// bytes sent and received by every rank, and one to the collectives completed.
void CountersScenario(Team& team) {
  const int n = team.nranks;
  for (size_t per_rank : {size_t{1}, size_t{4099}, size_t{65536}}) {
    const size_t count = per_rank * static_cast<size_t>(n);
    const uint64_t bytes = count * sizeof(float);
    const uint64_t expect = 2 * static_cast<uint64_t>(n - 1) * bytes / static_cast<uint64_t>(n);
    std::vector<ringoCommStats> before(team.size()), after(team.size());
    for (size_t k = 0; k < team.size(); k++) ASSERT_EQ(ringoCommGetStats(team.comms[k], &before[k]), ringoSuccess);
    std::vector<std::vector<float>> data(team.size(), std::vector<float>(count, 1.0f));
    ASSERT_EQ(TeamCall(team, [&](size_t k) {
      return ringoAllReduce(data[k].data(), data[k].data(), count, ringoFloat32, ringoSum, team.comms[k], nullptr);
    }), ringoSuccess);
    for (size_t k = 0; k < team.size(); k++) {
      ASSERT_EQ(ringoCommGetStats(team.comms[k], &after[k]), ringoSuccess);
      const int r = team.ranks[k];
      EXPECT_EQ(after[k].bytesSent - before[k].bytesSent, expect) << "rank " << r << ", D = " << bytes << " bytes";
      EXPECT_EQ(after[k].bytesReceived - before[k].bytesReceived, expect) << "rank " << r << ", D = " << bytes;
      EXPECT_EQ(after[k].collectives - before[k].collectives, 1u) << "rank " << r;
      EXPECT_EQ(data[k][count - 1], static_cast<float>(n)) << "rank " << r;
      ringoResult_t async = ringoInternalError;
      EXPECT_EQ(ringoCommGetAsyncError(team.comms[k], &async), ringoSuccess);
      EXPECT_EQ(async, ringoSuccess) << "rank " << r;
    }
  }
}

Options Generous() {
  Options o;
  o.deadline_s = 150;
  return o;
}

class AllReduceFork : public testing::TestWithParam<int> {};
TEST_P(AllReduceFork, EveryTypeOpCountAndPlacement) { ringo_test::RunForked(GetParam(), AllReduceScenario, Generous()); }
INSTANTIATE_TEST_SUITE_P(N, AllReduceFork, testing::Values(1, 2, 3, 4, 5, 8));

class AllReduceGroup : public testing::TestWithParam<int> {};
TEST_P(AllReduceGroup, OneThreadDrivesEveryRank) { ringo_test::RunGroup(GetParam(), AllReduceScenario, Generous()); }
INSTANTIATE_TEST_SUITE_P(N, AllReduceGroup, testing::Values(1, 3, 4));

class AllReduceThreads : public testing::TestWithParam<int> {};
TEST_P(AllReduceThreads, OneThreadPerRank) { ringo_test::RunThreads(GetParam(), AllReduceScenario, Generous()); }
INSTANTIATE_TEST_SUITE_P(N, AllReduceThreads, testing::Values(1, 3, 4));

class OtherCollectivesFork : public testing::TestWithParam<int> {};
TEST_P(OtherCollectivesFork, EveryRootAndPlacement) {
  ringo_test::RunForked(GetParam(), OtherCollectivesScenario, Generous());
}
INSTANTIATE_TEST_SUITE_P(N, OtherCollectivesFork, testing::Values(1, 2, 3, 4, 8));

TEST(OtherCollectivesGroup, ThreeRanksFromOneThread) { ringo_test::RunGroup(3, OtherCollectivesScenario, Generous()); }

// The ring's law at every size, small ones included (RINGO_ALGO=auto would run those one-shot:
// test_oneshot.cc counts their bytes).
Options RingOnly() {
  Options o;
  o.env = {{"RINGO_ALGO", "ring"}};
  return o;
}

class Counters : public testing::TestWithParam<int> {};
TEST_P(Counters, AllReduceMovesTwoNMinusOneOverNBytes) {
  ringo_test::RunForked(GetParam(), CountersScenario, RingOnly());
}
INSTANTIATE_TEST_SUITE_P(N, Counters, testing::Values(1, 2, 3, 4, 8));

TEST(CountersGroup, FourRanksFromOneThread) { ringo_test::RunGroup(4, CountersScenario, RingOnly()); }

}  // namespace
