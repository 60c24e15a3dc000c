// test_ddp_device.cc — the DDP layer on device memory (src/ddp.c's device buckets, src/ddp_device.h):
// without a GPU through a fake device whose streams are staged_fake.h's FakeStream (exact bytes against
// the host path, enqueue order, no host waits) and, where a GPU answers, the same on real CUDA. The scale
// kernel is tested in test_ddp_scale.cc. Depends on harness.h, ddp_fake_device.h, gpu_probe.h. Run: make test.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ddp/ddp_device.h"
#include "ddp_fake_device.h"
#include "include/elementwise.h"
#include "gpu_probe.h"
#include "harness.h"
#include "ringo.h"
#include "ringo_ddp.h"
#include "staged_fake.h"

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

using ringo_ddp_test::Drain;
using ringo_ddp_test::Entry;
using ringo_ddp_test::kBound;
using ringo_ddp_test::FakeDevice;
using ringo_ddp_test::WaitFor;
using ringo_staged_test::FakeStream;
using ringo_test::NoGpuReason;  // test/gpu_probe.h
using ringo_test::Options;
using ringo_test::Team;

bool ErrorHas(ringoDdp_t ddp, const char* text) { return strstr(ringoDdpGetLastError(ddp), text) != nullptr; }

#define DDP_OK(ddp, call) ASSERT_EQ((call), ringoSuccess) << #call << ": " << ringoDdpGetLastError(ddp)

size_t Esize(ringoDataType_t t) { return t == ringoFloat64 ? 8 : t == ringoFloat32 ? 4 : 2; }
const char* TypeName(ringoDataType_t t) {
  return t == ringoFloat64 ? "float64" : t == ringoFloat32 ? "float32" : t == ringoFloat16 ? "float16" : "bfloat16";
}

uint64_t Lcg(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return s >> 11;
}

const ringoDataType_t kFloatTypes[] = {ringoFloat16, ringoBfloat16, ringoFloat32, ringoFloat64};

// ---------------------------------------------------------------------------------------------
// Models: parameters laid out in one arena (gradients) and a twin (values), either each (dtype,
// memory kind) group back to back (buckets all-reduce in place) or with gaps (staging).

struct Spec {
  size_t count;
  ringoDataType_t type;
  ringoMemKind_t mem;
};

struct Bufs {
  std::vector<uint8_t> grads, params;
  std::vector<size_t> off;
  uint8_t* grad(size_t i) { return grads.data() + off[i]; }
  uint8_t* param(size_t i) { return params.data() + off[i]; }
};

Bufs Layout(const std::vector<Spec>& specs, bool contiguous) {
  Bufs b;
  b.off.assign(specs.size(), 0);
  size_t at = 0;
  auto place = [&](size_t i) {
    b.off[i] = at;
    at += specs[i].count * Esize(specs[i].type);
    if (!contiguous) at = (at + 7) / 8 * 8 + 64;
  };
  if (contiguous) {
    for (ringoDataType_t t : kFloatTypes)
      for (ringoMemKind_t m : {ringoMemHost, ringoMemDevice}) {
        for (size_t i = 0; i < specs.size(); i++)
          if (specs[i].type == t && specs[i].mem == m) place(i);
        at = (at + 7) / 8 * 8 + 64;  // groups apart
      }
  } else {
    for (size_t i = 0; i < specs.size(); i++) place(i);
  }
  b.grads.assign(at + 8, 0x55);
  b.params.assign(at + 8, 0);
  return b;
}

void PutValue(uint8_t* p, ringoDataType_t t, double v) {
  switch (t) {
    case ringoFloat64: memcpy(p, &v, 8); break;
    case ringoFloat32: { const float f = static_cast<float>(v); memcpy(p, &f, 4); break; }
    case ringoFloat16: { const uint16_t h = ringo_ew_float_to_half(static_cast<float>(v)); memcpy(p, &h, 2); break; }
    default: { const uint16_t h = ringo_ew_float_to_bf16(static_cast<float>(v)); memcpy(p, &h, 2); break; }
  }
}

// Gradient element i of parameter k on rank r in micro-step s: small integers when exact (sums
// then do not depend on bucket layout), else values of every magnitude with signed zeros.
double GradValue(bool exact, int r, int s, size_t k, size_t i) {
  uint64_t st = (static_cast<uint64_t>(r) * 1000003 + static_cast<uint64_t>(s) * 7919 + k * 104729 + i) | 1;
  for (int j = 0; j < 3; j++) Lcg(st);
  const double u = static_cast<double>(Lcg(st) % 2000001) / 1000000.0 - 1.0;
  if (exact) return std::round(u * 8);
  if (i % 53 == 5) return (i % 2) ? -0.0 : 1e-6;
  return u * std::ldexp(1.0, static_cast<int>(Lcg(st) % 16) - 10);
}

// *x = sum(*x, *g) on the bytes of one element (elementwise.h's rounding for float16/bfloat16).
template <class T>
void AddAs(uint8_t* x, const uint8_t* g, T (*sum)(T, T)) {
  T a, b;
  memcpy(&a, x, sizeof a);
  memcpy(&b, g, sizeof b);
  a = sum(a, b);
  memcpy(x, &a, sizeof a);
}

// Writes (or, accumulating, adds in the dtype, as a backward would) micro-step s's gradient k.
void WriteGrad(uint8_t* p, const Spec& sp, bool exact, bool add, int r, int s, size_t k) {
  const size_t es = Esize(sp.type);
  for (size_t i = 0; i < sp.count; i++) {
    uint8_t g[8];
    PutValue(g, sp.type, GradValue(exact, r, s, k, i));
    uint8_t* x = p + i * es;
    if (!add) { memcpy(x, g, es); continue; }
    switch (sp.type) {
      case ringoFloat64: AddAs(x, g, ringo_ew_sum_f64); break;
      case ringoFloat32: AddAs(x, g, ringo_ew_sum_f32); break;
      case ringoFloat16: AddAs(x, g, ringo_ew_sum_f16); break;
      default: AddAs(x, g, ringo_ew_sum_bf16); break;
    }
  }
}

void FillParams(Bufs& b, const std::vector<Spec>& specs, int rank) {
  for (size_t k = 0; k < specs.size(); k++)
    for (size_t i = 0; i < specs[k].count; i++)
      PutValue(b.param(k) + i * Esize(specs[k].type), specs[k].type, 100.0 * rank + static_cast<double>(k + i % 7));
}

ringoDdp_t Make(ringoComm_t comm, const std::vector<Spec>& specs, Bufs& b, FakeDevice* fake, FakeStream* compute,
                bool as_host) {
  ringoDdp_t ddp = nullptr;
  EXPECT_EQ(ringoDdpCreate(&ddp, comm, 1024, 256), ringoSuccess) << ringoDdpGetLastError(nullptr);
  if (!ddp) return nullptr;
  if (fake) {
    EXPECT_EQ(ringo_ddp_set_device_ops(ddp, &fake->ops), ringoSuccess) << ringoDdpGetLastError(ddp);
  }
  if (compute) {
    EXPECT_EQ(ringoDdpSetStream(ddp, compute->handle()), ringoSuccess);
  }
  for (size_t k = 0; k < specs.size(); k++) {
    int idx = -1;
    EXPECT_EQ(ringoDdpRegisterMem(ddp, b.grad(k), b.param(k), specs[k].count, specs[k].type,
                                  as_host ? ringoMemHost : specs[k].mem, &idx), ringoSuccess)
        << ringoDdpGetLastError(ddp);
    EXPECT_EQ(idx, static_cast<int>(k));
  }
  EXPECT_EQ(ringoDdpBroadcastParams(ddp), ringoSuccess) << ringoDdpGetLastError(ddp);
  return ddp;
}

struct StepCfg {
  bool exact = false, add = false, no_sync = false;
  int micro = 0;  // which micro-step's gradients
};

// The reference: the same step on host memory.
void HostStep(ringoDdp_t ddp, Bufs& b, const std::vector<Spec>& specs, int rank, const StepCfg& c) {
  for (size_t k = specs.size(); k-- > 0;) {
    WriteGrad(b.grad(k), specs[k], c.exact, c.add, rank, c.micro, k);
    ASSERT_EQ(ringoDdpMarkReady(ddp, static_cast<int>(k)), ringoSuccess) << ringoDdpGetLastError(ddp);
  }
  ASSERT_EQ(ringoDdpFinish(ddp), ringoSuccess) << ringoDdpGetLastError(ddp);
}

// Checks the fake's log of one synchronising step: per device bucket the ready event is recorded
// after the writes of all its gradients were enqueued and runs after they ran (the last mark records
// it), and before the side stream's wait, the wait before every scale, every scale before the
// all-reduce, the all-reduce before every unpack copy; all-reduces go in bucket order; Finish's
// join comes after the last all-reduce and runs after the last side-stream task, of which the last
// bucket's unpack copies (`held` tasks) were still held when Finish returned.
void CheckOrder(const std::vector<Entry>& log, ringoDdp_t ddp, const std::vector<Spec>& specs, bool staged,
                size_t held) {
  int nb = 0;
  ASSERT_EQ(ringoDdpGetBucketCount(ddp, &nb), ringoSuccess);
  std::vector<int> nonempty(static_cast<size_t>(nb), 0), device(static_cast<size_t>(nb), 0);
  std::vector<std::vector<int>> grads(static_cast<size_t>(nb));
  for (size_t k = 0; k < specs.size(); k++) {
    int b = -1;
    ASSERT_EQ(ringoDdpGetParamBucket(ddp, static_cast<int>(k), &b, nullptr), ringoSuccess);
    nonempty[static_cast<size_t>(b)] += specs[k].count > 0;
    device[static_cast<size_t>(b)] = specs[k].mem == ringoMemDevice;
    grads[static_cast<size_t>(b)].push_back(static_cast<int>(k));
  }
  auto find = [&](const char* what, int b, bool last) {
    int at = -1;
    for (size_t i = 0; i < log.size(); i++)
      if (log[i].what == what && log[i].bucket == b && (at < 0 || last)) at = static_cast<int>(i);
    return at;
  };
  auto find_k = [&](const char* what, int k) {
    for (size_t i = 0; i < log.size(); i++)
      if (log[i].what == what && log[i].index == k) return static_cast<int>(i);
    return -1;
  };
  auto count = [&](const char* what, int b) {
    return std::count_if(log.begin(), log.end(), [&](const Entry& e) { return e.what == what && e.bucket == b; });
  };
  int prev_allreduce = -1, last_side = -1, last_bucket = -1;
  for (int b = 0; b < nb; b++) {
    if (!device[static_cast<size_t>(b)]) {
      EXPECT_EQ(find("ready", b, false), -1) << "host bucket " << b << " went to the device";
      continue;
    }
    const int ready = find("ready", b, false), run = find("ready-run", b, false), wait = find("wait", b, false);
    const int scale0 = find("scale", b, false), scale1 = find("scale", b, true), ar = find("allreduce", b, false);
    const int copy0 = find("copy", b, false), copy1 = find("copy", b, true);
    EXPECT_TRUE(ready >= 0 && run > ready && wait > run) << "bucket " << b << ": ready " << ready << ", ready ran "
                                                          << run << ", side wait " << wait;
    for (int k : grads[static_cast<size_t>(b)]) {
      const int enq = find_k("write-enq", k), wrote = find_k("write", k);
      EXPECT_TRUE(enq >= 0 && enq < ready) << "bucket " << b << ": ready event recorded (" << ready
                                           << ") before gradient " << k << "'s write was enqueued (" << enq << ")";
      EXPECT_TRUE(wrote >= 0 && wrote < run) << "bucket " << b << ": ready event ran (" << run << ") before gradient "
                                             << k << " was written (" << wrote << ")";
    }
    EXPECT_TRUE(scale0 > wait && ar > scale1) << "bucket " << b << ": wait " << wait << ", scales " << scale0
                                              << ".." << scale1 << ", all-reduce " << ar;
    EXPECT_GT(ar, prev_allreduce) << "bucket " << b << " all-reduced out of bucket order";
    // With gaps between gradients a bucket goes through staging unless it has one (non-empty) gradient.
    const int nz = nonempty[static_cast<size_t>(b)];
    const bool staging = staged && nz > 1;
    EXPECT_EQ(count("scale", b), staging ? nz : 1) << "bucket " << b;
    EXPECT_EQ(count("copy", b), staging ? nz : 0) << "bucket " << b;
    if (staging) {
      EXPECT_GT(copy0, ar) << "bucket " << b << " unpacked before its all-reduce";
    }
    if (ar >= 0) last_bucket = b;
    prev_allreduce = ar;
    last_side = std::max({last_side, scale1, copy1});
  }
  EXPECT_EQ(held, static_cast<size_t>(count("copy", last_bucket)))
      << "side-stream tasks still held when Finish returned (the last bucket's unpack copies)";
  const int join = find("join", -1, false), join_run = find("join-run", -1, false);
  EXPECT_EQ(count("join", -1), 1);
  EXPECT_GT(join, prev_allreduce) << "Finish joined before the last bucket was enqueued";
  EXPECT_GT(join_run, last_side) << "the compute stream went on before the side stream's work";
}

// One step of the device context. Backward's writes are tasks on the compute stream, held behind a
// closed gate while MarkReady is called: MarkReady must return anyway, and nothing may touch the
// gradients before the writes ran. Finish, with the gate closed again and the side stream held, must
// return without the compute stream having run its join and without a host wait for the side stream;
// after the gates open the averages are there.
void DeviceStep(ringoDdp_t ddp, FakeDevice& fake, FakeStream& compute, Bufs& b, const std::vector<Spec>& specs,
                int rank, const StepCfg& c, bool staged) {
  fake.TakeLog();
  const int syncs = fake.sync_sides;
  const std::vector<uint8_t> before = b.grads;
  const size_t done_before = compute.done();
  compute.SetGate(false);
  fake.HoldSide(true);
  for (size_t k = specs.size(); k-- > 0;) {
    uint8_t* g = b.grad(k);
    const Spec sp = specs[k];
    int bk = -1;
    ASSERT_EQ(ringoDdpGetParamBucket(ddp, static_cast<int>(k), &bk, nullptr), ringoSuccess);
    if (sp.mem == ringoMemDevice) {
      fake.Log("write-enq", bk, static_cast<int>(k));
      compute.Enqueue([=, &fake] {
        WriteGrad(g, sp, c.exact, c.add, rank, c.micro, k);
        fake.Log("write", bk, static_cast<int>(k));
      });
    } else {
      WriteGrad(g, sp, c.exact, c.add, rank, c.micro, k);
    }
    ASSERT_EQ(ringoDdpMarkReady(ddp, static_cast<int>(k)), ringoSuccess) << ringoDdpGetLastError(ddp);
  }
  EXPECT_EQ(compute.done(), done_before) << "the gate was closed";
  for (size_t k = 0; k < specs.size(); k++) {
    if (specs[k].mem != ringoMemDevice) continue;
    EXPECT_EQ(0, memcmp(b.grad(k), before.data() + b.off[k], specs[k].count * Esize(specs[k].type)))
        << "gradient " << k << " touched before backward's write ran";
  }
  compute.SetGate(true);
  Drain(compute);
  compute.SetGate(false);
  const size_t enq = compute.enqueued();
  ASSERT_EQ(ringoDdpFinish(ddp), ringoSuccess) << ringoDdpGetLastError(ddp);
  const bool any_device =
      std::any_of(specs.begin(), specs.end(), [](const Spec& s) { return s.mem == ringoMemDevice; });
  EXPECT_EQ(compute.enqueued(), enq + (!c.no_sync && any_device ? 1 : 0))
      << "Finish enqueues one join, only when it syncs";
  EXPECT_EQ(compute.done(), enq) << "the compute stream ran while gated";
  const size_t held = fake.side.enqueued() - fake.side.done();  // Finish returned with these unrun
  EXPECT_EQ(fake.sync_sides, syncs) << "a step waited on the host for the side stream (sync_side)";
  compute.SetGate(true);
  fake.HoldSide(false);
  Drain(compute);
  Drain(fake.side);
  const std::vector<Entry> log = fake.TakeLog();
  if (c.no_sync) {
    const auto device_calls = std::count_if(log.begin(), log.end(), [](const Entry& e) {
      return e.what != "write-enq" && e.what != "write";
    });
    EXPECT_EQ(device_calls, 0) << "NoSync must not touch the device";
    EXPECT_EQ(held, 0u);
  } else if (any_device) {
    CheckOrder(log, ddp, specs, staged, held);
  }
}

void ExpectSame(Bufs& a, Bufs& b, const std::vector<Spec>& specs, const std::string& what) {
  for (size_t k = 0; k < specs.size(); k++) {
    const size_t bytes = specs[k].count * Esize(specs[k].type);
    EXPECT_EQ(0, memcmp(a.grad(k), b.grad(k), bytes)) << what << ": gradient " << k << " (" << TypeName(specs[k].type)
                                                      << ") differs from the host path";
    EXPECT_EQ(0, memcmp(a.param(k), b.param(k), bytes)) << what << ": parameter " << k << " differs";
  }
}

std::vector<Spec> SeveralTypes(ringoMemKind_t mem) {
  return {{300, ringoFloat32, mem}, {0, ringoFloat32, mem}, {129, ringoFloat16, mem}, {77, ringoBfloat16, mem},
          {1000, ringoFloat32, mem}, {33, ringoFloat64, mem}, {513, ringoFloat16, mem}, {64, ringoBfloat16, mem},
          {250, ringoFloat64, mem}, {7, ringoFloat32, mem}, {400, ringoBfloat16, mem}};
}

// Uneven shards, an empty one from N = 3 on (w = 0).
size_t Shard(int rank) { return rank == 1 ? 0 : static_cast<size_t>(rank + 1); }

// The whole scenario on one rank: a host context and a fake-device context on the same comm, the
// same steps on both (uneven weights, accumulation under NoSync, equal weights), compared bytes.
void Scenario(Team& t, const std::vector<Spec>& specs, bool contiguous, bool exact) {
  const int rank = t.ranks[0];
  const ringoComm_t comm = t.comms[0];
  std::vector<Spec> host_specs = specs;
  for (Spec& s : host_specs) s.mem = ringoMemHost;
  Bufs hb = Layout(specs, contiguous), db = Layout(specs, contiguous);
  FillParams(hb, specs, rank);
  FillParams(db, specs, rank);
  FakeStream compute;  // declared first: the fake's side stream may wait on it until it is gone
  FakeDevice fake;
  ringoDdp_t hd = Make(comm, host_specs, hb, nullptr, nullptr, true);
  ringoDdp_t dd = Make(comm, specs, db, &fake, &compute, false);
  ASSERT_TRUE(hd && dd);
  EXPECT_EQ(fake.sync_sides, 1) << "one host wait for the device parameters' broadcast";
  Drain(compute);
  ExpectSame(hb, db, specs, "after BroadcastParams");
  Bufs ref = Layout(specs, contiguous);
  FillParams(ref, specs, 0);
  EXPECT_EQ(0, memcmp(db.params.data(), ref.params.data(), db.params.size())) << "params are not rank 0's";
  const std::vector<StepCfg> steps = {{exact, false, false, 0}, {exact, false, true, 1}, {exact, true, false, 2},
                                      {exact, false, false, 3}};
  for (size_t s = 0; s < steps.size(); s++) {
    // Exact runs keep every w_r a power of two (sum of n is 2, 4 or 4); the others end with w_r = 1/N.
    const size_t n = exact ? (t.nranks == 3 && rank == 2 ? 2u : 1u) : s < 3 ? Shard(rank) : 1;
    DDP_OK(hd, ringoDdpSetLocalBatch(hd, n));
    DDP_OK(dd, ringoDdpSetLocalBatch(dd, n));
    DDP_OK(hd, ringoDdpNoSync(hd, steps[s].no_sync));
    DDP_OK(dd, ringoDdpNoSync(dd, steps[s].no_sync));
    ringoCommStats st0, st1;
    ASSERT_EQ(ringoCommGetStats(comm, &st0), ringoSuccess);
    ASSERT_NO_FATAL_FAILURE(HostStep(hd, hb, host_specs, rank, steps[s]));
    ASSERT_NO_FATAL_FAILURE(DeviceStep(dd, fake, compute, db, specs, rank, steps[s], !contiguous));
    ASSERT_EQ(ringoCommGetStats(comm, &st1), ringoSuccess);
    if (steps[s].no_sync) {
      EXPECT_EQ(st1.collectives, st0.collectives) << "a NoSync step communicated";
    }
    ExpectSame(hb, db, specs, "step " + std::to_string(s));
  }
  ringoDdpStats ds;
  ASSERT_EQ(ringoDdpGetStats(dd, &ds), ringoSuccess);
  EXPECT_EQ(ds.steps, 3u);
  EXPECT_EQ(ringoDdpDestroy(hd), ringoSuccess);
  EXPECT_EQ(ringoDdpDestroy(dd), ringoSuccess);
  EXPECT_EQ(fake.frees, fake.allocs) << "device staging freed through the ops";
  EXPECT_EQ(fake.allocs, contiguous ? 0 : 1) << "one device staging buffer, only when some bucket does not tile";
}

class DdpDeviceFake : public testing::TestWithParam<int> {};

TEST_P(DdpDeviceFake, ContiguousBucketsEqualTheHostPathBytes) {
  ringo_test::RunThreads(GetParam(), [](Team& t) { Scenario(t, SeveralTypes(ringoMemDevice), true, false); });
}

TEST_P(DdpDeviceFake, ScatteredBucketsEqualTheHostPathBytes) {
  ringo_test::RunThreads(GetParam(), [](Team& t) { Scenario(t, SeveralTypes(ringoMemDevice), false, false); });
}

// Host and device parameters in one context: two bucket groups per dtype, run by the one thread in
// bucket order. Exact values, so the reference (all host, other buckets) must match bit for bit.
TEST_P(DdpDeviceFake, HostAndDeviceParametersMix) {
  ringo_test::RunThreads(GetParam(), [](Team& t) {
    std::vector<Spec> specs;
    for (int k = 0; k < 12; k++)
      specs.push_back({static_cast<size_t>(40 + 37 * k), k % 3 == 2 ? ringoBfloat16 : ringoFloat32,
                       k % 2 ? ringoMemDevice : ringoMemHost});
    Scenario(t, specs, false, true);
    Scenario(t, specs, true, true);
  });
}

// BroadcastParams orders the side stream after the compute stream's work so far: a device param
// written there behind a closed gate is broadcast as written, so every rank ends with rank 0's write.
// The gate opens once the side stream waits for the compute stream, or else once BroadcastParams has
// returned (a broadcast that did not wait sent the old value, and the write then lands last).
TEST_P(DdpDeviceFake, BroadcastParamsWaitsForTheComputeStream) {
  ringo_test::RunThreads(GetParam(), [](Team& t) {
    const int rank = t.ranks[0];
    const std::vector<Spec> specs = {{64, ringoFloat32, ringoMemDevice}, {16, ringoFloat32, ringoMemHost},
                                     {32, ringoBfloat16, ringoMemDevice}};
    Bufs b = Layout(specs, false), ref = Layout(specs, false);
    FillParams(b, specs, rank);
    FillParams(ref, specs, 0);
    for (size_t i = 0; i < specs[0].count; i++) PutValue(ref.param(0) + 4 * i, ringoFloat32, 1000.0);  // rank 0's
    FakeStream compute;  // declared first: the fake's side stream may wait on it until it is gone
    FakeDevice fake;
    compute.SetGate(false);
    uint8_t* p0 = b.param(0);
    compute.Enqueue([=, &fake] {
      for (size_t i = 0; i < 64; i++) PutValue(p0 + 4 * i, ringoFloat32, 1000.0 + rank);
      fake.Log("write", -1, 0);
    });
    bool returned = false;  // under fake.mu
    std::thread opener([&] {
      {
        std::unique_lock<std::mutex> lock(fake.mu);
        auto side_waits = [](const Entry& e) { return e.what == "after"; };
        fake.logged.wait_for(lock, kBound, [&] {
          return returned || std::any_of(fake.log.begin(), fake.log.end(), side_waits);
        });
      }
      compute.SetGate(true);
    });
    ringoDdp_t ddp = Make(t.comms[0], specs, b, &fake, &compute, false);
    {
      std::lock_guard<std::mutex> lock(fake.mu);
      returned = true;
      fake.logged.notify_all();
    }
    opener.join();
    Drain(compute);
    ASSERT_NE(ddp, nullptr);
    EXPECT_EQ(fake.sync_sides, 1) << "one host wait for the device parameters' broadcast";
    const std::vector<Entry> log = fake.TakeLog();
    int write = -1, first_broadcast = -1, broadcasts = 0;
    for (size_t i = 0; i < log.size(); i++) {
      if (log[i].what == "write") write = static_cast<int>(i);
      if (log[i].what == "broadcast" && broadcasts++ == 0) first_broadcast = static_cast<int>(i);
    }
    EXPECT_EQ(broadcasts, 2) << "one broadcast per device param, on the side stream";
    EXPECT_TRUE(write >= 0 && write < first_broadcast)
        << "the side stream broadcast (" << first_broadcast << ") before the compute stream's write (" << write << ")";
    EXPECT_EQ(0, memcmp(b.params.data(), ref.params.data(), b.params.size())) << "params are not rank 0's as written";
    EXPECT_EQ(ringoDdpDestroy(ddp), ringoSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(N, DdpDeviceFake, testing::Values(2, 3, 4));

// Every rank's device allocations (the ready events, the staging buffer) are made before any rank
// enqueues a device collective: with ranks of one process on one GPU, an allocation may wait for the
// device work in flight, and a ring kernel in flight waits for the allocating rank's kernel. Rank 1's
// allocation is slowed down, so a rank 0 that did not wait for it would enqueue its broadcast first.
std::atomic<int> order_clock{0}, last_alloc{-1}, first_collective{1 << 30};
int Stamp(std::atomic<int>& mark, bool keep_max) {
  const int now = order_clock++;
  for (int was = mark.load(); keep_max ? now > was : now < was;)
    if (mark.compare_exchange_weak(was, now)) break;
  return now;
}

TEST(DdpDeviceOrder, EveryRanksAllocationsComeBeforeAnyDeviceCollective) {
  ringo_test::RunThreads(2, [](Team& t) {
    const std::vector<Spec> specs = {{20, ringoFloat32, ringoMemDevice}, {20, ringoFloat32, ringoMemDevice},
                                     {20, ringoFloat32, ringoMemDevice}};  // one bucket
    FakeStream compute;  // declared first: the fake's side stream may wait on it until it is gone
    FakeDevice fake;
    fake.ops.prepare = [](void* c, int n) {
      Stamp(last_alloc, true);
      return FakeDevice::Prepare(c, n);
    };
    fake.ops.alloc = t.ranks[0] == 1 ? +[](void* c, void** p, size_t bytes) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a slow allocation, not a synchronisation
      Stamp(last_alloc, true);
      return FakeDevice::Alloc(c, p, bytes);
    } : +[](void* c, void** p, size_t bytes) {
      Stamp(last_alloc, true);
      return FakeDevice::Alloc(c, p, bytes);
    };
    fake.ops.side_stream = [](void* c) {
      Stamp(first_collective, false);
      return FakeDevice::SideStream(c);
    };
    Bufs b = Layout(specs, false);  // scattered gradients: the buckets need a device staging buffer
    ringoDdp_t ddp = Make(t.comms[0], specs, b, &fake, &compute, false);
    ASSERT_NE(ddp, nullptr);
    EXPECT_EQ(fake.allocs, 1) << "the scattered bucket's staging buffer";
    // Make returned after this rank's broadcast, which needed the other rank's, which came after
    // that rank's allocations: every stamp is in.
    EXPECT_LT(last_alloc.load(), first_collective.load())
        << "a rank enqueued a device collective before another rank's device allocations were done";
    Drain(compute);
    EXPECT_EQ(ringoDdpDestroy(ddp), ringoSuccess);
  });
}

// Errors of the device ops: with a message, once from Finish (or MarkReady), the context unusable.
TEST(DdpDeviceErrors, EnqueueFailuresAreReportedAndStick) {
  ringo_test::RunThreads(1, [](Team& t) {
    const std::vector<Spec> specs = {{64, ringoFloat32, ringoMemDevice}, {64, ringoFloat32, ringoMemDevice}};
    for (int mode = 0; mode < 2; mode++) {
      FakeStream compute;  // declared first: the fake's side stream may wait on it until it is gone
      FakeDevice fake;
      Bufs b = Layout(specs, true);
      if (mode == 0) fake.fail_scale_at = 0;
      ringoDdp_t ddp = Make(t.comms[0], specs, b, &fake, &compute, false);
      ASSERT_NE(ddp, nullptr);
      ASSERT_EQ(ringoDdpMarkReady(ddp, 1), ringoSuccess);  // completes bucket 0
      if (mode == 1) fake.fail_record = 1;
      const ringoResult_t mark = ringoDdpMarkReady(ddp, 0);
      if (mode == 1) {
        EXPECT_EQ(mark, ringoUnhandledCudaError);
        EXPECT_TRUE(ErrorHas(ddp, "ready event")) << ringoDdpGetLastError(ddp);
      }
      EXPECT_EQ(ringoDdpFinish(ddp), ringoUnhandledCudaError);
      EXPECT_TRUE(ErrorHas(ddp, "fake CUDA error")) << ringoDdpGetLastError(ddp);
      if (mode == 0) {
        EXPECT_TRUE(ErrorHas(ddp, "scale")) << ringoDdpGetLastError(ddp);
      }
      EXPECT_EQ(ringoDdpMarkReady(ddp, 0), ringoInvalidUsage);
      EXPECT_EQ(ringoDdpFinish(ddp), ringoInvalidUsage);
      Drain(compute);
      EXPECT_EQ(ringoDdpDestroy(ddp), ringoSuccess);
    }
  });
}

TEST(DdpDeviceUsage, RegistrationAndStreamRules) {
  ringo_test::RunThreads(1, [](Team& t) {
    FakeStream compute;  // declared first: the fake's side stream may wait on it until it is gone
    FakeDevice fake;
    std::vector<float> g(16), p(16);
    ringoDdp_t ddp = nullptr;
    DDP_OK(ddp, ringoDdpCreate(&ddp, t.comms[0], 0, 0));
    EXPECT_EQ(ringoDdpSetStream(nullptr, compute.handle()), ringoInvalidArgument);
    DDP_OK(ddp, ringo_ddp_set_device_ops(ddp, &fake.ops));
    fake.bad_ptr = p.data();
    EXPECT_EQ(ringoDdpRegisterMem(ddp, g.data(), p.data(), 16, ringoFloat32, ringoMemDevice, nullptr),
              ringoInvalidUsage);
    EXPECT_TRUE(ErrorHas(ddp, "param")) << ringoDdpGetLastError(ddp);
    EXPECT_TRUE(ErrorHas(ddp, "not device memory")) << ringoDdpGetLastError(ddp);
    fake.bad_ptr = nullptr;
    int idx = -1;
    DDP_OK(ddp, ringoDdpRegisterMem(ddp, g.data(), p.data(), 16, ringoFloat32, ringoMemDevice, &idx));
    EXPECT_EQ(idx, 0);
    EXPECT_EQ(ringo_ddp_set_device_ops(ddp, &fake.ops), ringoInvalidUsage) << "ops swapped under a registration";
    DDP_OK(ddp, ringoDdpSetStream(ddp, compute.handle()));
    DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
    DDP_OK(ddp, ringoDdpMarkReady(ddp, 0));
    EXPECT_EQ(ringoDdpSetStream(ddp, nullptr), ringoInvalidUsage) << "SetStream during a step";
    DDP_OK(ddp, ringoDdpFinish(ddp));
    Drain(compute);
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  });
}

// Several ranks of one process on one GPU may not share a default compute stream (each Finish would
// hold back the others' backward): refused by SetStream and, for the default NULL, BroadcastParams.
TEST(DdpDeviceUsage, ASharedDefaultStreamIsRefused) {
  ringo_test::RunThreads(1, [](Team& t) {
    FakeStream compute;
    FakeDevice fake;
    fake.ops.stream_shared = [](void*, ringoStream_t s) { return s == nullptr ? 1 : 0; };
    std::vector<float> g(16), p(16);
    ringoDdp_t ddp = nullptr;
    DDP_OK(ddp, ringoDdpCreate(&ddp, t.comms[0], 0, 0));
    DDP_OK(ddp, ringo_ddp_set_device_ops(ddp, &fake.ops));
    DDP_OK(ddp, ringoDdpRegisterMem(ddp, g.data(), p.data(), 16, ringoFloat32, ringoMemDevice, nullptr));
    EXPECT_EQ(ringoDdpBroadcastParams(ddp), ringoInvalidUsage) << "the default stream, shared";
    EXPECT_TRUE(ErrorHas(ddp, "own stream")) << ringoDdpGetLastError(ddp);
    EXPECT_EQ(ringoDdpSetStream(ddp, nullptr), ringoInvalidUsage);
    DDP_OK(ddp, ringoDdpSetStream(ddp, compute.handle()));
    DDP_OK(ddp, ringoDdpBroadcastParams(ddp));
    DDP_OK(ddp, ringoDdpDestroy(ddp));
  });
}

// ---------------------------------------------------------------------------------------------
// On a GPU (skipped, with the reason, where none answers). CUDA is only touched in forked children.

#ifdef RINGO_HAVE_CUDA
Options GpuOptions() {
  Options o;
  o.deadline_s = 90;
  o.ringo_timeout_s = 20;
  o.make_id = false;
  return o;
}

#define CU_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())
#endif


#ifdef RINGO_HAVE_CUDA
// One rank (a thread) of the GPU scenario: a host context and a device context on comm, with the
// device gradients written by H2D copies on the compute stream as a backward would; bytes compared.
void GpuRank(ringoComm_t comm, int rank, bool contiguous) {
  CU_OK(cudaSetDevice(0));
  const std::vector<Spec> specs = {{1000, ringoFloat32, ringoMemDevice}, {300, ringoBfloat16, ringoMemDevice},
                                   {4097, ringoFloat32, ringoMemDevice}, {129, ringoFloat16, ringoMemDevice},
                                   {64, ringoFloat64, ringoMemDevice}, {2000, ringoFloat32, ringoMemDevice}};
  std::vector<Spec> host_specs = specs;
  for (Spec& s : host_specs) s.mem = ringoMemHost;
  Bufs hb = Layout(specs, contiguous), src = Layout(specs, contiguous), back = Layout(specs, contiguous);
  FillParams(hb, specs, rank);
  uint8_t *dgrad = nullptr, *dparam = nullptr;
  cudaStream_t cs;
  CU_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  CU_OK(cudaMalloc(reinterpret_cast<void**>(&dgrad), hb.grads.size()));
  CU_OK(cudaMalloc(reinterpret_cast<void**>(&dparam), hb.params.size()));
  CU_OK(cudaMemcpy(dparam, hb.params.data(), hb.params.size(), cudaMemcpyHostToDevice));
  // A pageable upload may return before it lands, on the legacy stream, which the non-blocking
  // streams do not wait for; the other rank's work is not waited for here.
  CU_OK(cudaStreamSynchronize(cudaStreamLegacy));
  ringoDdp_t hd = nullptr, dd = nullptr;
  DDP_OK(hd, ringoDdpCreate(&hd, comm, 4096, 1024));
  DDP_OK(dd, ringoDdpCreate(&dd, comm, 4096, 1024));
  EXPECT_EQ(ringoDdpRegisterMem(dd, hb.grad(0), dparam, 4, ringoFloat32, ringoMemDevice, nullptr), ringoInvalidUsage)
      << "a host pointer registered as device memory";
  DDP_OK(dd, ringoDdpSetStream(dd, reinterpret_cast<ringoStream_t>(cs)));
  for (size_t k = 0; k < specs.size(); k++) {
    DDP_OK(hd, ringoDdpRegister(hd, hb.grad(k), hb.param(k), specs[k].count, specs[k].type, nullptr));
    DDP_OK(dd, ringoDdpRegisterMem(dd, dgrad + hb.off[k], dparam + hb.off[k], specs[k].count, specs[k].type,
                                   ringoMemDevice, nullptr));
  }
  DDP_OK(hd, ringoDdpBroadcastParams(hd));
  DDP_OK(dd, ringoDdpBroadcastParams(dd));
  CU_OK(cudaMemcpy(back.params.data(), dparam, back.params.size(), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(back.params == hb.params) << "device params are not rank 0's";
  for (int s = 0; s < 4; s++) {
    const StepCfg c{false, false, s == 1, s};
    const size_t n = s < 3 ? Shard(rank) + 1 : 1;
    DDP_OK(hd, ringoDdpSetLocalBatch(hd, n));
    DDP_OK(dd, ringoDdpSetLocalBatch(dd, n));
    DDP_OK(hd, ringoDdpNoSync(hd, c.no_sync));
    DDP_OK(dd, ringoDdpNoSync(dd, c.no_sync));
    ASSERT_NO_FATAL_FAILURE(HostStep(hd, hb, host_specs, rank, c));
    for (size_t k = specs.size(); k-- > 0;) {
      WriteGrad(src.grad(k), specs[k], false, false, rank, s, k);
      CU_OK(cudaMemcpyAsync(dgrad + hb.off[k], src.grad(k), specs[k].count * Esize(specs[k].type),
                            cudaMemcpyHostToDevice, cs));
      DDP_OK(dd, ringoDdpMarkReady(dd, static_cast<int>(k)));
    }
    DDP_OK(dd, ringoDdpFinish(dd));
    // Waited for before the pageable copy back: that copy blocks this thread inside CUDA until it
    // is done, and could hold the context's staging while the other rank's uploads, which this
    // rank's all-reduce needs, wait for it.
    CU_OK(cudaStreamSynchronize(cs));
    CU_OK(cudaMemcpyAsync(back.grads.data(), dgrad, back.grads.size(), cudaMemcpyDeviceToHost, cs));
    CU_OK(cudaStreamSynchronize(cs));
    ringoResult_t async = ringoInternalError;
    ASSERT_EQ(ringoCommGetAsyncError(comm, &async), ringoSuccess);
    ASSERT_EQ(async, ringoSuccess) << ringoGetLastError(comm);
    for (size_t k = 0; k < specs.size(); k++)
      EXPECT_EQ(0, memcmp(back.grad(k), hb.grad(k), specs[k].count * Esize(specs[k].type)))
          << "step " << s << ": device gradient " << k << " differs from the host path";
  }
  EXPECT_EQ(ringoDdpDestroy(hd), ringoSuccess);
  EXPECT_EQ(ringoDdpDestroy(dd), ringoSuccess);
  cudaFree(dgrad);
  cudaFree(dparam);
  cudaStreamDestroy(cs);
}
#endif

// Ranks on GPU 0 listed twice (ringoCommInitAll), one thread each.
TEST(DdpDeviceGpu, TwoRanksOnOneGpuEqualTheHostPathBytes) {
  const std::string why = NoGpuReason();
  if (!why.empty()) GTEST_SKIP() << why;
#ifdef RINGO_HAVE_CUDA
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId&, ringo_test::Shared&) {
    for (bool contiguous : {true, false}) {
      const int devs[2] = {0, 0};
      ringoComm_t comms[2] = {nullptr, nullptr};
      ASSERT_EQ(ringoCommInitAll(comms, 2, devs), ringoSuccess) << ringoGetLastError(nullptr);
      std::vector<std::thread> threads;
      for (int r = 0; r < 2; r++) threads.emplace_back([&, r] { GpuRank(comms[r], r, contiguous); });
      for (std::thread& th : threads) th.join();
      for (ringoComm_t c : comms) EXPECT_EQ(ringoCommDestroy(c), ringoSuccess);
    }
  }, GpuOptions());
#endif
}

}  // namespace
