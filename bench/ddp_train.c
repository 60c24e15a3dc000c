/* ddp_train.c — a real data-parallel trainer on ringo's DDP layer: the MLP of bench/mlp.h on N forked
 * ranks, each on its shard of every global batch; prints loss and time per step with the gradient
 * all-reduce overlapped with backward, not overlapped, and absent, and how much of it was hidden.
 * Depends on include/ringo.h, include/ringo_ddp.h, bench/mlp.h, bench/bench_args.h. Run: build/bin/ddp_train -h;
 * its arguments are tested by test/test_bench.cc. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../bench/bench_args.h"
#include "../bench/launch_id.h"
#include "../bench/mlp.h"
#include "ringo.h"
#include "ringo_ddp.h"

enum { MODE_OVERLAP, MODE_SYNC, MODE_NONE, NUM_MODES };
static const char* const mode_names[NUM_MODES] = {"overlap", "sync", "none"};

struct opts {
  int nranks, batch, steps, nlayers, quiet;
  int dims[MLP_MAX_LAYERS + 1];
  int modes[NUM_MODES], nmodes;
  size_t bucket_bytes, first_bucket_bytes;
  float lr;
  uint64_t seed;
};

/* One mode's totals for the closing summary (steps 1.., step 0 is warm-up). */
struct summary {
  double step_s, comm_s, exposed_s;
  int steps;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE* f) {
  fprintf(f,
          "usage: ddp_train [-N ranks] [-B global batch] [-s steps] [-l dims] [-m modes] [-b bytes] [-f bytes]\n"
          "                 [-r lr] [-S seed] [-q]\n"
          "  -N  ranks, forked on this host (default 2)\n"
          "  -B  global batch per step, split over the ranks as evenly as possible (default 64)\n"
          "  -s  steps per mode (default 20)\n"
          "  -l  layer widths, input first, classes last (default 64,1024,1024,1024,4)\n"
          "  -m  comma list of overlap (MarkReady per layer), sync (all-reduce after backward), none (no\n"
          "      all-reduce: replicas drift), or all (default); each mode trains its own replica and the\n"
          "      modes take turns step by step, so load on the machine hits them alike\n"
          "  -b  bucket bytes (default 2M); -f first bucket bytes (default 512K); K/M suffixes\n"
          "  -r  learning rate (default 0.5); -S data and init seed (default 1)\n"
          "  -q  no per-step lines, only the summary\n"
          "Lines: <mode> <step> <loss over the global batch> <ms for the step, slowest rank>.\n");
}

/* A learning rate: the whole argument, finite and > 0 (strtof would take "0.5x" and "nan"). */
static int parse_rate(const char* s, float* out) {
  double v;
  if (!bench_parse_positive(s, 1e6, &v)) return 0;
  *out = (float)v;
  return 1;
}

/* A seed: base-10 digits only, the whole argument (strtoull takes "-1" and "12abc"). */
static int parse_seed(const char* s, uint64_t* out) {
  char* end = NULL;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[strspn(s, " \t")] == '-') return 0;
  *out = v;
  return 1;
}

static int parse_modes(struct opts* o, char* s) {
  o->nmodes = 0;
  for (char* tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
    if (!strcmp(tok, "all")) {
      for (int k = 0; k < NUM_MODES; k++) o->modes[k] = k;
      o->nmodes = NUM_MODES;
      return 0;
    }
    int k = 0;
    while (k < NUM_MODES && strcmp(tok, mode_names[k])) k++;
    if (k == NUM_MODES || o->nmodes == NUM_MODES) return -1;
    o->modes[o->nmodes++] = k;
  }
  return o->nmodes ? 0 : -1;
}

static int parse_dims(struct opts* o, char* s) {
  int n = 0;
  for (char* tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
    if (n > MLP_MAX_LAYERS || !bench_parse_int(tok, 1, 1 << 16, &o->dims[n])) return -1;
    n++;
  }
  o->nlayers = n - 1;
  return n >= 2 ? 0 : -1;
}

static int parse(struct opts* o, int argc, char** argv) {
  char dims[] = "64,1024,1024,1024,4", modes[] = "all";
  /* Buckets smaller than the library's 25 MiB / 1 MiB: with those this 8.7 MB model would have two
   * buckets, the second complete only when backward ends, leaving little to overlap. */
  *o = (struct opts){.nranks = 2, .batch = 64, .steps = 20, .lr = 0.5f, .seed = 1,
                     .bucket_bytes = (size_t)2 << 20, .first_bucket_bytes = (size_t)512 << 10};
  if (parse_dims(o, dims) || parse_modes(o, modes)) return -1;
  int c;
  while ((c = getopt(argc, argv, "N:B:s:l:m:b:f:r:S:qh")) != -1) {
    int ok = 1;
    switch (c) {
      case 'N': ok = bench_parse_int(optarg, 1, 64, &o->nranks); break;
      case 'B': ok = bench_parse_int(optarg, 1, 1 << 20, &o->batch); break;
      case 's': ok = bench_parse_int(optarg, 1, 1 << 24, &o->steps); break;
      case 'l': ok = parse_dims(o, optarg) == 0; break;
      case 'm': ok = parse_modes(o, optarg) == 0; break;
      case 'b': ok = bench_parse_bytes(optarg, 1UL << 40, &o->bucket_bytes) && o->bucket_bytes; break;
      case 'f': ok = bench_parse_bytes(optarg, 1UL << 40, &o->first_bucket_bytes) && o->first_bucket_bytes; break;
      case 'r': ok = parse_rate(optarg, &o->lr); break;
      case 'S': ok = parse_seed(optarg, &o->seed); break;
      case 'q': o->quiet = 1; break;
      case 'h': usage(stdout); exit(0);
      default: return -1;
    }
    if (!ok) {
      fprintf(stderr, "ddp_train: bad -%c '%s'\n", c, optarg);
      return -1;
    }
  }
  if (o->batch < o->nranks) fprintf(stderr, "ddp_train: -B %d is smaller than -N %d: a rank would have no sample\n",
                                    o->batch, o->nranks);
  return o->nranks >= 1 && o->nranks <= 64 && o->batch >= o->nranks && o->steps >= 1 ? 0 : -1;
}

/* ---- one rank ----
 * Each mode trains its own replica with its own DDP context, and the modes take turns step by step
 * (step s of every mode, then step s+1), so a load change on the machine hits them all alike. */

struct rank_ctx {
  const struct opts* o;
  ringoComm_t comm;
  int rank, local, offset; /* this rank's n_r samples start at offset within each global batch */
  int* labels;
};

struct trainer {
  int mode;
  mlp_t m;
  ringoDdp_t ddp;
  int index_w[MLP_MAX_LAYERS], index_b[MLP_MAX_LAYERS];
  ringoResult_t hook_err;
  ringoDdpStats st0;
  struct summary sum;
};

static int report(int rank, const char* what, ringoResult_t r, const char* msg) {
  fprintf(stderr, "ddp_train rank %d: %s: %s: %s\n", rank, what, ringoGetErrorString(r), msg);
  return 1;
}
/* DDP calls: the message is the context's (or, before it exists, this thread's). */
#define DDP_CHECK(t, call) \
  do { ringoResult_t r_ = (call); if (r_ != ringoSuccess) return report(ctx->rank, #call, r_, ringoDdpGetLastError((t)->ddp)); } while (0)
#define COMM_CHECK(call) \
  do { ringoResult_t r_ = (call); if (r_ != ringoSuccess) return report(ctx->rank, #call, r_, ringoGetLastError(ctx->comm)); } while (0)

/* The backward hook: layer l's gradients are final, so their buckets may start all-reducing. */
static void on_layer_ready(void* arg, int l) {
  struct trainer* t = (struct trainer*)arg;
  ringoResult_t r = ringoDdpMarkReady(t->ddp, t->index_w[l]);
  if (r == ringoSuccess) r = ringoDdpMarkReady(t->ddp, t->index_b[l]);
  if (r != ringoSuccess && t->hook_err == ringoSuccess) t->hook_err = r;
}

static int setup(const struct rank_ctx* ctx, struct trainer* t, int mode) {
  const struct opts* o = ctx->o;
  memset(t, 0, sizeof *t);
  t->mode = mode;
  if (mlp_create(&t->m, o->dims, o->nlayers, ctx->local > 0 ? ctx->local : 1, o->seed, 1)) return 1;
  DDP_CHECK(t, ringoDdpCreate(&t->ddp, ctx->comm, o->bucket_bytes, o->first_bucket_bytes));
  for (int l = 0; l < o->nlayers; l++) { /* forward order; the grads are one block, so buckets run in place */
    DDP_CHECK(t, ringoDdpRegister(t->ddp, t->m.gw[l], t->m.w[l], mlp_wcount(&t->m, l), ringoFloat32, &t->index_w[l]));
    DDP_CHECK(t, ringoDdpRegister(t->ddp, t->m.gb[l], t->m.b[l], mlp_bcount(&t->m, l), ringoFloat32, &t->index_b[l]));
  }
  DDP_CHECK(t, ringoDdpBroadcastParams(t->ddp));
  DDP_CHECK(t, ringoDdpSetLocalBatch(t->ddp, (size_t)ctx->local));
  DDP_CHECK(t, ringoDdpNoSync(t->ddp, mode == MODE_NONE));
  return 0;
}

/* One step of one mode: forward, backward (marking layers ready in overlap mode), Finish, SGD.
 * Returns the local mean loss and the step's seconds. */
static int train_step(const struct rank_ctx* ctx, struct trainer* t, int step, double* loss, double* secs) {
  const struct opts* o = ctx->o;
  mlp_load_batch(&t->m, o->seed, (uint64_t)step * (uint64_t)o->batch + (uint64_t)ctx->offset, ctx->local, ctx->labels);
  const double t0 = now_s();
  mlp_zero_grad(&t->m);
  mlp_forward(&t->m, ctx->local);
  *loss = ctx->local ? mlp_loss(&t->m, ctx->labels, ctx->local, 1.0f) : 0.0;
  mlp_backward(&t->m, ctx->local, t->mode == MODE_OVERLAP ? on_layer_ready : NULL, t);
  DDP_CHECK(t, t->hook_err);
  DDP_CHECK(t, ringoDdpFinish(t->ddp));
  mlp_sgd(&t->m, o->lr);
  *secs = now_s() - t0;
  return 0;
}

/* Outside the timed step: the union-batch loss sum_r n_r L_r / B and the slowest rank's time. */
static int log_step(const struct rank_ctx* ctx, struct trainer* t, int step, double loss, double secs) {
  double l = loss * ctx->local, s = secs;
  COMM_CHECK(ringoAllReduce(&l, &l, 1, ringoFloat64, ringoSum, ctx->comm, NULL));
  COMM_CHECK(ringoAllReduce(&s, &s, 1, ringoFloat64, ringoMax, ctx->comm, NULL));
  if (ctx->rank == 0 && !ctx->o->quiet) printf("%-8s %4d %.7f %9.3f\n", mode_names[t->mode], step, l / ctx->o->batch, 1e3 * s);
  if (step == 0) DDP_CHECK(t, ringoDdpGetStats(t->ddp, &t->st0)); /* step 0 warms caches and pages up */
  else t->sum.step_s += s, t->sum.steps++;
  return 0;
}

/* The DDP counters of steps 1.., averaged over ranks. */
static int close_trainer(const struct rank_ctx* ctx, struct trainer* t) {
  ringoDdpStats st;
  DDP_CHECK(t, ringoDdpGetStats(t->ddp, &st));
  double c[2] = {st.commSeconds - t->st0.commSeconds, st.exposedSeconds - t->st0.exposedSeconds};
  COMM_CHECK(ringoAllReduce(c, c, 2, ringoFloat64, ringoSum, ctx->comm, NULL));
  t->sum.comm_s = c[0] / ctx->o->nranks;
  t->sum.exposed_s = c[1] / ctx->o->nranks;
  DDP_CHECK(t, ringoDdpDestroy(t->ddp));
  mlp_free(&t->m);
  return 0;
}

static void print_header(const struct rank_ctx* ctx, const struct trainer* t) {
  const struct opts* o = ctx->o;
  int nbuckets = 0;
  ringoDdpGetBucketCount(t->ddp, &nbuckets);
  printf("# ddp_train: %d ranks, global batch %d (%d..%d per rank), MLP", o->nranks, o->batch, o->batch / o->nranks,
         (o->batch + o->nranks - 1) / o->nranks);
  for (int l = 0; l <= o->nlayers; l++) printf("%c%d", l ? '-' : ' ', o->dims[l]);
  printf(", %zu parameters = %.2f MB of float32 gradients in %d bucket(s) (%zu / first %zu bytes), lr %g\n",
         mlp_total_params(&t->m), 4e-6 * (double)mlp_total_params(&t->m), nbuckets,
         o->bucket_bytes ? o->bucket_bytes : RINGO_DDP_DEFAULT_BUCKET_BYTES,
         o->first_bucket_bytes ? o->first_bucket_bytes : RINGO_DDP_DEFAULT_FIRST_BUCKET_BYTES, (double)o->lr);
  printf("# mode   step loss        ms\n");
}

/* Two views of overlap. The DDP counters give the all-reduce's wall time and the part of it Finish
 * waited for; in overlap mode the all-reduce shares the cores with backward and stretches, so
 * "hidden" is measured against what it costs alone: 1 - exposed(overlap) / all-reduce(sync). */
static void print_summary(const struct opts* o, const struct trainer* tr) {
  printf("# summary over steps 1..%d (step 0 is warm-up), ms per step; all-reduce = wall time of the bucket\n"
         "# all-reduces on the communication thread, exposed = time Finish waited for them (means over ranks)\n",
         o->steps - 1);
  printf("# mode        step  all-reduce   exposed  of it under backward\n");
  double t[NUM_MODES] = {0}, comm[NUM_MODES] = {0}, exposed[NUM_MODES] = {0};
  int have = 0;
  for (int k = 0; k < o->nmodes; k++) {
    const struct summary* s = &tr[k].sum;
    const int n = s->steps ? s->steps : 1, mode = tr[k].mode;
    t[mode] = s->step_s / n, comm[mode] = s->comm_s / n, exposed[mode] = s->exposed_s / n;
    have |= 1 << mode;
    printf("# %-8s %8.3f %10.3f %9.3f", mode_names[mode], 1e3 * t[mode], 1e3 * comm[mode], 1e3 * exposed[mode]);
    if (mode != MODE_NONE && comm[mode] > 0) /* Finish's wake-up can make exposed exceed it: clamp */
      printf("   %5.1f%%", exposed[mode] < comm[mode] ? 100.0 * (1.0 - exposed[mode] / comm[mode]) : 0.0);
    printf("\n");
  }
  if ((have & 3) == 3 && comm[MODE_SYNC] > 0)
    printf("# hidden under backward: %.1f%% (overlap leaves %.3f ms of the %.3f ms the all-reduce costs alone, in sync)\n",
           exposed[MODE_OVERLAP] < comm[MODE_SYNC] ? 100.0 * (1.0 - exposed[MODE_OVERLAP] / comm[MODE_SYNC]) : 0.0,
           1e3 * exposed[MODE_OVERLAP], 1e3 * comm[MODE_SYNC]);
  if (have == 7 && t[MODE_SYNC] > t[MODE_NONE])
    printf("# step time: sync - overlap = %.3f ms of sync - none = %.3f ms: %.1f%% of the all-reduce's cost saved\n",
           1e3 * (t[MODE_SYNC] - t[MODE_OVERLAP]), 1e3 * (t[MODE_SYNC] - t[MODE_NONE]),
           100.0 * (t[MODE_SYNC] - t[MODE_OVERLAP]) / (t[MODE_SYNC] - t[MODE_NONE]));
}

static int run_rank(const struct opts* o, ringoUniqueId id, int rank) {
  struct rank_ctx c = {.o = o, .rank = rank}, *ctx = &c;
  const int base = o->batch / o->nranks, extra = o->batch % o->nranks;
  c.local = base + (rank < extra);
  c.offset = rank * base + (rank < extra ? rank : extra);
  struct trainer tr[NUM_MODES];
  if (!(c.labels = (int*)calloc((size_t)c.local + 1, sizeof(int)))) return 1;
  COMM_CHECK(ringoCommInitRank(&c.comm, o->nranks, id, rank));
  for (int k = 0; k < o->nmodes; k++)
    if (setup(ctx, &tr[k], o->modes[k])) return 1;
  if (rank == 0 && !o->quiet) print_header(ctx, &tr[0]);
  for (int step = 0; step < o->steps; step++)
    for (int k = 0; k < o->nmodes; k++) {
      double loss, secs;
      if (train_step(ctx, &tr[k], step, &loss, &secs) || log_step(ctx, &tr[k], step, loss, secs)) return 1;
    }
  for (int k = 0; k < o->nmodes; k++)
    if (close_trainer(ctx, &tr[k])) return 1;
  if (rank == 0) print_summary(o, tr);
  COMM_CHECK(ringoCommDestroy(c.comm));
  free(c.labels);
  return 0;
}

/* Forks one process per rank; a rank that fails gets the others killed, so nothing lingers. */
int main(int argc, char** argv) {
  struct opts o;
  if (parse(&o, argc, argv)) {
    usage(stderr);
    return 2;
  }
  /* The ranks are forked before ringoGetUniqueId starts the root's thread (launch_id.h says why). */
  int fds[2];
  if (pipe(fds) != 0) {
    perror("ddp_train: pipe");
    return 1;
  }
  fflush(stdout);
  pid_t pids[64];
  for (int r = 0; r < o.nranks; r++) {
    if ((pids[r] = fork()) == 0) {
      ringoUniqueId id;
      close(fds[1]);
      if (launch_id_receive(fds[0], &id) != 0) _exit(1); /* the parent has no id to give */
      close(fds[0]);
      if (r == 0) setvbuf(stdout, NULL, _IOLBF, 0);
      const int rc = run_rank(&o, id, r);
      fflush(stdout);
      _exit(rc);
    }
    if (pids[r] < 0) {
      perror("ddp_train: fork");
      for (int k = 0; k < r; k++) kill(pids[k], SIGKILL);
      return 1;
    }
  }
  close(fds[0]);
  ringoUniqueId id;
  const ringoResult_t res = ringoGetUniqueId(&id);
  if (res != ringoSuccess) fprintf(stderr, "ddp_train: ringoGetUniqueId: %s\n", ringoGetLastError(NULL));
  else if (launch_id_send(fds[1], &id, o.nranks) != 0) perror("ddp_train: handing out the unique id");
  close(fds[1]); /* ranks still waiting for the id read end of file and exit */
  int failed = 0;
  for (int left = o.nranks; left > 0; left--) {
    int status;
    const pid_t pid = wait(&status);
    if (pid < 0) break;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    for (int r = 0; r < o.nranks; r++)
      if (pids[r] == pid) fprintf(stderr, "ddp_train: rank %d failed (status 0x%x); stopping the others\n", r, status);
    if (!failed++)
      for (int r = 0; r < o.nranks; r++)
        if (pids[r] != pid) kill(pids[r], SIGTERM);
  }
  return failed ? 1 : 0;
}
