/* gpu_bench_data.h — ringo-gpu-bench's inputs and their check: small integers, exact in float32 and
 * bfloat16, periodic with a period prime to every power of two and shifted per rank, and the exact
 * sums to compare a result with. Header-only, plain C (no CUDA), so that test/test_gpu_bench_data.cc
 * checks on the CPU that a right all-reduce passes and wrong ones do not. Run: make test. */
#ifndef RINGO_GPU_BENCH_DATA_H_
#define RINGO_GPU_BENCH_DATA_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Element i of rank r's input is gbd_value((GBD_SHIFT * r + i + extra) % GBD_PERIOD). A period
 * prime to every power of two is not a multiple of any chunk or slice boundary, so a ring that
 * reduces or gathers the wrong chunk, slice or offset gets other values; the shift makes every
 * rank's input differ (up to GBD_PERIOD ranks). `extra` (0 for the timed loop, 1 for the check's
 * own run) makes the checked result differ from the timed loop's, so a slot left from an earlier
 * all-reduce shows. With a multiple of GBD_PERIOD ranks the shifts cover every phase and every sum
 * is the same: such runs catch only a rank missing or counted twice and a result never written. */
#define GBD_PERIOD 29
#define GBD_SHIFT 5

/* Bits of the small non-negative integer v as a float32 (es 4) or a bfloat16 (es 2): exact, and
 * every partial sum of the ring is too (bfloat16 holds integers up to 256 exactly). */
static inline uint32_t gbd_encode(size_t es, int v) {
  const float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return es == 2 ? bits >> 16 : bits;
}

/* The value at phase k (0 <= k < GBD_PERIOD) for nranks ranks: below 256 / nranks, so sums stay
 * exact. */
static inline int gbd_value(int k, int nranks) {
  const int vmax = 256 / nranks < GBD_PERIOD - 1 ? 256 / nranks : GBD_PERIOD - 1;
  return k % (vmax + 1);
}

/* Where rank r's input starts in the pattern, in elements. */
static inline size_t gbd_input_offset(int r, int extra) { return (size_t)(GBD_SHIFT * r + extra) % GBD_PERIOD; }

/* Fills pattern with gbd_value(i % GBD_PERIOD) for count + GBD_PERIOD elements of es bytes, so
 * that any rank's input is count elements from its offset on: one period written, then doubled. */
static inline void gbd_fill_pattern(unsigned char* pattern, size_t es, size_t count, int nranks) {
  const size_t total = (count + GBD_PERIOD) * es;
  for (int k = 0; k < GBD_PERIOD; k++) {
    const uint32_t v = gbd_encode(es, gbd_value(k, nranks));
    const uint16_t h = (uint16_t)v;
    memcpy(pattern + es * (size_t)k, es == 4 ? (const void*)&v : (const void*)&h, es);
  }
  for (size_t have = GBD_PERIOD * es; have < total; have *= 2)
    memcpy(pattern + have, pattern, have < total - have ? have : total - have);
}

/* expect[k]: the bits of the sum over nranks ranks of element k of the inputs made with extra 0. */
static inline void gbd_expected_sums(size_t es, int nranks, uint32_t expect[GBD_PERIOD]) {
  for (int k = 0; k < GBD_PERIOD; k++) {
    int sum = 0;
    for (int r = 0; r < nranks; r++) sum += gbd_value((int)((gbd_input_offset(r, 0) + (size_t)k) % GBD_PERIOD), nranks);
    expect[k] = gbd_encode(es, sum);
  }
}

/* Elements of got whose bits differ from expect[(i + extra) % GBD_PERIOD]: the sums are exact, so
 * any difference is wrong. */
static inline uint64_t gbd_count_wrong(const unsigned char* got, size_t count, size_t es,
                                       const uint32_t expect[GBD_PERIOD], int extra) {
  uint64_t wrong = 0;
  int k = extra % GBD_PERIOD;
  for (size_t i = 0; i < count; i++) {
    uint32_t v = 0;
    if (es == 4) {
      memcpy(&v, got + 4 * i, 4);
    } else {
      uint16_t h;
      memcpy(&h, got + 2 * i, 2);
      v = h;
    }
    wrong += v != expect[k];
    if (++k == GBD_PERIOD) k = 0;
  }
  return wrong;
}

#endif /* RINGO_GPU_BENCH_DATA_H_ */
