/* model.c — PURE: the seed's cost model of ring all-reduce (factor 2(N-1)/N, 2(N-1) latency steps),
 * the units a student types ("200GB/s", "5us") and the worked-example text ringo-model prints.
 * Needs core.h (ringo_fail, type names). Tested by test/test_model.cc; run: build/bin/ringo-model. */
#include "sched/model.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* ---- the model ---- */

double ringo_model_factor(int nranks) { return nranks < 2 ? 0.0 : 2.0 * (nranks - 1) / nranks; }

int ringo_model_steps(int nranks) { return nranks < 2 ? 0 : 2 * (nranks - 1); }

double ringo_model_ring_bytes(double bytes, int nranks) { return ringo_model_factor(nranks) * bytes; }

double ringo_model_root_bytes(double bytes, int nranks) { return nranks < 2 ? 0.0 : (nranks - 1) * bytes; }

double ringo_model_bw_time(double bytes, int nranks, double bw) {
  return bw > 0 ? ringo_model_ring_bytes(bytes, nranks) / bw : 0.0;
}

double ringo_model_latency_time(int nranks, double latency) {
  return latency > 0 ? ringo_model_steps(nranks) * latency : 0.0;
}

double ringo_model_time(double bytes, int nranks, double bw, double latency) {
  return ringo_model_bw_time(bytes, nranks, bw) + ringo_model_latency_time(nranks, latency);
}

/* Both terms share the factor 2(N-1), which is why the crossover N·alpha·beta is so simple:
 * 2(N-1)/N · D/beta = k · 2(N-1) · alpha  <=>  D = k · N · alpha · beta. */
double ringo_model_bytes_for_share(int nranks, double latency, double bw, double share) {
  if (nranks < 2 || latency <= 0 || bw <= 0 || share <= 0 || share >= 1) return 0.0;
  return share / (1.0 - share) * nranks * latency * bw;
}

/* ---- units ---- */

static ringoResult_t bad(const char* what, const char* text, const char* expected) {
  return ringo_fail(ringoInvalidArgument, "cannot read %s \"%s\": expected %s", what, text ? text : "(null)",
                    expected);
}

/* The leading non-negative finite number of text; *rest is what follows it, spaces skipped. */
static int lead_number(const char* text, double* value, const char** rest) {
  if (!text) return 0;
  char* end = NULL;
  const double v = strtod(text, &end);
  if (end == text || !isfinite(v) || v < 0) return 0;
  while (*end == ' ') end++;
  *value = v;
  *rest = end;
  return 1;
}

/* A decimal (k, M, G, T, P) or binary (Ki, Mi, Gi, Ti, Pi) prefix at *p, consumed; 1 if none. */
static double size_prefix(const char** p) {
  static const char letters[] = "KMGTP";
  const char c = (char)toupper((unsigned char)**p);
  const char* at = c ? strchr(letters, c) : NULL;
  if (!at) return 1.0;
  const int power = (int)(at - letters) + 1;
  (*p)++;
  if (**p == 'i') {
    (*p)++;
    return ldexp(1.0, 10 * power);
  }
  return pow(1000.0, power);
}

ringoResult_t ringo_model_parse_bytes(const char* text, double* bytes) {
  const char* rest;
  double v;
  if (!lead_number(text, &v, &rest)) return bad("a size", text, "bytes such as 4GB, 25MB, 64KiB or 4e9");
  const double scale = size_prefix(&rest);
  if (strcmp(rest, "") != 0 && strcmp(rest, "B") != 0)
    return bad("a size", text, "bytes such as 4GB, 25MB, 64KiB or 4e9");
  if (!isfinite(v * scale)) return bad("a size", text, "a finite number of bytes");
  *bytes = v * scale;
  return ringoSuccess;
}

ringoResult_t ringo_model_parse_rate(const char* text, double* bytes_per_s) {
  const char* rest;
  double v;
  const char* expected = "a bandwidth such as 200GB/s, 25GiB/s, 100Gbit/s or 2e11 (bytes/s)";
  if (!lead_number(text, &v, &rest)) return bad("a bandwidth", text, expected);
  const double scale = size_prefix(&rest);
  double unit;
  if (strcmp(rest, "") == 0 || strcmp(rest, "B/s") == 0 || strcmp(rest, "/s") == 0) unit = 1.0;
  else if (strcmp(rest, "bit/s") == 0 || strcmp(rest, "b/s") == 0 || strcmp(rest, "bps") == 0) unit = 0.125;
  else return bad("a bandwidth", text, expected);
  if (!isfinite(v * scale * unit)) return bad("a bandwidth", text, "a finite rate");
  *bytes_per_s = v * scale * unit;
  return ringoSuccess;
}

ringoResult_t ringo_model_parse_seconds(const char* text, double* seconds) {
  static const struct { const char* unit; double scale; } units[] = {
      {"", 1.0}, {"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6} /* micro sign */,
      {"\xce\xbcs", 1e-6} /* Greek mu */, {"ns", 1e-9}};
  const char* rest;
  double v;
  if (lead_number(text, &v, &rest))
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (strcmp(rest, units[i].unit) == 0) {
        *seconds = v * units[i].scale;
        return ringoSuccess;
      }
  return bad("a latency", text, "a time such as 5us, 800ns, 1.5ms or 2e-6 (seconds)");
}

ringoResult_t ringo_model_parse_count(const char* text, double* count) {
  static const struct { const char* suffix; double scale; } units[] = {
      {"", 1.0}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"B", 1e9}, {"G", 1e9}, {"T", 1e12}};
  const char* rest;
  double v;
  if (lead_number(text, &v, &rest))
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (strcmp(rest, units[i].suffix) == 0 && isfinite(v * units[i].scale)) {
        *count = v * units[i].scale;
        return ringoSuccess;
      }
  return bad("a parameter count", text, "a count such as 1e9, 7B (billion), 350M or 70k");
}

ringoResult_t ringo_model_parse_dtype(const char* text, size_t* elem_bytes) {
  static const struct { const char* alias; const char* name; } aliases[] = {
      {"fp32", "float32"}, {"fp16", "float16"}, {"bf16", "bfloat16"}, {"fp64", "float64"},
      {"float", "float32"}, {"half", "float16"}, {"double", "float64"}};
  const char* name = text ? text : "";
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(name, aliases[i].alias) == 0) name = aliases[i].name;
  for (int t = 0; t < RINGO_NUM_TYPES; t++)
    if (strcmp(name, ringo_type_name((ringoDataType_t)t)) == 0) {
      *elem_bytes = ringo_type_size((ringoDataType_t)t);
      return ringoSuccess;
    }
  return bad("a datatype", text, "float32, float16, bfloat16, float64, int8, ... (or fp32, fp16, bf16)");
}

/* Both formatters write at most 15 characters, so any buffer of 16 holds the whole number and its unit:
 * values the units cannot hold (negative, not finite, past the largest unit) are written as %.3g. */
void ringo_model_format_bytes(double bytes, char* buf, size_t cap) {
  static const char* const units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  const int last = (int)(sizeof units / sizeof units[0]) - 1;
  int u = 0;
  if (!(bytes >= 0 && bytes < 1e27)) { /* 1000 YB: no unit left */
    snprintf(buf, cap, "%.3g B", bytes);
    return;
  }
  while (u < last && bytes >= 1000.0) {
    bytes /= 1000.0;
    u++;
  }
  if (u == 0) snprintf(buf, cap, "%.0f B", bytes);
  else snprintf(buf, cap, "%.1f %s", bytes, units[u]);
}

void ringo_model_format_seconds(double seconds, char* buf, size_t cap) {
  if (!(seconds >= 0 && seconds < 1e9)) snprintf(buf, cap, "%.3g s", seconds); /* 31 years, or not a time */
  else if (seconds >= 1.0) snprintf(buf, cap, "%.2f s", seconds);
  else if (seconds >= 1e-3) snprintf(buf, cap, "%.1f ms", seconds * 1e3);
  else if (seconds >= 1e-6) snprintf(buf, cap, "%.1f us", seconds * 1e6);
  else if (seconds >= 1e-9 || seconds == 0) snprintf(buf, cap, "%.0f ns", seconds * 1e9);
  else snprintf(buf, cap, "%.3g ns", seconds * 1e9);
}

/* ---- the report ---- */

/* Text accumulated into a caller's buffer; `need` counts what the whole text takes. */
struct writer {
  char* buf;
  size_t cap, need;
};

static void out(struct writer* w, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(struct writer* w, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const size_t room = w->need < w->cap ? w->cap - w->need : 0;
  const int n = vsnprintf(room ? w->buf + w->need : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) w->need += (size_t)n;
}

/* "1e9" rather than printf's "1e+09": the way the seed and a student write it. */
static void format_count(double v, char* buf, size_t cap) {
  char tmp[48];
  snprintf(tmp, sizeof tmp, "%.4g", v);
  const char* e = strchr(tmp, 'e');
  if (e) snprintf(buf, cap, "%.*se%d", (int)(e - tmp), tmp, atoi(e + 1));
  else snprintf(buf, cap, "%s", tmp);
}

/* The factor as the seed writes it: exact when two decimals say it all, else "1.96875 ~ 1.97". */
static void factor_lines(struct writer* w, int n) {
  const double f = ringo_model_factor(n);
  char two[32], exact[32];
  snprintf(two, sizeof two, "%.2f", f);
  snprintf(exact, sizeof exact, "%.6g", f);
  if (strtod(two, NULL) == f) out(w, "  factor     = 2(N-1)/N = 2*%d/%d = %s\n", n - 1, n, two);
  else out(w, "  factor     = 2(N-1)/N = 2*%d/%d = %s ~ %s\n", n - 1, n, exact, two);
}

static void bytes_lines(struct writer* w, const struct ringo_model_input* in) {
  char d[32], sent[32], root[32], count[64];
  ringo_model_format_bytes(in->bytes, d, sizeof d);
  ringo_model_format_bytes(ringo_model_ring_bytes(in->bytes, in->nranks), sent, sizeof sent);
  ringo_model_format_bytes(ringo_model_root_bytes(in->bytes, in->nranks), root, sizeof root);
  if (in->params > 0) {
    format_count(in->params, count, sizeof count);
    out(w, "  D          = %s params x %zu bytes (%s) = %s of gradient per rank\n", count, in->elem_bytes,
        in->dtype ? in->dtype : "?", d);
  } else {
    out(w, "  D          = %s per rank\n", d);
  }
  factor_lines(w, in->nranks);
  out(w, "  sent/rank  = factor x D = %.6g x %s = %s (and as much received), on every rank alike\n",
      ringo_model_factor(in->nranks), d, sent);
  out(w, "  naive root = (N-1) x D = %d x %s = %s into one rank (and as much back out)\n", in->nranks - 1, d, root);
}

static void time_lines(struct writer* w, const struct ringo_model_input* in) {
  char sent[32], bw[32], t_bw[32], t_lat[32], lat[32], total[32];
  ringo_model_format_bytes(ringo_model_ring_bytes(in->bytes, in->nranks), sent, sizeof sent);
  ringo_model_format_bytes(in->bw, bw, sizeof bw);
  ringo_model_format_seconds(ringo_model_bw_time(in->bytes, in->nranks, in->bw), t_bw, sizeof t_bw);
  out(w, "  time       = sent/rank / bandwidth = %s / %s/s = %s per all-reduce (bandwidth term)\n", sent, bw, t_bw);
  if (in->latency < 0) {
    out(w, "  latency    : not given; --latency 5us adds 2(N-1) x latency and the bucket size where "
           "bandwidth dominates\n");
    return;
  }
  ringo_model_format_seconds(in->latency, lat, sizeof lat);
  ringo_model_format_seconds(ringo_model_latency_time(in->nranks, in->latency), t_lat, sizeof t_lat);
  ringo_model_format_seconds(ringo_model_time(in->bytes, in->nranks, in->bw, in->latency), total, sizeof total);
  out(w, "  latency    = 2(N-1) steps x latency = %d x %s = %s (latency term)\n", ringo_model_steps(in->nranks), lat,
      t_lat);
  out(w, "  total      = %s + %s = %s\n", t_bw, t_lat, total);
}

/* Where bandwidth takes over: the crossover N·alpha·beta, the size at which bandwidth is 90% of
 * the time, and the seed's 25 MB DDP bucket as a landmark. */
static void bucket_lines(struct writer* w, const struct ringo_model_input* in) {
  char lat[32], bw[32], half[32], ninety[32];
  const double ddp = 25e6;
  const double t_bw = ringo_model_bw_time(ddp, in->nranks, in->bw);
  ringo_model_format_seconds(in->latency, lat, sizeof lat);
  ringo_model_format_bytes(in->bw, bw, sizeof bw);
  ringo_model_format_bytes(ringo_model_bytes_for_share(in->nranks, in->latency, in->bw, 0.5), half, sizeof half);
  ringo_model_format_bytes(ringo_model_bytes_for_share(in->nranks, in->latency, in->bw, 0.9), ninety,
                           sizeof ninety);
  out(w, "  buckets    : bandwidth term = latency term at D* = N x latency x bandwidth = %d x %s x %s/s = %s;\n",
      in->nranks, lat, bw, half);
  out(w, "               bandwidth dominates above D*, and is 90%% of the time from 9 x D* = %s;\n", ninety);
  out(w, "               a 25.0 MB bucket (DDP's default) spends %.0f%% of its time on bandwidth\n",
      100.0 * t_bw / ringo_model_time(ddp, in->nranks, in->bw, in->latency));
}

size_t ringo_model_report(const struct ringo_model_input* in, char* buf, size_t cap) {
  struct writer w = {buf, cap, 0};
  if (cap) buf[0] = '\0';
  out(&w, "ring all-reduce, the seed's cost model: N = %d ranks\n", in->nranks);
  if (in->nranks < 2) {
    out(&w, "  with fewer than 2 ranks nothing moves: 0 bytes, 0 steps\n");
    return w.need;
  }
  bytes_lines(&w, in);
  if (in->bw > 0) time_lines(&w, in);
  else out(&w, "  time       : give a bandwidth (--bw 200GB/s) for the time\n");
  if (in->bw > 0 && in->latency > 0) bucket_lines(&w, in);
  return w.need;
}
