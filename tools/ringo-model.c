/* ringo-model.c — the seed's cost model of ring all-reduce as a calculator: D, 2(N-1)/N, bytes per rank,
 * time, the latency term and the bucket size where bandwidth dominates. Needs src/sched/model.h (a
 * teaching tool: -Isrc) and tool_args.h. Run: ringo-model --params 1e9 --dtype float32 --nranks 8 --bw 200GB/s */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/model.h"
#include "tool_args.h"

/* What the model prints meaningfully (--help says so): beyond these its results stop being numbers
 * a student can read (inf PB, 0 B/s, a time of 1e100 s). */
#define MAX_BYTES 1e18 /* D per rank: 1 EB */
#define MAX_BW 1e15    /* 1 PB/s */
#define MAX_LATENCY 1.0
#define MIN_LATENCY 1e-9
#define MAX_RANKS (1 << 20)

static void usage(FILE* f) {
  fprintf(f,
          "usage: ringo-model [options]   the seed's cost model of one ring all-reduce\n"
          "  -p, --params N     elements of the vector (gradient), e.g. 1e9, 7B, 350M\n"
          "  -d, --dtype T      element type: float32 (default), float16, bfloat16, float64, fp32, ...\n"
          "  -b, --bytes D      or give D in bytes directly: 4GB, 25MB, 64KiB\n"
          "  -N, --nranks N     ranks in the ring (default 8)\n"
          "  -B, --bw RATE      usable bandwidth per rank: 200GB/s, 25GiB/s, 100Gbit/s\n"
          "  -l, --latency T    latency per ring step: 5us, 800ns, 1.5ms\n"
          "  -s, --sweep        also a table over N = 2, 4, 8, ... 1024: the factor tends to 2\n"
          "  -h, --help         this text\n"
          "limits (beyond them the numbers stop meaning anything): D from 1 B to %g B (1 EB) per rank,\n"
          "  --bw from 1 B/s to %g B/s (1 PB/s), --latency 0 or from %g s (1 ns) to %g s, --nranks up to %d\n"
          "example (the seed's worked example): ringo-model --params 1e9 --dtype float32 --nranks 8 --bw 200GB/s\n",
          MAX_BYTES, MAX_BW, MIN_LATENCY, MAX_LATENCY, MAX_RANKS);
}

/* One parse error ends the program with the library's message. */
static void check(ringoResult_t res) {
  if (res == ringoSuccess) return;
  fprintf(stderr, "ringo-model: %s\n", ringoGetLastError(NULL));
  exit(2);
}

/* --nranks as a whole number; 0 (refused) for anything else, "2.5" included, which atoi would cut to 2. */
static int whole_ranks(const char* text) {
  double v = 0;
  return tool_parse_number(text, 1, 1, MAX_RANKS, &v) ? (int)v : 0;
}

/* D, the bandwidth and the latency within those bounds; else a message naming the value, and 0. */
static int in_range(const struct ringo_model_input* in) {
  if (!(in->bytes >= 1 && in->bytes <= MAX_BYTES)) {
    if (in->params > 0)
      fprintf(stderr, "ringo-model: D = --params x --dtype = %g x %zu bytes = %g bytes", in->params, in->elem_bytes,
              in->bytes);
    else fprintf(stderr, "ringo-model: D = --bytes = %g bytes", in->bytes);
    fprintf(stderr, " is outside what the model prints: 1 B to %g B (1 EB) per rank (see -h)\n", MAX_BYTES);
    return 0;
  }
  if (in->bw > 0 && !(in->bw >= 1 && in->bw <= MAX_BW)) {
    fprintf(stderr, "ringo-model: --bw %g B/s is outside what the model prints: 1 B/s to %g B/s (1 PB/s)\n", in->bw,
            MAX_BW);
    return 0;
  }
  if (in->latency > 0 && !(in->latency >= MIN_LATENCY && in->latency <= MAX_LATENCY)) {
    fprintf(stderr, "ringo-model: --latency %g s is outside what the model prints: 0, or %g s to %g s per step\n",
            in->latency, MIN_LATENCY, MAX_LATENCY);
    return 0;
  }
  return 1;
}

static void print_sweep(const struct ringo_model_input* in) {
  char d[32];
  ringo_model_format_bytes(in->bytes, d, sizeof d);
  printf("\nhow the ring scales, D = %s per rank:\n", d);
  printf("  %6s  %9s  %12s  %14s  %12s\n", "N", "2(N-1)/N", "sent/rank", "naive root", "time");
  for (int n = 2; n <= 1024; n *= 2) {
    char sent[32], root[32], t[32];
    ringo_model_format_bytes(ringo_model_ring_bytes(in->bytes, n), sent, sizeof sent);
    ringo_model_format_bytes(ringo_model_root_bytes(in->bytes, n), root, sizeof root);
    if (in->bw > 0) ringo_model_format_seconds(ringo_model_time(in->bytes, n, in->bw, in->latency), t, sizeof t);
    else snprintf(t, sizeof t, "-");
    printf("  %6d  %9.4f  %12s  %14s  %12s\n", n, ringo_model_factor(n), sent, root, t);
  }
}

int main(int argc, char** argv) {
  static const struct option longs[] = {
      {"params", required_argument, 0, 'p'}, {"dtype", required_argument, 0, 'd'},
      {"bytes", required_argument, 0, 'b'},  {"nranks", required_argument, 0, 'N'},
      {"bw", required_argument, 0, 'B'},     {"latency", required_argument, 0, 'l'},
      {"sweep", no_argument, 0, 's'},        {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  struct ringo_model_input in = {.dtype = "float32", .elem_bytes = 4, .nranks = 8, .latency = -1};
  int sweep = 0, bytes_given = 0, opt;
  setenv("RINGO_DEBUG", "NONE", 0); /* this program prints the library's messages itself */
  while ((opt = getopt_long(argc, argv, "p:d:b:N:B:l:sh", longs, NULL)) != -1) {
    switch (opt) {
      case 'p': check(ringo_model_parse_count(optarg, &in.params)); break;
      case 'd': check(ringo_model_parse_dtype(optarg, &in.elem_bytes)); in.dtype = optarg; break;
      case 'b': check(ringo_model_parse_bytes(optarg, &in.bytes)); bytes_given = 1; break;
      case 'N': in.nranks = whole_ranks(optarg); break;
      case 'B':
        check(ringo_model_parse_rate(optarg, &in.bw));
        if (in.bw == 0) in.bw = -1; /* refused below: a rate of 0 is not "no rate given" */
        break;
      case 'l': check(ringo_model_parse_seconds(optarg, &in.latency)); break;
      case 's': sweep = 1; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind < argc || in.nranks < 1 || (in.params <= 0 && in.bytes <= 0) || in.bw < 0) {
    fprintf(stderr, "ringo-model: give --params (with --dtype) or --bytes, --nranks >= 1 (a whole number) and a "
            "--bw above 0\n");
    usage(stderr);
    return 2;
  }
  if (in.params > 0 && bytes_given) {
    fprintf(stderr, "ringo-model: give --params (with --dtype) or --bytes, not both: they are two ways to say D\n");
    return 2;
  }
  if (in.params > 0) in.bytes = in.params * (double)in.elem_bytes;
  if (!in_range(&in)) return 2;
  char text[4096];
  ringo_model_report(&in, text, sizeof text);
  fputs(text, stdout);
  if (sweep) print_sweep(&in);
  return 0;
}
