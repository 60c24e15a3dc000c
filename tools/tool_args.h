/* tool_args.h — the strict number parser the teaching tools (ringo-trace, ringo-model) read their flags
 * with: the whole argument or nothing, never cut ("2.5" is not 2). Header-only; tested through the tools
 * by test/test_trace.cc and test/test_model.cc (TraceTool.*, ModelTool.*). */
#ifndef RINGO_TOOL_ARGS_H_
#define RINGO_TOOL_ARGS_H_

#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* The largest whole number a flag may take: every whole number up to it is exact in a double. */
#define TOOL_MAX_WHOLE 9007199254740992.0 /* 2^53 */

/* A base-10 integer as a double; NaN (refused by any range) beyond 2^53, where the double would round it. */
static double tool_whole(const char* s, char** end) {
  const long long w = strtoll(s, end, 10);
  return w >= -(1LL << 53) && w <= 1LL << 53 ? (double)w : NAN;
}

/* The whole of s as one number in [lo, hi]: base-10 digits only when whole ("2.5", "1e3", "4abc"
 * refused), else any finite number strtod reads ("nan", "inf", "2x" refused). Returns 1 with *out,
 * or 0 for anything else (out of range included), leaving *out as it was. */
static int tool_parse_number(const char* s, int whole, double lo, double hi, double* out) {
  char* end = NULL;
  errno = 0;
  const double v = !s ? NAN : whole ? tool_whole(s, &end) : strtod(s, &end);
  if (!s || end == s || *end || errno || !(v >= lo && v <= hi)) return 0; /* NaN fails the range */
  *out = v;
  return 1;
}

#endif /* RINGO_TOOL_ARGS_H_ */
