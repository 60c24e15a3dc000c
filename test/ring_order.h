// ring_order.h — inexact inputs and the all-reduce every path must equal bit for bit: each chunk of
// ringo_chunk_range combined in the ring's order (ringo_reduce_start), partial steps with the partial
// op, the last with the final one, by the host's ringo_reduce. Header-only, for the kernel tests
// (test_cuda_ring.cc, test_cuda_oneshot.cc); needs libringo (src/sched, src/reduce).
#ifndef RINGO_TEST_RING_ORDER_H_
#define RINGO_TEST_RING_ORDER_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "collective_cases.h"
#include "ringo.h"

extern "C" {
#include "reduce/reduce.h"
#include "sched/schedule.h"
}

namespace ringo_order {

// Floats of several magnitudes and both signs, so adding them in another order changes the low
// bits (a test against the ring's order then fails for any other order); small integers otherwise.
// Rank r's element j: In(r, j), a period of kElems elements.
class InexactPattern {
 public:
  static constexpr size_t kElems = 4093;  // prime: no chunk or vector lines up with the period
  InexactPattern(ringoDataType_t t, int n) : t_(t), size_(ringo_cases::TypeSize(t)), in_(size_t(n) * kElems * size_) {
    uint64_t x = 0x2545f4914f6cdd1dull ^ (uint64_t(t) << 32) ^ uint64_t(n);
    for (size_t k = 0; k < size_t(n) * kElems; k++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const uint32_t bits = uint32_t(x >> 33);
      double v;
      if (ringo_cases::IsFloat(t)) {
        const double mant = 1.0 + double(bits & 0xffff) / 65536.0;
        v = std::ldexp(mant, int((bits >> 16) % 9) - 4) * ((bits >> 25) & 1 ? -1 : 1);
      } else {
        v = double(bits % 101) - (ringo_cases::IsUnsigned(t) ? 0 : 50);
      }
      ringo_cases::Encode(v, t, &in_[k * size_]);
    }
  }
  const unsigned char* In(int r, size_t j) const { return &in_[(size_t(r) * kElems + j % kElems) * size_]; }
  size_t size() const { return size_; }

 private:
  ringoDataType_t t_;
  size_t size_;
  std::vector<unsigned char> in_;
};

// The all-reduce of count elements over n ranks (rank r's input inputs[r]; the ring in rank order,
// ring[p] = p) as the ring combines it: what every rank must hold afterwards, on every path.
inline std::vector<unsigned char> RingOrderAllReduce(const std::vector<const unsigned char*>& inputs, size_t count,
                                                     ringoDataType_t t, ringoRedOp_t op) {
  const int n = static_cast<int>(inputs.size());
  const size_t esz = ringo_cases::TypeSize(t);
  std::vector<unsigned char> out(count * esz);
  const ringoRedOp_t partial = op == ringoAvg ? ringoSum : op;
  for (int c = 0; c < n; c++) {
    size_t off, len;
    ringo_chunk_range(count, n, c, &off, &len);
    if (len == 0) continue;
    const int start = ringo_reduce_start(RINGO_COLL_ALLREDUCE, n, 0, c);
    unsigned char* dst = out.data() + off * esz;
    memcpy(dst, inputs[start] + off * esz, len * esz);
    for (int k = 1; k < n; k++) {
      const bool last = k == n - 1;
      ringo_reduce(dst, nullptr, dst, inputs[ringo_mod(start + k, n)] + off * esz, len, t, last ? op : partial,
                   last ? n : 1);
    }
  }
  return out;
}

// Where the cut before aligned chunks (count / n each, the remainder one each to the first) put
// chunk c: the counts worth testing are those where it started off a 16-byte boundary.
inline bool OldCutMisaligns(size_t count, int n, size_t esz) {
  for (int c = 1; c < n; c++) {
    const size_t off = size_t(c) * (count / n) + std::min(size_t(c), count % n);
    if (off * esz % 16 != 0) return true;
  }
  return false;
}

}  // namespace ringo_order

#endif  // RINGO_TEST_RING_ORDER_H_
