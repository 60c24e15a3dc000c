/* bench_compare.h — ringo-bench's --compare: the other library (Open MPI, Gloo as PyTorch runs it on
 * CPUs, or ringo itself with other settings) on ringo's buffers, call by call beside ringo: which rows
 * it can run, its untimed barrier, one call, the notes before the table. Header-only, needs bench.h,
 * bench_mpi.h, bench_launch.h and, with RINGO_HAVE_GLOO, bench_gloo.h. Run: mpirun -np 4 ringo-bench
 * --compare mpi; ringo-bench --compare gloo; ringo-bench --compare ringo:RINGO_ALGO=ring. */
#ifndef RINGO_BENCH_COMPARE_H_
#define RINGO_BENCH_COMPARE_H_

#include "bench.h"
#include "bench_launch.h"
#include "bench_mpi.h"

#ifdef RINGO_HAVE_GLOO
#include "bench_gloo.h"

static const char* gloo_skip_reason(int coll, const struct row* w) {
  if (coll == COLL_REDUCE_SCATTER) return "Gloo's collective API has no reduce-scatter";
  if (w->type == ringoBfloat16) return "Gloo has no bfloat16";
  return w->op == ringoAvg ? "Gloo has no avg op" : NULL;
}

/* Gloo's rendezvous exchange, over the bench's own coordination (MPI, or ringo before any timing):
 * each rank fills its slot of a zeroed buffer, and a max over ranks leaves every slot filled. */
static int gloo_exchange(void* ctx, const void* mine, void* all, size_t bytes) {
  const struct bench* b = ctx;
  memset(all, 0, bytes * (size_t)b->nranks);
  memcpy((unsigned char*)all + bytes * (size_t)b->rank, mine, bytes);
  coord_allreduce(b, all, bytes * (size_t)b->nranks, ringoUint8, ringoMax);
  return 0;
}

static void gloo_die(const struct bench* b, const char* what, const char* err) {
  fprintf(stderr, "ringo-bench: rank %d: Gloo's %s failed: %s\n", b->rank, what, err);
  die(EXIT_LAUNCH);
}

/* Whether every rank runs on this host: a hash of each host name, its max and min over ranks. */
static int all_on_one_host(const struct bench* b) {
  char host[HOST_BYTES] = "";
  gethostname(host, sizeof host - 1);
  uint64_t h[2] = {1469598103934665603ull, 0};
  for (const char* c = host; *c; c++) h[0] = (h[0] ^ (unsigned char)*c) * 1099511628211ull;
  h[1] = ~h[0];
  coord_allreduce(b, h, 2, ringoUint64, ringoMax);
  return h[0] == ~h[1];
}
#endif /* RINGO_HAVE_GLOO */

/* --compare ringo:VAR=VALUE,...: whether every item names a RINGO_* variable and gives it a value. */
static int alt_settings_valid(const char* s) {
  if (!*s || strlen(s) >= 1024) return 0;
  int items = 0;
  for (const char* item = s; item; item = strchr(item, ',') ? strchr(item, ',') + 1 : NULL) {
    if (++items > 16) return 0;
    const char* eq = strchr(item, '=');
    const char* end = strchr(item, ',');
    if (strncmp(item, "RINGO_", 6) || !eq || (end && eq > end) || eq == item + 6) return 0;
  }
  return 1;
}

/* Sets (restore = 0) the settings' variables in this process, keeping what they were in saved (NULL:
 * unset), or puts back what saved kept and frees it (restore = 1). The library reads them when a
 * communicator is made. alt_settings_valid allows at most 16 items. */
static void alt_environment(const char* settings, char* saved[16], int restore) {
  char copy[1024];
  snprintf(copy, sizeof copy, "%s", settings);
  int k = 0;
  for (char *save = NULL, *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save), k++) {
    char* eq = strchr(item, '=');
    *eq = '\0';
    if (restore) {
      if (saved[k]) setenv(item, saved[k], 1);
      else unsetenv(item);
      free(saved[k]);
      continue;
    }
    const char* was = getenv(item);
    saved[k] = was ? strdup(was) : NULL;
    setenv(item, eq + 1, 1);
  }
}

/* The second communicator of --compare ringo:...: the same ranks, made while the settings are in the
 * environment. Forked ranks take rank 0's fresh id over the bench's own coordination. Collective. */
static void alt_open(struct bench* b) {
  char* saved[16];
  ringoUniqueId id;
  memset(&id, 0, sizeof id);
#ifdef RINGO_HAVE_MPI
  if (!b->L->mpi)
#endif
  {
    if (b->rank == 0) RB_CHECK(b, ringoGetUniqueId(&id));
    coord_allreduce(b, &id, sizeof id, ringoUint8, ringoMax); /* the others' zeros give rank 0's bytes */
  }
  alt_environment(b->o->alt_settings, saved, 0);
#ifdef RINGO_HAVE_MPI
  if (b->L->mpi) RB_CHECK(b, ringoCommInitMPI(&b->alt, MPI_COMM_WORLD));
  else
#endif
    RB_CHECK(b, ringoCommInitRank(&b->alt, b->nranks, id, b->rank));
  alt_environment(b->o->alt_settings, saved, 1);
}

/* Why the --compare library cannot run this row as ringo does, or NULL when it can. */
static const char* cmp_skip_reason(const struct bench* b, const struct row* w) {
#ifdef RINGO_HAVE_MPI
  if (b->o->compare == CMP_MPI) return mpi_skip_reason(w);
#endif
#ifdef RINGO_HAVE_GLOO
  if (b->o->compare == CMP_GLOO) return gloo_skip_reason(b->o->coll, w);
#endif
  if (b->o->compare == CMP_ALT) return NULL;
  (void)w;
  return b->o->compare ? "not built with it" : "no --compare";
}

/* The library runs beside ringo when asked, when it is up (MPI: launched by mpirun), and when it has
 * the row's collective, type and op. */
static int row_uses_cmp(const struct bench* b, const struct row* w) {
  const int up = b->o->compare == CMP_MPI ? b->L->mpi : b->o->compare == CMP_GLOO ? b->gloo != NULL : b->alt != NULL;
  return up && !cmp_skip_reason(b, w);
}

/* Connects the --compare library's side where it needs it (Gloo: a context over TCP); collective. */
static void cmp_open(struct bench* b) {
  if (b->o->compare == CMP_ALT) alt_open(b);
#ifdef RINGO_HAVE_GLOO
  if (b->o->compare != CMP_GLOO) return;
  char err[512] = "";
  b->gloo = gloo_side_open(b->rank, b->nranks, all_on_one_host(b), b->o->timeout_s, gloo_exchange, b, err,
                           sizeof err);
  if (!b->gloo) gloo_die(b, "rendezvous", err);
#else
  (void)b;
#endif
}

static void cmp_close(struct bench* b) {
  if (b->alt) RB_CHECK(b, ringoCommDestroy(b->alt));
  b->alt = NULL;
#ifdef RINGO_HAVE_GLOO
  if (b->gloo) gloo_side_close(b->gloo);
  b->gloo = NULL;
#else
  (void)b;
#endif
}

/* An untimed barrier of the --compare library before each call, ringo's and its own, so each call
 * starts with the ranks together; none passes through ringo, whose counters see only ringo's calls.
 * ringo against itself has none: both sides start as the other left the ranks, alike. Returns
 * whether it met the ranks (not under RINGO_BENCH_NO_QUIET_BARRIER). */
static int cmp_barrier(const struct bench* b) {
  if (getenv("RINGO_BENCH_NO_QUIET_BARRIER")) return 0;
#ifdef RINGO_HAVE_MPI
  if (b->o->compare == CMP_MPI) {
    mpi_quiet_barrier();
    return 1;
  }
#endif
#ifdef RINGO_HAVE_GLOO
  char err[512] = "";
  if (b->o->compare == CMP_GLOO) {
    if (gloo_side_barrier(b->gloo, err, sizeof err) != 0) gloo_die(b, "barrier", err);
    return 1;
  }
#endif
  (void)b;
  return 0;
}

/* The --compare library's counterpart of the row's collective, once; an error ends the rank. */
static void cmp_run_checked(const struct bench* b, const struct row* w, int inplace) {
#ifdef RINGO_HAVE_MPI
  if (b->o->compare == CMP_MPI) mpi_coll_checked(b, w, inplace);
#endif
#ifdef RINGO_HAVE_GLOO
  static const int colls[NUM_COLLS] = {[COLL_ALL_REDUCE] = GLOO_ALL_REDUCE, [COLL_ALL_GATHER] = GLOO_ALL_GATHER,
      [COLL_BROADCAST] = GLOO_BROADCAST, [COLL_REDUCE] = GLOO_REDUCE, [COLL_SENDRECV] = GLOO_SENDRECV};
  if (b->o->compare != CMP_GLOO) return;
  const struct gloo_call c = {.coll = colls[b->o->coll], .type = w->type, .op = w->op, .root = w->root,
                              .inplace = inplace, .s = b->sbuf, .r = b->rbuf, .count = w->count};
  char err[512] = "";
  if (gloo_side_run(b->gloo, &c, err, sizeof err) == 0) return;
  char what[160];
  snprintf(what, sizeof what, "%s of %zu bytes (%s, %s)", coll_names[b->o->coll], w->bytes, type_names[w->type],
           inplace ? "in-place" : "out-of-place");
  gloo_die(b, what, err);
#else
  (void)b;
  (void)w;
  (void)inplace;
#endif
}

/* What the --compare library runs, and which of the run's types and ops it cannot (their rows show
 * '-' in its columns), said once before the table. */
static void print_cmp_notes(const struct bench* b) {
  const struct opts* o = b->o;
  const int c = o->coll;
  if (o->compare == CMP_ALT)
    printf("# Compared with: ringo on a second communicator made with %s (the same buffers, interleaved "
           "per iteration, no barrier between calls)\n", o->alt_settings);
  if (o->compare == CMP_MPI) {
#ifdef RINGO_HAVE_MPI
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(version, &len);
    version[strcspn(version, ",\n")] = '\0';
    printf("# Compared with: %s (MPI_%s on the same buffers, interleaved per iteration)\n", version,
           c == COLL_ALL_REDUCE ? "Allreduce" : c == COLL_REDUCE_SCATTER ? "Reduce_scatter_block"
           : c == COLL_ALL_GATHER ? "Allgather" : c == COLL_BROADCAST ? "Bcast"
           : c == COLL_SENDRECV ? "Sendrecv, in place MPI_Sendrecv_replace" : "Reduce");
#endif
  } else if (o->compare == CMP_GLOO) {
#ifdef RINGO_HAVE_GLOO
    printf("# Compared with: Gloo %s (%s over its TCP transport on %s, as PyTorch's gloo backend runs "
           "on CPUs; the same buffers, interleaved per iteration)\n", gloo_side_version(), c == COLL_ALL_REDUCE ? "gloo::allreduce, its default algorithm"
           : c == COLL_ALL_GATHER ? "gloo::allgather" : c == COLL_BROADCAST ? "gloo::broadcast"
           : c == COLL_REDUCE ? "gloo::reduce" : c == COLL_SENDRECV ? "send and recv, in place from a copy"
           : "nothing", b->gloo ? gloo_side_where(b->gloo) : "-");
#endif
  }
  const int has_op = coll_has_op(c);
  const char* const lib = cmp_names[o->compare];
  /* A reason that every row shares (Gloo has no reduce-scatter) is said once. */
  const char* every = cmp_skip_reason(b, &(struct row){.type = o->types[0], .op = OP_NONE});
  for (int ti = 1; ti < o->ntypes && every; ti++)
    if (cmp_skip_reason(b, &(struct row){.type = o->types[ti], .op = OP_NONE}) != every) every = NULL;
  if (every) {
    printf("# Note: every row shows '-' in the %s columns: %s\n", lib, every);
    return;
  }
  int usable_type = -1; /* a type the library has, to ask about each op alone */
  for (int ti = 0; ti < o->ntypes; ti++) {
    const char* why = cmp_skip_reason(b, &(struct row){.type = o->types[ti], .op = OP_NONE});
    if (why) printf("# Note: %s rows show '-' in the %s columns: %s\n", type_names[o->types[ti]], lib, why);
    else if (usable_type < 0) usable_type = o->types[ti];
  }
  for (int oi = 0; oi < o->nops && has_op && usable_type >= 0; oi++) {
    const char* why = cmp_skip_reason(b, &(struct row){.type = usable_type, .op = o->ops[oi]});
    if (why) printf("# Note: %s rows show '-' in the %s columns: %s\n", op_names[o->ops[oi]], lib, why);
  }
}

#endif /* RINGO_BENCH_COMPARE_H_ */
