/* bench_print.h — ringo-bench's output on rank 0: the run header, the nccl-tests-style table (with
 * the %bound and --compare library's columns when asked for) and the -J JSON file. Header-only, needs
 * bench.h, bench_compare.h and bench_launch.h. Run: ringo-bench -N 4 -J out.json --compare gloo. */
#ifndef RINGO_BENCH_PRINT_H_
#define RINGO_BENCH_PRINT_H_

#include "bench.h"
#include "bench_compare.h"
#include "bench_launch.h"

/* ---------------------------------------------------------------- run header */

static const char* transport_env(void) {
  const char* t = getenv("RINGO_TRANSPORT");
  return t && *t ? t : "";
}

/* How the ranks were placed: forked ones by --bind-to, the others by mpirun (the rank lines give the CPUs). */
static const char* binding_name(const struct bench* b) {
  if (b->L->mpi) return "mpirun";
  return b->o->bind == BENCH_BIND_CORE ? "core" : "none";
}

static void print_binding(const struct bench* b) {
  if (b->L->mpi) printf("# Binding: as mpirun placed the ranks (its --bind-to)\n");
  else if (b->o->bind == BENCH_BIND_CORE)
    printf("# Binding: each forked rank to one CPU, round robin over the %d this process may run on (--bind-to core)\n",
           CPU_COUNT(&b->L->allowed));
  else
    printf("# Binding: none (%s): the kernel places the forked ranks\n",
           b->o->bind_explicit ? "--bind-to none"
           : b->o->compare == CMP_GLOO ? "the default with --compare gloo" : "this process's CPUs are not known");
}

static void print_run_lines(const struct bench* b, const int64_t* pids, const unsigned char* hosts,
                            const int64_t* cpus) {
  const struct opts* o = b->o;
  int version = 0;
  ringoGetVersion(&version);
  printf("# ringo-bench %s, ringo %d.%d.%d, launch: %s\n", coll_names[o->coll], version / 10000,
         version / 100 % 100, version % 100, b->L->kind);
  printf("# Command: %s\n", o->command);
  printf("# nranks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d%s "
         "validation: %d\n", b->nranks, o->minbytes, o->maxbytes,
         o->stepfactor ? (size_t)o->stepfactor : o->stepbytes, o->stepfactor ? "factor" : "bytes",
         o->warmup, o->iters, o->iters_explicit ? "" : " (fewer for slow rows)", o->check);
  if (b->o->barrier) printf("# Timing: an untimed barrier before every call (--barrier), waiters yield the CPU\n");
  print_binding(b);
  if (*transport_env()) printf("# Links: RINGO_TRANSPORT=%s\n", transport_env());
  const char* algo = getenv("RINGO_ALGO") && *getenv("RINGO_ALGO") ? getenv("RINGO_ALGO") : "auto";
  if (strcmp(algo, "auto") == 0)
    printf("# Algorithm: auto: with every rank on one host, a collective of at most RINGO_ONESHOT_BYTES per rank "
           "(unset: 4 KiB per other rank, at most 64 KiB) runs one-shot, an all-reduce of at most RINGO_TWOPHASE_BYTES "
           "(unset: 4 MiB / N, at most 2 MiB, 1 MiB at N = 3) in two phases through the board, the rest on the ring; --algo ring for the "
           "ring at every size\n# (one-shot rows: each rank reads the N-1 others' inputs, law N/2 for all_reduce, N-1 for "
           "broadcast; %%bound counts the ring's traffic)\n");
  else
    printf("# Algorithm: RINGO_ALGO=%s\n", algo);
  if (o->bw_add > 0)
    printf("# Memory bandwidth (all cores, best of runs): copy %.2f GB/s, add (c = a + b) %.2f GB/s\n",
           o->bw_copy, o->bw_add);
  if (o->compare) print_cmp_notes(b);
  printf("#\n# Using ranks (host memory)\n");
  for (int r = 0; r < b->nranks; r++) {
    printf("#  Rank %2d Pid %7lld on %s", r, (long long)pids[r], (const char*)hosts + (size_t)r * HOST_BYTES);
    if (cpus[r] > 0) printf(", bound to CPU %lld\n", (long long)cpus[r] - 1);
    else if (cpus[r] < 0) printf(", may run on %lld CPUs\n", -(long long)cpus[r]);
    else printf("\n");
  }
  printf("#\n");
}

/* Rank 0 learns every rank's pid, host and CPUs (each rank fills its own slot; max/sum leave them). */
static void print_run_header(const struct bench* b, char* host0) {
  int n = b->nranks;
  int64_t* pids = calloc((size_t)n, sizeof *pids);
  int64_t* cpus = calloc((size_t)n, sizeof *cpus);
  unsigned char* hosts = calloc((size_t)n, HOST_BYTES);
  if (!pids || !cpus || !hosts) die(EXIT_USAGE);
  pids[b->rank] = getpid();
  cpus[b->rank] = bench_bind_own_cpus();
  gethostname((char*)hosts + (size_t)b->rank * HOST_BYTES, HOST_BYTES - 1);
  coord_allreduce(b, pids, (size_t)n, ringoInt64, ringoSum);
  coord_allreduce(b, cpus, (size_t)n, ringoInt64, ringoSum);
  coord_allreduce(b, hosts, (size_t)n * HOST_BYTES, ringoUint8, ringoMax);
  memcpy(host0, hosts, HOST_BYTES);
  if (b->rank == 0) print_run_lines(b, pids, hosts, cpus);
  free(pids);
  free(cpus);
  free(hosts);
}

/* ---------------------------------------------------------------- table */

/* 15 columns always, then %bound (--bound), then four columns of the --compare library. */
enum { NBASE = 15, COL_BOUND = 15, COL_CMP = 16, NCOLS = 20 };
static const int col_width[NCOLS] = {12, 12, 8, 6, 6, 9, 7, 7, 6, 9, 7, 7, 6, 13, 6, 7, 10, 10, 6, 10};

static int col_on(const struct bench* b, int c) {
  return c < NBASE || (c == COL_BOUND ? b->o->bw_add > 0 : b->o->compare);
}

/* Prints one table line; lead is '#' for headers, ' ' for rows, so the columns line up. */
static void print_cols(const struct bench* b, char lead, const char* const* cols) {
  putchar(lead);
  for (int c = 0; c < NCOLS; c++)
    if (col_on(b, c)) printf("%s%*s", c ? "  " : "", col_width[c], cols[c]);
  putchar('\n');
}

static void print_table_header(const struct bench* b) {
  char cmp[3][16], group[48];
  const char* key = cmp_keys[b->o->compare];
  snprintf(cmp[0], sizeof cmp[0], "%s time", key);
  snprintf(cmp[1], sizeof cmp[1], "%s busbw", key);
  snprintf(cmp[2], sizeof cmp[2], "ringo/%s", key);
  snprintf(group, sizeof group, "%s (out-of-place)", cmp_names[b->o->compare]);
  const char* const names[NCOLS] = {"size", "count", "type", "redop", "root", "time", "algbw",
      "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "sent(B)/rank", "law", "%bound",
      cmp[0], cmp[1], "#wrong", cmp[2]};
  static const char* const units[NCOLS] = {"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)",
      "", "(us)", "(GB/s)", "(GB/s)", "", "(oop, max)", "(x)", "(oop)", "(us)", "(GB/s)", "(both)", "(busbw)"};
  /* The group labels start where their first column's field starts. */
  char line[256];
  int at = 1, end = 0;
  memset(line, ' ', sizeof line);
  for (int c = 0; c < NCOLS; c++) {
    if (!col_on(b, c)) continue;
    const char* label = c == 5 ? "out-of-place" : c == 9 ? "in-place" : c == COL_CMP ? group : NULL;
    at += c ? 2 : 0;
    if (label) memcpy(line + at, label, strlen(label));
    if (label) end = at + (int)strlen(label);
    at += col_width[c];
  }
  line[0] = '#';
  printf("%.*s\n", end, line);
  print_cols(b, '#', names);
  print_cols(b, '#', units);
}

static void print_row(const struct bench* b, const struct row* w) {
  char s[NCOLS][32];
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
    CELL(8 + 4 * p, placement_checked(b->o, p) ? "%llu" : "N/A", (unsigned long long)w->wrong[p]);
  }
  CELL(13, "%llu", (unsigned long long)w->sent);
  CELL(14, w->law >= 0 ? "%.3f" : "-", w->law);
  CELL(COL_BOUND, w->bound >= 0 ? "%.1f" : "-", 100 * w->bound);
  for (int c = COL_CMP; c < NCOLS; c++) CELL(c, "-");
  if (w->cmp) {
    double t = w->cmp_time_us[0];
    CELL(COL_CMP, t < 1e4 ? "%.2f" : t < 1e6 ? "%.1f" : "%.0f", t);
    CELL(COL_CMP + 1, "%.2f", w->cmp_busbw[0]);
    CELL(COL_CMP + 2, b->o->check ? "%llu" : "N/A", (unsigned long long)(w->cmp_wrong[0] + w->cmp_wrong[1]));
    CELL(COL_CMP + 3, w->ratio >= 0 ? "%.2f" : "-", w->ratio);
  }
#undef CELL
  for (int c = 0; c < NCOLS; c++) cols[c] = s[c];
  print_cols(b, ' ', cols);
  fflush(stdout);
}

/* ---------------------------------------------------------------- JSON (-J) */

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

static void json_wrong(FILE* f, const struct bench* b, int p, const char* key, uint64_t v) {
  if (placement_checked(b->o, p)) fprintf(f, ", \"%s\": %llu", key, (unsigned long long)v);
  else fprintf(f, ", \"%s\": null", key);
}

/* The --compare library's keys, prefixed with its name ("mpi_oop_time_us", "ringo_over_gloo"): measured,
 * or "<name>_skipped" with the reason. */
static void json_cmp(FILE* f, const struct bench* b, const struct row* w) {
  static const char* const place[2] = {"oop", "ip"};
  const char* key = cmp_keys[b->o->compare];
  if (!b->o->compare) return;
  if (!w->cmp) {
    fprintf(f, ", \"%s_skipped\": ", key);
    json_string(f, cmp_skip_reason(b, w) ? cmp_skip_reason(b, w) : "not run");
    return;
  }
  for (int p = 0; p < 2; p++) {
    char name[32];
    fprintf(f, ", \"%s_%s_time_us\": %.3f, \"%s_%s_busbw\": %.4f", key, place[p], w->cmp_time_us[p], key,
            place[p], w->cmp_busbw[p]);
    snprintf(name, sizeof name, "%s_%s_wrong", key, place[p]);
    json_wrong(f, b, p, name, w->cmp_wrong[p]);
  }
  char name[32];
  snprintf(name, sizeof name, "ringo_over_%s", key);
  json_ratio(f, name, w->ratio);
}

static void json_row(FILE* f, const struct bench* b, const struct row* w) {
  static const char* const place[2] = {"oop", "ip"};
  fprintf(f, "%s\n    {\"collective\": \"%s\", \"nranks\": %d, \"size\": %zu, \"count\": %zu, "
             "\"type\": \"%s\", \"op\": \"%s\", \"root\": %d, \"iters\": %d",
          b->nrows ? "," : "", coll_names[b->o->coll], b->nranks, w->bytes, w->count, type_names[w->type],
          w->op < 0 ? "none" : op_names[w->op], w->root, w->iters);
  for (int p = 0; p < 2; p++) {
    char key[32];
    fprintf(f, ", \"%s_time_us\": %.3f, \"%s_algbw\": %.4f, \"%s_busbw\": %.4f", place[p], w->time_us[p],
            place[p], w->algbw[p], place[p], w->busbw[p]);
    snprintf(key, sizeof key, "%s_wrong", place[p]);
    json_wrong(f, b, p, key, w->wrong[p]);
  }
  fprintf(f, ", \"sent_per_rank\": %llu", (unsigned long long)w->sent);
  json_ratio(f, "law_ratio", w->law);
  json_ratio(f, "bound_frac", w->bound);
  json_cmp(f, b, w);
  fprintf(f, "}");
}

/* -J: {"header": {command, hostname, date, ...}, "rows": [one object per table row], "summary": {...}};
 * rows are written as they complete, so a run that dies keeps what it measured. */
static FILE* json_open(const struct bench* b, const char* host) {
  FILE* f = fopen(b->o->json, "w");
  if (!f) {
    fprintf(stderr, "ringo-bench: cannot write %s: %s\n", b->o->json, strerror(errno));
    die(EXIT_USAGE);
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
             "\"collective\": \"%s\", \"iters\": %d, \"warmup_iters\": %d, \"check\": %d, \"barrier\": %d, "
             "\"bind\": \"%s\", \"transport\": ",
          date, version, b->L->kind, b->nranks, coll_names[b->o->coll], b->o->iters, b->o->warmup,
          b->o->check, b->o->barrier, binding_name(b));
  json_string(f, transport_env());
  fprintf(f, ", \"algo\": ");
  json_string(f, getenv("RINGO_ALGO") && *getenv("RINGO_ALGO") ? getenv("RINGO_ALGO") : "auto");
  fprintf(f, ", \"compare\": ");
  if (b->o->compare) json_string(f, cmp_keys[b->o->compare]);
  else fprintf(f, "null");
  if (b->o->bw_add > 0) fprintf(f, ", \"membw_copy_GBps\": %.3f, \"membw_add_GBps\": %.3f", b->o->bw_copy, b->o->bw_add);
  fprintf(f, "},\n  \"rows\": [");
  return f;
}

static int json_close(const struct bench* b, FILE* f, double avg_busbw) {
  fprintf(f, "\n  ],\n  \"summary\": {\"out_of_bounds\": %llu, \"avg_busbw\": %.4f",
          (unsigned long long)b->wrong_total, avg_busbw);
  if (b->o->compare)
    fprintf(f, ", \"%s_out_of_bounds\": %llu", cmp_keys[b->o->compare], (unsigned long long)b->cmp_wrong_total);
  fprintf(f, "}\n}\n");
  if (fclose(f) == 0) return 0;
  fprintf(stderr, "ringo-bench: cannot write %s: %s\n", b->o->json, strerror(errno));
  return -1;
}

#endif /* RINGO_BENCH_PRINT_H_ */
