/* model.h — the seed's cost model of ring all-reduce (2(N-1)/N·D bytes per rank, 2(N-1) steps) as
 * pure functions, plus the unit parsing and the worked-example report that ringo-model prints.
 * Implemented in src/model.c (needs core.h only); tested by test/test_model.cc. */
#ifndef RINGO_MODEL_H_
#define RINGO_MODEL_H_

#include <stddef.h>

#include "ringo.h"

/* ---- the model: D bytes per rank, N ranks, bandwidth beta (bytes/s), per-step latency alpha (s) ---- */

/* 2(N-1)/N: how many times its own D bytes each rank sends (and receives); 0 for N < 2. */
double ringo_model_factor(int nranks);
/* 2(N-1): the sequential steps of reduce-scatter plus all-gather, each paying the latency once. */
int ringo_model_steps(int nranks);
/* 2(N-1)/N · D: the bytes each rank sends in a ring all-reduce. */
double ringo_model_ring_bytes(double bytes, int nranks);
/* (N-1) · D: the bytes a naive root receives when every other rank sends it its whole vector
 * (and sends again when it returns the sum). */
double ringo_model_root_bytes(double bytes, int nranks);
/* Bandwidth term 2(N-1)/N · D / beta, in seconds. */
double ringo_model_bw_time(double bytes, int nranks, double bw);
/* Latency term 2(N-1) · alpha, in seconds. */
double ringo_model_latency_time(int nranks, double latency);
/* The two terms added: the time of one ring all-reduce of D bytes. */
double ringo_model_time(double bytes, int nranks, double bw, double latency);
/* The D at which the bandwidth term reaches `share` (0 < share < 1) of the whole time:
 * 2(N-1)/N·D/beta = share/(1-share) · 2(N-1)·alpha, so D = share/(1-share) · N·alpha·beta.
 * share = 0.5 gives the crossover N·alpha·beta, above which bandwidth dominates. */
double ringo_model_bytes_for_share(int nranks, double latency, double bw, double share);

/* ---- units, as a student types them ---- */

/* "4GB", "4 GB", "25MB", "64KiB", "4e9", "4e9B": bytes (K/M/G/T powers of ten, Ki/Mi/Gi/Ti of two).
 * @return ringoSuccess; ringoInvalidArgument (message via ringo_thread_last_error) otherwise. */
ringoResult_t ringo_model_parse_bytes(const char* text, double* bytes);
/* "200GB/s", "200 GB/s", "25GiB/s", "100Gbit/s", "2e11": bytes per second. */
ringoResult_t ringo_model_parse_rate(const char* text, double* bytes_per_s);
/* "5us", "5µs", "800ns", "1.5ms", "2e-6", "2e-6s": seconds. */
ringoResult_t ringo_model_parse_seconds(const char* text, double* seconds);
/* "1e9", "1000000000", "7B" (billion), "350M", "70k": a count of parameters. */
ringoResult_t ringo_model_parse_count(const char* text, double* count);
/* "float32" (or any ringo type name), "fp32", "fp16", "bf16", "fp64": element bytes. */
ringoResult_t ringo_model_parse_dtype(const char* text, size_t* elem_bytes);

/* The longest text the two formatters below write, its terminating NUL included: a buffer this size
 * never cuts a number or its unit. */
#define RINGO_MODEL_TEXT_CAP 16
/* "4.0 GB", "7.9 GB", "252.0 GB", "25.0 MB", "512 B": decimal units up to YB, one decimal;
 * "1e+30 B" past them, "inf B" for what is not finite. */
void ringo_model_format_bytes(double bytes, char* buf, size_t cap);
/* "35.0 ms", "5.0 us", "1.20 s"; "3.2e+09 s" from 1e9 s (31 years), "0.001 ns" below 1 ns. */
void ringo_model_format_seconds(double seconds, char* buf, size_t cap);

/* ---- the worked example, as text ---- */

struct ringo_model_input {
  double params;       /* number of elements (0: bytes was given directly) */
  size_t elem_bytes;   /* bytes per element (with params) */
  const char* dtype;   /* its name, for the text */
  double bytes;        /* D in bytes (computed from params when params > 0) */
  int nranks;          /* N >= 2 */
  double bw;           /* bytes/s; 0: no time line */
  double latency;      /* seconds per step; < 0: not given */
};

/* Writes the seed's worked example for `in` into buf (at most cap bytes, always terminated):
 * D, the factor 2(N-1)/N, bytes sent per rank, the naive root's bytes, the bandwidth time, and
 * when a latency is given, the latency term and the bucket size where bandwidth dominates.
 * @return the length the full text needs (like snprintf), so a caller can see truncation. */
size_t ringo_model_report(const struct ringo_model_input* in, char* buf, size_t cap);

#endif /* RINGO_MODEL_H_ */
