/* nccl_device_program.c — an NCCL client on device memory, written only against nccl.h, the CUDA runtime API
 * and libc: one thread creates NRANKS ranks on GPU 0 in a group, then runs a bucketed gradient all-reduce loop,
 * the other collectives, an ncclSend/ncclRecv all-to-all and a bf16 all-reduce on cudaMalloc'd buffers, each
 * checked bit for bit. Built by `make`
 * when nvcc is found; run by `make gpu-check` (.ci/gpu_check.sh). Usage: nccl_device_program NRANKS (1..8).
 * Exits 0 only if every check passed, 2 without a CUDA device; prints one line per failed check, naming the rank. */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>
#include <cuda_runtime_api.h>

#ifndef RINGO_NCCL_COMPAT
#error "not ringo's nccl.h: put -I.../nccl before the CUDA include folder"
#endif

#define MAX_RANKS 8
/* Each stream gets this long to finish a step, the whole run RUN_DEADLINE_S: a hang is a failed run. */
#define SYNC_DEADLINE_S 60
#define RUN_DEADLINE_S 120
#define STR_(x) #x
#define STR(x) STR_(x)

static int g_n;
static ncclComm_t g_comm[MAX_RANKS];
static cudaStream_t g_stream[MAX_RANKS];
static int g_failures;

/* Records one failed check. rank -1 stands for the whole process (a group, a CUDA call). */
static void fail_at(int rank, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (rank >= 0) printf("rank %d: ", rank);
  else printf("process: ");
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  g_failures++;
}

static int call_ok(int rank, ncclResult_t res, const char* what) {
  if (res == ncclSuccess) return 1;
  fail_at(rank, "%s returned %s: %s", what, ncclGetErrorString(res), ncclGetLastError(rank >= 0 ? g_comm[rank] : NULL));
  return 0;
}
#define CALL(k, call) call_ok((k), (call), #call)

static int cuda_ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return 1;
  fail_at(-1, "%s failed: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
  return 0;
}
#define CUDA(call) cuda_ok((call), #call)

/* A ring that failed or hangs leaves nothing worth checking: abort every rank (which also stops
 * their kernels, so the process can exit) and end the run. */
static void give_up(void) {
  for (int k = 0; k < g_n; k++)
    if (g_comm[k]) ncclCommAbort(g_comm[k]);
  printf("nccl_device_program N=%d: FAIL (%d failed checks; gave up)\n", g_n, g_failures);
  fflush(stdout);
  _exit(1);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "nccl_device_program: still running after " STR(RUN_DEADLINE_S) " s; ended by its alarm\n";
  (void)!write(STDOUT_FILENO, msg, sizeof msg - 1);
  _exit(1);
}

static void group_end(const char* what) {
  const ncclResult_t res = ncclGroupEnd();
  if (res != ncclSuccess)
    fail_at(-1, "ncclGroupEnd of %s returned %s: %s", what, ncclGetErrorString(res), ncclGetLastError(NULL));
}

/* Waits for every rank's stream by polling, as a training loop that must not hang does, checking
 * the communicator's asynchronous error at each poll and once its stream is done: an error, or
 * SYNC_DEADLINE_S without completion, ends the run. */
static void sync_all(const char* what) {
  const time_t deadline = time(NULL) + SYNC_DEADLINE_S;
  for (int k = 0; k < g_n; k++)
    for (;;) {
      const cudaError_t err = cudaStreamQuery(g_stream[k]);
      ncclResult_t async = ncclSuccess;
      const ncclResult_t res = ncclCommGetAsyncError(g_comm[k], &async);
      if (res != ncclSuccess || async != ncclSuccess) {
        fail_at(k, "%s: ncclCommGetAsyncError: %s: %s", what, ncclGetErrorString(res != ncclSuccess ? res : async),
                ncclGetLastError(g_comm[k]));
        give_up();
      }
      if (err == cudaSuccess) break;
      if (err != cudaErrorNotReady) fail_at(k, "%s: cudaStreamQuery: %s", what, cudaGetErrorString(err));
      else if (time(NULL) > deadline) fail_at(k, "%s: stream still busy after %d s", what, SYNC_DEADLINE_S);
      else {
        const struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
        continue;
      }
      give_up();
    }
}

static void* host_alloc(size_t bytes) {
  void* p = malloc(bytes ? bytes : 1);
  if (!p) {
    printf("out of host memory (%zu bytes)\n", bytes);
    give_up();
  }
  return p;
}

/* A device buffer holding a copy of host (or left as cudaMalloc gives it when host is NULL). */
static void* dev_copy(const void* host, size_t bytes) {
  void* d = NULL;
  if (!CUDA(cudaMalloc(&d, bytes))) give_up();
  if (host && !CUDA(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice))) give_up();
  return d;
}

/* cudaMemcpy from pageable memory may return before its DMA lands, cudaMemset before it ran, and
 * the ranks' non-blocking streams do not wait for the legacy stream: it is drained before any
 * collective reads. (Only it: a whole-device sync would also wait on ringo's streams.) */
static void settle(void) {
  if (!CUDA(cudaStreamSynchronize(cudaStreamLegacy))) give_up();
}

/* Issues call (which names rank k) for every rank in one group, as one thread driving several
 * communicators must, once the uploads have landed, and waits for every stream. */
#define ON_ALL_RANKS(what, call)                              \
  do {                                                        \
    settle();                                                 \
    CALL(-1, ncclGroupStart());                                            \
    for (int k = 0; k < g_n; k++) CALL(k, call);              \
    group_end(what);                                          \
    sync_all(what);                                           \
  } while (0)

static void free_all(void* a[], void* b[]) {
  for (int k = 0; k < g_n; k++) {
    CUDA(cudaFree(a[k]));
    CUDA(cudaFree(b[k]));
  }
}

enum kind { F32, I32, BF16 };

static double value_of(const void* buf, enum kind kind, size_t i) {
  if (kind == I32) return ((const int32_t*)buf)[i];
  if (kind == F32) return ((const float*)buf)[i];
  const uint32_t bits = (uint32_t)((const uint16_t*)buf)[i] << 16; /* bf16 is a float's top half */
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Copies count elements of device buffer dev back and compares them bit for bit with want (every
 * expected value is exact), reporting the first differing element and how many differ. */
static void check_dev(int rank, const char* what, const void* dev, const void* want, size_t count, enum kind kind) {
  const size_t es = kind == BF16 ? 2 : 4;
  void* got = host_alloc(count * es);
  if (CUDA(cudaMemcpy(got, dev, count * es, cudaMemcpyDeviceToHost))) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++)
      if (memcmp((const char*)got + i * es, (const char*)want + i * es, es) != 0 && bad++ == 0) first = i;
    if (bad)
      fail_at(rank, "%s: %zu of %zu elements wrong, first [%zu] = %.9g, expected %.9g", what, bad, count, first,
              value_of(got, kind, first), value_of(want, kind, first));
  }
  free(got);
}

/* ---- a bucketed gradient all-reduce loop, as a data-parallel trainer runs it ---- */

static const size_t kBuckets[] = {1, 17, 4099, 262147, (size_t)1 << 22};
#define NBUCKETS (sizeof kBuckets / sizeof kBuckets[0])
#define NSTEPS 3

/* Rank r's gradient at step s is (r+1)*((i % 13) + s): integers, so the sum over ranks and the
 * average (a multiple of 0.5) are exact in float. Odd buckets reduce out of place, even ones in
 * place; odd steps average, even steps sum. Every bucket of every rank goes in one group. */
static void gradient_step(int step, float* grad[][NBUCKETS], float* out[][NBUCKETS], float* host) {
  const ncclRedOp_t op = step % 2 ? ncclAvg : ncclSum;
  for (int k = 0; k < g_n; k++)
    for (size_t b = 0; b < NBUCKETS; b++) {
      for (size_t i = 0; i < kBuckets[b]; i++) host[i] = (float)(k + 1) * (float)(i % 13 + (size_t)step);
      CUDA(cudaMemcpy(grad[k][b], host, kBuckets[b] * sizeof(float), cudaMemcpyHostToDevice));
      if (out[k][b] != grad[k][b]) CUDA(cudaMemset(out[k][b], 0xff, kBuckets[b] * sizeof(float)));
    }
  settle();
  CALL(-1, ncclGroupStart());
  for (int k = 0; k < g_n; k++)
    for (size_t b = 0; b < NBUCKETS; b++)
      CALL(k, ncclAllReduce(grad[k][b], out[k][b], kBuckets[b], ncclFloat, op, g_comm[k], g_stream[k]));
  group_end("a gradient step");
  sync_all("a gradient step");
  const float factor = op == ncclAvg ? (float)(g_n + 1) / 2.0f : (float)(g_n * (g_n + 1) / 2);
  for (size_t b = 0; b < NBUCKETS; b++) {
    for (size_t i = 0; i < kBuckets[b]; i++) host[i] = factor * (float)(i % 13 + (size_t)step);
    char what[112];
    snprintf(what, sizeof what, "gradient all-reduce (%s, %s) step %d bucket of %zu", op == ncclAvg ? "avg" : "sum",
             b % 2 ? "out of place" : "in place", step, kBuckets[b]);
    for (int k = 0; k < g_n; k++) check_dev(k, what, out[k][b], host, kBuckets[b], F32);
  }
}

static void gradient_loop(void) {
  float* grad[MAX_RANKS][NBUCKETS];
  float* out[MAX_RANKS][NBUCKETS];
  float* host = host_alloc(kBuckets[NBUCKETS - 1] * sizeof(float));
  for (int k = 0; k < g_n; k++)
    for (size_t b = 0; b < NBUCKETS; b++) {
      grad[k][b] = dev_copy(NULL, kBuckets[b] * sizeof(float));
      out[k][b] = b % 2 ? dev_copy(NULL, kBuckets[b] * sizeof(float)) : grad[k][b];
    }
  for (int step = 0; step < NSTEPS; step++) gradient_step(step, grad, out, host);
  for (int k = 0; k < g_n; k++)
    for (size_t b = 0; b < NBUCKETS; b++) {
      if (out[k][b] != grad[k][b]) CUDA(cudaFree(out[k][b]));
      CUDA(cudaFree(grad[k][b]));
    }
  free(host);
}

/* ---- the other collectives (device pointers are only passed on here, so they are void*) ---- */

/* ncclBroadcast from the last rank (non-roots' sendbuff holds -1, which must show up nowhere),
 * then the legacy in-place ncclBcast from rank 0 into the same buffers. */
static void broadcasts(void) {
  const size_t count = 1000003, bytes = count * sizeof(int32_t);
  const int root = g_n - 1;
  void *send[MAX_RANKS], *recv[MAX_RANKS];
  int32_t *want = host_alloc(bytes), *junk = host_alloc(bytes);
  for (size_t i = 0; i < count; i++) want[i] = (int32_t)(i * 3 + 11), junk[i] = -1;
  for (int k = 0; k < g_n; k++) {
    send[k] = dev_copy(k == root ? want : junk, bytes);
    recv[k] = dev_copy(junk, bytes);
  }
  ON_ALL_RANKS("ncclBroadcast", ncclBroadcast(send[k], recv[k], count, ncclInt32, root, g_comm[k], g_stream[k]));
  for (int k = 0; k < g_n; k++) check_dev(k, "ncclBroadcast from the last rank", recv[k], want, count, I32);
  for (size_t i = 0; i < count; i++) want[i] = (int32_t)(i * 5) - 77;
  for (int k = 0; k < g_n; k++) CUDA(cudaMemcpy(recv[k], k == 0 ? want : junk, bytes, cudaMemcpyHostToDevice));
  ON_ALL_RANKS("ncclBcast", ncclBcast(recv[k], count, ncclInt32, 0, g_comm[k], g_stream[k]));
  for (int k = 0; k < g_n; k++) check_dev(k, "ncclBcast (in place) from rank 0", recv[k], want, count, I32);
  free_all(send, recv);
  free(want);
  free(junk);
}

/* ncclReduce (float sum) to rank 1 % n; the other ranks' recvbuff must stay untouched. */
static void reduce(void) {
  const size_t count = 300007, bytes = count * sizeof(float);
  const int root = 1 % g_n;
  void *send[MAX_RANKS], *recv[MAX_RANKS];
  float *host = host_alloc(bytes), *untouched = host_alloc(bytes);
  for (size_t i = 0; i < count; i++) untouched[i] = -42.0f;
  for (int k = 0; k < g_n; k++) {
    for (size_t i = 0; i < count; i++) host[i] = (float)(k + 1) * (float)(i % 7 + 1);
    send[k] = dev_copy(host, bytes);
    recv[k] = dev_copy(untouched, bytes);
  }
  ON_ALL_RANKS("ncclReduce", ncclReduce(send[k], recv[k], count, ncclFloat, ncclSum, root, g_comm[k], g_stream[k]));
  for (size_t i = 0; i < count; i++) host[i] = (float)(g_n * (g_n + 1) / 2) * (float)(i % 7 + 1);
  for (int k = 0; k < g_n; k++)
    check_dev(k, k == root ? "ncclReduce on the root" : "ncclReduce recvbuff off the root", recv[k],
              k == root ? host : untouched, count, F32);
  free_all(send, recv);
  free(host);
  free(untouched);
}

/* ncclReduceScatter: block j of rank r's input is (r+1)*((j+i) % 11); rank r gets the sum of block r. */
static void reduce_scatter(void) {
  const size_t rc = 65537, n = (size_t)g_n;
  void *send[MAX_RANKS], *recv[MAX_RANKS];
  float* host = host_alloc(rc * n * sizeof(float));
  for (int k = 0; k < g_n; k++) {
    for (size_t j = 0; j < n; j++)
      for (size_t i = 0; i < rc; i++) host[j * rc + i] = (float)(k + 1) * (float)((j + i) % 11);
    send[k] = dev_copy(host, rc * n * sizeof(float));
    recv[k] = dev_copy(NULL, rc * sizeof(float));
  }
  ON_ALL_RANKS("ncclReduceScatter", ncclReduceScatter(send[k], recv[k], rc, ncclFloat, ncclSum, g_comm[k], g_stream[k]));
  for (int k = 0; k < g_n; k++) {
    for (size_t i = 0; i < rc; i++) host[i] = (float)(n * (n + 1) / 2) * (float)(((size_t)k + i) % 11);
    check_dev(k, "ncclReduceScatter", recv[k], host, rc, F32);
  }
  free_all(send, recv);
  free(host);
}

/* ncclAllGather: rank r contributes r*1000003 + i; everyone gets all blocks in rank order. */
static void all_gather(void) {
  const size_t sc = 100001, total = sc * (size_t)g_n;
  void *send[MAX_RANKS], *recv[MAX_RANKS];
  int32_t* want = host_alloc(total * sizeof(int32_t));
  for (size_t i = 0; i < total; i++) want[i] = (int32_t)(i / sc * 1000003 + i % sc);
  for (int k = 0; k < g_n; k++) {
    send[k] = dev_copy(want + (size_t)k * sc, sc * sizeof(int32_t));
    recv[k] = dev_copy(NULL, total * sizeof(int32_t));
    CUDA(cudaMemset(recv[k], 0, total * sizeof(int32_t)));
  }
  ON_ALL_RANKS("ncclAllGather", ncclAllGather(send[k], recv[k], sc, ncclInt32, g_comm[k], g_stream[k]));
  for (int k = 0; k < g_n; k++) check_dev(k, "ncclAllGather", recv[k], want, total, I32);
  free_all(send, recv);
  free(want);
}

/* bfloat16 sum of (r+1)*((i % 5) + 1): at most 36*5 = 180, so every value has at most 8
 * significant bits and is exact in bf16, whose bits are the top half of the float's. */
static uint16_t bf16_of(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16);
}

static void bf16_all_reduce(void) {
  const size_t count = 300001, bytes = count * sizeof(uint16_t);
  void *send[MAX_RANKS], *recv[MAX_RANKS];
  uint16_t* host = host_alloc(bytes);
  for (int k = 0; k < g_n; k++) {
    for (size_t i = 0; i < count; i++) host[i] = bf16_of((float)(k + 1) * (float)(i % 5 + 1));
    send[k] = dev_copy(host, bytes);
    recv[k] = dev_copy(NULL, bytes);
  }
  ON_ALL_RANKS("the bf16 all-reduce",
               ncclAllReduce(send[k], recv[k], count, ncclBfloat16, ncclSum, g_comm[k], g_stream[k]));
  for (size_t i = 0; i < count; i++) host[i] = bf16_of((float)(g_n * (g_n + 1) / 2) * (float)(i % 5 + 1));
  for (int k = 0; k < g_n; k++) check_dev(k, "ncclAllReduce of ncclBfloat16 (sum)", recv[k], host, count, BF16);
  free_all(send, recv);
  free(host);
}

/* Device sendbuff with host recvbuff: one call cannot mix the two, and a rejected call moves
 * nothing (the bf16 all-reduce after it checks that every rank goes on). In a group, so that a
 * library wrongly taking the calls runs them together rather than waiting for the next rank. */
static void mixed_buffers(void) {
  float* dev = dev_copy(NULL, 64 * sizeof(float));
  float host[MAX_RANKS][64];
  CALL(-1, ncclGroupStart());
  for (int k = 0; k < g_n; k++) {
    const ncclResult_t res = ncclAllReduce(dev, host[k], 64, ncclFloat, ncclSum, g_comm[k], g_stream[k]);
    if (res != ncclInvalidArgument)
      fail_at(k, "ncclAllReduce from device to host memory returned %s, expected ncclInvalidArgument",
              ncclGetErrorString(res));
  }
  group_end("the rejected mixed calls");
  sync_all("the rejected mixed calls");
  CUDA(cudaFree(dev));
}

/* A grouped all-to-all of 1 MiB per pair with ncclSend/ncclRecv on device buffers (itself
 * included): what a pipeline- or expert-parallel trainer does. */
static void all_to_all(void) {
  const size_t count = ((size_t)1 << 20) / sizeof(int32_t), total = count * (size_t)g_n;
  void *send[MAX_RANKS], *recv[MAX_RANKS];
  int32_t* host = host_alloc(total * sizeof(int32_t));
  for (int k = 0; k < g_n; k++) {
    for (int p = 0; p < g_n; p++)
      for (size_t i = 0; i < count; i++) host[(size_t)p * count + i] = (int32_t)((k * MAX_RANKS + p) * 100000 + (int)(i % 99991));
    send[k] = dev_copy(host, total * sizeof(int32_t));
    recv[k] = dev_copy(NULL, total * sizeof(int32_t));
  }
  settle();
  CALL(-1, ncclGroupStart());
  for (int k = 0; k < g_n; k++)
    for (int p = 0; p < g_n; p++) {
      CALL(k, ncclSend((int32_t*)send[k] + (size_t)p * count, count, ncclInt32, p, g_comm[k], g_stream[k]));
      CALL(k, ncclRecv((int32_t*)recv[k] + (size_t)p * count, count, ncclInt32, p, g_comm[k], g_stream[k]));
    }
  group_end("the all-to-all");
  sync_all("the all-to-all");
  for (int k = 0; k < g_n; k++) {
    for (int p = 0; p < g_n; p++)
      for (size_t i = 0; i < count; i++) host[(size_t)p * count + i] = (int32_t)((p * MAX_RANKS + k) * 100000 + (int)(i % 99991));
    check_dev(k, "the ncclSend/ncclRecv all-to-all", recv[k], host, total, I32);
  }
  free(host);
  free_all(send, recv);
}

static int init_ranks(void) {
  ncclUniqueId id;
  if (!CALL(-1, ncclGetUniqueId(&id))) return 0;
  CALL(-1, ncclGroupStart());
  for (int k = 0; k < g_n; k++) CALL(k, ncclCommInitRank(&g_comm[k], g_n, id, k));
  group_end("the grouped ncclCommInitRank calls");
  if (g_failures) return 0;
  for (int k = 0; k < g_n; k++) {
    if (!CUDA(cudaStreamCreateWithFlags(&g_stream[k], cudaStreamNonBlocking))) return 0;
    int device = -7, rank = -7;
    if (CALL(k, ncclCommCuDevice(g_comm[k], &device)) && device != 0)
      fail_at(k, "ncclCommCuDevice gave %d, expected 0", device);
    if (CALL(k, ncclCommUserRank(g_comm[k], &rank)) && rank != k) fail_at(k, "ncclCommUserRank gave %d", rank);
  }
  return 1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  g_n = argc == 2 ? atoi(argv[1]) : 0;
  if (g_n < 1 || g_n > MAX_RANKS) {
    fprintf(stderr, "usage: %s NRANKS (1..%d)\n", argv[0], MAX_RANKS);
    return 1;
  }
  signal(SIGALRM, on_alarm);
  alarm(RUN_DEADLINE_S);
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    printf("no CUDA device: %s\n", err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount reports 0");
    return 2;
  }
  if (!CUDA(cudaSetDevice(0)) || !init_ranks()) give_up();
  gradient_loop();
  broadcasts();
  reduce();
  reduce_scatter();
  all_gather();
  mixed_buffers();
  all_to_all();
  bf16_all_reduce();
  for (int k = 0; k < g_n; k++) {
    CALL(k, ncclCommDestroy(g_comm[k]));
    CUDA(cudaStreamDestroy(g_stream[k]));
  }
  printf("nccl_device_program N=%d: %s (%d failed checks)\n", g_n, g_failures ? "FAIL" : "PASS", g_failures);
  return g_failures ? 1 : 0;
}
