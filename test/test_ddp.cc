// test_ddp.cc — the DDP layer (include/ringo_ddp.h) on real forked ranks: N ranks with microbatch b
// train exactly like one rank with batch N*b, uneven shards, buckets, accumulation, misuse errors.
// Depends on ringo.h, ringo_ddp.h, test/harness.h and the trainer's model bench/mlp.h. Run: make test (about 0.3 s).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../bench/mlp.h"
#include "harness.h"
#include "ringo.h"
#include "ringo_ddp.h"

namespace {

using ringo_test::Options;
using ringo_test::Team;

#define DDP_OK(ddp, call) ASSERT_EQ((call), ringoSuccess) << #call << ": " << ringoDdpGetLastError(ddp)
// A helper that failed an ASSERT returned early: the rank stops here too (its data is incomplete).
#define NO_FATAL(call)                                \
  do {                                                \
    call;                                             \
    if (testing::Test::HasFatalFailure()) return;     \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Training runs: the DDP side on every rank, and references computed in one process without ringo.

struct RunCfg {
  std::vector<int> dims{16, 32, 32, 4};
  std::vector<int> shards;  // samples per rank per micro-step; their sum is the global batch B
  int steps = 20;
  int accumulate = 1;  // micro-steps per step (NoSync for all but the last)
  float lr = 0.3f;
  bool weighted = true;    // call ringoDdpSetLocalBatch(n_r * accumulate)
  bool overlap = true;     // MarkReady each layer from inside backward
  bool contiguous = true;  // gradients in one block (buckets in place) or one allocation each (staging)
  size_t bucket_bytes = 2048, first_bucket_bytes = 512;  // 3 buckets for 16-32-32-4
  uint64_t seed = 7;
  int Batch() const {
    int b = 0;
    for (int n : shards) b += n;
    return b;
  }
  int Offset(int rank) const {
    int o = 0;
    for (int r = 0; r < rank; r++) o += shards[r];
    return o;
  }
  // First global sample index of micro-step q of step s (the stream is cut into global batches).
  uint64_t First(int s, int q) const { return (static_cast<uint64_t>(s) * accumulate + q) * Batch(); }
};

struct TrainRun {
  mlp_t m;
  std::vector<double> losses;     // union-batch loss of each step (first micro-step)
  std::vector<uint64_t> hashes;   // parameter hash after each step
  std::vector<uint64_t> finish_collectives;  // collectives each Finish ran on the comm
  std::vector<bool> finish_kept_grads;       // whether each Finish left the gradients as they were
  int nbuckets = 0;
  TrainRun() { memset(&m, 0, sizeof m); }
  ~TrainRun() { mlp_free(&m); }
};

uint64_t ParamHash(const mlp_t& m) {
  uint64_t h = 0;
  for (int l = 0; l < m.nlayers; l++) {
    h = h * 31 + ringo_test::Hash64(m.w[l], sizeof(float) * mlp_wcount(&m, l));
    h = h * 31 + ringo_test::Hash64(m.b[l], sizeof(float) * mlp_bcount(&m, l));
  }
  return h;
}

uint64_t GradHash(const mlp_t& m) {
  uint64_t h = 0;
  for (int l = 0; l < m.nlayers; l++) {
    h = h * 31 + ringo_test::Hash64(m.gw[l], sizeof(float) * mlp_wcount(&m, l));
    h = h * 31 + ringo_test::Hash64(m.gb[l], sizeof(float) * mlp_bcount(&m, l));
  }
  return h;
}

void PoisonGrads(mlp_t* m) {
  for (int l = 0; l < m->nlayers; l++) {
    std::fill(m->gw[l], m->gw[l] + mlp_wcount(m, l), NAN);
    std::fill(m->gb[l], m->gb[l] + mlp_bcount(m, l), NAN);
  }
}

struct Hook {
  ringoDdp_t ddp;
  int fails;
};
void MarkLayer(void* arg, int l) {
  Hook* h = static_cast<Hook*>(arg);
  // Parameter 2l is W_l, 2l+1 is b_l (registered in forward order).
  if (ringoDdpMarkReady(h->ddp, 2 * l) != ringoSuccess || ringoDdpMarkReady(h->ddp, 2 * l + 1) != ringoSuccess)
    h->fails++;
}

void RegisterModel(ringoDdp_t ddp, mlp_t* m) {
  for (int l = 0; l < m->nlayers; l++) {
    int iw = -1, ib = -1;
    DDP_OK(ddp, ringoDdpRegister(ddp, m->gw[l], m->w[l], mlp_wcount(m, l), ringoFloat32, &iw));
    DDP_OK(ddp, ringoDdpRegister(ddp, m->gb[l], m->b[l], mlp_bcount(m, l), ringoFloat32, &ib));
    ASSERT_EQ(iw, 2 * l);
    ASSERT_EQ(ib, 2 * l + 1);
  }
}

// One rank's DDP training. Every replica starts from a different init (seed + rank) so the test
// also shows BroadcastParams making them equal.
void DdpTrain(const RunCfg& c, int rank, ringoComm_t comm, TrainRun* run) {
  const int n = c.shards[rank];
  ASSERT_EQ(mlp_create(&run->m, c.dims.data(), static_cast<int>(c.dims.size()) - 1, std::max(n, 1),
                       rank == 0 ? c.seed : c.seed + 100 + rank, c.contiguous), 0);
  ringoDdp_t ddp = nullptr;
  DDP_OK(ddp, ringoDdpCreate(&ddp, comm, c.bucket_bytes, c.first_bucket_bytes));
  RegisterModel(ddp, &run->m);
  DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
  DDP_OK(ddp, ringoDdpGetBucketCount(ddp, &run->nbuckets));
  if (c.weighted) {
    DDP_OK(ddp, ringoDdpSetLocalBatch(ddp, static_cast<size_t>(n) * c.accumulate));
  }
  std::vector<int> labels(std::max(n, 1));
  Hook hook{ddp, 0};
  for (int s = 0; s < c.steps; s++) {
    mlp_zero_grad(&run->m);
    double first_loss = 0;
    for (int q = 0; q < c.accumulate; q++) {
      const bool last = q + 1 == c.accumulate;
      DDP_OK(ddp, ringoDdpNoSync(ddp, !last));
      mlp_load_batch(&run->m, c.seed, c.First(s, q) + c.Offset(rank), n, labels.data());
      mlp_forward(&run->m, n);
      const double loss = n ? mlp_loss(&run->m, labels.data(), n, 1.0f / c.accumulate) : 0.0;
      if (n == 0 && c.weighted) PoisonGrads(&run->m);  // a mean over no samples is 0/0: weight 0 drops it
      if (q == 0) first_loss = loss;
      // Counted from before backward: with overlap, buckets start during it.
      ringoCommStats st0, st1;
      ASSERT_EQ(ringoCommGetStats(comm, &st0), ringoSuccess);
      mlp_backward(&run->m, n, c.overlap ? MarkLayer : nullptr, &hook);
      // Only under NoSync may the gradients be read here: otherwise buckets can be in flight.
      const uint64_t grads_before = last ? 0 : GradHash(run->m);
      DDP_OK(ddp, ringoDdpFinish(ddp));
      ASSERT_EQ(ringoCommGetStats(comm, &st1), ringoSuccess);
      run->finish_collectives.push_back(st1.collectives - st0.collectives);
      run->finish_kept_grads.push_back(!last && GradHash(run->m) == grads_before);
    }
    ASSERT_EQ(hook.fails, 0) << ringoDdpGetLastError(ddp);
    mlp_sgd(&run->m, c.lr);
    double weighted_loss = first_loss * n;  // union-batch loss: sum_r n_r L_r / B
    ASSERT_EQ(ringoAllReduce(&weighted_loss, &weighted_loss, 1, ringoFloat64, ringoSum, comm, nullptr), ringoSuccess);
    run->losses.push_back(weighted_loss / c.Batch());
    run->hashes.push_back(ParamHash(run->m));
  }
  DDP_OK(ddp, ringoDdpDestroy(ddp));
}

// One process, no ringo: batch B (times accumulate) per step, the mean loss over all of it. With
// biased, the gradient is instead the plain mean over shards of each shard's mean gradient —
// what DDP computes when uneven shards are not weighted.
void ReferenceTrain(const RunCfg& c, TrainRun* run, bool biased = false) {
  const int B = c.Batch() * c.accumulate;
  ASSERT_EQ(mlp_create(&run->m, c.dims.data(), static_cast<int>(c.dims.size()) - 1, B, c.seed, 1), 0);
  std::vector<int> labels(B);
  const float nshards = static_cast<float>(c.shards.size());
  for (int s = 0; s < c.steps; s++) {
    mlp_zero_grad(&run->m);
    double loss = 0;
    if (!biased) {
      mlp_load_batch(&run->m, c.seed, c.First(s, 0), B, labels.data());
      mlp_forward(&run->m, B);
      loss = mlp_loss(&run->m, labels.data(), B, 1.0f);
      mlp_backward(&run->m, B, nullptr, nullptr);
      if (c.accumulate > 1) loss = 0;  // losses are compared for accumulate == 1 only
    } else {
      for (size_t r = 0; r < c.shards.size(); r++) {
        const int n = c.shards[r];
        if (n == 0) continue;  // an empty shard's gradient is zero
        mlp_load_batch(&run->m, c.seed, c.First(s, 0) + c.Offset(static_cast<int>(r)), n, labels.data());
        mlp_forward(&run->m, n);
        loss += mlp_loss(&run->m, labels.data(), n, 1.0f / nshards) * n / c.Batch();
        mlp_backward(&run->m, n, nullptr, nullptr);
      }
    }
    mlp_sgd(&run->m, c.lr);
    run->losses.push_back(loss);
  }
}

// Largest element-wise |a - b| / max(|b|, floor) over every parameter. "Agrees to 1e-5 relative"
// means this is below 1e-5 with floor 1e-3: elements that happen to pass near zero (below 1e-3,
// where a typical weight is ~0.1) are held to an absolute 1e-8 instead of a relative bound.
struct Diff {
  double worst = 0;
  std::string where;
};
Diff CompareParams(const mlp_t& a, const mlp_t& b, double floor = 1e-3) {
  Diff d;
  for (int l = 0; l < a.nlayers; l++)
    for (int which = 0; which < 2; which++) {
      const float* x = which ? a.b[l] : a.w[l];
      const float* y = which ? b.b[l] : b.w[l];
      const size_t n = which ? mlp_bcount(&a, l) : mlp_wcount(&a, l);
      for (size_t i = 0; i < n; i++) {
        const double e = std::fabs(static_cast<double>(x[i]) - y[i]) / std::max(std::fabs(static_cast<double>(y[i])), floor);
        if (e > d.worst) {
          d.worst = e;
          d.where = std::string(which ? "b" : "W") + std::to_string(l) + "[" + std::to_string(i) + "]: " +
                    std::to_string(x[i]) + " vs " + std::to_string(y[i]);
        }
      }
    }
  return d;
}

// Training moved the parameters far further than the tolerance, so agreeing to 1e-5 means something.
void ExpectTrainedFarFromInit(const RunCfg& c, const TrainRun& trained) {
  mlp_t init;
  ASSERT_EQ(mlp_create(&init, c.dims.data(), static_cast<int>(c.dims.size()) - 1, 1, c.seed, 1), 0);
  EXPECT_GT(CompareParams(trained.m, init).worst, 0.1) << "training hardly changed the parameters";
  mlp_free(&init);
}

double RelDiff(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

// Writes each step's hash into the shared page, then checks every rank's against rank 0's.
void ExpectReplicasBitIdentical(Team& team, const TrainRun& run) {
  const int rank = team.ranks[0];
  for (size_t s = 0; s < run.hashes.size(); s++) team.shared->Word(rank, s) = run.hashes[s];
  ASSERT_TRUE(team.shared->Barrier(60));
  for (int r = 1; r < team.nranks; r++)
    for (size_t s = 0; s < run.hashes.size(); s++)
      ASSERT_EQ(team.shared->Word(r, s), team.shared->Word(0, s)) << "rank " << r << " differs from rank 0 after step " << s;
}

// ---------------------------------------------------------------------------------------------
// N ranks with microbatch b == one rank with batch N*b.

struct EquivCase {
  int nranks;
  bool contiguous;
};

class DdpEquivalence : public testing::TestWithParam<EquivCase> {};

TEST_P(DdpEquivalence, MatchesOneRankWithTheUnionBatch) {
  const EquivCase ec = GetParam();
  ringo_test::RunForked(ec.nranks, [ec](Team& team) {
    RunCfg c;
    c.shards.assign(ec.nranks, 4);
    c.contiguous = ec.contiguous;
    TrainRun ddp, ref;
    NO_FATAL(DdpTrain(c, team.ranks[0], team.comms[0], &ddp));
    NO_FATAL(ReferenceTrain(c, &ref));
    ASSERT_EQ(ddp.losses.size(), static_cast<size_t>(c.steps));
    for (int s = 0; s < c.steps; s++)
      EXPECT_LT(RelDiff(ddp.losses[s], ref.losses[s]), 1e-5) << "step " << s << ": " << ddp.losses[s] << " vs " << ref.losses[s];
    ExpectTrainedFarFromInit(c, ref);
    const Diff d = CompareParams(ddp.m, ref.m);
    EXPECT_LT(d.worst, 1e-5) << "after " << c.steps << " steps, worst parameter " << d.where;
    ExpectReplicasBitIdentical(team, ddp);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DdpEquivalence,
                         testing::Values(EquivCase{1, true}, EquivCase{2, true}, EquivCase{2, false}, EquivCase{4, true},
                                         EquivCase{4, false}),
                         [](const testing::TestParamInfo<EquivCase>& i) {
                           return "N" + std::to_string(i.param.nranks) + (i.param.contiguous ? "_InPlace" : "_Staging");
                         });


// ---------------------------------------------------------------------------------------------
// Uneven shards: the seed's caveat, shown and fixed.

TEST(DdpUneven, LocalBatchWeightsGiveExactlyTheUnionBatch) {
  ringo_test::RunForked(4, [](Team& team) {
    RunCfg c;
    c.shards = {0, 3, 5, 8};  // an empty shard too: it must contribute nothing, not NaN
    TrainRun ddp, ref;
    NO_FATAL(DdpTrain(c, team.ranks[0], team.comms[0], &ddp));
    NO_FATAL(ReferenceTrain(c, &ref));
    for (int s = 0; s < c.steps; s++) EXPECT_LT(RelDiff(ddp.losses[s], ref.losses[s]), 1e-5) << "step " << s;
    ExpectTrainedFarFromInit(c, ref);
    const Diff d = CompareParams(ddp.m, ref.m);
    EXPECT_LT(d.worst, 1e-5) << "worst parameter " << d.where;
    ExpectReplicasBitIdentical(team, ddp);
  });
}

TEST(DdpUneven, UnweightedAverageIsBiasedTowardTheSmallShards) {
  ringo_test::RunForked(4, [](Team& team) {
    RunCfg c;
    c.shards = {0, 3, 5, 8};
    c.weighted = false;  // every rank's mean gradient counts 1/N, whatever its sample count
    TrainRun ddp, unions, biased;
    NO_FATAL(DdpTrain(c, team.ranks[0], team.comms[0], &ddp));
    NO_FATAL(ReferenceTrain(c, &unions));
    NO_FATAL(ReferenceTrain(c, &biased, /*biased=*/true));
    const Diff to_biased = CompareParams(ddp.m, biased.m), to_union = CompareParams(ddp.m, unions.m);
    EXPECT_LT(to_biased.worst, 1e-5) << "DDP without SetLocalBatch should be the plain mean of shard means: "
                                     << to_biased.where;
    EXPECT_GT(to_union.worst, 1e-2) << "the plain mean of shard means should NOT be the union-batch gradient";
    ExpectReplicasBitIdentical(team, ddp);
  });
}

// ---------------------------------------------------------------------------------------------
// Gradient accumulation: k micro-steps under NoSync, then one all-reduce.

TEST(DdpNoSync, AccumulatesLocallyThenAllReducesOnce) {
  ringo_test::RunForked(2, [](Team& team) {
    RunCfg c;
    c.shards = {4, 4};
    c.accumulate = 3;
    c.steps = 8;
    TrainRun ddp, ref;
    NO_FATAL(DdpTrain(c, team.ranks[0], team.comms[0], &ddp));
    NO_FATAL(ReferenceTrain(c, &ref));  // batch N * k * b = 24 per step
    ASSERT_EQ(ddp.finish_collectives.size(), static_cast<size_t>(c.steps * c.accumulate));
    for (size_t i = 0; i < ddp.finish_collectives.size(); i++) {
      const bool last = (i + 1) % c.accumulate == 0;
      EXPECT_EQ(ddp.finish_collectives[i], last ? static_cast<uint64_t>(ddp.nbuckets) : 0u)
          << "Finish " << i << (last ? " (syncing)" : " (NoSync)") << " ran the wrong number of collectives";
      if (!last) {
        EXPECT_TRUE(ddp.finish_kept_grads[i]) << "a NoSync Finish changed the local gradients";
      }
    }
    ExpectTrainedFarFromInit(c, ref);
    const Diff d = CompareParams(ddp.m, ref.m);
    EXPECT_LT(d.worst, 1e-5) << "worst parameter " << d.where;
    ExpectReplicasBitIdentical(team, ddp);
  });
}

// ---------------------------------------------------------------------------------------------
// Buckets: boundaries, order, dtype groups, launch order, overlap.

// Registers params of the given dtypes and counts, each in its own buffer (grad and param).
struct ParamSet {
  std::vector<std::vector<double>> grads, params;  // double storage: aligned for every dtype
  void Add(ringoDdp_t ddp, ringoDataType_t t, size_t count) {
    grads.emplace_back(count + 1, 0.0);
    params.emplace_back(count + 1, 0.0);
    int index = -1;
    ASSERT_EQ(ringoDdpRegister(ddp, grads.back().data(), params.back().data(), count, t, &index), ringoSuccess)
        << ringoDdpGetLastError(ddp);
    ASSERT_EQ(index, static_cast<int>(grads.size()) - 1);
  }
};

void ExpectBucket(ringoDdp_t ddp, int param, int bucket, int position) {
  int b = -1, p = -1;
  ASSERT_EQ(ringoDdpGetParamBucket(ddp, param, &b, &p), ringoSuccess) << ringoDdpGetLastError(ddp);
  EXPECT_EQ(b, bucket) << "parameter " << param;
  EXPECT_EQ(p, position) << "parameter " << param;
}

TEST(DdpBuckets, FirstBucketRuleReverseOrderAndDtypeGroups) {
  ringo_test::RunForked(1, [](Team& team) {
    ringoDdp_t ddp = nullptr;
    DDP_OK(ddp, ringoDdpCreate(&ddp, team.comms[0], /*bucketBytes=*/100, /*firstBucketBytes=*/40));
    ParamSet ps;
    const ringoDataType_t f32 = ringoFloat32, f64 = ringoFloat64;
    //         param:  0: 20 B   1: 40 B   2: 20 B   3: 20 B   4: 16 B   5: 120 B   6: 20 B   7: 8 B
    const std::pair<ringoDataType_t, size_t> shapes[] = {{f32, 5}, {f64, 5}, {f32, 5}, {f32, 5},
                                                         {f64, 2}, {f32, 30}, {f32, 5}, {f64, 1}};
    for (const auto& sh : shapes) ps.Add(ddp, sh.first, sh.second);
    DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
    // Backward order 7 6 5 4 3 2 1 0. float64: 7 opens bucket 0 (8 B), 4 (24 B), 1 (64 B >= the
    // first limit 40): closed. float32: 6 opens bucket 1 (20 B), 5 makes it 140 B >= 40: closed (a
    // bucket may overshoot by its last parameter); 3 opens bucket 2, then 2 and 0 (60 B < 100):
    // left open, closed at the end. Layouts are in registration order.
    int count = 0;
    DDP_OK(ddp, ringoDdpGetBucketCount(ddp, &count));
    EXPECT_EQ(count, 3);
    ExpectBucket(ddp, 7, 0, 2);
    ExpectBucket(ddp, 4, 0, 1);
    ExpectBucket(ddp, 1, 0, 0);
    ExpectBucket(ddp, 6, 1, 1);
    ExpectBucket(ddp, 5, 1, 0);
    ExpectBucket(ddp, 3, 2, 2);
    ExpectBucket(ddp, 2, 2, 1);
    ExpectBucket(ddp, 0, 2, 0);
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  });
}

TEST(DdpBuckets, DefaultsAre25MiBWithA1MiBFirstBucket) {
  ringo_test::RunForked(1, [](Team& team) {
    ringoDdp_t ddp = nullptr;
    DDP_OK(ddp, ringoDdpCreate(&ddp, team.comms[0], 0, 0));
    std::vector<float> mib(1 << 18);  // 1 MiB, registered 40 times (one rank: nothing moves)
    for (int i = 0; i < 40; i++)
      DDP_OK(ddp, ringoDdpRegister(ddp, mib.data(), mib.data(), mib.size(), ringoFloat32, nullptr));
    DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
    int count = 0;
    DDP_OK(ddp, ringoDdpGetBucketCount(ddp, &count));
    EXPECT_EQ(count, 3);
    ExpectBucket(ddp, 39, 0, 0);  // the first 1 MiB fills the first bucket
    for (int i = 14; i <= 38; i++) ExpectBucket(ddp, i, 1, i - 14);  // the next 25 MiB
    for (int i = 0; i <= 13; i++) ExpectBucket(ddp, i, 2, i);        // the rest
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  });
}

// Exact small values in float16 / bfloat16 bits (the test's own encoders, not the library's).
uint16_t ExactHalf(float v) {
  if (v == 0.0f) return 0;
  uint32_t x;
  memcpy(&x, &v, 4);
  return static_cast<uint16_t>(((x >> 16) & 0x8000u) | ((((x >> 23) & 0xffu) - 112u) << 10) | ((x & 0x7fffffu) >> 13));
}
uint16_t ExactBf16(float v) {
  uint32_t x;
  memcpy(&x, &v, 4);
  return static_cast<uint16_t>(x >> 16);
}

// Every float dtype in its own bucket group, scattered buffers (staging path), uneven weights:
// w = 1/4 and 3/4 and gradients (rank+1)*k give 1.75*k exactly in every dtype, on both ranks.
TEST(DdpBuckets, EveryFloatDtypeIsWeightedAndAveraged) {
  ringo_test::RunForked(2, [](Team& team) {
    const int rank = team.ranks[0];
    ringoDdp_t ddp = nullptr;
    DDP_OK(ddp, ringoDdpCreate(&ddp, team.comms[0], 64, 16));
    ParamSet ps;
    const ringoDataType_t types[] = {ringoFloat32, ringoFloat16, ringoFloat64, ringoBfloat16, ringoFloat32, ringoFloat16};
    const size_t n = 37;
    for (ringoDataType_t t : types) ps.Add(ddp, t, n);
    DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
    DDP_OK(ddp, ringoDdpSetLocalBatch(ddp, rank == 0 ? 1 : 3));
    auto value = [](size_t i) { return static_cast<float>(i % 7); };
    for (size_t p = 0; p < ps.grads.size(); p++)
      for (size_t i = 0; i < n; i++) {
        const float g = static_cast<float>(rank + 1) * value(i);
        void* base = ps.grads[p].data();
        switch (types[p]) {
          case ringoFloat32: static_cast<float*>(base)[i] = g; break;
          case ringoFloat64: static_cast<double*>(base)[i] = g; break;
          case ringoFloat16: static_cast<uint16_t*>(base)[i] = ExactHalf(g); break;
          default: static_cast<uint16_t*>(base)[i] = ExactBf16(g); break;
        }
      }
    for (int p = static_cast<int>(ps.grads.size()) - 1; p >= 0; p--) DDP_OK(ddp, ringoDdpMarkReady(ddp, p));
    DDP_OK(ddp, ringoDdpFinish(ddp));
    for (size_t p = 0; p < ps.grads.size(); p++)
      for (size_t i = 0; i < n; i++) {
        const float want = 1.75f * value(i);
        const void* base = ps.grads[p].data();
        switch (types[p]) {
          case ringoFloat32: ASSERT_EQ(static_cast<const float*>(base)[i], want) << "param " << p << " [" << i << "]"; break;
          case ringoFloat64: ASSERT_EQ(static_cast<const double*>(base)[i], want) << "param " << p << " [" << i << "]"; break;
          case ringoFloat16: ASSERT_EQ(static_cast<const uint16_t*>(base)[i], ExactHalf(want)) << "param " << p; break;
          default: ASSERT_EQ(static_cast<const uint16_t*>(base)[i], ExactBf16(want)) << "param " << p; break;
        }
      }
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  });
}

// Two parameters of different sizes, one bucket each: bucket 0 = parameter 1 (last registered).
void TwoBucketScenario(Team& team, bool opposite_orders) {
  const int rank = team.ranks[0];
  ringoDdp_t ddp = nullptr;
  DDP_OK(ddp, ringoDdpCreate(&ddp, team.comms[0], 4, 4));
  std::vector<float> g0(100, static_cast<float>(rank + 1)), g1(50, static_cast<float>(10 * (rank + 1)));
  std::vector<float> p0(100), p1(50);
  DDP_OK(ddp, ringoDdpRegister(ddp, g0.data(), p0.data(), g0.size(), ringoFloat32, nullptr));
  DDP_OK(ddp, ringoDdpRegister(ddp, g1.data(), p1.data(), g1.size(), ringoFloat32, nullptr));
  DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
  if (opposite_orders) {
    // Rank 0 completes bucket 1 first, rank 1 bucket 0 first. Launching in completion order would
    // pair a 100-element all-reduce with a 50-element one: ringo would report a mismatch.
    const int first = rank == 0 ? 0 : 1;
    DDP_OK(ddp, ringoDdpMarkReady(ddp, first));
    DDP_OK(ddp, ringoDdpMarkReady(ddp, 1 - first));
  } else {
    // Only bucket 0: its all-reduce must complete with backward still "running" (no Finish yet).
    DDP_OK(ddp, ringoDdpMarkReady(ddp, 1));
    ringoDdpStats st{};
    const double deadline = 20.0;
    timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (t = t0; st.buckets < 1 && (t.tv_sec - t0.tv_sec) < deadline; clock_gettime(CLOCK_MONOTONIC, &t)) {
      DDP_OK(ddp, ringoDdpGetStats(ddp, &st));
      const timespec nap{0, 1000000};
      nanosleep(&nap, nullptr);
    }
    ASSERT_EQ(st.buckets, 1u) << "bucket 0 did not all-reduce before Finish";
    EXPECT_EQ(g1[0], 15.0f) << "bucket 0 holds the average before Finish";
    EXPECT_EQ(g0[0], static_cast<float>(rank + 1)) << "bucket 1 was never marked: it must not have moved";
  }
  DDP_OK(ddp, ringoDdpFinish(ddp));
  for (float v : g0) ASSERT_EQ(v, 1.5f);
  for (float v : g1) ASSERT_EQ(v, 15.0f);
  ringoDdpStats st{};
  DDP_OK(ddp, ringoDdpGetStats(ddp, &st));
  EXPECT_EQ(st.steps, 1u);
  EXPECT_EQ(st.buckets, 2u);
  EXPECT_EQ(st.bytes, 600u);
  DDP_OK(ddp, ringoDdpDestroy(ddp));
}

TEST(DdpBuckets, LaunchInBucketOrderWhateverTheMarkOrder) {
  ringo_test::RunForked(2, [](Team& team) { TwoBucketScenario(team, true); });
}

TEST(DdpBuckets, AReadyBucketAllReducesWhileBackwardContinues) {
  ringo_test::RunForked(2, [](Team& team) { TwoBucketScenario(team, false); });
}

// ---------------------------------------------------------------------------------------------
// Parameter broadcast and the shape check.

TEST(DdpBroadcast, EveryRankEndsWithRankZerosParameters) {
  ringo_test::RunForked(3, [](Team& team) {
    const int rank = team.ranks[0];
    const int dims[] = {8, 16, 3};
    mlp_t m;
    ASSERT_EQ(mlp_create(&m, dims, 2, 1, 1000 + rank, 0), 0);  // a different init on every rank
    ringoDdp_t ddp = nullptr;
    DDP_OK(ddp, ringoDdpCreate(&ddp, team.comms[0], 0, 0));
    RegisterModel(ddp, &m);
    DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
    mlp_t want;
    ASSERT_EQ(mlp_create(&want, dims, 2, 1, 1000, 1), 0);
    EXPECT_EQ(ParamHash(m), ParamHash(want)) << "rank " << rank << " does not hold rank 0's initial parameters";
    mlp_free(&want);
    mlp_free(&m);
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  });
}

// Registers the shapes (count, dtype) on this rank, runs BroadcastParams, expects ringoInvalidUsage
// on every rank with each of `needles` in the message.
void ExpectShapeError(ringoComm_t comm, const std::vector<std::pair<size_t, ringoDataType_t>>& shapes,
                      size_t bucket_bytes, const std::vector<std::string>& needles) {
  ringoDdp_t ddp = nullptr;
  DDP_OK(ddp, ringoDdpCreate(&ddp, comm, bucket_bytes, 0));
  std::vector<std::vector<double>> bufs;
  for (const auto& sh : shapes) {
    bufs.emplace_back(sh.first, 0.0);
    DDP_OK(ddp, ringoDdpRegister(ddp, bufs.back().data(), bufs.back().data(), sh.first, sh.second, nullptr));
  }
  EXPECT_EQ(ringoDdpBroadcastParams(ddp), ringoInvalidUsage);
  const std::string msg = ringoDdpGetLastError(ddp);
  for (const std::string& needle : needles) EXPECT_NE(msg.find(needle), std::string::npos) << "no '" << needle << "' in: " << msg;
  EXPECT_EQ(ringoDdpMarkReady(ddp, 0), ringoInvalidUsage) << "a context that failed its check must not train";
  DDP_OK(ddp, ringoDdpDestroy(ddp));
}

TEST(DdpBroadcast, ShapeMismatchIsAClearErrorOnEveryRankNotAHang) {
  Options o;
  o.ringo_timeout_s = 10;
  ringo_test::RunForked(3, [](Team& team) {
    const int rank = team.ranks[0];
    const ringoDataType_t f = ringoFloat32;
    // Parameter 2 has another count on rank 2.
    ExpectShapeError(team.comms[0], {{10, f}, {20, f}, {rank == 2 ? 31u : 30u, f}, {40, f}}, 0,
                     {"parameter 2 ", "30 x float32", "31 x float32", "rank 2"});
    // Rank 1 registered one parameter more.
    std::vector<std::pair<size_t, ringoDataType_t>> shapes{{10, f}, {20, f}, {30, f}};
    if (rank == 1) shapes.push_back({5, f});
    ExpectShapeError(team.comms[0], shapes, 0, {"parameter 3 ", "missing on rank 0", "rank 1"});
    // Parameter 0 is float64 on rank 1.
    ExpectShapeError(team.comms[0], {{10, rank == 1 ? ringoFloat64 : f}}, 0, {"parameter 0 ", "float64", "rank 1"});
    // Bucket sizes differ: the buckets would not match.
    ExpectShapeError(team.comms[0], {{10, f}}, rank == 2 ? 4096 : 8192, {"bucket sizes", "rank 2"});
    // The communicator is still good: the check's collectives all matched.
    double x = 1.0;
    EXPECT_EQ(ringoAllReduce(&x, &x, 1, ringoFloat64, ringoSum, team.comms[0], nullptr), ringoSuccess);
    EXPECT_EQ(x, 3.0);
  }, o);
}

// ---------------------------------------------------------------------------------------------
// Memory kinds and misuse: errors with messages, never a crash.

TEST(DdpUsage, DeviceMemoryIsAClearInvalidUsage) {
  ringo_test::RunForked(1, [](Team& team) {
    ringoDdp_t ddp = nullptr;
    DDP_OK(ddp, ringoDdpCreate(&ddp, team.comms[0], 0, 0));
    std::vector<float> host(16);
    EXPECT_EQ(ringoDdpRegisterMem(ddp, host.data(), host.data(), 16, ringoFloat32, ringoMemDevice, nullptr),
              ringoInvalidUsage);
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("device memory"), std::string::npos) << ringoDdpGetLastError(ddp);
    // A pointer the host cannot read (what a CUDA device address is to the CPU), passed as host memory.
    const size_t bytes = 1 << 16;
    void* dev = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(dev, MAP_FAILED);
    EXPECT_EQ(ringoDdpRegister(ddp, dev, host.data(), 16, ringoFloat32, nullptr), ringoInvalidUsage);
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("grad"), std::string::npos) << ringoDdpGetLastError(ddp);
    EXPECT_EQ(ringoDdpRegister(ddp, host.data(), dev, 16, ringoFloat32, nullptr), ringoInvalidUsage);
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("not host memory"), std::string::npos) << ringoDdpGetLastError(ddp);
    munmap(dev, bytes);
    // Readable but read-only: the communication thread would fault writing the average into it.
    void* ro = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(ro, MAP_FAILED);
    EXPECT_EQ(ringoDdpRegister(ddp, ro, host.data(), 16, ringoFloat32, nullptr), ringoInvalidUsage);
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("grad"), std::string::npos) << ringoDdpGetLastError(ddp);
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("read-only"), std::string::npos) << ringoDdpGetLastError(ddp);
    munmap(ro, bytes);
    EXPECT_EQ(ringoDdpRegisterMem(ddp, host.data(), host.data(), 16, ringoFloat32, static_cast<ringoMemKind_t>(7), nullptr),
              ringoInvalidArgument);
    // Nothing was registered by the failed calls: a good registration gets index 0.
    int index = -1;
    DDP_OK(ddp, ringoDdpRegister(ddp, host.data(), host.data(), 16, ringoFloat32, &index));
    EXPECT_EQ(index, 0);
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  });
}

// A read-only param is refused where the broadcast writes it (every rank but 0), and taken on
// rank 0, whose params are only read; checked from the mapping's flags, the bytes untouched.
TEST(DdpUsage, ReadOnlyParamIsRefusedWhereTheBroadcastWritesIt) {
  ringo_test::RunForked(2, [](Team& team) {
    ringoDdp_t ddp = nullptr;
    DDP_OK(ddp, ringoDdpCreate(&ddp, team.comms[0], 0, 0));
    const size_t bytes = 1 << 16;
    void* ro = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(ro, MAP_FAILED);
    std::vector<float> g(16, 1.0f);
    const ringoResult_t res = ringoDdpRegister(ddp, g.data(), ro, 16, ringoFloat32, nullptr);
    if (team.ranks[0] == 0) {
      EXPECT_EQ(res, ringoSuccess) << ringoDdpGetLastError(ddp);
    } else {
      EXPECT_EQ(res, ringoInvalidUsage);
      EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("param"), std::string::npos) << ringoDdpGetLastError(ddp);
      EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("read-only"), std::string::npos) << ringoDdpGetLastError(ddp);
    }
    munmap(ro, bytes);
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  });
}

TEST(DdpUsage, MisuseIsRejectedWithAMessage) {
  ringo_test::RunForked(1, [](Team& team) {
    ringoDdp_t ddp = nullptr;
    EXPECT_EQ(ringoDdpCreate(nullptr, team.comms[0], 0, 0), ringoInvalidArgument);
    EXPECT_EQ(ringoDdpCreate(&ddp, nullptr, 0, 0), ringoInvalidArgument);
    EXPECT_EQ(ddp, nullptr);
    EXPECT_NE(std::string(ringoDdpGetLastError(nullptr)).find("comm"), std::string::npos) << ringoDdpGetLastError(nullptr);
    EXPECT_EQ(ringoDdpMarkReady(nullptr, 0), ringoInvalidArgument);
    EXPECT_EQ(ringoDdpFinish(nullptr), ringoInvalidArgument);
    EXPECT_EQ(ringoDdpBroadcastParams(nullptr), ringoInvalidArgument);
    EXPECT_EQ(ringoDdpSetLocalBatch(nullptr, 1), ringoInvalidArgument);
    EXPECT_EQ(ringoDdpNoSync(nullptr, 1), ringoInvalidArgument);
    EXPECT_EQ(ringoDdpDestroy(nullptr), ringoInvalidArgument);

    DDP_OK(ddp, ringoDdpCreate(&ddp, team.comms[0], 0, 0));
    std::vector<float> g(8), p(8);
    std::vector<int32_t> ints(8);
    EXPECT_EQ(ringoDdpRegister(ddp, ints.data(), ints.data(), 8, ringoInt32, nullptr), ringoInvalidArgument);
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("floating-point"), std::string::npos);
    EXPECT_EQ(ringoDdpRegister(ddp, nullptr, p.data(), 8, ringoFloat32, nullptr), ringoInvalidArgument);
    EXPECT_EQ(ringoDdpMarkReady(ddp, 0), ringoInvalidUsage);  // before BroadcastParams
    EXPECT_EQ(ringoDdpFinish(ddp), ringoInvalidUsage);
    int count = 0;
    EXPECT_EQ(ringoDdpGetBucketCount(ddp, &count), ringoInvalidUsage);
    DDP_OK(ddp, ringoDdpRegister(ddp, g.data(), p.data(), 8, ringoFloat32, nullptr));
    // Their collectives must complete before they return: not queued in an open group.
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    EXPECT_EQ(ringoDdpBroadcastParams(ddp), ringoInvalidUsage);
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("ringoGroupStart"), std::string::npos)
        << ringoDdpGetLastError(ddp);
    EXPECT_EQ(ringoDdpSetLocalBatch(ddp, 4), ringoInvalidUsage);
    ASSERT_EQ(ringoGroupEnd(), ringoSuccess);
    DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
    EXPECT_EQ(ringoDdpBroadcastParams(ddp), ringoInvalidUsage);
    EXPECT_EQ(ringoDdpRegister(ddp, g.data(), p.data(), 8, ringoFloat32, nullptr), ringoInvalidUsage);
    EXPECT_EQ(ringoDdpMarkReady(ddp, 1), ringoInvalidArgument);
    EXPECT_EQ(ringoDdpMarkReady(ddp, -1), ringoInvalidArgument);
    EXPECT_EQ(ringoDdpGetParamBucket(ddp, 5, nullptr, nullptr), ringoInvalidArgument);
    DDP_OK(ddp, ringoDdpMarkReady(ddp, 0));
    EXPECT_EQ(ringoDdpMarkReady(ddp, 0), ringoInvalidUsage);
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("already marked"), std::string::npos);
    EXPECT_EQ(ringoDdpSetLocalBatch(ddp, 4), ringoInvalidUsage);  // mid-step
    EXPECT_EQ(ringoDdpNoSync(ddp, 1), ringoInvalidUsage);
    DDP_OK(ddp, ringoDdpFinish(ddp));
    DDP_OK(ddp, ringoDdpSetLocalBatch(ddp, 4));  // between steps
    EXPECT_EQ(ringoDdpSetLocalBatch(ddp, 0), ringoInvalidArgument);  // every rank (the one) is empty
    DDP_OK(ddp, ringoDdpMarkReady(ddp, 0));  // the next step starts clean
    DDP_OK(ddp, ringoDdpFinish(ddp));
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  });
}

// Batch sizes whose sum wraps 64 bits would weight the gradients wrongly, silently: refused on
// every rank, and the context goes on with its previous weights.
TEST(DdpUneven, BatchSizesWhoseSumOverflowsAreRefusedOnEveryRank) {
  ringo_test::RunForked(2, [](Team& team) {
    ringoDdp_t ddp = nullptr;
    DDP_OK(ddp, ringoDdpCreate(&ddp, team.comms[0], 0, 0));
    std::vector<float> g(4, static_cast<float>(team.ranks[0])), p(4);
    DDP_OK(ddp, ringoDdpRegister(ddp, g.data(), p.data(), g.size(), ringoFloat32, nullptr));
    DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
    EXPECT_EQ(ringoDdpSetLocalBatch(ddp, team.ranks[0] == 0 ? SIZE_MAX : 2), ringoInvalidArgument);
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("overflows"), std::string::npos) << ringoDdpGetLastError(ddp);
    EXPECT_EQ(ringoDdpSetLocalBatch(ddp, size_t{1} << 63), ringoInvalidArgument) << "2^63 + 2^63 wraps to 0";
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("overflows"), std::string::npos) << ringoDdpGetLastError(ddp);
    DDP_OK(ddp, ringoDdpFinish(ddp));
    EXPECT_EQ(g[0], 0.5f) << "the plain average, weights untouched";
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  });
}

// A peer that leaves mid-training: Finish returns an error within RINGO_TIMEOUT, the context is
// unusable afterwards, and nothing hangs or crashes.
TEST(DdpUsage, APeerLeavingIsAnErrorNotAHang) {
  Options o;
  o.ringo_timeout_s = 5;
  o.grace_s = 20;
  ringo_test::RunForked(2, [](Team& team) {
    ringoDdp_t ddp = nullptr;
    DDP_OK(ddp, ringoDdpCreate(&ddp, team.comms[0], 0, 0));
    std::vector<float> g(1000, 1.0f), p(1000);
    DDP_OK(ddp, ringoDdpRegister(ddp, g.data(), p.data(), g.size(), ringoFloat32, nullptr));
    DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
    if (team.ranks[0] == 1) {
      DDP_OK(ddp, ringoDdpDestroy(ddp));
      return;  // leaves: the harness destroys its communicator
    }
    DDP_OK(ddp, ringoDdpMarkReady(ddp, 0));
    const ringoResult_t res = ringoDdpFinish(ddp);
    EXPECT_NE(res, ringoSuccess);
    EXPECT_NE(std::string(ringoDdpGetLastError(ddp)).find("all-reduce"), std::string::npos) << ringoDdpGetLastError(ddp);
    EXPECT_EQ(ringoDdpMarkReady(ddp, 0), ringoInvalidUsage);
    EXPECT_EQ(ringoDdpFinish(ddp), ringoInvalidUsage);
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  }, o);
}

}  // namespace
