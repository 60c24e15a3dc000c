/* ringo-bench.c — nccl-tests-style collective benchmark: times, bus bandwidth, bytes sent against the
 * ring law, a correctness check and (--bound) the memory-bandwidth bound. Uses include/ringo.h only.
 * Run: `make bench`, or build/bin/ringo-bench -N 4 -b 1K -e 64M -f 2 -d float32 -o sum (-h for all flags). */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ringo.h"

enum { EXIT_WRONG = 1, EXIT_USAGE = 2, EXIT_RINGO = 3, EXIT_LAUNCH = 4 };
enum { COLL_ALL_REDUCE, COLL_REDUCE_SCATTER, COLL_ALL_GATHER, COLL_BROADCAST, COLL_REDUCE, NUM_COLLS };
#define OP_NONE (-1) /* all_gather and broadcast reduce nothing */
#define HOST_BYTES 64
#define MAX_RANKS 1024
/* Without an explicit -n, a row whose warm-up iteration is slow gets fewer timed iterations (never
 * fewer than MIN_AUTO_ITERS) so that each placement's timed loop lasts about ITER_BUDGET_S. */
#define ITER_BUDGET_S 1.0
#define MIN_AUTO_ITERS 5
/* Once one rank has exited cleanly the others must follow within this many seconds. */
#define EXIT_GRACE_S 30.0

static const char* const type_names[RINGO_NUM_TYPES] = {"int8", "uint8", "int32", "uint32", "int64",
    "uint64", "float16", "float32", "float64", "bfloat16"};
static const char* const type_alias[RINGO_NUM_TYPES] = {"char", "uchar", "int", "uint", "long", "ulong",
    "half", "float", "double", "bf16"};
static const size_t type_size[RINGO_NUM_TYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
static const char* const op_names[RINGO_NUM_OPS] = {"sum", "prod", "max", "min", "avg"};
static const char* const coll_names[NUM_COLLS] = {"all_reduce", "reduce_scatter", "all_gather",
                                                  "broadcast", "reduce"};

struct opts {
  size_t minbytes, maxbytes, stepbytes;
  int stepfactor;               /* > 1: multiply; 0: add stepbytes */
  int iters, warmup, check, root, nranks, coll, bound, iters_explicit;
  int ntypes, types[RINGO_NUM_TYPES], nops, ops[RINGO_NUM_OPS];
  double timeout_s;
  const char* json;
  char command[4096];
  double bw_copy, bw_add;       /* GB/s measured by --bound, 0 when not measured */
};

/* How the ranks of this run came to be. Today: fork (the parent makes the unique id, forks nranks
 * children, waits). Under mpirun a launch_mpi() would fill the same fields from MPI_Comm_rank/size
 * and MPI_Bcast rank 0's id; nothing after launch depends on which launcher ran. */
struct launch {
  const char* kind;
  int nranks, rank;
  ringoUniqueId id;
};

/* One table row: its parameters and, once run, its results ([0] out-of-place, [1] in-place). */
struct row {
  size_t bytes, count;
  int type, op, root, iters;
  double time_us[2], algbw[2], busbw[2];
  uint64_t wrong[2];
  uint64_t sent;                /* bytesSent per out-of-place iteration, max over ranks */
  double law, bound;            /* ratios; < 0 when undefined */
};

/* One rank's state for the whole run. */
struct bench {
  const struct opts* o;
  const struct launch* L;
  ringoComm_t comm;
  int rank, nranks;
  unsigned char *sbuf, *rbuf;
  double* times;
  FILE* json;                   /* rank 0 with -J: rows are written as they complete */
  size_t nrows;
  double busbw_sum;
  uint64_t wrong_total;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- errors */

/* The library reports, the program decides: any ringo error ends this rank with its message. */
static void ringo_die(const struct bench* b, const char* what, ringoResult_t res) {
  const char* msg = ringoGetLastError(b ? b->comm : NULL);
  fprintf(stderr, "ringo-bench: rank %d: %s failed: %s: %s\n", b ? b->rank : -1, what,
          ringoGetErrorString(res), *msg ? msg : "(no message)");
  exit(EXIT_RINGO);
}
#define RB_CHECK(b, call)                                   \
  do {                                                      \
    ringoResult_t rb_res_ = (call);                         \
    if (rb_res_ != ringoSuccess) ringo_die((b), #call, rb_res_); \
  } while (0)

static void* xalloc(size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) {
    fprintf(stderr, "ringo-bench: cannot allocate %zu bytes\n", bytes);
    exit(EXIT_USAGE);
  }
  return p;
}

/* ---------------------------------------------------------------- options */

static void usage(FILE* f) {
  fprintf(f,
          "usage: ringo-bench [options]   (flags follow nccl-tests' all_reduce_perf)\n"
          "  -b, --minbytes N      smallest size in bytes, K/M/G suffixes (default 32M)\n"
          "  -e, --maxbytes N      largest size in bytes (default 32M)\n"
          "  -f, --stepfactor F    multiply the size by F each row (default 2)\n"
          "  -i, --stepbytes N     add N bytes each row instead of -f\n"
          "  -n, --iters N         timed iterations (default 20; without -n, rows slower than\n"
          "                        %.0f ms per iteration use fewer, at least %d)\n"
          "  -w, --warmup_iters N  warm-up iterations (default 5)\n"
          "  -c, --check 0|1       check every element of every result (default 1)\n"
          "  -o, --op OP           sum|prod|max|min|avg|all (default sum)\n"
          "  -d, --datatype T      int8|uint8|int32|uint32|int64|uint64|float16|float32|float64|\n"
          "                        bfloat16|all (default float32)\n"
          "  -r, --root R          root of broadcast and reduce (default 0)\n"
          "  -C, --collective C    all_reduce|reduce_scatter|all_gather|broadcast|reduce\n"
          "  -N, --nranks N        local ranks to fork (default 4)\n"
          "  -J, --output_file F   also write the results as JSON to F\n"
          "      --bound           measure memory bandwidth and add a %%bound column\n"
          "      --timeout S       kill the ranks if the run takes longer (default 600)\n"
          "  -h, --help            this text\n",
          1e3 * ITER_BUDGET_S / MIN_AUTO_ITERS / 4, MIN_AUTO_ITERS);
}

static void bad_arg(const char* what, const char* arg) {
  fprintf(stderr, "ringo-bench: bad %s '%s' (try -h)\n", what, arg);
  exit(EXIT_USAGE);
}

static size_t parse_bytes(const char* s) {
  char* end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0) bad_arg("size", s);
  static const char units[] = "KkMmGg";
  const char* unit = *end ? strchr(units, *end) : NULL;
  if (unit) end++;
  for (long k = unit ? (unit - units) / 2 : -1; k >= 0; k--) v *= 1024;
  if (*end == 'B' || *end == 'b') end++;
  if (*end) bad_arg("size", s);
  return (size_t)v;
}

static int parse_int(const char* s, int lo, int hi, const char* what) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) bad_arg(what, s);
  return (int)v;
}

/* Fills out with the indices of the names (or aliases) equal to s, every one for "all". */
static int parse_names(const char* s, const char* const* names, const char* const* alias, int n, int* out,
                       const char* what) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!strcmp(s, "all") || !strcmp(s, names[i]) || (alias && !strcmp(s, alias[i]))) out[k++] = i;
  if (!k) bad_arg(what, s);
  return k;
}

static void join_command(struct opts* o, int argc, char** argv) {
  size_t len = 0;
  o->command[0] = '\0';
  for (int i = 0; i < argc && len + 3 < sizeof o->command; i++) {
    int quote = argv[i][0] == '\0' || strpbrk(argv[i], " \t\"'$\\*?") != NULL;
    len += (size_t)snprintf(o->command + len, sizeof o->command - len, quote ? "%s'%s'" : "%s%s",
                            i ? " " : "", argv[i]);
  }
}

static void apply_opt(struct opts* o, int c, const char* arg) {
  int colls[NUM_COLLS];
  switch (c) {
    case 'b': o->minbytes = parse_bytes(arg); break;
    case 'e': o->maxbytes = parse_bytes(arg); break;
    case 'f': o->stepfactor = parse_int(arg, 2, 1 << 20, "step factor"); break;
    case 'i': o->stepbytes = parse_bytes(arg); o->stepfactor = 0; break;
    case 'n': o->iters = parse_int(arg, 1, 1 << 24, "iterations"); o->iters_explicit = 1; break;
    case 'w': o->warmup = parse_int(arg, 0, 1 << 24, "warm-up iterations"); break;
    case 'c': o->check = parse_int(arg, 0, 1, "check"); break;
    case 'o': o->nops = parse_names(arg, op_names, NULL, RINGO_NUM_OPS, o->ops, "op"); break;
    case 'd': o->ntypes = parse_names(arg, type_names, type_alias, RINGO_NUM_TYPES, o->types, "datatype"); break;
    case 'r': o->root = parse_int(arg, 0, MAX_RANKS - 1, "root"); break;
    case 'J': o->json = arg; break;
    case 'N': o->nranks = parse_int(arg, 1, MAX_RANKS, "nranks"); break;
    case 'C': if (parse_names(arg, coll_names, NULL, NUM_COLLS, colls, "collective") > 1) bad_arg("collective", arg);
              o->coll = colls[0]; break;
    case 'B': o->bound = 1; break;
    case 'T': o->timeout_s = atof(arg); if (o->timeout_s <= 0) bad_arg("timeout", arg); break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); exit(EXIT_USAGE);
  }
}

static void parse_args(struct opts* o, int argc, char** argv) {
  static const struct option longs[] = {
      {"minbytes", 1, 0, 'b'}, {"maxbytes", 1, 0, 'e'}, {"stepfactor", 1, 0, 'f'},
      {"stepbytes", 1, 0, 'i'}, {"iters", 1, 0, 'n'}, {"warmup_iters", 1, 0, 'w'},
      {"check", 1, 0, 'c'}, {"op", 1, 0, 'o'}, {"datatype", 1, 0, 'd'}, {"root", 1, 0, 'r'},
      {"output_file", 1, 0, 'J'}, {"nranks", 1, 0, 'N'}, {"collective", 1, 0, 'C'},
      {"bound", 0, 0, 'B'}, {"timeout", 1, 0, 'T'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  *o = (struct opts){.minbytes = 32u << 20, .maxbytes = 32u << 20, .stepfactor = 2, .iters = 20,
                     .warmup = 5, .check = 1, .nranks = 4, .timeout_s = 600};
  apply_opt(o, 'd', "float32");
  apply_opt(o, 'o', "sum");
  join_command(o, argc, argv);
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:o:d:r:J:N:C:h", longs, NULL)) != -1) apply_opt(o, c, optarg);
  if (optind < argc) bad_arg("argument", argv[optind]);
  if (!o->stepfactor && !o->stepbytes) bad_arg("step bytes", "0");
  if (o->minbytes > o->maxbytes) bad_arg("-b larger than -e", argv[0]);
  if (o->root >= o->nranks) bad_arg("root (must be below -N)", "-r");
  if (o->coll == COLL_ALL_GATHER || o->coll == COLL_BROADCAST) o->nops = 1; /* one "none" op */
}

/* ---------------------------------------------------------------- data and check */

/* float -> IEEE half, round to nearest even; inf/NaN kept, no subnormals (our values are integers). */
static uint16_t half_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
  if (a < 0x38800000u) return sign; /* below 2^-14: of our values only 0 gets here */
  uint32_t h = ((a >> 23) - 112) << 10 | ((a & 0x7fffffu) >> 13), rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* a carry rolls into the exponent */
  return (uint16_t)(sign | h);
}

static uint16_t bf16_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

static int type_is_float(int t) { return t >= ringoFloat16; }
static int type_is_signed(int t) { return t == ringoInt8 || t == ringoInt32 || t == ringoInt64; }

/* Stores an integer in an integer type, wrapping modulo 2^bits as the library's arithmetic does. */
static void store_int(int t, void* p, uint64_t v) {
  uint8_t v8 = (uint8_t)v;
  uint32_t v32 = (uint32_t)v;
  size_t es = type_size[t];
  memcpy(p, es == 1 ? (const void*)&v8 : es == 4 ? (const void*)&v32 : (const void*)&v, es);
}

static void store_float(int t, void* p, double v) {
  float f = (float)v;
  uint16_t h = t == ringoFloat16 ? half_from_float(f) : bf16_from_float(f);
  if (t == ringoFloat64) memcpy(p, &v, 8);
  else if (t == ringoFloat32) memcpy(p, &f, 4);
  else memcpy(p, &h, 2);
}

/* Input element i of rank r. Small integers, so every dtype holds them exactly and every partial
 * result is exact too (as nccl-tests does): sums stay below 4n (exact in bfloat16 up to 64 ranks),
 * products are powers of two, and for avg the ranks pair up with +1/-1 around a common value so
 * the sum is exactly n times it. The (i >> 7) term breaks the short period that would hide a
 * chunk or slice landing at the wrong offset. */
static int64_t input_value(int op, int r, size_t i, int n) {
  uint64_t h = ((uint64_t)i * 7u + (uint64_t)r * 31u + (i >> 7)) % 127u;
  if (op == ringoSum) return (int64_t)(h % 4);
  if (op == ringoProd) return h % 5 == 0 ? 2 : 1;
  if (op == ringoAvg) {
    int64_t v = 1 + (int64_t)(((uint64_t)i * 7u + (i >> 7)) % 3u);
    return r % 2 == 0 ? v + (r + 1 < n) : v - 1;
  }
  return (int64_t)h; /* max, min, and the copies of all_gather and broadcast */
}

static void store_input(int t, void* p, int64_t v) {
  if (type_is_float(t)) store_float(t, p, (double)v);
  else store_int(t, p, (uint64_t)v);
}

static void fill(unsigned char* p, size_t count, int type, int op, int rank, int n) {
  size_t es = type_size[type];
  for (size_t i = 0; i < count; i++) store_input(type, p + i * es, input_value(op, rank, i, n));
}

/* The exact op over all ranks of element i, stored in the row's type. */
static void expected_reduced(const struct row* w, int n, size_t i, unsigned char* out) {
  int64_t v0 = input_value(w->op, 0, i, n);
  double f = (double)v0;
  uint64_t u = (uint64_t)v0;
  for (int r = 1; r < n; r++) {
    int64_t v = input_value(w->op, r, i, n);
    if (w->op == ringoProd) { f *= (double)v; u *= (uint64_t)v; }
    else if (w->op == ringoMax) { f = f > (double)v ? f : (double)v; u = (int64_t)u > v ? u : (uint64_t)v; }
    else if (w->op == ringoMin) { f = f < (double)v ? f : (double)v; u = (int64_t)u < v ? u : (uint64_t)v; }
    else { f += (double)v; u += (uint64_t)v; }
  }
  if (w->op == ringoAvg && !type_is_float(w->type)) { /* the library wraps the sum, then divides */
    unsigned bits = 8 * (unsigned)type_size[w->type];
    uint64_t low = bits == 64 ? u : u & ((1ull << bits) - 1);
    int64_t s = bits == 64 ? (int64_t)u : (int64_t)(u << (64 - bits)) >> (64 - bits);
    u = type_is_signed(w->type) ? (uint64_t)(s / n) : low / (uint64_t)n;
  }
  if (w->op == ringoAvg) f /= n;
  if (type_is_float(w->type)) store_float(w->type, out, f);
  else store_int(w->type, out, u);
}

/* Counts the elements of this rank's result that differ (bit for bit) from the exact answer. */
static uint64_t check_result(const struct bench* b, const struct row* w, int inplace) {
  size_t es = type_size[w->type], per = w->count / (size_t)b->nranks;
  unsigned char want[8];
  uint64_t wrong = 0;
  const unsigned char* got = b->rbuf;
  size_t n = w->count, base = 0;
  const int coll = b->o->coll;
  if (coll == COLL_REDUCE && b->rank != w->root) return 0; /* recvbuff only written on root */
  if (coll == COLL_REDUCE_SCATTER) {
    n = per;
    base = (size_t)b->rank * per;
    got = b->rbuf + (inplace ? base * es : 0);
  }
  for (size_t i = 0; i < n; i++) {
    if (coll == COLL_ALL_GATHER)
      store_input(w->type, want, input_value(OP_NONE, (int)(i / per), i % per, b->nranks));
    else if (coll == COLL_BROADCAST)
      store_input(w->type, want, input_value(OP_NONE, w->root, i, b->nranks));
    else
      expected_reduced(w, b->nranks, base + i, want);
    wrong += memcmp(got + i * es, want, es) != 0;
  }
  return wrong;
}

/* Writes this rank's input where the call will read it, and a sentinel (0xff bytes: NaN or -1,
 * never an expected value) over the output so elements the library fails to write are caught. */
static void prepare(const struct bench* b, const struct row* w, int inplace) {
  size_t es = type_size[w->type], per = w->count / (size_t)b->nranks;
  memset(b->rbuf, 0xff, w->bytes);
  if (b->o->coll == COLL_ALL_GATHER)
    fill((inplace ? b->rbuf + (size_t)b->rank * per * es : b->sbuf), per, w->type, OP_NONE, b->rank,
         b->nranks);
  else
    fill(inplace ? b->rbuf : b->sbuf, w->count, w->type, w->op, b->rank, b->nranks);
}

/* ---------------------------------------------------------------- running a row */

static ringoResult_t coll_run(const struct bench* b, const struct row* w, int inplace) {
  size_t es = type_size[w->type], per = w->count / (size_t)b->nranks;
  unsigned char *s = inplace ? b->rbuf : b->sbuf, *r = b->rbuf, *mine = r + (size_t)b->rank * per * es;
  ringoDataType_t t = (ringoDataType_t)w->type;
  ringoRedOp_t op = (ringoRedOp_t)(w->op < 0 ? 0 : w->op);
  switch (b->o->coll) {
    case COLL_ALL_REDUCE: return ringoAllReduce(s, r, w->count, t, op, b->comm, NULL);
    case COLL_REDUCE_SCATTER: return ringoReduceScatter(s, inplace ? mine : r, per, t, op, b->comm, NULL);
    case COLL_ALL_GATHER: return ringoAllGather(inplace ? mine : s, r, per, t, b->comm, NULL);
    case COLL_BROADCAST: return ringoBroadcast(s, r, w->count, t, w->root, b->comm, NULL);
    default: return ringoReduce(s, r, w->count, t, op, w->root, b->comm, NULL);
  }
}

/* Runs the row's collective once; a library error ends this rank, naming what failed. */
static void coll_checked(const struct bench* b, const struct row* w, int inplace) {
  ringoResult_t res = coll_run(b, w, inplace);
  if (res == ringoSuccess) return;
  char what[160], root[32] = "";
  if (w->root >= 0) snprintf(root, sizeof root, ", root %d", w->root);
  snprintf(what, sizeof what, "%s of %zu bytes (%s, %s%s, %s)", coll_names[b->o->coll], w->bytes,
           type_names[w->type], w->op < 0 ? "none" : op_names[w->op], root, inplace ? "in-place" : "out-of-place");
  ringo_die(b, what, res);
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Timed iterations for this row. Every rank must choose the same count, so the slowest rank's
 * last warm-up time decides. -n given explicitly is always honoured. */
static int choose_iters(const struct bench* b, double warm_s) {
  const struct opts* o = b->o;
  if (o->iters_explicit || o->warmup == 0) return o->iters;
  RB_CHECK(b, ringoAllReduce(&warm_s, &warm_s, 1, ringoFloat64, ringoMax, b->comm, NULL));
  if (warm_s * o->iters <= ITER_BUDGET_S) return o->iters;
  int k = (int)(ITER_BUDGET_S / warm_s);
  return k < MIN_AUTO_ITERS ? (o->iters < MIN_AUTO_ITERS ? o->iters : MIN_AUTO_ITERS) : k;
}

/* One placement: check run, warm-up, timed loop; returns this rank's bytesSent per iteration.
 * The row's time is the median over iterations of the slowest rank's time of that iteration. */
static uint64_t run_placement(const struct bench* b, struct row* w, int inplace) {
  double warm_s = 0;
  prepare(b, w, inplace);
  if (b->o->check) {
    coll_checked(b, w, inplace);
    w->wrong[inplace] = check_result(b, w, inplace);
  }
  for (int k = 0; k < b->o->warmup; k++) {
    double t0 = now_s();
    coll_checked(b, w, inplace);
    warm_s = now_s() - t0;
  }
  if (!inplace) w->iters = choose_iters(b, warm_s);
  ringoCommStats s0, s1;
  RB_CHECK(b, ringoCommGetStats(b->comm, &s0));
  for (int k = 0; k < w->iters; k++) {
    double t0 = now_s();
    coll_checked(b, w, inplace);
    b->times[k] = now_s() - t0;
  }
  RB_CHECK(b, ringoCommGetStats(b->comm, &s1));
  RB_CHECK(b, ringoAllReduce(b->times, b->times, (size_t)w->iters, ringoFloat64, ringoMax, b->comm, NULL));
  qsort(b->times, (size_t)w->iters, sizeof(double), cmp_double);
  int m = w->iters / 2;
  double med = w->iters % 2 ? b->times[m] : 0.5 * (b->times[m - 1] + b->times[m]);
  w->time_us[inplace] = 1e6 * med;
  w->algbw[inplace] = med > 0 ? (double)w->bytes / med / 1e9 : 0;
  return (s1.bytesSent - s0.bytesSent) / (uint64_t)w->iters;
}

/* Per-rank factors of D (the full buffer in bytes) for collective coll on n ranks:
 * bus: nccl-tests' busbw/algbw; law: the ring's bytes sent by the busiest rank;
 * mem: memory traffic per rank in the single-copy ring, where a receiver reads its peer's slice
 * directly (bytes read + written, the STREAM convention). Derivations:
 *  all_reduce: n-1 reduce-scatter steps of D/n, each reads two slices and writes one (3), then
 *              n-1 all-gather steps, each reads one and writes one (2): 5(n-1)/n.
 *  reduce_scatter: the reduce steps alone: 3(n-1)/n.
 *  all_gather: the copy steps alone: 2(n-1)/n (an out-of-place rank's copy of its own block is
 *              left out so one bound serves both placements).
 *  broadcast: a pipelined chain; n-1 ranks each read D from their predecessor and write it:
 *             2(n-1)D in all, 2(n-1)/n per rank.
 *  reduce: a chain towards root; n-1 ranks each read the incoming partial and their own input
 *          and write the sum: 3(n-1)D in all, 3(n-1)/n per rank (what reduce_scatter moves). */
static void coll_factors(int coll, int n, double* bus, double* law, double* mem) {
  double m = (double)(n - 1) / n;
  switch (coll) {
    case COLL_ALL_REDUCE: *bus = 2 * m; *law = 2 * m; *mem = 5 * m; break;
    case COLL_REDUCE_SCATTER: *bus = m; *law = m; *mem = 3 * m; break;
    case COLL_ALL_GATHER: *bus = m; *law = m; *mem = 2 * m; break;
    case COLL_BROADCAST: *bus = 1; *law = n > 1; *mem = 2 * m; break;
    default: *bus = 1; *law = n > 1; *mem = 3 * m; break;
  }
}

static void run_row(struct bench* b, struct row* w) {
  double bus, law, mem;
  uint64_t sent = run_placement(b, w, 0);
  run_placement(b, w, 1);
  RB_CHECK(b, ringoAllReduce(&sent, &sent, 1, ringoUint64, ringoMax, b->comm, NULL));
  RB_CHECK(b, ringoAllReduce(w->wrong, w->wrong, 2, ringoUint64, ringoSum, b->comm, NULL));
  coll_factors(b->o->coll, b->nranks, &bus, &law, &mem);
  w->sent = sent;
  w->busbw[0] = w->algbw[0] * bus;
  w->busbw[1] = w->algbw[1] * bus;
  w->law = law * (double)w->bytes > 0 ? (double)sent / (law * (double)w->bytes) : -1;
  /* All n ranks of this host share its memory bandwidth, so the fastest possible time is the whole
   * host's traffic, n·mem·D, over the measured bandwidth. We use the c = a + b figure: the reduce
   * steps (2 reads, 1 write) carry most of the traffic and are exactly that kernel's pattern. */
  double t_bound = b->o->bw_add > 0 ? b->nranks * mem * (double)w->bytes / (b->o->bw_add * 1e9) : -1;
  w->bound = t_bound >= 0 && w->time_us[0] > 0 ? t_bound / (1e-6 * w->time_us[0]) : -1;
}

/* ---------------------------------------------------------------- output (rank 0) */

enum { NCOLS = 15 };
static const int col_width[NCOLS] = {12, 12, 8, 6, 6, 9, 7, 7, 6, 9, 7, 7, 6, 13, 6};

/* Prints one table line; lead is '#' for headers, ' ' for rows, so the columns line up. */
static void print_cols(char lead, const char* const* cols, int ncols, const char* extra) {
  putchar(lead);
  for (int c = 0; c < ncols; c++) printf("%s%*s", c ? "  " : "", col_width[c], cols[c]);
  if (extra) printf("  %7s", extra);
  putchar('\n');
}

static void print_table_header(const struct bench* b) {
  static const char* const names[NCOLS] = {"size", "count", "type", "redop", "root", "time", "algbw",
      "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "sent(B)/rank", "law"};
  static const char* const units[NCOLS] = {"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)",
      "", "(us)", "(GB/s)", "(GB/s)", "", "(oop, max)", "(x)"};
  int at = 1;
  for (int c = 0; c < 5; c++) at += col_width[c] + 2;
  printf("#%*s%-*s%s\n", at - 1, "", 4 * 2 + col_width[5] + col_width[6] + col_width[7] + col_width[8],
         "out-of-place", "  in-place");
  print_cols('#', names, NCOLS, b->o->bw_add > 0 ? "%bound" : NULL);
  print_cols('#', units, NCOLS, b->o->bw_add > 0 ? "(oop)" : NULL);
}

static void print_row(const struct bench* b, const struct row* w) {
  char s[NCOLS + 1][32];
  const char* cols[NCOLS];
#define CELL(i, ...) snprintf(s[i], sizeof s[i], __VA_ARGS__)
  CELL(0, "%zu", w->bytes);
  CELL(1, "%zu", w->count);
  CELL(2, "%s", type_names[w->type]);
  CELL(3, "%s", w->op < 0 ? "none" : op_names[w->op]);
  CELL(4, "%d", w->root);
  for (int p = 0; p < 2; p++) {
    CELL(5 + 4 * p, w->time_us[p] < 1e4 ? "%.2f" : w->time_us[p] < 1e6 ? "%.1f" : "%.0f", w->time_us[p]);
    CELL(6 + 4 * p, "%.2f", w->algbw[p]);
    CELL(7 + 4 * p, "%.2f", w->busbw[p]);
    CELL(8 + 4 * p, b->o->check ? "%llu" : "N/A", (unsigned long long)w->wrong[p]);
  }
  CELL(13, "%llu", (unsigned long long)w->sent);
  CELL(14, w->law >= 0 ? "%.3f" : "-", w->law);
  CELL(NCOLS, w->bound >= 0 ? "%.1f" : "-", 100 * w->bound);
#undef CELL
  for (int c = 0; c < NCOLS; c++) cols[c] = s[c];
  const char* bound = s[NCOLS];
  print_cols(' ', cols, NCOLS, b->o->bw_add > 0 ? bound : NULL);
  fflush(stdout);
}

static void json_string(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void json_ratio(FILE* f, const char* key, double v) {
  if (v >= 0) fprintf(f, ", \"%s\": %.4f", key, v);
  else fprintf(f, ", \"%s\": null", key);
}

static void json_row(FILE* f, const struct bench* b, const struct row* w) {
  static const char* const place[2] = {"oop", "ip"};
  fprintf(f, "%s\n    {\"collective\": \"%s\", \"nranks\": %d, \"size\": %zu, \"count\": %zu, "
             "\"type\": \"%s\", \"op\": \"%s\", \"root\": %d, \"iters\": %d",
          b->nrows ? "," : "", coll_names[b->o->coll], b->nranks, w->bytes, w->count, type_names[w->type],
          w->op < 0 ? "none" : op_names[w->op], w->root, w->iters);
  for (int p = 0; p < 2; p++) {
    fprintf(f, ", \"%s_time_us\": %.3f, \"%s_algbw\": %.4f, \"%s_busbw\": %.4f", place[p], w->time_us[p],
            place[p], w->algbw[p], place[p], w->busbw[p]);
    if (b->o->check) fprintf(f, ", \"%s_wrong\": %llu", place[p], (unsigned long long)w->wrong[p]);
    else fprintf(f, ", \"%s_wrong\": null", place[p]);
  }
  fprintf(f, ", \"sent_per_rank\": %llu", (unsigned long long)w->sent);
  json_ratio(f, "law_ratio", w->law);
  json_ratio(f, "bound_frac", w->bound);
  fprintf(f, "}");
}

/* -J: {"header": {command, hostname, date, ...}, "rows": [one object per table row], "summary": {...}};
 * rows are written as they complete, so a run that dies keeps what it measured. */
static FILE* json_open(const struct bench* b, const char* host) {
  FILE* f = fopen(b->o->json, "w");
  if (!f) {
    fprintf(stderr, "ringo-bench: cannot write %s: %s\n", b->o->json, strerror(errno));
    exit(EXIT_USAGE);
  }
  char date[64];
  time_t t = time(NULL);
  struct tm tm;
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S%z", localtime_r(&t, &tm));
  int version = 0;
  ringoGetVersion(&version);
  fprintf(f, "{\n  \"header\": {\"command\": ");
  json_string(f, b->o->command);
  fprintf(f, ", \"hostname\": ");
  json_string(f, host);
  fprintf(f, ", \"date\": \"%s\", \"ringo_version\": %d, \"launch\": \"%s\", \"nranks\": %d, "
             "\"collective\": \"%s\", \"iters\": %d, \"warmup_iters\": %d, \"check\": %d",
          date, version, b->L->kind, b->nranks, coll_names[b->o->coll], b->o->iters, b->o->warmup,
          b->o->check);
  if (b->o->bw_add > 0) fprintf(f, ", \"membw_copy_GBps\": %.3f, \"membw_add_GBps\": %.3f", b->o->bw_copy, b->o->bw_add);
  fprintf(f, "},\n  \"rows\": [");
  return f;
}

static int json_close(const struct bench* b, FILE* f, double avg_busbw) {
  fprintf(f, "\n  ],\n  \"summary\": {\"out_of_bounds\": %llu, \"avg_busbw\": %.4f}\n}\n",
          (unsigned long long)b->wrong_total, avg_busbw);
  if (fclose(f) == 0) return 0;
  fprintf(stderr, "ringo-bench: cannot write %s: %s\n", b->o->json, strerror(errno));
  return -1;
}

/* ---------------------------------------------------------------- one rank */

/* Rank 0 learns every rank's pid and host (each rank fills its own slot; max/sum leave them). */
static void print_run_header(const struct bench* b, char* host0) {
  const struct opts* o = b->o;
  int n = b->nranks, version = 0;
  int64_t* pids = calloc((size_t)n, sizeof *pids);
  unsigned char* hosts = calloc((size_t)n, HOST_BYTES);
  if (!pids || !hosts) exit(EXIT_USAGE);
  pids[b->rank] = getpid();
  gethostname((char*)hosts + (size_t)b->rank * HOST_BYTES, HOST_BYTES - 1);
  RB_CHECK(b, ringoAllReduce(pids, pids, (size_t)n, ringoInt64, ringoSum, b->comm, NULL));
  RB_CHECK(b, ringoAllReduce(hosts, hosts, (size_t)n * HOST_BYTES, ringoUint8, ringoMax, b->comm, NULL));
  memcpy(host0, hosts, HOST_BYTES);
  ringoGetVersion(&version);
  if (b->rank == 0) {
    printf("# ringo-bench %s, ringo %d.%d.%d, launch: %s\n", coll_names[o->coll], version / 10000,
           version / 100 % 100, version % 100, b->L->kind);
    printf("# Command: %s\n", o->command);
    printf("# nranks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d%s "
           "validation: %d\n", n, o->minbytes, o->maxbytes,
           o->stepfactor ? (size_t)o->stepfactor : o->stepbytes, o->stepfactor ? "factor" : "bytes",
           o->warmup, o->iters, o->iters_explicit ? "" : " (fewer for slow rows)", o->check);
    if (o->bw_add > 0)
      printf("# Memory bandwidth (all cores, best of runs): copy %.2f GB/s, add (c = a + b) %.2f GB/s\n",
             o->bw_copy, o->bw_add);
    printf("#\n# Using ranks (host memory)\n");
    for (int r = 0; r < n; r++)
      printf("#  Rank %2d Pid %7lld on %s\n", r, (long long)pids[r], (char*)hosts + (size_t)r * HOST_BYTES);
    printf("#\n");
  }
  free(pids);
  free(hosts);
}

static void keep_row(struct bench* b, const struct row* w) {
  b->busbw_sum += w->busbw[0] + w->busbw[1];
  b->wrong_total += w->wrong[0] + w->wrong[1];
  if (b->rank == 0) print_row(b, w);
  if (b->json) {
    json_row(b->json, b, w);
    fflush(b->json);
  }
  b->nrows++;
}

/* Rows: for each type, each op, each size (nccl-tests' order). */
static void run_all_rows(struct bench* b) {
  const struct opts* o = b->o;
  const int rooted = o->coll == COLL_BROADCAST || o->coll == COLL_REDUCE;
  const int has_op = o->coll != COLL_ALL_GATHER && o->coll != COLL_BROADCAST;
  for (int ti = 0; ti < o->ntypes; ti++)
    for (int oi = 0; oi < o->nops; oi++)
      for (size_t size = o->minbytes; size <= o->maxbytes;) {
        struct row w = {.type = o->types[ti], .op = has_op ? o->ops[oi] : OP_NONE,
                        .root = rooted ? o->root : -1};
        size_t es = type_size[w.type];
        w.count = size / es;
        if (o->coll == COLL_REDUCE_SCATTER || o->coll == COLL_ALL_GATHER)
          w.count -= w.count % (size_t)b->nranks;
        w.bytes = w.count * es;
        run_row(b, &w);
        keep_row(b, &w);
        size_t next = o->stepfactor ? size * (size_t)o->stepfactor : size + o->stepbytes;
        if (next <= size) break; /* 0 * factor, or overflow */
        size = next;
      }
}

static int run_rank(const struct opts* o, const struct launch* L) {
  struct bench b = {.o = o, .L = L, .rank = L->rank, .nranks = L->nranks};
  char host0[HOST_BYTES] = "";
  RB_CHECK(&b, ringoCommInitRank(&b.comm, L->nranks, L->id, L->rank));
  b.sbuf = xalloc(o->maxbytes);
  b.rbuf = xalloc(o->maxbytes);
  b.times = xalloc((size_t)o->iters * sizeof(double));
  memset(b.sbuf, 0, o->maxbytes); /* fault the pages in before anything is timed */
  memset(b.rbuf, 0, o->maxbytes);
  print_run_header(&b, host0);
  if (b.rank == 0) print_table_header(&b);
  if (b.rank == 0 && o->json) b.json = json_open(&b, host0);
  run_all_rows(&b);
  RB_CHECK(&b, ringoCommDestroy(b.comm));
  int rc = b.wrong_total ? EXIT_WRONG : 0;
  double avg = b.nrows ? b.busbw_sum / (2.0 * (double)b.nrows) : 0.0;
  if (b.rank == 0) {
    printf("# Out of bounds values : %llu %s\n", (unsigned long long)b.wrong_total, rc ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", avg);
    fflush(stdout);
  }
  if (b.json && json_close(&b, b.json, avg) != 0 && !rc) rc = EXIT_USAGE;
  free(b.sbuf);
  free(b.rbuf);
  free(b.times);
  return rc;
}

/* ---------------------------------------------------------------- --bound: memory bandwidth */

struct bw_thread { double *a, *b, *c; size_t n; int reps; pthread_barrier_t* bar; };

/* Each thread first-touches its own slice, then runs reps x (copy, add) between barriers that the
 * main thread uses to time the whole machine's pass. */
static void* bw_worker(void* arg) {
  struct bw_thread* t = arg;
  for (size_t i = 0; i < t->n; i++) { t->a[i] = 1.0; t->b[i] = 2.0; t->c[i] = 0.0; }
  pthread_barrier_wait(t->bar);
  for (int r = 0; r < t->reps; r++) {
    pthread_barrier_wait(t->bar);
    for (size_t i = 0; i < t->n; i++) t->c[i] = t->a[i];
    pthread_barrier_wait(t->bar);
    pthread_barrier_wait(t->bar);
    for (size_t i = 0; i < t->n; i++) t->c[i] = t->a[i] + t->b[i];
    pthread_barrier_wait(t->bar);
  }
  return NULL;
}

/* Best-of-5 copy and add bandwidth with one thread per core over three arrays of 4x the last-level
 * cache (64..256 MiB each), counted as bytes read + written (no write-allocate), like STREAM. */
static void measure_bound(struct opts* o) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN), llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  size_t bytes = llc > 0 ? 4 * (size_t)llc : 0, nt = ncpu > 0 ? (size_t)ncpu : 1;
  bytes = bytes < (64u << 20) ? 64u << 20 : bytes > (256u << 20) ? 256u << 20 : bytes;
  size_t per = bytes / sizeof(double) / nt;
  double* arr = xalloc(3 * per * nt * sizeof(double));
  pthread_t* tid = calloc(nt, sizeof *tid);
  struct bw_thread* th = calloc(nt, sizeof *th);
  pthread_barrier_t bar;
  if (!tid || !th) exit(EXIT_USAGE);
  pthread_barrier_init(&bar, NULL, (unsigned)nt + 1);
  for (size_t i = 0; i < nt; i++) {
    th[i] = (struct bw_thread){arr + i * per, arr + (nt + i) * per, arr + (2 * nt + i) * per, per, 5, &bar};
    if (pthread_create(&tid[i], NULL, bw_worker, &th[i]) != 0) exit(EXIT_USAGE);
  }
  pthread_barrier_wait(&bar);
  double best[2] = {1e30, 1e30};
  for (int r = 0; r < 5; r++)
    for (int k = 0; k < 2; k++) {
      pthread_barrier_wait(&bar);
      double t0 = now_s();
      pthread_barrier_wait(&bar);
      double dt = now_s() - t0;
      best[k] = dt < best[k] ? dt : best[k];
    }
  for (size_t i = 0; i < nt; i++) pthread_join(tid[i], NULL);
  double total = (double)(per * nt * sizeof(double));
  o->bw_copy = 2 * total / best[0] / 1e9;
  o->bw_add = 3 * total / best[1] / 1e9;
  pthread_barrier_destroy(&bar);
  free(arr);
  free(tid);
  free(th);
}

/* ---------------------------------------------------------------- fork launcher */

static void kill_all(const pid_t* pids, int n) {
  for (int r = 0; r < n; r++)
    if (pids[r] > 0) kill(pids[r], SIGKILL);
  for (int r = 0; r < n; r++)
    if (pids[r] > 0) waitpid(pids[r], NULL, 0);
}

/* Reaps the children that have ended. A rank that exits 0 or EXIT_WRONG (it reported its results)
 * gives the others EXIT_GRACE_S to follow; any other end returns 1 so the rest are stopped. */
static int reap(pid_t* pids, int n, int* alive, double* deadline, int* code) {
  int st;
  pid_t p;
  while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
    int r = 0;
    while (r < n && pids[r] != p) r++;
    if (r == n) continue;
    pids[r] = 0;
    (*alive)--;
    int ex = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (ex == 0 || ex == EXIT_WRONG) {
      *code = ex > *code ? ex : *code;
      if (*deadline > now_s() + EXIT_GRACE_S) *deadline = now_s() + EXIT_GRACE_S;
      continue;
    }
    if (ex < 0) fprintf(stderr, "ringo-bench: rank %d killed by signal %d (%s)", r, WTERMSIG(st), strsignal(WTERMSIG(st)));
    else fprintf(stderr, "ringo-bench: rank %d exited with status %d", r, ex);
    fprintf(stderr, "%s\n", *alive ? "; stopping the other ranks" : "");
    *code = ex < 0 ? EXIT_LAUNCH : ex;
    return 1;
  }
  return 0;
}

/* Waits for every rank, bounded by timeout_s; kills what is left on any failure. */
static int launch_wait(pid_t* pids, int n, double timeout_s) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  double deadline = now_s() + timeout_s;
  int alive = n, code = 0;
  while (alive > 0 && !reap(pids, n, &alive, &deadline, &code)) {
    double left = deadline - now_s();
    if (alive == 0) break;
    if (left <= 0) {
      fprintf(stderr, "ringo-bench: timed out: ranks");
      for (int r = 0; r < n; r++) if (pids[r] > 0) fprintf(stderr, " %d", r);
      fprintf(stderr, " still running (--timeout %.0f s, or %.0f s after a rank finished); killing them\n",
              timeout_s, EXIT_GRACE_S);
      code = EXIT_LAUNCH;
      break;
    }
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    sigtimedwait(&chld, NULL, &ts);
  }
  kill_all(pids, n);
  return code;
}

/* Returns 1 in a child (L filled: go run the rank) and 0 in the parent once every rank has ended,
 * with *code the run's exit code. The parent keeps the unique id's rendezvous root alive. */
static int launch_fork(const struct opts* o, struct launch* L, int* code) {
  sigset_t chld, old;
  pid_t* pids = calloc((size_t)o->nranks, sizeof *pids);
  if (!pids) exit(EXIT_USAGE);
  *L = (struct launch){.kind = "fork", .nranks = o->nranks};
  RB_CHECK(NULL, ringoGetUniqueId(&L->id));
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old); /* so sigtimedwait sees every SIGCHLD */
  fflush(NULL);                        /* or children would print the parent's buffered output again */
  pid_t parent = getpid();
  for (int r = 0; r < o->nranks; r++) {
    pid_t p = fork();
    if (p == 0) {
      sigprocmask(SIG_SETMASK, &old, NULL);
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed parent takes its ranks along */
      if (getppid() != parent) _exit(EXIT_LAUNCH);
      free(pids);
      L->rank = r;
      return 1;
    }
    if (p < 0) {
      fprintf(stderr, "ringo-bench: fork failed: %s\n", strerror(errno));
      kill_all(pids, r);
      *code = EXIT_LAUNCH;
      free(pids);
      return 0;
    }
    pids[r] = p;
  }
  *code = launch_wait(pids, o->nranks, o->timeout_s);
  free(pids);
  return 0;
}

int main(int argc, char** argv) {
  struct opts o;
  struct launch L;
  int code = 0;
  parse_args(&o, argc, argv);
  if (o.bound) measure_bound(&o);
  if (launch_fork(&o, &L, &code)) return run_rank(&o, &L);
  return code;
}
