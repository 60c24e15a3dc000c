/* ringo-bench.c — nccl-tests-style collective benchmark: time, busbw, bytes sent vs the ring law, a check,
 * --bound (memory-bandwidth bound), --compare mpi|gloo (Open MPI or Gloo side by side). Needs include/ringo.h,
 * bench/bench*.h (and bench_gloo.cc with Gloo). Run: `make bench`; build/bin/ringo-bench -N 4 --compare gloo;
 * mpirun -np 4 build/bin/ringo-bench --compare mpi. */
#include <getopt.h>

#include "bench_args.h"
#include "bench.h"
#include "bench_bound.h"
#include "bench_compare.h"
#include "bench_mpi.h"
#include "bench_launch.h"
#include "bench_print.h"

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
          "  -C, --collective C    all_reduce|reduce_scatter|all_gather|broadcast|reduce|sendrecv\n"
          "                        (sendrecv: each rank sends to the next and receives from the\n"
          "                        previous, as nccl-tests' sendrecv_perf; in-place is not checked)\n"
          "  -N, --nranks N        local ranks to fork (default 4; under mpirun, -np decides)\n"
          "      --bind-to B       core (default): bind forked rank r to one CPU, the (r mod C)-th\n"
          "                        of the C this process may run on, as Intel MPI pins (and Open\n"
          "                        MPI's mpirun while ranks <= cores);\n"
          "                        none (the default with --compare gloo, whose transport thread\n"
          "                        needs a CPU of its own): leave placement to the kernel. Under\n"
          "                        mpirun, mpirun's own --bind-to decides\n"
          "  -J, --output_file F   also write the results as JSON to F\n"
          "      --bound           measure memory bandwidth and add a %%bound column\n"
          "      --barrier         an untimed barrier before every timed call, whose waiters\n"
          "                        yield the CPU, so each call starts with the ranks together\n"
          "                        (default: back to back, as nccl-tests; the peers' harnesses of\n"
          "                        make bench-peers use the barrier, and so does ringo there)\n"
          "      --compare L       also time library L's collective on the same buffers,\n"
          "                        interleaved with ringo's (A B A B), and print both and their\n"
          "                        ratio. L: mpi (needs mpirun: mpirun -np 4 ringo-bench --compare\n"
          "                        mpi) or gloo (Gloo over TCP, as PyTorch's gloo backend; forked\n"
          "                        ranks or mpirun; GLOO_SOCKET_IFNAME picks the interface), or\n"
          "                        ringo:VAR=VALUE[,VAR=VALUE...]: ringo itself on a second\n"
          "                        communicator made with those RINGO_* settings (A B in one\n"
          "                        launch: ringo:RINGO_ALGO=ring, ringo:RINGO_TWOPHASE_BYTES=0)\n"
          "      --algo A          auto (default: ranks of one host run collectives of at most\n"
          "                        RINGO_ONESHOT_BYTES per rank one-shot, all-reduces of at most\n"
          "                        RINGO_TWOPHASE_BYTES in two phases, the rest on the ring),\n"
          "                        ring (always), or naive: every rank sends its buffer to rank 0,\n"
          "                        which reduces and sends the result back (sets RINGO_ALGO)\n"
          "      --mpi             one rank per process via MPI even if no mpirun variables are\n"
          "                        seen (they are detected: OMPI_COMM_WORLD_SIZE, PMI_RANK, ...)\n"
          "      --timeout S       kill the ranks if the run takes longer (default 600, at most 1e6)\n"
          "  -h, --help            this text\n",
          1e3 * ITER_BUDGET_S / MIN_AUTO_ITERS / 4, MIN_AUTO_ITERS);
}

static void bad_arg(const char* what, const char* arg) {
  fprintf(stderr, "ringo-bench: bad %s '%s' (try -h)\n", what, arg);
  exit(EXIT_USAGE);
}

static size_t parse_bytes(const char* s) {
  size_t v = 0;
  if (!bench_parse_bytes(s, 1e18, &v)) bad_arg("size (whole bytes up to 1e18, K/M/G suffixes: 4096, 64K, 1G)", s);
  return v;
}

/* The largest --timeout: about 11 days, and within alarm()'s unsigned seconds under mpirun. */
#define MAX_TIMEOUT_S 1e6

/* --timeout: a plain number of seconds in (0, MAX_TIMEOUT_S], all of it ("5x", "nan" and 0 refused: a NaN
 * deadline would leave the launcher spinning with no timeout). */
static double parse_timeout(const char* s) {
  double v = 0;
  if (!bench_parse_positive(s, MAX_TIMEOUT_S, &v))
    bad_arg("--timeout (seconds above 0, at most 1e6: 600, 0.5)", s);
  return v;
}

static int parse_int(const char* s, int lo, int hi, const char* what) {
  int v = 0;
  if (!bench_parse_int(s, lo, hi, &v)) bad_arg(what, s);
  return v;
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
    case 'N': o->nranks = parse_int(arg, 1, MAX_RANKS, "nranks"); o->nranks_explicit = 1; break;
    case 'C': if (parse_names(arg, coll_names, NULL, NUM_COLLS, colls, "collective") > 1) bad_arg("collective", arg);
              o->coll = colls[0]; break;
    case 'B': o->bound = 1; break;
    case 'Q': o->barrier = 1; break;
    case 'G': if (strcmp(arg, "core") && strcmp(arg, "none")) bad_arg("--bind-to (core or none)", arg);
              o->bind = strcmp(arg, "core") ? BENCH_BIND_NONE : BENCH_BIND_CORE;
              o->bind_explicit = 1;
              break;
    case 'T': o->timeout_s = parse_timeout(arg); break;
    case 'M': if (!strncmp(arg, "ringo:", 6)) {
                if (!alt_settings_valid(arg + 6)) bad_arg("--compare ringo: settings (RINGO_VAR=VALUE,...)", arg);
                o->compare = CMP_ALT;
                o->alt_settings = arg + 6;
                break;
              }
              if (strcmp(arg, "mpi") && strcmp(arg, "gloo")) bad_arg("--compare (mpi, gloo or ringo:VAR=VALUE,...)", arg);
              o->compare = strcmp(arg, "mpi") ? CMP_GLOO : CMP_MPI; break;
    case 'P': o->force_mpi = 1; break;
    case 'A': if (strcmp(arg, "auto") && strcmp(arg, "ring") && strcmp(arg, "naive"))
                bad_arg("--algo (auto, ring or naive)", arg);
              setenv("RINGO_ALGO", arg, 1); /* read by the library when the communicator is made */
              break;
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
      {"bound", 0, 0, 'B'}, {"timeout", 1, 0, 'T'}, {"compare", 1, 0, 'M'}, {"mpi", 0, 0, 'P'},
      {"algo", 1, 0, 'A'}, {"barrier", 0, 0, 'Q'}, {"bind-to", 1, 0, 'G'},
      {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  *o = (struct opts){.minbytes = 32u << 20, .maxbytes = 32u << 20, .stepfactor = 2, .iters = 20,
                     .warmup = 5, .check = 1, .nranks = 4, .timeout_s = 600, .bind = BENCH_BIND_CORE};
  apply_opt(o, 'd', "float32");
  apply_opt(o, 'o', "sum");
  join_command(o, argc, argv);
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:o:d:r:J:N:C:h", longs, NULL)) != -1) apply_opt(o, c, optarg);
  if (optind < argc) bad_arg("argument", argv[optind]);
  if (!o->stepfactor && !o->stepbytes) bad_arg("step bytes", "0");
  if (o->minbytes > o->maxbytes) {
    fprintf(stderr, "ringo-bench: bad sizes: -b %zu bytes is larger than -e %zu bytes (each is 32M unless given; "
            "try -h)\n", o->minbytes, o->maxbytes);
    exit(EXIT_USAGE);
  }
  /* Under mpirun the rank count is known only after launch, where launch_mpi() checks the root. */
  if (o->root >= o->nranks && !o->force_mpi && !under_mpirun()) bad_arg("root (must be below -N)", "-r");
  if (!coll_has_op(o->coll)) o->nops = 1; /* one "none" op */
  /* Gloo's TCP pairs run an I/O thread beside the rank's: bound to one CPU with it, Gloo took 10-20x
   * as long at 4-64 KiB (N = 2), a comparison of the binding rather than of the libraries. */
  if (!o->bind_explicit && o->compare == CMP_GLOO) o->bind = BENCH_BIND_NONE;
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

/* Counts the elements of this rank's result that differ (bit for bit) from the exact answer. mpi = 1
 * follows MPI's conventions where they differ from ringo's (see mpi_coll_run()); Gloo has ringo's. */
static uint64_t check_result(const struct bench* b, const struct row* w, int inplace, int mpi) {
  size_t es = type_size[w->type], per = w->count / (size_t)b->nranks;
  unsigned char want[8];
  uint64_t wrong = 0;
  const unsigned char* got = b->rbuf;
  size_t n = w->count, base = 0;
  const int coll = b->o->coll;
  if (coll == COLL_REDUCE && b->rank != w->root) return 0; /* recvbuff only written on root */
  if (coll == COLL_BROADCAST && mpi && !inplace && b->rank == w->root) return 0;
  if (coll == COLL_REDUCE_SCATTER) {
    n = per;
    base = (size_t)b->rank * per;
    got = b->rbuf + (inplace && !mpi ? base * es : 0);
  }
  for (size_t i = 0; i < n; i++) {
    if (coll == COLL_ALL_GATHER)
      store_input(w->type, want, input_value(OP_NONE, (int)(i / per), i % per, b->nranks));
    else if (coll == COLL_SENDRECV) /* the previous rank's input */
      store_input(w->type, want, input_value(OP_NONE, (b->rank + b->nranks - 1) % b->nranks, i, b->nranks));
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

/* nccl-tests' sendrecv: to the next rank, from the previous one, in one group. */
static ringoResult_t send_recv(const struct bench* b, ringoComm_t comm, const void* s, void* r, size_t count,
                               ringoDataType_t t) {
  const int next = (b->rank + 1) % b->nranks, prev = (b->rank + b->nranks - 1) % b->nranks;
  ringoResult_t res = ringoGroupStart();
  if (res != ringoSuccess) return res;
  res = ringoSend(s, count, t, next, comm, NULL);
  const ringoResult_t got = res == ringoSuccess ? ringoRecv(r, count, t, prev, comm, NULL) : res;
  const ringoResult_t end = ringoGroupEnd(); /* closes the group even after a failed call */
  return got != ringoSuccess ? got : end;
}

/* The row's collective once on comm: the bench's own communicator, or --compare ringo:...'s. */
static ringoResult_t coll_run(const struct bench* b, ringoComm_t comm, const struct row* w, int inplace) {
  size_t es = type_size[w->type], per = w->count / (size_t)b->nranks;
  unsigned char *s = inplace ? b->rbuf : b->sbuf, *r = b->rbuf, *mine = r + (size_t)b->rank * per * es;
  ringoDataType_t t = (ringoDataType_t)w->type;
  ringoRedOp_t op = (ringoRedOp_t)(w->op < 0 ? 0 : w->op);
  switch (b->o->coll) {
    case COLL_SENDRECV: return send_recv(b, comm, s, r, w->count, t);
    case COLL_ALL_REDUCE: return ringoAllReduce(s, r, w->count, t, op, comm, NULL);
    case COLL_REDUCE_SCATTER: return ringoReduceScatter(s, inplace ? mine : r, per, t, op, comm, NULL);
    case COLL_ALL_GATHER: return ringoAllGather(inplace ? mine : s, r, per, t, comm, NULL);
    case COLL_BROADCAST: return ringoBroadcast(s, r, w->count, t, w->root, comm, NULL);
    default: return ringoReduce(s, r, w->count, t, op, w->root, comm, NULL);
  }
}

/* Runs the row's collective once; a library error ends this rank, naming what failed. */
static void coll_checked(const struct bench* b, ringoComm_t comm, const struct row* w, int inplace) {
  ringoResult_t res = coll_run(b, comm, w, inplace);
  if (res == ringoSuccess) return;
  char what[160], root[32] = "";
  if (w->root >= 0) snprintf(root, sizeof root, ", root %d", w->root);
  snprintf(what, sizeof what, "%s of %zu bytes (%s, %s%s, %s)", coll_names[b->o->coll], w->bytes,
           type_names[w->type], w->op < 0 ? "none" : op_names[w->op], root, inplace ? "in-place" : "out-of-place");
  ringo_die(b, what, res);
}

/* --barrier: the bench's own untimed barrier, over MPI under mpirun (none of it through ringo, whose
 * counters see only the calls timed), else over the forked ranks' shared page. */
static void quiet_barrier(const struct bench* b) {
#ifdef RINGO_HAVE_MPI
  if (b->L->mpi) {
    mpi_quiet_barrier();
    return;
  }
#endif
  bench_barrier_wait(b->L->barrier, b->nranks);
}

/* One call of ringo's collective (other = 0) or of the --compare library's (other = 1); returns its
 * seconds. With MPI or Gloo beside ringo, that library's untimed barrier comes first
 * (bench_compare.h); where there is none, with --barrier, the bench's own. */
static double timed_call(const struct bench* b, const struct row* w, int inplace, int other) {
  const int met = w->cmp && b->o->compare != CMP_ALT && cmp_barrier(b);
  if (!met && b->o->barrier) quiet_barrier(b);
  double t0 = now_s();
  if (!other) coll_checked(b, b->comm, w, inplace);
  else if (b->o->compare == CMP_ALT) coll_checked(b, b->alt, w, inplace);
  else cmp_run_checked(b, w, inplace);
  return now_s() - t0;
}

/* Timed iterations for this row. Every rank must choose the same count, so the slowest rank's
 * last warm-up time decides. -n given explicitly is always honoured. */
static int choose_iters(const struct bench* b, double warm_s) {
  const struct opts* o = b->o;
  if (o->iters_explicit || o->warmup == 0) return o->iters;
  coord_allreduce(b, &warm_s, 1, ringoFloat64, ringoMax);
  if (warm_s * o->iters <= ITER_BUDGET_S) return o->iters;
  int k = (int)(ITER_BUDGET_S / warm_s);
  return k < MIN_AUTO_ITERS ? (o->iters < MIN_AUTO_ITERS ? o->iters : MIN_AUTO_ITERS) : k;
}

/* The median over iterations of the slowest rank's time of that iteration (t is overwritten). */
static double slowest_median(const struct bench* b, double* t, int n) {
  coord_allreduce(b, t, (size_t)n, ringoFloat64, ringoMax);
  qsort(t, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* The check run: fresh inputs, one call, every element compared; the --compare library's too when it runs. */
static void check_placement(const struct bench* b, struct row* w, int inplace) {
  prepare(b, w, inplace);
  if (!placement_checked(b->o, inplace)) return;
  timed_call(b, w, inplace, 0);
  w->wrong[inplace] = check_result(b, w, inplace, 0);
  if (!w->cmp) return;
  prepare(b, w, inplace);
  timed_call(b, w, inplace, 1);
  w->cmp_wrong[inplace] = check_result(b, w, inplace, b->o->compare == CMP_MPI);
}

/* One placement: check run, warm-up, timed loop; returns this rank's bytesSent per iteration.
 * With a library beside ringo the two alternate call by call (A B A B), so any drift of this machine's
 * speed during the row lands on both alike; ringo's counters see only ringo's calls. */
static uint64_t run_placement(const struct bench* b, struct row* w, int inplace) {
  double warm_s = 0;
  check_placement(b, w, inplace);
  for (int k = 0; k < b->o->warmup; k++) {
    warm_s = timed_call(b, w, inplace, 0);
    if (w->cmp) warm_s += timed_call(b, w, inplace, 1);
  }
  if (!inplace) w->iters = choose_iters(b, warm_s);
  ringoCommStats s0, s1;
  RB_CHECK(b, ringoCommGetStats(b->comm, &s0));
  for (int k = 0; k < w->iters; k++) {
    b->times[k] = timed_call(b, w, inplace, 0);
    if (w->cmp) b->cmp_times[k] = timed_call(b, w, inplace, 1);
  }
  RB_CHECK(b, ringoCommGetStats(b->comm, &s1));
  double med = slowest_median(b, b->times, w->iters);
  w->time_us[inplace] = 1e6 * med;
  w->algbw[inplace] = med > 0 ? (double)w->bytes / med / 1e9 : 0;
  if (w->cmp) w->cmp_time_us[inplace] = 1e6 * slowest_median(b, b->cmp_times, w->iters);
  return (s1.bytesSent - s0.bytesSent) / (uint64_t)w->iters;
}

/* busbw = algbw x the collective's bus factor, for ringo and the --compare library alike. */
static void row_bandwidths(struct row* w, double bus) {
  for (int p = 0; p < 2; p++) {
    w->busbw[p] = w->algbw[p] * bus;
    double t = 1e-6 * w->cmp_time_us[p];
    w->cmp_busbw[p] = w->cmp && t > 0 ? (double)w->bytes / t / 1e9 * bus : 0;
  }
  w->ratio = w->cmp && w->cmp_busbw[0] > 0 ? w->busbw[0] / w->cmp_busbw[0] : -1;
}

static void run_row(struct bench* b, struct row* w) {
  double bus, law, mem;
  w->cmp = row_uses_cmp(b, w);
  uint64_t sent = run_placement(b, w, 0);
  run_placement(b, w, 1);
  coord_allreduce(b, &sent, 1, ringoUint64, ringoMax);
  coord_allreduce(b, w->wrong, 2, ringoUint64, ringoSum);
  if (w->cmp) coord_allreduce(b, w->cmp_wrong, 2, ringoUint64, ringoSum);
  coll_factors(b->o->coll, b->nranks, &bus, &law, &mem);
  w->sent = sent;
  row_bandwidths(w, bus);
  w->law = law * (double)w->bytes > 0 ? (double)sent / (law * (double)w->bytes) : -1;
  /* All n ranks of this host share its memory bandwidth, so the fastest possible time is the whole
   * host's traffic, n·mem·D, over the measured bandwidth. We use the c = a + b figure: the reduce
   * steps (2 reads, 1 write) carry most of the traffic and are exactly that kernel's pattern. */
  double t_bound = b->o->bw_add > 0 ? b->nranks * mem * (double)w->bytes / (b->o->bw_add * 1e9) : -1;
  w->bound = t_bound >= 0 && w->time_us[0] > 0 ? t_bound / (1e-6 * w->time_us[0]) : -1;
}

/* ---------------------------------------------------------------- one rank */

static void keep_row(struct bench* b, const struct row* w) {
  b->busbw_sum += w->busbw[0] + w->busbw[1];
  b->wrong_total += w->wrong[0] + w->wrong[1];
  b->cmp_wrong_total += w->cmp_wrong[0] + w->cmp_wrong[1];
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
  const int has_op = coll_has_op(o->coll);
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

/* The closing lines (rank 0) and the run's exit code, which every rank agrees on. */
static int finish(struct bench* b) {
  int rc = b->wrong_total || b->cmp_wrong_total ? EXIT_WRONG : 0;
  double avg = b->nrows ? b->busbw_sum / (2.0 * (double)b->nrows) : 0.0;
  if (b->rank == 0) {
    printf("# Out of bounds values : %llu %s\n", (unsigned long long)b->wrong_total, b->wrong_total ? "FAILED" : "OK");
    if (b->o->compare)
      printf("# %s : %llu %s\n", b->o->compare == CMP_MPI ? "MPI out of bounds   " : b->o->compare == CMP_ALT ? "alt out of bounds   " : "Gloo out of bounds  ",
             (unsigned long long)b->cmp_wrong_total, b->cmp_wrong_total ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", avg);
    fflush(stdout);
  }
  if (b->json && json_close(b, b->json, avg) != 0 && !rc) rc = EXIT_USAGE;
  return rc;
}

static int run_rank(const struct opts* o, const struct launch* L) {
  struct bench b = {.o = o, .L = L, .rank = L->rank, .nranks = L->nranks};
  char host0[HOST_BYTES] = "";
  comm_init(&b);
  cmp_open(&b);
  b.sbuf = xalloc(o->maxbytes);
  b.rbuf = xalloc(o->maxbytes);
  b.times = xalloc((size_t)o->iters * sizeof(double));
  b.cmp_times = xalloc((size_t)o->iters * sizeof(double));
  memset(b.sbuf, 0, o->maxbytes); /* fault the pages in before anything is timed */
  memset(b.rbuf, 0, o->maxbytes);
  print_run_header(&b, host0);
  if (b.rank == 0) print_table_header(&b);
  if (b.rank == 0 && o->json) b.json = json_open(&b, host0);
  run_all_rows(&b);
  cmp_close(&b);
  RB_CHECK(&b, ringoCommDestroy(b.comm));
  int rc = finish(&b);
  free(b.sbuf);
  free(b.rbuf);
  free(b.times);
  free(b.cmp_times);
  return rc;
}

int main(int argc, char** argv) {
  struct opts o;
  struct launch L;
  int code = 0;
  parse_args(&o, argc, argv);
#ifndef RINGO_HAVE_GLOO
  if (o.compare == CMP_GLOO) {
    fprintf(stderr, "ringo-bench: --compare gloo: built without Gloo (no gloo/allreduce.h at build time); "
                    "install libgloo-dev (make deps does) and rebuild\n");
    return EXIT_USAGE;
  }
#endif
  if (o.force_mpi || under_mpirun()) {
#ifdef RINGO_HAVE_MPI
    launch_mpi(&o, &L, &argc, &argv);
    if (o.bind_explicit && L.rank == 0)
      fprintf(stderr, "ringo-bench: --bind-to binds forked ranks; under mpirun, mpirun's own --bind-to places them\n");
    return launch_mpi_end(run_rank(&o, &L));
#else
    fprintf(stderr, "ringo-bench: started under mpirun (or with --mpi), but built without MPI (no mpicc at "
                    "build time); install Open MPI and rebuild, or run standalone: ringo-bench -N 4\n");
    return EXIT_USAGE;
#endif
  }
  if (o.compare == CMP_MPI) {
    fprintf(stderr, "ringo-bench: --compare mpi needs one rank per process under mpirun (forked ranks "
                    "have no MPI); run: mpirun -np 4 %s --compare mpi ...\n", argv[0]);
    return EXIT_USAGE;
  }
  if (o.bound) measure_bound(&o);
  if (launch_fork(&o, &L, &code)) return run_rank(&o, &L);
  return code;
}
