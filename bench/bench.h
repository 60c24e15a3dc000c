/* bench.h — what every part of ringo-bench shares: the option, launch, row and rank structs, the
 * name tables and the fatal-error helpers. Header-only (static), included by bench/ringo-bench.c
 * only; include/ringo.h (and ringo_mpi.h with RINGO_HAVE_MPI). Run: see bench/ringo-bench.c. */
#ifndef RINGO_BENCH_H_
#define RINGO_BENCH_H_

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ringo.h"
#ifdef RINGO_HAVE_MPI
#include <mpi.h>

#include "ringo_mpi.h"
#endif

enum { EXIT_WRONG = 1, EXIT_USAGE = 2, EXIT_RINGO = 3, EXIT_LAUNCH = 4 };
/* sendrecv is nccl-tests' sendrecv_perf: every rank sends count elements to the next rank and receives
 * count from the previous one, in one group (ringoSend/ringoRecv). */
enum { COLL_ALL_REDUCE, COLL_REDUCE_SCATTER, COLL_ALL_GATHER, COLL_BROADCAST, COLL_REDUCE, COLL_SENDRECV, NUM_COLLS };
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
/* --compare: the library timed beside ringo, its key (JSON, column names) and its name. CMP_ALT is
 * ringo itself on a second communicator made with other RINGO_* settings (--compare ringo:...). */
enum { CMP_NONE, CMP_MPI, CMP_GLOO, CMP_ALT };
static const char* const cmp_keys[] = {"", "mpi", "gloo", "alt"};
static const char* const cmp_names[] = {"", "Open MPI", "Gloo", "ringo (alt)"};
static const char* const coll_names[NUM_COLLS] = {"all_reduce", "reduce_scatter", "all_gather",
                                                  "broadcast", "reduce", "sendrecv"};

struct opts {
  size_t minbytes, maxbytes, stepbytes;
  int stepfactor;               /* > 1: multiply; 0: add stepbytes */
  int iters, warmup, check, root, nranks, coll, bound, iters_explicit, nranks_explicit;
  int compare;                  /* --compare: CMP_MPI or CMP_GLOO times that library's collective beside ringo's */
  const char* alt_settings;     /* --compare ringo:VAR=VALUE,...: the second communicator's settings */
  int force_mpi;                /* --mpi: one rank per process even without mpirun's variables */
  int barrier;                  /* --barrier: an untimed barrier before every call (bench_barrier.h) */
  int bind, bind_explicit;      /* --bind-to: BENCH_BIND_CORE (default) or _NONE, forked ranks only (bench_bind.h) */
  int ntypes, types[RINGO_NUM_TYPES], nops, ops[RINGO_NUM_OPS];
  double timeout_s;
  const char* json;
  char command[4096];
  double bw_copy, bw_add;       /* GB/s measured by --bound, 0 when not measured */
};

/* all_gather, broadcast and sendrecv reduce nothing: their rows have one "none" op. */
static int coll_has_op(int coll) {
  return coll != COLL_ALL_GATHER && coll != COLL_BROADCAST && coll != COLL_SENDRECV;
}

/* Whether placement p (0 out-of-place, 1 in-place) of a row is checked. In-place sendrecv sends from
 * and receives into one buffer in one group, which overwrites what is still to be sent: timed, never
 * checked, as in nccl-tests (N/A). */
static int placement_checked(const struct opts* o, int p) {
  return o->check && !(p == 1 && o->coll == COLL_SENDRECV);
}

/* How the ranks of this run came to be: "fork" (the parent makes the unique id, forks nranks
 * children and waits) or "mpi" (one rank per process of MPI_COMM_WORLD, the communicator made by
 * ringoCommInitMPI). Nothing after launch depends on which launcher ran, except that only "mpi"
 * has an MPI to compare with. */
struct launch {
  const char* kind;
  int nranks, rank, mpi;
  ringoUniqueId id;             /* fork only */
  struct bench_barrier* barrier; /* fork with --barrier: the ranks' shared barrier */
  cpu_set_t allowed;            /* fork with --bind-to core: the CPUs the parent may run on, dealt to the ranks */
};

/* One table row: its parameters and, once run, its results ([0] out-of-place, [1] in-place). */
struct row {
  size_t bytes, count;
  int type, op, root, iters;
  double time_us[2], algbw[2], busbw[2];
  uint64_t wrong[2];
  uint64_t sent;                /* bytesSent per out-of-place iteration, max over ranks */
  double law, bound;            /* ratios; < 0 when undefined */
  int cmp;                      /* 1 when the --compare library's collective ran beside ringo's */
  double cmp_time_us[2], cmp_busbw[2], ratio; /* ratio: ringo busbw / its busbw, out-of-place */
  uint64_t cmp_wrong[2];
};

/* One rank's state for the whole run. */
struct bench {
  const struct opts* o;
  const struct launch* L;
  ringoComm_t comm;
  int rank, nranks;
  unsigned char *sbuf, *rbuf;
  double *times, *cmp_times;
  FILE* json;                   /* rank 0 with -J: rows are written as they complete */
  size_t nrows;
  double busbw_sum;
  uint64_t wrong_total, cmp_wrong_total;
  struct gloo_side* gloo;       /* --compare gloo: this rank's Gloo context (bench_compare.h) */
  ringoComm_t alt;              /* --compare ringo:...: the second communicator (bench_compare.h) */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef RINGO_HAVE_MPI
/* Set once MPI is initialised: from then on a fatal error must take every process of the job down
 * (MPI_Abort), or the other ranks would wait in a collective for a peer that is gone. */
static int bench_mpi_live;
#endif

static void die(int code) {
  fflush(NULL);
#ifdef RINGO_HAVE_MPI
  if (bench_mpi_live) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  exit(code);
}

/* The library reports, the program decides: any ringo error ends this rank with its message. */
static void ringo_die(const struct bench* b, const char* what, ringoResult_t res) {
  const char* msg = ringoGetLastError(b ? b->comm : NULL);
  fprintf(stderr, "ringo-bench: rank %d: %s failed: %s: %s\n", b ? b->rank : -1, what,
          ringoGetErrorString(res), *msg ? msg : "(no message)");
  die(EXIT_RINGO);
}
#define RB_CHECK(b, call)                                   \
  do {                                                      \
    ringoResult_t rb_res_ = (call);                         \
    if (rb_res_ != ringoSuccess) ringo_die((b), #call, rb_res_); \
  } while (0)

#ifdef RINGO_HAVE_MPI
/* MPI's own errors end the job too, naming the call (MPI_ERRORS_ARE_FATAL would, without a name). */
static void mpi_die(const char* what, int err) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(err, msg, &len);
  fprintf(stderr, "ringo-bench: %s failed: %s\n", what, msg);
  die(EXIT_LAUNCH);
}
#define MB_CHECK(call)                                \
  do {                                                \
    int mb_err_ = (call);                             \
    if (mb_err_ != MPI_SUCCESS) mpi_die(#call, mb_err_); \
  } while (0)
#endif

static void* xalloc(size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) {
    fprintf(stderr, "ringo-bench: cannot allocate %zu bytes\n", bytes);
    die(EXIT_USAGE);
  }
  return p;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

#endif /* RINGO_BENCH_H_ */
