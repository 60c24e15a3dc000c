/* env.c — every RINGO_* environment knob is read here and nowhere else, and logged at INFO.
 * Tested by test/test_api.cc (timeouts, slice sizes) and indirectly by every multi-rank test. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "include/cuda_ring.h" /* RINGO_DEV_MAX_CHANNELS */

/* The whole of s as a finite number: "5x", "nan" and "1e999" are not numbers here (strtod alone
 * would read 5, NaN, which no range refuses, and HUGE_VAL). Trailing blanks are allowed. */
static int env_number(const char* s, double* v) {
  char* end = NULL;
  errno = 0;
  *v = strtod(s, &end);
  while (end && (*end == ' ' || *end == '\t' || *end == '\n')) end++;
  return end != s && !*end && !errno && isfinite(*v);
}

static double env_double(const char* name, double dflt, double lo, double hi) {
  const char* s = getenv(name);
  if (!s || !*s) return dflt;
  double v;
  if (!env_number(s, &v) || v < lo || v > hi) {
    RINGO_WARN("ignoring %s=%s (expected a number in [%g, %g]); using %g", name, s, lo, hi, dflt);
    return dflt;
  }
  return v;
}

/* A knob that counts: a whole number (4.5 slots is not 4). */
static int env_int(const char* name, int dflt, int lo, int hi) {
  const char* s = getenv(name);
  if (!s || !*s) return dflt;
  double v;
  if (!env_number(s, &v) || v < lo || v > hi || v != floor(v)) {
    RINGO_WARN("ignoring %s=%s (expected a whole number in [%d, %d]); using %d", name, s, lo, hi, dflt);
    return dflt;
  }
  return (int)v;
}

/* Accepts plain numbers and K/M/G suffixes (powers of two), nothing after them. */
static size_t env_bytes(const char* name, size_t dflt, size_t lo, size_t hi) {
  const char* s = getenv(name);
  if (!s || !*s) return dflt;
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  const char* unit = end && *end ? strchr("KkMmGg", *end) : NULL;
  const int shift = unit ? 10 * (int)(1 + (unit - "KkMmGg") / 2) : 0;
  const char* rest = unit ? end + 1 : end;
  /* strtoull takes "-1" as its largest value and wraps nothing itself; a shift could. */
  const int ok = end != s && !errno && !*rest && s[strspn(s, " \t")] != '-' && v <= (ULLONG_MAX >> shift);
  if (ok) v <<= shift;
  if (!ok || v < lo || v > hi) {
    if (dflt == RINGO_ONESHOT_PER_PEER || dflt == 0) /* a default picked later (a sentinel, as RINGO_BOARD_ROTATE_AUTO) */
      RINGO_WARN("ignoring %s=%s (expected bytes in [%zu, %zu]); using the default", name, s, lo, hi);
    else
      RINGO_WARN("ignoring %s=%s (expected bytes in [%zu, %zu]); using %zu", name, s, lo, hi, dflt);
    return dflt;
  }
  return (size_t)v;
}

static void env_string(const char* name, char* dst, size_t cap) {
  const char* s = getenv(name);
  snprintf(dst, cap, "%s", s ? s : "");
}

void ringo_env_read(struct ringo_env* env) {
  env->timeout_s = env_double("RINGO_TIMEOUT", 300.0, 0.001, 1e9);
  /* Slots hold whole elements of any type: keep them a multiple of 64 bytes. */
  env->slice_bytes = env_bytes("RINGO_SLICE_BYTES", 0, 256, 64 << 20) & ~(size_t)63;
  env->nslots = env_int("RINGO_NSLOTS", 4, 4, 64);
  /* Unset (-1): decided per communicator, by whether a host's ranks fit its CPUs (comm.c). */
  env->spin = env_int("RINGO_SPIN", -1, 0, 1000000000);
  /* Then yield rather than sleep for a while: a slice's wait is usually tens of microseconds, a
   * futex wake-up in a VM about as long again (docs/performance.md, the wait defaults). */
  env->yield_us = env_double("RINGO_YIELD_US", 200, 0, 1e6);
  env->board_rotate = env_bytes("RINGO_BOARD_ROTATE", RINGO_BOARD_ROTATE_AUTO, 0, (size_t)1 << 30);
  env->cuda_enable = env_int("RINGO_CUDA", 1, 0, 1);
  env->cuda_channels = env_int("RINGO_CUDA_CHANNELS", 0, 0, RINGO_DEV_MAX_CHANNELS);
  env->cuda_slice_bytes = env_bytes("RINGO_CUDA_SLICE_BYTES", 256 << 10, 4096, 64 << 20) & ~(size_t)4095;
  env->cuda_min_slice_bytes = env_bytes("RINGO_CUDA_MIN_SLICE_BYTES", 16 << 10, 16, 64 << 20);
  env->cuda_window = env_int("RINGO_CUDA_WINDOW", 0, 0, 64);
  env->cuda_fence = env_int("RINGO_CUDA_FENCE", 1, 0, 1);
  env->cuda_gpu_scope = env_int("RINGO_CUDA_GPU_SCOPE", -1, 0, 1); /* -1: unset (core.h) */
  /* A phase costs a copy per chunk each way and a marker: enough phases to overlap the copies
   * with the transfer, pieces large enough that a copy's launch cost stays small beside it. */
  env->staged_phases = env_int("RINGO_STAGED_PHASES", 8, 1, 64);
  env->staged_piece_bytes = env_bytes("RINGO_STAGED_PIECE_BYTES", 1 << 20, 64, (size_t)1 << 40);
  env_string("RINGO_HOSTNAME", env->hostname, sizeof env->hostname);
  if (!env->hostname[0] && gethostname(env->hostname, sizeof env->hostname - 1) != 0)
    snprintf(env->hostname, sizeof env->hostname, "localhost");
  env_string("RINGO_SOCKET_IFNAME", env->socket_ifname, sizeof env->socket_ifname);
  env_string("RINGO_COMM_ID", env->comm_id, sizeof env->comm_id);
  env_string("RINGO_TRANSPORT", env->transport, sizeof env->transport);
  env_string("RINGO_TRACE", env->trace_path, sizeof env->trace_path);
  env_string("RINGO_ALGO", env->algo, sizeof env->algo);
  if (!env->algo[0]) snprintf(env->algo, sizeof env->algo, "auto");
  env_string("RINGO_RING_ORDER", env->ring_order, sizeof env->ring_order);
  if (!env->ring_order[0]) snprintf(env->ring_order, sizeof env->ring_order, "cpu");
  /* Unset: 4 KiB per peer (comm.c), where the one-shot and the ring cross (docs/performance.md). */
  env->oneshot_bytes = env_bytes("RINGO_ONESHOT_BYTES", RINGO_ONESHOT_PER_PEER, 0, 1 << 20);
  env->twophase_bytes = env_bytes("RINGO_TWOPHASE_BYTES", RINGO_TWOPHASE_DEFAULT, 0, 64 << 20);
  env->twophase_round_bytes = env_bytes("RINGO_TWOPHASE_ROUND_BYTES", RINGO_TWOPHASE_DEFAULT, 4096, 64 << 20);
  char oneshot_text[32] = "4K per other rank", twophase_text[32] = "by rank count", round_text[32] = "by rank count";
  if (env->twophase_bytes != RINGO_TWOPHASE_DEFAULT) snprintf(twophase_text, sizeof twophase_text, "%zu", env->twophase_bytes);
  if (env->twophase_round_bytes != RINGO_TWOPHASE_DEFAULT)
    snprintf(round_text, sizeof round_text, "%zu", env->twophase_round_bytes);
  if (env->oneshot_bytes != RINGO_ONESHOT_PER_PEER) snprintf(oneshot_text, sizeof oneshot_text, "%zu", env->oneshot_bytes);
  char slice_text[48] = "unset (128K on one host, 512K across hosts)";
  char rotate_text[48] = "unset (the L2's size where ranks fit the CPUs)";
  if (env->board_rotate != RINGO_BOARD_ROTATE_AUTO) snprintf(rotate_text, sizeof rotate_text, "%zu", env->board_rotate);
  if (env->slice_bytes) snprintf(slice_text, sizeof slice_text, "%zu", env->slice_bytes);
  RINGO_INFO(RINGO_LOG_ENV,
             "env: RINGO_TIMEOUT=%g RINGO_SLICE_BYTES=%s RINGO_NSLOTS=%d RINGO_SPIN=%d RINGO_YIELD_US=%g RINGO_CUDA=%d RINGO_CUDA_CHANNELS=%d "
             "RINGO_CUDA_SLICE_BYTES=%zu RINGO_CUDA_MIN_SLICE_BYTES=%zu RINGO_CUDA_WINDOW=%d RINGO_CUDA_FENCE=%d RINGO_CUDA_GPU_SCOPE=%d RINGO_STAGED_PHASES=%d RINGO_STAGED_PIECE_BYTES=%zu "
             "RINGO_HOSTNAME=%s RINGO_SOCKET_IFNAME=%s RINGO_COMM_ID=%s RINGO_TRANSPORT=%s RINGO_TRACE=%s RINGO_ALGO=%s RINGO_RING_ORDER=%s RINGO_ONESHOT_BYTES=%s RINGO_TWOPHASE_BYTES=%s RINGO_TWOPHASE_ROUND_BYTES=%s RINGO_BOARD_ROTATE=%s",
             env->timeout_s, slice_text, env->nslots, env->spin, env->yield_us, env->cuda_enable, env->cuda_channels, env->cuda_slice_bytes,
             env->cuda_min_slice_bytes, env->cuda_window, env->cuda_fence, env->cuda_gpu_scope, env->staged_phases, env->staged_piece_bytes, env->hostname,
             env->socket_ifname, env->comm_id, env->transport, env->trace_path, env->algo, env->ring_order, oneshot_text, twophase_text, round_text, rotate_text);
}
