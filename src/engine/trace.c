/* trace.c — RINGO_TRACE: keeps one event per ring-step slice (one per one-shot collective) in memory and, when the communicator
 * goes, appends them to a Chrome-trace JSON file shared by every rank (flock; one track per rank).
 * Tested by test/test_trace.cc; viewed in chrome://tracing, Perfetto or `ringo-trace --timeline`. */
#include "engine/trace.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

struct ringo_trace {
  char path[256];
  int rank;
  struct ringo_trace_event* ev;
  size_t n, cap;
  int dropped; /* events not kept because memory ran out */
};

ringoResult_t ringo_trace_open(struct ringo_trace** out, const char* path, int rank) {
  struct ringo_trace* t = calloc(1, sizeof *t);
  if (!t) return ringo_fail(ringoSystemError, "RINGO_TRACE: out of memory");
  snprintf(t->path, sizeof t->path, "%s", path);
  t->rank = rank;
  *out = t;
  return ringoSuccess;
}

void ringo_trace_record(struct ringo_trace* t, const struct ringo_trace_event* ev) {
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 1024;
    struct ringo_trace_event* grown = realloc(t->ev, cap * sizeof *grown);
    if (!grown) {
      t->dropped++;
      return;
    }
    t->ev = grown;
    t->cap = cap;
  }
  t->ev[t->n++] = *ev;
}

static const char* coll_name(enum ringo_coll c) {
  static const char* const names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"};
  return names[c];
}

static const char* prim_name(enum ringo_prim p) {
  static const char* const names[] = {"send", "recv-reduce-send", "recv-reduce-copy-send", "recv-reduce-copy",
                                      "copy-send", "recv-copy-send", "recv"};
  return names[p];
}

/* Step t of an all-reduce of N ranks is reduce-scatter step t for t < N-1 (its send), and the
 * receive of all-gather step t-N+1 after that: name it the way the seed does. */
static void step_label(const struct ringo_trace_event* e, char* buf, size_t cap) {
  /* The two-level ring's walks (trace.h): the host ring's halves count their own steps; across
   * hosts an all-reduce's walk is an all-reduce of the ranks at one place of every host, named as
   * one; a reduce-scatter's or all-gather's is that collective among them. */
  const int n = e->ring_size;
  if (e->level == RINGO_WALK_HOST_RS || e->level == RINGO_WALK_HOST_AG)
    snprintf(buf, cap, "host %s step %d", e->level == RINGO_WALK_HOST_RS ? "reduce-scatter" : "all-gather", e->step);
  else if (e->coll == RINGO_COLL_ALLREDUCE)
    snprintf(buf, cap, "%s%s step %d", e->level == RINGO_WALK_ACROSS ? "across hosts " : "",
             e->step < n - 1 ? "reduce-scatter" : "all-gather", e->step < n - 1 ? e->step : e->step - (n - 1));
  else if (e->level == RINGO_WALK_ACROSS) /* a two-level reduce-scatter's or all-gather's walk across hosts */
    snprintf(buf, cap, "across hosts %s step %d", e->coll == RINGO_COLL_REDUCESCATTER ? "reduce-scatter" : "all-gather",
             e->step);
  else
    snprintf(buf, cap, "%s step %d", coll_name(e->coll), e->step);
}

/* Commas go before every event but the file's first, so the file plus a closing "]" is strict JSON. */
static void write_events(const struct ringo_trace* t, FILE* f, int empty) {
  if (empty) fprintf(f, "[\n");
  fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d\"}}",
          empty ? "" : ",\n", t->rank, t->rank);
  for (size_t i = 0; i < t->n; i++) {
    const struct ringo_trace_event* e = &t->ev[i];
    char label[64];
    if (e->board) snprintf(label, sizeof label, "%s", e->board);
    else step_label(e, label, sizeof label);
    fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,"
               "\"args\":{\"seq\":%llu,\"prim\":\"%s\",\"chunk\":%d,\"slice\":%zu,\"bytes\":%zu,"
               "\"from\":%d,\"to\":%d,\"step\":%d,\"part\":%d}}",
            label, coll_name(e->coll), t->rank, e->t0 * 1e6, (e->t1 - e->t0) * 1e6, (unsigned long long)e->seq,
            e->board ? e->board : prim_name(e->prim), e->chunk, e->round, e->bytes, e->recv_peer, e->send_peer,
            e->step, e->part);
  }
}

/* Chrome's JSON array format allows the closing bracket to be missing, which is what lets ranks
 * of different processes append to one file without knowing who comes last. */
ringoResult_t ringo_trace_close(struct ringo_trace* t) {
  ringoResult_t res = ringoSuccess;
  int fd = open(t->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  FILE* f = fd >= 0 ? fdopen(fd, "a") : NULL;
  if (!f) {
    res = ringo_fail(ringoSystemError, "RINGO_TRACE: cannot open %s: %s", t->path, strerror(errno));
    if (fd >= 0) close(fd);
  } else {
    struct stat st;
    flock(fd, LOCK_EX); /* one rank's block of lines at a time */
    write_events(t, f, fstat(fd, &st) == 0 && st.st_size == 0);
    fflush(f);
    flock(fd, LOCK_UN);
    fclose(f);
    if (t->dropped) RINGO_WARN("RINGO_TRACE: rank %d dropped %d events (out of memory)", t->rank, t->dropped);
  }
  free(t->ev);
  free(t);
  return res;
}
