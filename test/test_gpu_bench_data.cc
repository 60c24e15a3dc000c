// test_gpu_bench_data.cc — ringo-gpu-bench's inputs and check (bench/gpu_bench_data.h) on the CPU:
// a right all-reduce of them passes, and the wrong ones a ring could make (a chunk from the wrong
// offset, a rank counted twice, an earlier all-reduce's result) do not. No GPU needed. Run: make test.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "../bench/gpu_bench_data.h"

namespace {

float Decode(const unsigned char* p, size_t es) {
  uint32_t bits = 0;
  if (es == 4) {
    memcpy(&bits, p, 4);
  } else {
    uint16_t h;
    memcpy(&h, p, 2);
    bits = static_cast<uint32_t>(h) << 16;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

// The all-reduce (sum) the benchmark's ranks would compute, in float like the kernel: element i
// from the ranks in `ranks` (a rank may be missing or twice), each input from its offset with
// `extra`, read `shift` elements further on (a ring that took the wrong chunk).
std::vector<unsigned char> AllReduce(const std::vector<unsigned char>& pattern, size_t es, size_t count,
                                     const std::vector<int>& ranks, int extra, size_t shift = 0) {
  std::vector<unsigned char> out(count * es);
  for (size_t i = 0; i < count; i++) {
    float sum = 0;
    for (int r : ranks) sum += Decode(&pattern[(gbd_input_offset(r, extra) + (i + shift) % count) * es], es);
    const uint32_t bits = gbd_encode(es, static_cast<int>(sum));
    EXPECT_EQ(sum, static_cast<float>(static_cast<int>(sum))) << "sums are small integers";
    EXPECT_LE(sum, 256.0f) << "a sum past what bfloat16 holds exactly";
    const uint16_t h = static_cast<uint16_t>(bits);
    memcpy(&out[i * es], es == 4 ? static_cast<const void*>(&bits) : static_cast<const void*>(&h), es);
  }
  return out;
}

std::vector<int> Ranks(int n) {
  std::vector<int> v;
  for (int r = 0; r < n; r++) v.push_back(r);
  return v;
}

TEST(GpuBenchData, ARightAllReducePassesForEveryRankCountAndType) {
  for (size_t es : {size_t{4}, size_t{2}})
    for (int n : {1, 2, 3, 4, 5, 8, 13, 16, 28, 29, 64})
      for (int extra : {0, 1}) {
        const size_t count = 1000 + static_cast<size_t>(n);
        std::vector<unsigned char> pattern((count + GBD_PERIOD) * es);
        gbd_fill_pattern(pattern.data(), es, count, n);
        uint32_t expect[GBD_PERIOD];
        gbd_expected_sums(es, n, expect);
        const auto got = AllReduce(pattern, es, count, Ranks(n), extra);
        EXPECT_EQ(0u, gbd_count_wrong(got.data(), count, es, expect, extra))
            << n << " ranks, " << es << "-byte elements, extra " << extra;
      }
}

TEST(GpuBenchData, WrongResultsAreCounted) {
  for (size_t es : {size_t{4}, size_t{2}}) {
    const int n = 8;
    const size_t count = 1 << 14;  // chunk and slice boundaries are powers of two
    std::vector<unsigned char> pattern((count + GBD_PERIOD) * es);
    gbd_fill_pattern(pattern.data(), es, count, n);
    uint32_t expect[GBD_PERIOD];
    gbd_expected_sums(es, n, expect);
    // A chunk (count / n elements on) or a slice (64 elements on) from the wrong offset.
    for (size_t shift : {count / n, size_t{64}, size_t{1}})
      EXPECT_GT(gbd_count_wrong(AllReduce(pattern, es, count, Ranks(n), 1, shift).data(), count, es, expect, 1),
                count / 2)
          << "shifted by " << shift;
    // Rank 4 missing and rank 0 counted twice: with a period of 4, ranks 0 and 4 had the same input.
    std::vector<int> twice = Ranks(n);
    twice[4] = 0;
    EXPECT_GT(gbd_count_wrong(AllReduce(pattern, es, count, twice, 1).data(), count, es, expect, 1), count / 2);
    // The timed loop's result where the checked all-reduce's should be (a stale slot).
    EXPECT_GT(gbd_count_wrong(AllReduce(pattern, es, count, Ranks(n), 0).data(), count, es, expect, 1), count / 2);
    // A result never written (all ones: NaN).
    std::vector<unsigned char> nan(count * es, 0xff);
    EXPECT_EQ(count, gbd_count_wrong(nan.data(), count, es, expect, 1));
  }
}

TEST(GpuBenchData, EveryRanksInputDiffers) {
  const int n = GBD_PERIOD;
  const size_t count = 100, es = 4;
  std::vector<unsigned char> pattern((count + GBD_PERIOD) * es);
  gbd_fill_pattern(pattern.data(), es, count, n);
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++)
      EXPECT_NE(0, memcmp(&pattern[gbd_input_offset(a, 0) * es], &pattern[gbd_input_offset(b, 0) * es], count * es))
          << "ranks " << a << " and " << b;
}

}  // namespace
