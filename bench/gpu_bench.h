/* gpu_bench.h — what ringo-gpu-bench.c needs besides the device work: the data types it runs, its
 * options and their parsing, and the fatal-error helpers that check every CUDA and ringo call.
 * Header-only (static); include/ringo.h and the CUDA runtime C API. Run: see bench/ringo-gpu-bench.c. */
#ifndef RINGO_GPU_BENCH_H_
#define RINGO_GPU_BENCH_H_

#include <cuda_runtime_api.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "ringo.h"

/* Exit codes: 2 is reserved for "no CUDA device", so that a script can tell a machine without a GPU
 * from a benchmark that failed; usage errors are failures like any other. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_NO_DEVICE = 2 };
#define MAX_RANKS 64
#define MAX_DEVICES 64

struct dtype {
  const char* name;
  ringoDataType_t type;
  size_t size;
};
static const struct dtype dtypes[] = {{"float32", ringoFloat32, 4}, {"bfloat16", ringoBfloat16, 2}};
#define NUM_DTYPES 2

struct opts {
  int nranks, ndevs_given, devs[MAX_RANKS];
  size_t minbytes, maxbytes;
  int factor, iters, warmup, check, ntypes, types[NUM_DTYPES];
  double timeout_s;
  const char* json;
  int procs; /* 1: every rank a forked process (ringoCommInitRank, CUDA IPC) instead of a thread */
};

/* ---------------------------------------------------------------- errors */

static void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("ringo-gpu-bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  /* _exit, not exit: after a kernel hung, library or runtime exit hooks could wait on it. */
  fflush(NULL);
  _exit(EXIT_FAIL);
}

#define CU(call)                                                                              \
  do {                                                                                        \
    cudaError_t cu_err_ = (call);                                                             \
    if (cu_err_ != cudaSuccess)                                                               \
      fail("line %d: %s failed: %s (%d): %s", __LINE__, #call, cudaGetErrorName(cu_err_),     \
           (int)cu_err_, cudaGetErrorString(cu_err_));                                         \
  } while (0)

#define RG(comm, call)                                                                        \
  do {                                                                                        \
    ringoResult_t rg_res_ = (call);                                                           \
    if (rg_res_ != ringoSuccess)                                                              \
      fail("line %d: %s failed: %s: %s", __LINE__, #call, ringoGetErrorString(rg_res_),       \
           ringoGetLastError(comm));                                                          \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- options */

static void usage(FILE* f) {
  fprintf(f, "usage: ringo-gpu-bench [options]   (all-reduce, sum, out-of-place, device buffers)\n"
             "  -N, --nranks N         ranks (default 4, or the length of -g)\n"
             "  -P, --processes        each rank a forked process (CUDA IPC between them) instead of\n"
             "                         a thread of this one (ringoCommInitAll)\n"
             "  -g, --devices LIST     CUDA device of each rank, e.g. 0,0,0,0 (default: all on 0)\n"
             "  -b, --minbytes N       smallest size, K/M/G suffixes (default 1M)\n"
             "  -e, --maxbytes N       largest size (default 1G)\n"
             "  -f, --stepfactor F     multiply the size by F each row (default 2)\n"
             "  -n, --iters N          timed iterations (default 20)\n"
             "  -w, --warmup_iters N   warm-up iterations (default 5)\n"
             "  -d, --datatype T       float32|bfloat16|all (default all)\n"
             "  -c, --check 0|1        check every element of every rank's result (default 1)\n"
             "  -J, --output_file F    also write the rows as a JSON array to F\n"
             "  -t, --timeout S        give up when the streams are not done S s after a row's\n"
             "                         work was issued (default 120)\n"
             "exit: 0 ok, 2 no CUDA device, 1 any error or a wrong element\n");
}

static void bad_arg(const char* what, const char* arg) {
  fprintf(stderr, *arg ? "ringo-gpu-bench: bad %s '%s' (try -h)\n" : "ringo-gpu-bench: bad %s%s (try -h)\n",
          what, arg);
  exit(EXIT_FAIL);
}

static size_t parse_bytes(const char* s) {
  size_t v = 0;
  if (!bench_parse_bytes(s, 64.0 * 1024 * 1024 * 1024, &v) || v < 1) bad_arg("size", s);
  return v;
}

static int parse_int(const char* s, int lo, int hi, const char* what) {
  int v = 0;
  if (!bench_parse_int(s, lo, hi, &v)) bad_arg(what, s);
  return v;
}

static void parse_devices(struct opts* o, const char* s) {
  char buf[1024];
  if (strlen(s) >= sizeof buf) bad_arg("device list", s);
  strcpy(buf, s);
  o->ndevs_given = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (o->ndevs_given == MAX_RANKS) bad_arg("device list (too many ranks)", s);
    o->devs[o->ndevs_given++] = parse_int(tok, 0, MAX_DEVICES - 1, "device");
  }
  if (!o->ndevs_given) bad_arg("device list", s);
}

static void parse_opts(struct opts* o, int argc, char** argv) {
  static const struct option longs[] = {
      {"nranks", 1, 0, 'N'}, {"devices", 1, 0, 'g'}, {"minbytes", 1, 0, 'b'}, {"maxbytes", 1, 0, 'e'},
      {"stepfactor", 1, 0, 'f'}, {"iters", 1, 0, 'n'}, {"warmup_iters", 1, 0, 'w'},
      {"datatype", 1, 0, 'd'}, {"check", 1, 0, 'c'}, {"output_file", 1, 0, 'J'}, {"timeout", 1, 0, 't'},
      {"processes", 0, 0, 'P'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  *o = (struct opts){.nranks = 0, .minbytes = 1 << 20, .maxbytes = 1 << 30, .factor = 2, .iters = 20,
                     .warmup = 5, .check = 1, .ntypes = 2, .types = {0, 1}, .timeout_s = 120};
  int c;
  while ((c = getopt_long(argc, argv, "N:g:b:e:f:n:w:d:c:J:t:Ph", longs, NULL)) != -1) {
    switch (c) {
      case 'N': o->nranks = parse_int(optarg, 1, MAX_RANKS, "rank count"); break;
      case 'g': parse_devices(o, optarg); break;
      case 'b': o->minbytes = parse_bytes(optarg); break;
      case 'e': o->maxbytes = parse_bytes(optarg); break;
      case 'f': o->factor = parse_int(optarg, 2, 1024, "step factor"); break;
      case 'n': o->iters = parse_int(optarg, 1, 1000000, "iteration count"); break;
      case 'w': o->warmup = parse_int(optarg, 0, 1000000, "warm-up count"); break;
      case 'c': o->check = parse_int(optarg, 0, 1, "check flag"); break;
      case 'J': o->json = optarg; break;
      case 't': o->timeout_s = parse_int(optarg, 1, 86400, "timeout"); break;
      case 'P': o->procs = 1; break;
      case 'd':
        if (!strcmp(optarg, "all")) o->ntypes = 2;
        else if (!strcmp(optarg, "float32") || !strcmp(optarg, "float")) o->ntypes = 1, o->types[0] = 0;
        else if (!strcmp(optarg, "bfloat16") || !strcmp(optarg, "bf16")) o->ntypes = 1, o->types[0] = 1;
        else bad_arg("datatype", optarg);
        break;
      case 'h': usage(stdout); exit(EXIT_OK);
      default: usage(stderr); exit(EXIT_FAIL);
    }
  }
  if (optind < argc) bad_arg("argument", argv[optind]);
  if (o->minbytes > o->maxbytes) bad_arg("size range: -b is above -e", "");
  if (o->ndevs_given && o->nranks && o->ndevs_given != o->nranks)
    bad_arg("device list: -g does not name -N devices", "");
  if (!o->nranks) o->nranks = o->ndevs_given ? o->ndevs_given : 4;
  if (!o->ndevs_given)
    for (int r = 0; r < o->nranks; r++) o->devs[r] = 0;
}

#endif /* RINGO_GPU_BENCH_H_ */
