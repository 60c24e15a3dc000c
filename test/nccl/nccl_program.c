/* nccl_program.c — a small NCCL client written only against nccl.h (plus libc): init by unique id,
 * a bucketed gradient all-reduce loop, the other collectives, a grouped Send/Recv all-to-all and
 * error handling, each checked for exact values. Linked unchanged against ringo's libnccl.so.2.
 * Run by test/test_nccl_program.cc. Usage: nccl_program procs|group NRANKS, or nccl_program where
 * (procs: a process per rank; group: one thread creates and drives all ranks in groups).
 * Exits 0 only if every check passed; prints one line per failed check, naming the rank. */
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#define MAX_RANKS 16
/* Every process and the parent's wait are bounded: a hang is a failed run, never a hung test. */
#define DEADLINE_S 60

/* The ranks one thread drives: one in procs mode, all of them (through groups) in group mode. */
struct team {
  int nranks;
  int size;
  int rank[MAX_RANKS];
  ncclComm_t comm[MAX_RANKS];
};

static int g_failures;

/* Records one failed check. rank -1 stands for the whole group (a failed ncclGroupEnd). */
static void fail_at(int rank, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (rank >= 0) printf("rank %d: ", rank);
  else printf("group: ");
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  g_failures++;
}

static int check_call(const struct team* t, int k, ncclResult_t res, const char* what) {
  if (res == ncclSuccess) return 1;
  fail_at(t->rank[k], "%s returned %s: %s", what, ncclGetErrorString(res), ncclGetLastError(t->comm[k]));
  return 0;
}
#define CALL(t, k, call) check_call((t), (k), (call), #call)

/* A team of several ranks issues each step as one group, as NCCL requires of one thread driving
 * several communicators; a lone rank calls directly unless the caller asks for a group. */
static void begin(const struct team* t, int force) {
  if (t->size > 1 || force) {
    const ncclResult_t res = ncclGroupStart();
    if (res != ncclSuccess) fail_at(-1, "ncclGroupStart returned %s", ncclGetErrorString(res));
  }
}

static void end(const struct team* t, int force, const char* what) {
  if (t->size > 1 || force) {
    const ncclResult_t res = ncclGroupEnd();
    if (res != ncclSuccess)
      fail_at(-1, "ncclGroupEnd of %s returned %s: %s", what, ncclGetErrorString(res), ncclGetLastError(NULL));
  }
}

static double element(const void* buf, ncclDataType_t type, size_t i) {
  switch (type) {
    case ncclUint8: return ((const uint8_t*)buf)[i];
    case ncclInt32: return ((const int32_t*)buf)[i];
    case ncclInt64: return (double)((const int64_t*)buf)[i];
    case ncclFloat32: return ((const float*)buf)[i];
    case ncclFloat64: return ((const double*)buf)[i];
    default: return -1e300;
  }
}

static size_t type_size(ncclDataType_t type) {
  return type == ncclUint8 ? 1 : type == ncclInt32 || type == ncclFloat32 ? 4 : 8;
}

/* Compares got with want bit for bit (every expected value is exact) and reports the first
 * differing element and how many differ. */
static void expect_same(int rank, const char* what, const void* got, const void* want, size_t count,
                        ncclDataType_t type) {
  const size_t es = type_size(type);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char*)got + i * es, (const char*)want + i * es, es) != 0 && bad++ == 0) first = i;
  if (bad)
    fail_at(rank, "%s: %zu of %zu elements wrong, first [%zu] = %g, expected %g", what, bad, count, first,
            element(got, type, first), element(want, type, first));
}

static void* alloc_or_die(size_t bytes) {
  void* p = malloc(bytes ? bytes : 1);
  if (!p) {
    printf("out of memory (%zu bytes)\n", bytes);
    fflush(stdout);
    _exit(3);
  }
  return p;
}

/* Polled after every scenario, as training loops poll it: success while nothing went wrong. */
static void poll_async(const struct team* t, const char* after) {
  for (int k = 0; k < t->size; k++) {
    ncclResult_t async = ncclInternalError;
    if (CALL(t, k, ncclCommGetAsyncError(t->comm[k], &async)) && async != ncclSuccess)
      fail_at(t->rank[k], "ncclCommGetAsyncError after %s: %s", after, ncclGetErrorString(async));
  }
}

static void check_queries(const struct team* t) {
  for (int k = 0; k < t->size; k++) {
    int count = -7, rank = -7, device = -7;
    if (CALL(t, k, ncclCommCount(t->comm[k], &count)) && count != t->nranks)
      fail_at(t->rank[k], "ncclCommCount gave %d, expected %d", count, t->nranks);
    if (CALL(t, k, ncclCommUserRank(t->comm[k], &rank)) && rank != t->rank[k])
      fail_at(t->rank[k], "ncclCommUserRank gave %d", rank);
    if (CALL(t, k, ncclCommCuDevice(t->comm[k], &device)) && device != -1)
      fail_at(t->rank[k], "ncclCommCuDevice gave %d, expected -1 for a host communicator", device);
  }
  poll_async(t, "init");
}

/* ---- a bucketed gradient all-reduce loop, as a data-parallel trainer runs it ---- */

static const size_t kBuckets[] = {1, 17, 1000, 4099, 70001, 262147};
#define NBUCKETS (sizeof kBuckets / sizeof kBuckets[0])
#define NSTEPS 4

/* Rank r's gradient at step s is (r+1)*((i % 13) + s): integers, so the sum over ranks and the
 * average (sum/n, a multiple of 0.5) are exact in float. Odd buckets reduce out of place, even
 * ones in place; odd steps average, even steps sum; odd steps put every bucket in one group. */
static void gradient_step(const struct team* t, int step, float* grad[][NBUCKETS], float* out[][NBUCKETS]) {
  const ncclRedOp_t op = step % 2 ? ncclAvg : ncclSum;
  for (int k = 0; k < t->size; k++)
    for (size_t b = 0; b < NBUCKETS; b++)
      for (size_t i = 0; i < kBuckets[b]; i++) grad[k][b][i] = (float)(t->rank[k] + 1) * (float)(i % 13 + step);
  begin(t, step % 2);
  for (int k = 0; k < t->size; k++)
    for (size_t b = 0; b < NBUCKETS; b++)
      CALL(t, k, ncclAllReduce(grad[k][b], out[k][b], kBuckets[b], ncclFloat, op, t->comm[k], NULL));
  end(t, step % 2, "a gradient step");
  const int n = t->nranks;
  const float factor = op == ncclAvg ? (float)(n + 1) / 2.0f : (float)(n * (n + 1) / 2);
  float* want = alloc_or_die(kBuckets[NBUCKETS - 1] * sizeof *want);
  for (size_t b = 0; b < NBUCKETS; b++) {
    for (size_t i = 0; i < kBuckets[b]; i++) want[i] = factor * (float)(i % 13 + step);
    for (int k = 0; k < t->size; k++) {
      char what[96];
      snprintf(what, sizeof what, "gradient all-reduce (%s) step %d bucket %zu", op == ncclAvg ? "avg" : "sum", step, b);
      expect_same(t->rank[k], what, out[k][b], want, kBuckets[b], ncclFloat);
    }
  }
  free(want);
}

static void gradient_loop(const struct team* t) {
  float* grad[MAX_RANKS][NBUCKETS];
  float* out[MAX_RANKS][NBUCKETS];
  for (int k = 0; k < t->size; k++)
    for (size_t b = 0; b < NBUCKETS; b++) {
      grad[k][b] = alloc_or_die(kBuckets[b] * sizeof(float));
      out[k][b] = b % 2 ? alloc_or_die(kBuckets[b] * sizeof(float)) : grad[k][b];
    }
  for (int step = 0; step < NSTEPS; step++) gradient_step(t, step, grad, out);
  for (int k = 0; k < t->size; k++)
    for (size_t b = 0; b < NBUCKETS; b++) {
      if (out[k][b] != grad[k][b]) free(out[k][b]);
      free(grad[k][b]);
    }
  poll_async(t, "the gradient loop");
}

/* ---- the other collectives ---- */

/* ncclBroadcast out of place from the last rank; non-roots' sendbuff holds values that must not
 * show up anywhere. */
static void broadcast(const struct team* t) {
  const size_t count = 100003;
  const int root = t->nranks - 1;
  int32_t *send[MAX_RANKS], *recv[MAX_RANKS], *want = alloc_or_die(count * sizeof *want);
  for (size_t i = 0; i < count; i++) want[i] = (int32_t)(i * 3 + 11);
  for (int k = 0; k < t->size; k++) {
    send[k] = alloc_or_die(count * sizeof(int32_t));
    recv[k] = alloc_or_die(count * sizeof(int32_t));
    for (size_t i = 0; i < count; i++) send[k][i] = t->rank[k] == root ? want[i] : -1;
    memset(recv[k], 0x7f, count * sizeof(int32_t));
  }
  begin(t, 0);
  for (int k = 0; k < t->size; k++)
    CALL(t, k, ncclBroadcast(send[k], recv[k], count, ncclInt32, root, t->comm[k], NULL));
  end(t, 0, "ncclBroadcast");
  for (int k = 0; k < t->size; k++) {
    expect_same(t->rank[k], "ncclBroadcast from the last rank", recv[k], want, count, ncclInt32);
    free(send[k]);
    free(recv[k]);
  }
  free(want);
  poll_async(t, "ncclBroadcast");
}

/* The legacy in-place ncclBcast from rank 1. */
static void bcast(const struct team* t) {
  const size_t count = 5000;
  const int root = t->nranks > 1 ? 1 : 0;
  double *buf[MAX_RANKS], *want = alloc_or_die(count * sizeof *want);
  for (size_t i = 0; i < count; i++) want[i] = (double)i * 0.5 - 7.0;
  for (int k = 0; k < t->size; k++) {
    buf[k] = alloc_or_die(count * sizeof(double));
    for (size_t i = 0; i < count; i++) buf[k][i] = t->rank[k] == root ? want[i] : -1.0;
  }
  begin(t, 0);
  for (int k = 0; k < t->size; k++) CALL(t, k, ncclBcast(buf[k], count, ncclDouble, root, t->comm[k], NULL));
  end(t, 0, "ncclBcast");
  for (int k = 0; k < t->size; k++) {
    expect_same(t->rank[k], "ncclBcast (in place) from rank 1", buf[k], want, count, ncclDouble);
    free(buf[k]);
  }
  free(want);
  poll_async(t, "ncclBcast");
}

/* ncclReduce (sum of int64) to a middle rank; other ranks' recvbuff must stay untouched. */
static void reduce(const struct team* t) {
  const size_t count = 7777;
  const int root = t->nranks / 2, n = t->nranks;
  int64_t *send[MAX_RANKS], *recv[MAX_RANKS], *want = alloc_or_die(count * sizeof *want);
  int64_t* untouched = alloc_or_die(count * sizeof *untouched);
  for (size_t i = 0; i < count; i++) {
    want[i] = (int64_t)(n * (n + 1) / 2) * ((int64_t)i - 100);
    untouched[i] = -42;
  }
  for (int k = 0; k < t->size; k++) {
    send[k] = alloc_or_die(count * sizeof(int64_t));
    recv[k] = alloc_or_die(count * sizeof(int64_t));
    for (size_t i = 0; i < count; i++) send[k][i] = (int64_t)(t->rank[k] + 1) * ((int64_t)i - 100);
    memcpy(recv[k], untouched, count * sizeof(int64_t));
  }
  begin(t, 0);
  for (int k = 0; k < t->size; k++)
    CALL(t, k, ncclReduce(send[k], recv[k], count, ncclInt64, ncclSum, root, t->comm[k], NULL));
  end(t, 0, "ncclReduce");
  for (int k = 0; k < t->size; k++) {
    const int is_root = t->rank[k] == root;
    expect_same(t->rank[k], is_root ? "ncclReduce on the root" : "ncclReduce recvbuff off the root",
                recv[k], is_root ? want : untouched, count, ncclInt64);
    free(send[k]);
    free(recv[k]);
  }
  free(want);
  free(untouched);
  poll_async(t, "ncclReduce");
}

/* ncclReduceScatter: block j of rank r's input is (r+1)*((j+i) % 11); rank r gets the sum of
 * block r. */
static void reduce_scatter(const struct team* t) {
  const size_t rc = 1234;
  const int n = t->nranks;
  float *send[MAX_RANKS], *recv[MAX_RANKS], *want = alloc_or_die(rc * sizeof *want);
  for (int k = 0; k < t->size; k++) {
    send[k] = alloc_or_die(rc * (size_t)n * sizeof(float));
    recv[k] = alloc_or_die(rc * sizeof(float));
    for (size_t j = 0; j < (size_t)n; j++)
      for (size_t i = 0; i < rc; i++) send[k][j * rc + i] = (float)(t->rank[k] + 1) * (float)((j + i) % 11);
  }
  begin(t, 0);
  for (int k = 0; k < t->size; k++)
    CALL(t, k, ncclReduceScatter(send[k], recv[k], rc, ncclFloat32, ncclSum, t->comm[k], NULL));
  end(t, 0, "ncclReduceScatter");
  for (int k = 0; k < t->size; k++) {
    for (size_t i = 0; i < rc; i++) want[i] = (float)(n * (n + 1) / 2) * (float)(((size_t)t->rank[k] + i) % 11);
    expect_same(t->rank[k], "ncclReduceScatter", recv[k], want, rc, ncclFloat32);
    free(send[k]);
    free(recv[k]);
  }
  free(want);
  poll_async(t, "ncclReduceScatter");
}

static void all_gather(const struct team* t) {
  const size_t sc = 3001, total = sc * (size_t)t->nranks;
  uint8_t *send[MAX_RANKS], *recv[MAX_RANKS], *want = alloc_or_die(total);
  for (size_t r = 0; r < (size_t)t->nranks; r++)
    for (size_t i = 0; i < sc; i++) want[r * sc + i] = (uint8_t)(r * 31 + i);
  for (int k = 0; k < t->size; k++) {
    send[k] = alloc_or_die(sc);
    recv[k] = alloc_or_die(total);
    memcpy(send[k], want + (size_t)t->rank[k] * sc, sc);
    memset(recv[k], 0, total);
  }
  begin(t, 0);
  for (int k = 0; k < t->size; k++) CALL(t, k, ncclAllGather(send[k], recv[k], sc, ncclUint8, t->comm[k], NULL));
  end(t, 0, "ncclAllGather");
  for (int k = 0; k < t->size; k++) {
    expect_same(t->rank[k], "ncclAllGather", recv[k], want, total, ncclUint8);
    free(send[k]);
    free(recv[k]);
  }
  free(want);
  poll_async(t, "ncclAllGather");
}

/* ---- an all-to-all made of grouped Send/Recv (NCCL 2.7+), self included ---- */

/* 1 MiB and 12 bytes per peer: more than a link's FIFO holds, so it only completes if the
 * group's sends and receives progress together. Rank s sends peer p the values
 * s*1000003 + p*7 + (i % 1009). */
static void all_to_all(const struct team* t) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 7, 0)
  const size_t per = (1u << 18) + 3, n = (size_t)t->nranks;
  int32_t *send[MAX_RANKS], *recv[MAX_RANKS], *want = alloc_or_die(per * n * sizeof *want);
  for (int k = 0; k < t->size; k++) {
    send[k] = alloc_or_die(per * n * sizeof(int32_t));
    recv[k] = alloc_or_die(per * n * sizeof(int32_t));
    for (size_t p = 0; p < n; p++)
      for (size_t i = 0; i < per; i++) send[k][p * per + i] = (int32_t)((size_t)t->rank[k] * 1000003 + p * 7 + i % 1009);
    memset(recv[k], 0xff, per * n * sizeof(int32_t));
  }
  begin(t, 1);
  for (int k = 0; k < t->size; k++)
    for (int p = 0; p < t->nranks; p++) {
      CALL(t, k, ncclSend(send[k] + (size_t)p * per, per, ncclInt32, p, t->comm[k], NULL));
      CALL(t, k, ncclRecv(recv[k] + (size_t)p * per, per, ncclInt32, p, t->comm[k], NULL));
    }
  end(t, 1, "the Send/Recv all-to-all");
  for (int k = 0; k < t->size; k++) {
    for (size_t s = 0; s < n; s++)
      for (size_t i = 0; i < per; i++) want[s * per + i] = (int32_t)(s * 1000003 + (size_t)t->rank[k] * 7 + i % 1009);
    expect_same(t->rank[k], "all-to-all of grouped ncclSend/ncclRecv", recv[k], want, per * n, ncclInt32);
    free(send[k]);
    free(recv[k]);
  }
  free(want);
  poll_async(t, "the all-to-all");
#else
  fail_at(t->rank[0], "nccl.h claims a version without ncclSend/ncclRecv");
#endif
}

/* ---- errors: strings, rejected calls, and a communicator that survives them ---- */

static void errors(const struct team* t) {
  const char* s = ncclGetErrorString(ncclInvalidArgument);
  if (!s || !s[0] || !strcmp(s, ncclGetErrorString(ncclSuccess)))
    fail_at(t->rank[0], "ncclGetErrorString(ncclInvalidArgument) is empty or not distinct");
  int32_t buf[3] = {1, 2, 3};
  if (ncclAllReduce(buf, buf, 3, ncclInt32, ncclSum, NULL, NULL) != ncclInvalidArgument)
    fail_at(t->rank[0], "ncclAllReduce on a NULL comm did not return ncclInvalidArgument");
  for (int k = 0; k < t->size; k++) {
    ncclResult_t res = ncclAllReduce(buf, buf, 3, (ncclDataType_t)42, ncclSum, t->comm[k], NULL);
    if (res != ncclInvalidArgument)
      fail_at(t->rank[k], "ncclAllReduce with datatype 42 returned %s", ncclGetErrorString(res));
    else if (!strstr(ncclGetLastError(t->comm[k]), "datatype"))
      fail_at(t->rank[k], "ncclGetLastError after a bad datatype says \"%s\"", ncclGetLastError(t->comm[k]));
    res = ncclBroadcast(buf, buf, 3, ncclInt32, t->nranks, t->comm[k], NULL);
    if (res != ncclInvalidArgument) fail_at(t->rank[k], "ncclBroadcast from root nranks returned %s", ncclGetErrorString(res));
  }
  /* A rejected call moves nothing, so every rank can go on. */
  int32_t out[MAX_RANKS][3] = {{0}};
  begin(t, 0);
  for (int k = 0; k < t->size; k++) CALL(t, k, ncclAllReduce(buf, out[k], 3, ncclInt32, ncclMax, t->comm[k], NULL));
  end(t, 0, "an all-reduce after rejected calls");
  for (int k = 0; k < t->size; k++) expect_same(t->rank[k], "all-reduce after rejected calls", out[k], buf, 3, ncclInt32);
  poll_async(t, "the rejected calls");
}

static void run_team(struct team* t) {
  check_queries(t);
  gradient_loop(t);
  broadcast(t);
  bcast(t);
  reduce(t);
  reduce_scatter(t);
  all_gather(t);
  all_to_all(t);
  errors(t);
  for (int k = 0; k < t->size; k++) CALL(t, k, ncclCommDestroy(t->comm[k]));
}

/* ---- the two ways to start ranks ---- */

/* Rank 0 makes the unique id and hands it to the other ranks out of band (a pipe here; MPI or a
 * file in a real job). The parent makes no id itself: it would have to fork while ncclGetUniqueId's
 * rendezvous thread runs, and a child of a multithreaded process may inherit a held lock (the
 * sanitizers' allocator does deadlock so). Each write of one id is atomic (< PIPE_BUF). */
static int share_id(int n, int rank, int fds[2], ncclUniqueId* id) {
  if (rank == 0) {
    close(fds[0]);
    const ncclResult_t res = ncclGetUniqueId(id);
    if (res != ncclSuccess) {
      fail_at(0, "ncclGetUniqueId returned %s: %s", ncclGetErrorString(res), ncclGetLastError(NULL));
      return 0;
    }
    for (int r = 1; r < n; r++)
      if (write(fds[1], id, sizeof *id) != (ssize_t)sizeof *id) {
        fail_at(0, "could not pass the unique id on");
        return 0;
      }
    close(fds[1]);
    return 1;
  }
  close(fds[1]);
  size_t got = 0;
  while (got < sizeof *id) {
    const ssize_t k = read(fds[0], (char*)id + got, sizeof *id - got);
    if (k <= 0) break; /* EOF: rank 0 ended without sending it */
    got += (size_t)k;
  }
  close(fds[0]);
  if (got != sizeof *id) fail_at(rank, "did not receive the unique id from rank 0");
  return got == sizeof *id;
}

static void child_rank(int n, int rank, int fds[2]) {
  alarm(DEADLINE_S);
  struct team t = {.nranks = n, .size = 1, .rank = {rank}};
  ncclUniqueId id;
  if (share_id(n, rank, fds, &id) && CALL(&t, 0, ncclCommInitRank(&t.comm[0], n, id, rank))) run_team(&t);
  fflush(stdout);
  _exit(g_failures ? 1 : 0);
}

/* Reaps the children, SIGKILLing any still running at the deadline. Polls: it orders nothing. */
static int reap(const pid_t* pids, int n) {
  const time_t deadline = time(NULL) + DEADLINE_S + 5;
  int left = n, failed = 0, done[MAX_RANKS] = {0};
  while (left > 0 && time(NULL) < deadline) {
    for (int r = 0; r < n; r++) {
      int st;
      if (done[r] || waitpid(pids[r], &st, WNOHANG) != pids[r]) continue;
      done[r] = 1;
      left--;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("rank %d: process ended with %s %d\n", r, WIFEXITED(st) ? "exit status" : "signal",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        failed++;
      }
    }
    const struct timespec ms = {0, 5000000};
    nanosleep(&ms, NULL);
  }
  for (int r = 0; r < n; r++)
    if (!done[r]) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], NULL, 0);
      printf("rank %d: still running at the deadline; killed\n", r);
      failed++;
    }
  return failed;
}

static int run_procs(int n) {
  int fds[2];
  if (pipe(fds) != 0) {
    printf("parent: pipe failed\n");
    return 1;
  }
  pid_t pids[MAX_RANKS];
  fflush(stdout);
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) child_rank(n, r, fds);
    if (pids[r] < 0) {
      printf("parent: fork failed\n");
      for (int q = 0; q < r; q++) kill(pids[q], SIGKILL);
      reap(pids, r);
      return 1;
    }
  }
  close(fds[0]);
  close(fds[1]);
  return reap(pids, n) ? 1 : 0;
}

/* One thread creates every rank inside one group (as NCCL benchmarks do) and drives them all. */
static int run_group(int n) {
  alarm(DEADLINE_S);
  struct team t = {.nranks = n, .size = n};
  ncclUniqueId id;
  ncclResult_t res = ncclGetUniqueId(&id);
  if (res != ncclSuccess) {
    printf("group: ncclGetUniqueId returned %s: %s\n", ncclGetErrorString(res), ncclGetLastError(NULL));
    return 1;
  }
  begin(&t, 1);
  for (int r = 0; r < n; r++) {
    t.rank[r] = r;
    CALL(&t, r, ncclCommInitRank(&t.comm[r], n, id, r));
  }
  end(&t, 1, "the grouped ncclCommInitRank calls");
  if (g_failures) return 1;
  run_team(&t);
  return g_failures ? 1 : 0;
}

/* Names the libnccl.so.2 this process loaded and the nccl.h it was compiled with. */
static int where(void) {
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  struct link_map* map = NULL;
  if (!lib || dlinfo(lib, RTLD_DI_LINKMAP, &map) != 0 || !map) {
    printf("libnccl.so.2 is not loaded: %s\n", dlerror());
    return 1;
  }
  int version = 0;
  const ncclResult_t res = ncclGetVersion(&version);
#ifdef RINGO_NCCL_COMPAT
  printf("header: ringo\n");
#else
  printf("header: other\n");
#endif
  printf("library: %s\nversion: %d (%s)\n", map->l_name, version, ncclGetErrorString(res));
  dlclose(lib);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 2 && !strcmp(argv[1], "where")) return where();
  const int n = argc == 3 ? atoi(argv[2]) : 0;
  if (n < 1 || n > MAX_RANKS || (strcmp(argv[1], "procs") && strcmp(argv[1], "group"))) {
    fprintf(stderr, "usage: %s procs|group NRANKS (1..%d) | where\n", argv[0], MAX_RANKS);
    return 2;
  }
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) {
    printf("ncclGetVersion gave %d, the header says %d\n", version, NCCL_VERSION_CODE);
    return 1;
  }
  return strcmp(argv[1], "procs") == 0 ? run_procs(n) : run_group(n);
}
