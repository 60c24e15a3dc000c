/* bench_args.h — command-line helpers shared by ringo-bench and ringo-gpu-bench (header-only).
 * Tested through the tools (make bench; ringo-gpu-bench on a GPU). */
#ifndef RINGO_BENCH_ARGS_H_
#define RINGO_BENCH_ARGS_H_

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Parses a byte count as nccl-tests writes them: a number with an optional K/M/G (powers of 1024)
 * and an optional B, e.g. 1K, 64M, 1GB, 4096. Returns 0 on anything else or above max_bytes. */
static int bench_parse_bytes(const char* s, double max_bytes, size_t* out) {
  char* end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0) return 0;
  static const char units[] = "KkMmGg";
  const char* unit = *end ? strchr(units, *end) : NULL;
  if (unit) end++;
  for (long k = unit ? (unit - units) / 2 : -1; k >= 0; k--) v *= 1024;
  if (*end == 'B' || *end == 'b') end++;
  if (*end || v > max_bytes) return 0;
  *out = (size_t)v;
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
