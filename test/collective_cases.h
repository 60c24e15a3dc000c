// collective_cases.h — exact checking of collective calls, shared by test_collectives.cc and mpi/test_mpi_ring.cc:
// dtypes encoded without the library, exact input patterns with their reference, guarded buffers laid out as ringo.h
// says, the call and the checks. Header-only (test/mpi/ binaries link only test/mpi/main.cc); needs include/ringo.h.
#ifndef RINGO_TEST_COLLECTIVE_CASES_H_
#define RINGO_TEST_COLLECTIVE_CASES_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "ringo.h"

namespace ringo_cases {

// ---------------------------------------------------------------------------------------------
// Datatypes: sizes, names and an encoder/decoder written here, independent of the library.

inline constexpr ringoDataType_t kAllTypes[RINGO_NUM_TYPES] = {
    ringoInt8,  ringoUint8,   ringoInt32,   ringoUint32,  ringoInt64,
    ringoUint64, ringoFloat16, ringoFloat32, ringoFloat64, ringoBfloat16};
inline constexpr ringoRedOp_t kAllOps[RINGO_NUM_OPS] = {ringoSum, ringoProd, ringoMax, ringoMin, ringoAvg};

inline size_t TypeSize(ringoDataType_t t) {
  switch (t) {
    case ringoInt8: case ringoUint8: return 1;
    case ringoFloat16: case ringoBfloat16: return 2;
    case ringoInt32: case ringoUint32: case ringoFloat32: return 4;
    default: return 8;
  }
}

inline const char* TypeName(ringoDataType_t t) {
  static const char* const names[] = {"int8",    "uint8",   "int32",   "uint32",  "int64",
                                      "uint64",  "float16", "float32", "float64", "bfloat16"};
  return names[t];
}

inline const char* OpName(ringoRedOp_t op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  return names[op];
}

inline bool IsFloat(ringoDataType_t t) {
  return t == ringoFloat16 || t == ringoFloat32 || t == ringoFloat64 || t == ringoBfloat16;
}
inline bool IsUnsigned(ringoDataType_t t) { return t == ringoUint8 || t == ringoUint32 || t == ringoUint64; }

// IEEE binary16 with round-to-nearest-even.
inline uint16_t FloatToHalf(float f) {
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

inline float HalfToFloat(uint16_t h) {
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  const int exp = (h >> 10) & 0x1f;
  const int man = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -24);
  if (exp == 31) return man ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(man | 0x400), exp - 25);
}

// bfloat16 with round-to-nearest-even (NaNs stay NaN).
inline uint16_t FloatToBf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float Bf16ToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

// Stores v as type t (integers wrap like a two's-complement cast; v is integral for them).
inline void Encode(double v, ringoDataType_t t, void* dst) {
  const int64_t iv = IsFloat(t) ? 0 : static_cast<int64_t>(v);
  switch (t) {
    case ringoFloat16: { const uint16_t h = FloatToHalf(static_cast<float>(v)); memcpy(dst, &h, 2); return; }
    case ringoBfloat16: { const uint16_t b = FloatToBf16(static_cast<float>(v)); memcpy(dst, &b, 2); return; }
    case ringoFloat32: { const float f = static_cast<float>(v); memcpy(dst, &f, 4); return; }
    case ringoFloat64: memcpy(dst, &v, 8); return;
    default: memcpy(dst, &iv, TypeSize(t)); return;  // little-endian: the low bytes
  }
}

inline double Decode(const void* src, ringoDataType_t t) {
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

// The raw bytes of one element, most significant first.
inline std::string Hex(const unsigned char* p, size_t size) {
  static const char* const digits = "0123456789abcdef";
  std::string s = "0x";
  for (size_t b = size; b-- > 0;) s += digits[p[b] >> 4], s += digits[p[b] & 15];
  return s;
}

// One element for a failure message: its value and its bytes.
inline std::string Show(const unsigned char* p, ringoDataType_t t) {
  std::ostringstream os;
  os << Decode(p, t) << " (" << Hex(p, TypeSize(t)) << ")";
  return os.str();
}

// The running reduction acc folded with one more rank's value v (avg sums: the caller divides).
template <class T>
T Combine(ringoRedOp_t op, T acc, T v) {
  if (op == ringoSum || op == ringoAvg) return acc + v;
  if (op == ringoProd) return acc * v;
  return op == ringoMax ? std::max(acc, v) : std::min(acc, v);
}

// ---------------------------------------------------------------------------------------------
// Exact data. Element i belongs to class Data::ClassOf(i) < kClasses, a hash of i (so a misplaced
// chunk shows), and rank r's input is Data::Input(t, op, class, r, n), a small integer: the
// reference is then one fold over ranks per class. Data must keep every fold exact in type t, and
// make the float avg's sum a multiple of n so its average is exact however the library divides.
// Integer avg is the sum divided with C's truncation toward zero.

constexpr uint32_t kClasses = 840;  // lcm(1..8), so c mod N is uniform for every N <= 8

// Small integers, exact in every type (fp16 holds integers up to 2048 exactly, bfloat16 up to 256)
// and under every op for N <= 8: sum, max, min, int avg: (7c + 3r) mod 5, minus 2 for signed types;
// prod: 2, then 3 (signed: -1), then 1s, by (c + r) mod 8, each at most once; float avg: base(c) +
// (N-1 on rank c mod N, else -1), so the sum is N*base(c) and the average exact however it is
// divided. Element i falls in class ClassOf(i), spread by a multiplicative hash.
struct SmallIntData {
  static uint32_t ClassOf(size_t i) { return static_cast<uint32_t>((i * 2654435761u) % kClasses); }
  static int64_t Input(ringoDataType_t t, ringoRedOp_t op, uint32_t c, int r, int n) {
    if (op == ringoProd) {
      const uint32_t k = (c + static_cast<uint32_t>(r)) % 8;
      return k == 0 ? 2 : k == 1 ? (IsUnsigned(t) ? 3 : -1) : 1;
    }
    if (op == ringoAvg && IsFloat(t)) {
      const int64_t base = static_cast<int64_t>(c * 3 % 5) - 2;
      return base + (static_cast<uint32_t>(r) == c % static_cast<uint32_t>(n) ? n - 1 : -1);
    }
    const int64_t v = (c * 7 + static_cast<uint32_t>(r) * 3) % 5;
    return IsUnsigned(t) ? v : v - 2;
  }
};

template <class Data>
class ExactPattern {
 public:
  ExactPattern(ringoDataType_t t, ringoRedOp_t op, int n)
      : t_(t), size_(TypeSize(t)), in_(static_cast<size_t>(n) * kClasses * size_), out_(kClasses * size_) {
    for (uint32_t c = 0; c < kClasses; c++) {
      int64_t acc = 0;
      for (int r = 0; r < n; r++) {
        const int64_t v = Data::Input(t, op, c, r, n);
        Encode(static_cast<double>(v), t, &in_[(static_cast<size_t>(r) * kClasses + c) * size_]);
        acc = r == 0 ? v : Combine(op, acc, v);
      }
      const double ref = op == ringoAvg ? (IsFloat(t) ? static_cast<double>(acc) / n
                                                      : static_cast<double>(acc / n))
                                        : static_cast<double>(acc);
      Encode(ref, t, &out_[c * size_]);
    }
  }
  const unsigned char* In(int r, size_t i) const {
    return &in_[(static_cast<size_t>(r) * kClasses + Data::ClassOf(i)) * size_];
  }
  const unsigned char* Out(size_t i) const { return &out_[Data::ClassOf(i) * size_]; }
  ringoDataType_t type() const { return t_; }
  size_t size() const { return size_; }

 private:
  ringoDataType_t t_;
  size_t size_;
  std::vector<unsigned char> in_, out_;
};

// ---------------------------------------------------------------------------------------------
// Buffers with a guard zone behind them, so a write past the end is caught.

constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xa5, kPoisonByte = 0xcd;

// `bytes` poisoned bytes followed by the guard zone.
struct Buf {
  std::vector<unsigned char> mem;
  explicit Buf(size_t bytes = 0) : mem(bytes + kGuard, kPoisonByte) {
    memset(mem.data() + bytes, kGuardByte, kGuard);
  }
  unsigned char* at(size_t byte) { return mem.data() + byte; }
  bool GuardIntact() const {
    return std::all_of(mem.end() - kGuard, mem.end(), [](unsigned char b) { return b == kGuardByte; });
  }
};

// ---------------------------------------------------------------------------------------------
// One collective call of one rank, with buffers laid out as ringo.h describes.

enum class Coll { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce };

struct Case {
  Coll coll;
  ringoDataType_t type;
  ringoRedOp_t op;
  size_t count;
  bool inplace;
  int root;
};

// AllGather and Broadcast take no op, so their labels name none.
inline std::string Label(const Case& c) {
  static const char* const names[] = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce"};
  std::ostringstream os;
  os << names[static_cast<int>(c.coll)] << " " << TypeName(c.type);
  if (c.coll != Coll::kAllGather && c.coll != Coll::kBroadcast) os << " " << OpName(c.op);
  os << " count=" << c.count << (c.inplace ? " in-place" : " out-of-place");
  if (c.coll == Coll::kBroadcast || c.coll == Coll::kReduce) os << " root=" << c.root;
  return os.str();
}

// Every collective, dtype and op (none for all-gather and broadcast) at every count, out of place
// and in place; broadcast's and reduce's root moves on by one rank each case.
inline std::vector<Case> EveryCase(int n, const std::vector<size_t>& counts) {
  std::vector<Case> cases;
  int root = 0;
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce}) {
    const bool has_op = coll != Coll::kAllGather && coll != Coll::kBroadcast;
    const bool rooted = coll == Coll::kBroadcast || coll == Coll::kReduce;
    for (ringoDataType_t t : kAllTypes)
      for (int o = 0; o < (has_op ? RINGO_NUM_OPS : 1); o++)
        for (size_t count : counts)
          for (int inplace = 0; inplace < 2; inplace++)
            cases.push_back({coll, t, kAllOps[o], count, inplace != 0, rooted ? root++ % n : 0});
  }
  return cases;
}

// The buffers of one rank for one case; send and recv point into a and b.
struct CaseBufs {
  Buf a, b;
  unsigned char* send = nullptr;
  unsigned char* recv = nullptr;
  bool GuardsIntact() const { return a.GuardIntact() && b.GuardIntact(); }
};

// Calls f(std::integral_constant<size_t, S>) for an element size S of 1, 2, 4 or 8, so the loops
// that copy or compare one element at a time do it with fixed-size loads, not a memcpy or memcmp
// call per element (those calls were most of a large case's time, more under the sanitizers).
template <class F>
auto WithElementSize(size_t size, F f) {
  switch (size) {
    case 1: return f(std::integral_constant<size_t, 1>{});
    case 2: return f(std::integral_constant<size_t, 2>{});
    case 4: return f(std::integral_constant<size_t, 4>{});
    default: return f(std::integral_constant<size_t, 8>{});
  }
}

// Fills count elements with rank r's inputs for elements 0..count-1.
template <class Pattern>
void Fill(unsigned char* p, const Pattern& pat, int r, size_t count) {
  WithElementSize(pat.size(), [&](auto size) {
    for (size_t j = 0; j < count; j++) memcpy(p + j * size, pat.In(r, j), size);
  });
}

template <class Pattern>
void Prepare(const Case& c, const Pattern& pat, int n, int r, CaseBufs* b) {
  const size_t bytes = c.count * pat.size(), all = bytes * static_cast<size_t>(n);
  if (c.coll == Coll::kReduceScatter) {
    b->a = Buf(all);
    Fill(b->a.at(0), pat, r, c.count * static_cast<size_t>(n));
    b->send = b->a.at(0);
    if (!c.inplace) b->b = Buf(bytes);
    b->recv = c.inplace ? b->a.at(static_cast<size_t>(r) * bytes) : b->b.at(0);
  } else if (c.coll == Coll::kAllGather) {
    b->b = Buf(all);
    b->recv = b->b.at(0);
    if (!c.inplace) b->a = Buf(bytes);
    b->send = c.inplace ? b->b.at(static_cast<size_t>(r) * bytes) : b->a.at(0);
    Fill(b->send, pat, r, c.count);
  } else {  // AllReduce, Broadcast, Reduce: count elements in, count out
    b->a = Buf(bytes);
    Fill(b->a.at(0), pat, r, c.count);
    b->send = b->a.at(0);
    if (!c.inplace) b->b = Buf(bytes);
    b->recv = c.inplace ? b->send : b->b.at(0);
  }
}

inline ringoResult_t Call(const Case& c, const CaseBufs& b, ringoComm_t comm) {
  switch (c.coll) {
    case Coll::kAllReduce: return ringoAllReduce(b.send, b.recv, c.count, c.type, c.op, comm, nullptr);
    case Coll::kReduceScatter: return ringoReduceScatter(b.send, b.recv, c.count, c.type, c.op, comm, nullptr);
    case Coll::kAllGather: return ringoAllGather(b.send, b.recv, c.count, c.type, comm, nullptr);
    case Coll::kBroadcast: return ringoBroadcast(b.send, b.recv, c.count, c.type, c.root, comm, nullptr);
    case Coll::kReduce: return ringoReduce(b.send, b.recv, c.count, c.type, c.op, c.root, comm, nullptr);
  }
  return ringoInternalError;
}

// ---------------------------------------------------------------------------------------------
// Checks. Each returns "" when all holds, else a description of what is wrong and where first.

// Adds e (when not empty) to the descriptions in *err, "; " between them.
inline void Append(std::string* err, const std::string& e) {
  if (!e.empty()) *err += (err->empty() ? "" : "; ") + e;
}

// Whether S bytes at a and b are equal, as one integer comparison.
template <size_t S>
bool SameBytes(const unsigned char* a, const unsigned char* b) {
  using Word = std::conditional_t<S == 1, uint8_t, std::conditional_t<S == 2, uint16_t,
                                  std::conditional_t<S == 4, uint32_t, uint64_t>>>;
  Word x, y;
  memcpy(&x, a, S);
  memcpy(&y, b, S);
  return x == y;
}

// Compares count elements of p with expect(j).
template <class F>
std::string Compare(const unsigned char* p, size_t count, ringoDataType_t t, const char* what, F expect) {
  const size_t sz = TypeSize(t);
  size_t wrong = 0, first = 0;
  WithElementSize(sz, [&](auto size) {
    for (size_t j = 0; j < count; j++)
      if (!SameBytes<size>(p + j * size, expect(j)) && wrong++ == 0) first = j;
  });
  if (wrong == 0) return "";
  std::ostringstream os;
  os << what << ": " << wrong << " of " << count << " elements wrong; first at " << first
     << ": expected " << Show(expect(first), t) << ", got " << Show(p + first * sz, t);
  return os.str();
}

// What rank r's recvbuff must hold after c: the result, or for Reduce's non-roots, what was there.
template <class Pattern>
std::string CheckRecv(const Case& c, const Pattern& pat, int n, int r, const CaseBufs& b) {
  const size_t cnt = c.count;
  const ringoDataType_t t = c.type;
  const unsigned char poison[8] = {kPoisonByte, kPoisonByte, kPoisonByte, kPoisonByte,
                                   kPoisonByte, kPoisonByte, kPoisonByte, kPoisonByte};
  auto reduced = [&](size_t j) { return pat.Out(j); };
  auto own = [&](size_t j) { return pat.In(r, j); };
  switch (c.coll) {
    case Coll::kAllReduce: return Compare(b.recv, cnt, t, "result", reduced);
    case Coll::kReduceScatter:
      return Compare(b.recv, cnt, t, "result", [&](size_t j) { return pat.Out(static_cast<size_t>(r) * cnt + j); });
    case Coll::kAllGather:
      return Compare(b.recv, cnt * static_cast<size_t>(n), t, "result",
                     [&](size_t j) { return pat.In(static_cast<int>(j / cnt), j % cnt); });
    case Coll::kBroadcast: return Compare(b.recv, cnt, t, "result", [&](size_t j) { return pat.In(c.root, j); });
    case Coll::kReduce:
      if (r == c.root) return Compare(b.recv, cnt, t, "result on the root", reduced);
      if (c.inplace) return Compare(b.recv, cnt, t, "a non-root's buffer changed", own);
      return Compare(b.recv, cnt, t, "a non-root's recvbuff was written", [&](size_t) { return poison; });
  }
  return "unknown collective";
}

// An out-of-place sendbuff must come back as Prepare filled it.
template <class Pattern>
std::string CheckSendUnchanged(const Case& c, const Pattern& pat, int n, int r, const CaseBufs& b) {
  const size_t sent = c.coll == Coll::kReduceScatter ? c.count * static_cast<size_t>(n) : c.count;
  return Compare(b.send, sent, c.type, "sendbuff changed", [&](size_t j) { return pat.In(r, j); });
}

}  // namespace ringo_cases

#endif  // RINGO_TEST_COLLECTIVE_CASES_H_
