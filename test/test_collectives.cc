// test_collectives.cc — real multi-rank jobs of every collective through the public API only,
// checked against references computed here. Depends on include/ringo.h and test/harness.h.
// Run: make tests && ./build/test/test_collectives (the whole binary takes about 90 s on 2 cores).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"
#include "ringo.h"

namespace {

using ringo_test::Options;
using ringo_test::Team;
using ringo_test::TeamCall;

// ---------------------------------------------------------------------------------------------
// Datatypes: sizes, names and an encoder/decoder written here, independent of the library.

const ringoDataType_t kAllTypes[RINGO_NUM_TYPES] = {ringoInt8,   ringoUint8,   ringoInt32,   ringoUint32,
                                                    ringoInt64,  ringoUint64,  ringoFloat16, ringoFloat32,
                                                    ringoFloat64, ringoBfloat16};
const ringoRedOp_t kAllOps[RINGO_NUM_OPS] = {ringoSum, ringoProd, ringoMax, ringoMin, ringoAvg};

size_t TypeSize(ringoDataType_t t) {
  switch (t) {
    case ringoInt8: case ringoUint8: return 1;
    case ringoFloat16: case ringoBfloat16: return 2;
    case ringoInt32: case ringoUint32: case ringoFloat32: return 4;
    default: return 8;
  }
}

const char* TypeName(ringoDataType_t t) {
  static const char* const names[] = {"int8",    "uint8",   "int32",   "uint32",  "int64",
                                      "uint64",  "float16", "float32", "float64", "bfloat16"};
  return names[t];
}

const char* OpName(ringoRedOp_t op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  return names[op];
}

bool IsFloat(ringoDataType_t t) {
  return t == ringoFloat16 || t == ringoFloat32 || t == ringoFloat64 || t == ringoBfloat16;
}
bool IsUnsigned(ringoDataType_t t) { return t == ringoUint8 || t == ringoUint32 || t == ringoUint64; }

// IEEE binary16 with round-to-nearest-even.
uint16_t FloatToHalf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (mag >= 0x477ff000u) return sign | 0x7c00u;  // rounds to infinity (>= 65520)
  if (mag < 0x38800000u) {                        // below 2^-14: subnormal half in units of 2^-24
    return sign | static_cast<uint16_t>(std::lrint(std::fabs(f) * 16777216.0f));
  }
  uint32_t h = ((mag >> 23) - 112u) << 10 | ((mag & 0x7fffffu) >> 13);
  const uint32_t rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

float HalfToFloat(uint16_t h) {
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  const int exp = (h >> 10) & 0x1f;
  const int man = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -24);
  if (exp == 31) return man ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(man | 0x400), exp - 25);
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

// Stores v as type t (integers wrap like a two's-complement cast; v is integral for them).
void Encode(double v, ringoDataType_t t, void* dst) {
  const int64_t iv = IsFloat(t) ? 0 : static_cast<int64_t>(v);
  switch (t) {
    case ringoFloat16: { const uint16_t h = FloatToHalf(static_cast<float>(v)); memcpy(dst, &h, 2); return; }
    case ringoBfloat16: { const uint16_t b = FloatToBf16(static_cast<float>(v)); memcpy(dst, &b, 2); return; }
    case ringoFloat32: { const float f = static_cast<float>(v); memcpy(dst, &f, 4); return; }
    case ringoFloat64: memcpy(dst, &v, 8); return;
    default: memcpy(dst, &iv, TypeSize(t)); return;  // little-endian: the low bytes
  }
}

double Decode(const void* src, ringoDataType_t t) {
  switch (t) {
    case ringoInt8: { int8_t v; memcpy(&v, src, 1); return v; }
    case ringoUint8: { uint8_t v; memcpy(&v, src, 1); return v; }
    case ringoInt32: { int32_t v; memcpy(&v, src, 4); return v; }
    case ringoUint32: { uint32_t v; memcpy(&v, src, 4); return v; }
    case ringoInt64: { int64_t v; memcpy(&v, src, 8); return static_cast<double>(v); }
    case ringoUint64: { uint64_t v; memcpy(&v, src, 8); return static_cast<double>(v); }
    case ringoFloat16: { uint16_t v; memcpy(&v, src, 2); return HalfToFloat(v); }
    case ringoBfloat16: { uint16_t v; memcpy(&v, src, 2); return Bf16ToFloat(v); }
    case ringoFloat32: { float v; memcpy(&v, src, 4); return v; }
    default: { double v; memcpy(&v, src, 8); return v; }
  }
}

std::string Show(const unsigned char* p, ringoDataType_t t) {
  std::ostringstream os;
  os << Decode(p, t) << " (0x";
  static const char* const hex = "0123456789abcdef";
  for (size_t b = TypeSize(t); b-- > 0;) os << hex[p[b] >> 4] << hex[p[b] & 15];
  os << ")";
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Exact data. Element i belongs to class ClassOf(i), a hash of i (so a misplaced chunk shows),
// and every input depends on (class, rank) only: the reference is one fold over ranks per class.
// The values keep every sum, product and average exact in every type:
//   sum/max/min/int avg: ((7c + 13r) mod 5) - 2, in [-2, 2] (unsigned: [0, 4]);
//   prod: 2, -1 (unsigned: 3) or 1 by (c + r) mod 4, so |product| <= 36 for N <= 8;
//   float avg: base(c) + (N-1 if r == c mod N else -1), whose sum is N*base(c): the average is
//   exact however the library divides, while each rank's values still differ.
// Integer avg is the sum divided with C's truncation toward zero.

constexpr uint32_t kClasses = 840;  // lcm(1..8), so c mod N is uniform for every N <= 8

inline uint32_t ClassOf(size_t i) {
  uint64_t x = (static_cast<uint64_t>(i) + 1) * 0x9e3779b97f4a7c15ull;
  x ^= x >> 31;
  return static_cast<uint32_t>(x % kClasses);
}

int64_t ExactInput(ringoDataType_t t, ringoRedOp_t op, uint32_t c, int r, int n) {
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

class Pattern {
 public:
  Pattern(ringoDataType_t t, ringoRedOp_t op, int n)
      : t_(t), size_(TypeSize(t)), in_(static_cast<size_t>(n) * kClasses * size_), out_(kClasses * size_) {
    for (uint32_t c = 0; c < kClasses; c++) {
      int64_t acc = 0;
      for (int r = 0; r < n; r++) {
        const int64_t v = ExactInput(t, op, c, r, n);
        Encode(static_cast<double>(v), t, &in_[(static_cast<size_t>(r) * kClasses + c) * size_]);
        if (r == 0) acc = v;
        else if (op == ringoSum || op == ringoAvg) acc += v;
        else if (op == ringoProd) acc *= v;
        else if (op == ringoMax) acc = std::max(acc, v);
        else acc = std::min(acc, v);
      }
      // Integer avg truncates toward zero (C division); float avg is exact by construction.
      const double ref = op == ringoAvg ? (IsFloat(t) ? static_cast<double>(acc) / n
                                                      : static_cast<double>(acc / n))
                                        : static_cast<double>(acc);
      Encode(ref, t, &out_[c * size_]);
    }
  }
  const unsigned char* In(int r, size_t i) const {
    return &in_[(static_cast<size_t>(r) * kClasses + ClassOf(i)) * size_];
  }
  const unsigned char* Out(size_t i) const { return &out_[ClassOf(i) * size_]; }
  ringoDataType_t type() const { return t_; }

 private:
  ringoDataType_t t_;
  size_t size_;
  std::vector<unsigned char> in_, out_;
};

// ---------------------------------------------------------------------------------------------
// Buffers with a guard zone behind them, so a write past the end is caught.

constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xa5, kPoisonByte = 0xcd;

struct Buf {
  std::vector<unsigned char> mem;
  explicit Buf(size_t bytes = 0) : mem(bytes + kGuard, kPoisonByte) {
    memset(mem.data() + bytes, kGuardByte, kGuard);
  }
  unsigned char* at(size_t byte) { return mem.data() + byte; }
  bool GuardIntact() const {
    for (size_t b = mem.size() - kGuard; b < mem.size(); b++)
      if (mem[b] != kGuardByte) return false;
    return true;
  }
};

// Fills count elements from element `first` with rank r's inputs.
void Fill(unsigned char* p, const Pattern& pat, int r, size_t first, size_t count) {
  const size_t sz = TypeSize(pat.type());
  for (size_t j = 0; j < count; j++) memcpy(p + j * sz, pat.In(r, first + j), sz);
}

// Compares count elements of p with expect(j); "" when all match, else a description.
template <class F>
std::string Compare(const unsigned char* p, size_t count, ringoDataType_t t, const char* what, F expect) {
  const size_t sz = TypeSize(t);
  size_t wrong = 0, first = 0;
  for (size_t j = 0; j < count; j++) {
    if (memcmp(p + j * sz, expect(j), sz) != 0 && wrong++ == 0) first = j;
  }
  if (wrong == 0) return "";
  std::ostringstream os;
  os << what << ": " << wrong << " of " << count << " elements wrong; first at " << first
     << ": expected " << Show(expect(first), t) << ", got " << Show(p + first * sz, t);
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// One collective call of every rank of a team with exact data, checked in full.

enum class Coll { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce };

struct Case {
  Coll coll;
  ringoDataType_t type;
  ringoRedOp_t op;
  size_t count;
  bool inplace;
  int root;
};

std::string Label(const Case& c) {
  static const char* const names[] = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce"};
  std::ostringstream os;
  os << names[static_cast<int>(c.coll)] << " " << TypeName(c.type) << " " << OpName(c.op)
     << " count=" << c.count << (c.inplace ? " in-place" : " out-of-place");
  if (c.coll == Coll::kBroadcast || c.coll == Coll::kReduce) os << " root=" << c.root;
  return os.str();
}

// The buffers of one rank for one case, laid out as ringo.h describes.
struct RankBufs {
  Buf a, b;
  unsigned char* send = nullptr;
  unsigned char* recv = nullptr;
};

void Prepare(const Case& c, const Pattern& pat, int n, int r, RankBufs* rb) {
  const size_t sz = TypeSize(c.type), bytes = c.count * sz;
  const size_t nbytes = bytes * static_cast<size_t>(n);
  switch (c.coll) {
    case Coll::kReduceScatter:
      rb->a = Buf(nbytes);
      Fill(rb->a.at(0), pat, r, 0, c.count * static_cast<size_t>(n));
      rb->send = rb->a.at(0);
      if (c.inplace) {
        rb->recv = rb->a.at(static_cast<size_t>(r) * bytes);
      } else {
        rb->b = Buf(bytes);
        rb->recv = rb->b.at(0);
      }
      return;
    case Coll::kAllGather:
      rb->b = Buf(nbytes);
      rb->recv = rb->b.at(0);
      if (c.inplace) {
        rb->send = rb->b.at(static_cast<size_t>(r) * bytes);
      } else {
        rb->a = Buf(bytes);
        rb->send = rb->a.at(0);
      }
      Fill(rb->send, pat, r, 0, c.count);
      return;
    default:  // AllReduce, Broadcast, Reduce: count elements in, count out
      rb->a = Buf(bytes);
      Fill(rb->a.at(0), pat, r, 0, c.count);
      rb->send = rb->a.at(0);
      if (c.inplace) {
        rb->recv = rb->send;
      } else {
        rb->b = Buf(bytes);
        rb->recv = rb->b.at(0);
      }
      return;
  }
}

ringoResult_t Call(const Case& c, RankBufs& rb, ringoComm_t comm) {
  switch (c.coll) {
    case Coll::kAllReduce: return ringoAllReduce(rb.send, rb.recv, c.count, c.type, c.op, comm, nullptr);
    case Coll::kReduceScatter: return ringoReduceScatter(rb.send, rb.recv, c.count, c.type, c.op, comm, nullptr);
    case Coll::kAllGather: return ringoAllGather(rb.send, rb.recv, c.count, c.type, comm, nullptr);
    case Coll::kBroadcast: return ringoBroadcast(rb.send, rb.recv, c.count, c.type, c.root, comm, nullptr);
    case Coll::kReduce: return ringoReduce(rb.send, rb.recv, c.count, c.type, c.op, c.root, comm, nullptr);
  }
  return ringoInternalError;
}

// Every property one rank's buffers must have after the call; "" when all hold.
std::string Verify(const Case& c, const Pattern& pat, int n, int r, RankBufs& rb) {
  const size_t cnt = c.count;
  const ringoDataType_t t = c.type;
  std::string err;
  auto add = [&err](const std::string& e) { if (!e.empty()) err += (err.empty() ? "" : "; ") + e; };
  auto own_input = [&](size_t j) { return pat.In(r, j); };
  const unsigned char poison[8] = {kPoisonByte, kPoisonByte, kPoisonByte, kPoisonByte,
                                   kPoisonByte, kPoisonByte, kPoisonByte, kPoisonByte};
  switch (c.coll) {
    case Coll::kAllReduce:
      add(Compare(rb.recv, cnt, t, "result", [&](size_t j) { return pat.Out(j); }));
      if (!c.inplace) add(Compare(rb.send, cnt, t, "sendbuff changed", own_input));
      break;
    case Coll::kReduceScatter:
      add(Compare(rb.recv, cnt, t, "result", [&](size_t j) { return pat.Out(static_cast<size_t>(r) * cnt + j); }));
      if (!c.inplace) add(Compare(rb.send, cnt * static_cast<size_t>(n), t, "sendbuff changed", own_input));
      break;
    case Coll::kAllGather:
      add(Compare(rb.recv, cnt * static_cast<size_t>(n), t, "result",
                  [&](size_t j) { return pat.In(static_cast<int>(j / cnt), j % cnt); }));
      if (!c.inplace) add(Compare(rb.send, cnt, t, "sendbuff changed", own_input));
      break;
    case Coll::kBroadcast:
      add(Compare(rb.recv, cnt, t, "result", [&](size_t j) { return pat.In(c.root, j); }));
      if (!c.inplace) add(Compare(rb.send, cnt, t, "sendbuff changed", own_input));
      break;
    case Coll::kReduce:
      if (r == c.root) add(Compare(rb.recv, cnt, t, "result on root", [&](size_t j) { return pat.Out(j); }));
      else if (c.inplace) add(Compare(rb.recv, cnt, t, "buffer of a non-root changed", own_input));
      else add(Compare(rb.recv, cnt, t, "recvbuff of a non-root written", [&](size_t) { return poison; }));
      if (!c.inplace && r == c.root) add(Compare(rb.send, cnt, t, "sendbuff changed", own_input));
      break;
  }
  if (!rb.a.GuardIntact() || !rb.b.GuardIntact()) add("wrote past the end of a buffer");
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
    std::vector<RankBufs> bufs(team_.size());
    for (size_t k = 0; k < team_.size(); k++) Prepare(c, pat, n, team_.ranks[k], &bufs[k]);
    const ringoResult_t res = TeamCall(team_, [&](size_t k) { return Call(c, bufs[k], team_.comms[k]); });
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
    if (r == 0) acc = x;
    else if (op == ringoSum || op == ringoAvg) acc += x;
    else if (op == ringoProd) acc *= x;
    else if (op == ringoMax) acc = std::max(acc, x);
    else acc = std::min(acc, x);
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
          if (!runner.Run({Coll::kAllReduce, t, op, count, inplace, 0})) return;
  for (ringoDataType_t t : {ringoFloat16, ringoBfloat16, ringoFloat32, ringoFloat64})
    for (ringoRedOp_t op : kAllOps)
      for (size_t count : {static_cast<size_t>(n + 1), size_t{65537}})
        if (!RunRandom(team, runner, t, op, count, (static_cast<int>(op) + count) % 2 == 0,
                       42 + static_cast<uint64_t>(op)))
          return;
  if (!runner.Run({Coll::kAllReduce, ringoFloat32, ringoSum, kHuge, false, 0})) return;
  if (!runner.Run({Coll::kAllReduce, ringoInt32, ringoSum, kHuge, true, 0})) return;
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

class Counters : public testing::TestWithParam<int> {};
TEST_P(Counters, AllReduceMovesTwoNMinusOneOverNBytes) { ringo_test::RunForked(GetParam(), CountersScenario); }
INSTANTIATE_TEST_SUITE_P(N, Counters, testing::Values(1, 2, 3, 4, 8));

TEST(CountersGroup, FourRanksFromOneThread) { ringo_test::RunGroup(4, CountersScenario); }

}  // namespace
