/* bench_args.h — command-line helpers shared by ringo-bench and ringo-gpu-bench (header-only).
 * Tested through the tools: test/test_bench.cc (make test), make bench; ringo-gpu-bench on a GPU. */
#ifndef RINGO_BENCH_ARGS_H_
#define RINGO_BENCH_ARGS_H_

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The leading number of s, finite (strtod also reads "nan" and "inf"); *end is what follows it. */
static int bench_lead_number(const char* s, char** end, double* v) {
  errno = 0;
  *v = strtod(s, end);
  return !errno && *end != s && isfinite(*v);
}

/* Parses a byte count as nccl-tests writes them: a number with an optional K/M/G (powers of 1024)
 * and an optional B, e.g. 1K, 64M, 1GB, 4096, 1e3, 0x10. Returns 0 on anything else, above
 * max_bytes, or not a whole number of bytes once scaled (2.5 and 1e-5 are not cut to 2 and 0;
 * 2.5K is 2560). */
static int bench_parse_bytes(const char* s, double max_bytes, size_t* out) {
  char* end = NULL;
  double v;
  if (!bench_lead_number(s, &end, &v) || v < 0) return 0;
  static const char units[] = "KkMmGg";
  const char* unit = *end ? strchr(units, *end) : NULL;
  if (unit) end++;
  for (long k = unit ? (unit - units) / 2 : -1; k >= 0; k--) v *= 1024;
  if (*end == 'B' || *end == 'b') end++;
  if (*end || v > max_bytes || v != floor(v)) return 0;
  *out = (size_t)v;
  return 1;
}

/* Parses the whole of s as a finite number in (0, max]: "5x", "nan" and 0 are refused. Returns 0 on
 * anything else. */
static inline int bench_parse_positive(const char* s, double max, double* out) {
  char* end = NULL;
  double v;
  if (!bench_lead_number(s, &end, &v) || *end || !(v > 0 && v <= max)) return 0;
  *out = v;
  return 1;
}

/* Parses a whole decimal integer in [lo, hi]. Returns 0 on anything else. */
static int bench_parse_int(const char* s, int lo, int hi, int* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return 0;
  *out = (int)v;
  return 1;
}

#endif /* RINGO_BENCH_ARGS_H_ */
