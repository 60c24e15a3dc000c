/* ddp.c — the DDP layer: gradient buckets, ready marks, bucket all-reduces on a communication
 * thread overlapping backward, weighted averaging. A layer ON the public API: includes only ringo.h,
 * ringo_ddp.h, libc, pthreads and ddp_device.h (its own CUDA-free vtable for device memory, and the
 * host pre-scale of ddp_scale.c; no src/include). Tested by test/test_ddp.cc and
 * test/test_ddp_device.cc; used by bench/ddp_train.c.
 *
 *   caller thread (backward)                 communication thread
 *   MarkReady(p) ... bucket k complete  -->  launched = k+1 --> scale by w_r, all-reduce (sum), unpack
 *   MarkReady(q) ... (backward goes on)                          bucket k+1 ...
 *   Finish(): wait until done == nbuckets <--------------------  done++
 *
 * Device buckets take the same road, but the thread only enqueues: on the completing MarkReady the
 * bucket's ready event is recorded on the compute stream; the thread makes the side stream wait
 * for it and enqueues scale, pack, ringoAllReduce and unpack there; Finish makes the compute stream
 * wait for the side stream (an event) and returns. The host never waits for the GPU.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ddp/ddp_device.h"
#include "ringo.h"
#include "ringo_ddp.h"

#define MSG_BYTES 1024
#define NUM_GROUPS (RINGO_NUM_TYPES * 2) /* one bucket group per (dtype, memory kind) */

struct ddp_param {
  void* grad;
  void* param;
  size_t count;
  ringoDataType_t type;
  ringoMemKind_t mem;
  int bucket;   /* fixed by BroadcastParams */
  int position; /* place in the bucket's layout */
};

struct ddp_bucket {
  int first, n;  /* its parameters are order[first .. first+n), in registration order */
  ringoDataType_t type;
  ringoMemKind_t mem;
  size_t count, bytes;
  char* inplace; /* the gradients tile [inplace, inplace+bytes) in layout order: no staging copy */
};

struct ringoDdp {
  ringoComm_t comm;
  int nranks, rank;
  size_t bucket_bytes, first_bucket_bytes;
  struct ddp_param* params;
  int nparams, cap;
  struct ddp_bucket* buckets;
  int nbuckets;
  int* order;
  char* staging; /* one bucket at a time runs, so one buffer of the largest non-tiling bucket */
  ringoStream_t stream;                /* compute stream of device gradients (SetStream) */
  struct ringo_ddp_device_ops dev;     /* device memory: dev.ctx set once opened or installed */
  int have_dev, ndevice_buckets;
  char* dev_staging; /* device twin of staging: its users are ordered on the side stream */
  int frozen;    /* BroadcastParams succeeded: buckets fixed, registration closed */
  int no_sync;
  double weight; /* w_r = n_r / sum(n); only changed between steps */

  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work, done_cv;
  /* Step state, under mu. Buckets [0, launched) are handed to the thread, [0, started) taken by it,
   * [0, done) finished; pending[b] counts the gradients of bucket b not yet marked ready. */
  unsigned char* ready;
  int* pending;
  int in_step, launched, started, done, stop;
  ringoResult_t failed; /* first error of a bucket all-reduce; sticky */
  int failure_reported; /* Finish has returned that error once; later calls get ringoInvalidUsage */
  char async_msg[MSG_BYTES];
  ringoDdpStats stats;
  char msg[MSG_BYTES];
};

static _Thread_local char t_msg[MSG_BYTES]; /* failures with no context to hold them */

__attribute__((format(printf, 3, 4))) static ringoResult_t fail(struct ringoDdp* d, ringoResult_t res,
                                                                const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d ? d->msg : t_msg, MSG_BYTES, fmt, ap);
  va_end(ap);
  return res;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t float_size(ringoDataType_t t) {
  switch (t) {
    case ringoFloat16: case ringoBfloat16: return 2;
    case ringoFloat32: return 4;
    case ringoFloat64: return 8;
    default: return 0; /* not a floating-point type: gradients must be */
  }
}

static const char* type_name(int t) {
  static const char* const names[RINGO_NUM_TYPES] = {"int8",    "uint8",   "int32",   "uint32",  "int64",
                                                     "uint64",  "float16", "float32", "float64", "bfloat16"};
  return t >= 0 && t < RINGO_NUM_TYPES ? names[t] : "?";
}

static const char* mem_name(int m) { return m == ringoMemDevice ? "device" : "host"; }

/* ---- host memory check ----
 * A device pointer registered as host memory, or read-only memory the library will write (the
 * average into grad; rank 0's values into param on the other ranks), must be an error, not a crash
 * in the communication thread. Without CUDA we cannot ask the driver, but a device address is not
 * readable by the host (the driver reserves it inaccessible), so reading one byte through
 * process_vm_readv on ourselves fails with EFAULT where a load would fault. Writability is read from
 * the mapping's flags in /proc/self/maps, never by writing (a write-back would race with the
 * owner's writes and dirty shared file mappings). The first and last byte are checked. */
static int probe_byte(const void* p) {
  char byte;
  struct iovec local = {&byte, 1}, remote = {(void*)(uintptr_t)p, 1};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1) return 1;
  return errno != EFAULT; /* ENOSYS / EPERM (seccomp): the probe is unavailable, trust the caller */
}

static int host_readable(const void* p, size_t bytes) {
  return bytes == 0 || (probe_byte(p) && probe_byte((const char*)p + bytes - 1));
}

/* Which of the n buffers at[k] (bytes long each) lies in a mapping /proc/self/maps does not mark
 * writable, at its first or last byte: its index, or -1 (also when the file cannot be read: trust
 * the caller, as the read probe does). One pass over the file for all of them. */
static int first_unwritable(const void* const* at, int n, size_t bytes) {
  enum { MAX_BUFS = 2 };
  uintptr_t ends[2 * MAX_BUFS];
  int writable[2 * MAX_BUFS] = {0};
  if (bytes == 0 || n > MAX_BUFS) return -1;
  for (int k = 0; k < n; k++) ends[2 * k] = (uintptr_t)at[k], ends[2 * k + 1] = (uintptr_t)at[k] + bytes - 1;
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) return -1;
  char line[512];
  unsigned long lo, hi;
  char perms[5];
  while (fgets(line, sizeof line, maps)) {
    if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
    for (int e = 0; e < 2 * n; e++)
      if (ends[e] >= lo && ends[e] < hi) writable[e] = perms[1] == 'w';
    if (!strchr(line, '\n')) /* a path longer than line: skip the rest of it */
      for (int c = fgetc(maps); c != EOF && c != '\n'; c = fgetc(maps)) {}
  }
  fclose(maps);
  for (int k = 0; k < n; k++)
    if (!writable[2 * k] || !writable[2 * k + 1]) return k;
  return -1;
}

/* Calls whose collectives must complete before they return cannot be queued in an open group. */
static ringoResult_t check_not_grouped(struct ringoDdp* d, const char* fn) {
  int depth = 0;
  if (ringoGroupDepth(&depth) != ringoSuccess || depth == 0) return ringoSuccess;
  return fail(d, ringoInvalidUsage, "%s: called inside ringoGroupStart/ringoGroupEnd; its collectives must complete "
              "before it returns, so call it outside the group", fn);
}

/* ---- bucket assignment (BroadcastParams) ---- */

/* Walks the parameters from last to first, appending each to the open bucket of its (dtype, memory
 * kind) group; a bucket closes once it holds at least its limit (firstBucketBytes for a group's
 * first bucket, bucketBytes after). Buckets are numbered as they open, i.e. by the reverse position
 * of their first parameter: the order a plain backward completes them in. */
static void assign_buckets(struct ringoDdp* d, int* bucket_of) {
  int open[NUM_GROUPS], closed[NUM_GROUPS];
  size_t bytes[NUM_GROUPS];
  for (int g = 0; g < NUM_GROUPS; g++) open[g] = -1, closed[g] = 0, bytes[g] = 0;
  d->nbuckets = 0;
  for (int i = d->nparams - 1; i >= 0; i--) {
    const struct ddp_param* p = &d->params[i];
    const int g = (int)p->type * 2 + (int)p->mem;
    if (open[g] < 0) {
      open[g] = d->nbuckets++;
      bytes[g] = 0;
      d->buckets[open[g]] = (struct ddp_bucket){.type = p->type, .mem = p->mem};
    }
    bucket_of[i] = open[g];
    bytes[g] += p->count * float_size(p->type);
    if (bytes[g] >= (closed[g] == 0 ? d->first_bucket_bytes : d->bucket_bytes)) open[g] = -1, closed[g]++;
  }
}

/* A bucket is all-reduced in place when its gradients lie back to back in layout order. */
static char* tiled_base(const struct ringoDdp* d, const struct ddp_bucket* b) {
  char *base = NULL, *next = NULL;
  for (int k = 0; k < b->n; k++) {
    const struct ddp_param* p = &d->params[d->order[b->first + k]];
    if (p->count == 0) continue; /* an empty gradient takes no room, wherever it points */
    if (!base) base = next = p->grad;
    if ((char*)p->grad != next) return NULL;
    next += p->count * float_size(p->type);
  }
  return base;
}

/* Fills buckets[], order[] (each bucket's parameters in registration order), positions, pending
 * counts and the staging buffer. */
static ringoResult_t build_buckets(struct ringoDdp* d) {
  const int np = d->nparams;
  free(d->buckets), free(d->order), free(d->ready), free(d->pending), free(d->staging); /* a retry */
  if (d->dev_staging) d->dev.free(d->dev.ctx, d->dev_staging);
  d->staging = d->dev_staging = NULL;
  int* bucket_of = malloc(sizeof(int) * (size_t)(np ? np : 1));
  d->buckets = calloc((size_t)(np ? np : 1), sizeof(struct ddp_bucket));
  d->order = malloc(sizeof(int) * (size_t)(np ? np : 1));
  d->ready = calloc((size_t)(np ? np : 1), 1);
  d->pending = calloc((size_t)(np ? np : 1), sizeof(int));
  if (!bucket_of || !d->buckets || !d->order || !d->ready || !d->pending) {
    free(bucket_of);
    return fail(d, ringoSystemError, "ringoDdpBroadcastParams: out of memory for %d parameters", np);
  }
  assign_buckets(d, bucket_of);
  for (int i = 0; i < np; i++) d->buckets[bucket_of[i]].n++;
  for (int b = 0, at = 0; b < d->nbuckets; b++) d->buckets[b].first = at, at += d->buckets[b].n;
  for (int b = 0; b < d->nbuckets; b++) d->buckets[b].n = 0;
  for (int i = 0; i < np; i++) { /* ascending i: a bucket's layout is in registration order */
    struct ddp_bucket* b = &d->buckets[bucket_of[i]];
    d->params[i].bucket = bucket_of[i];
    d->params[i].position = b->n;
    d->order[b->first + b->n++] = i;
    b->count += d->params[i].count;
    b->bytes += d->params[i].count * float_size(d->params[i].type);
  }
  free(bucket_of);
  size_t staging[2] = {0, 0}; /* host, device */
  d->ndevice_buckets = 0;
  for (int b = 0; b < d->nbuckets; b++) {
    struct ddp_bucket* bk = &d->buckets[b];
    bk->inplace = tiled_base(d, bk);
    if (!bk->inplace && bk->bytes > staging[bk->mem]) staging[bk->mem] = bk->bytes;
    d->ndevice_buckets += bk->mem == ringoMemDevice;
    d->pending[b] = bk->n;
  }
  if (staging[0] && !(d->staging = malloc(staging[0])))
    return fail(d, ringoSystemError, "ringoDdpBroadcastParams: out of memory for a %zu-byte staging buffer",
                staging[0]);
  if (!d->ndevice_buckets) return ringoSuccess;
  int e = d->dev.prepare(d->dev.ctx, d->nbuckets);
  if (e) return fail(d, ringoUnhandledCudaError, "ringoDdpBroadcastParams: creating the buckets' ready events "
                     "failed: %s", d->dev.error_string(e));
  if (staging[1] && (e = d->dev.alloc(d->dev.ctx, (void**)&d->dev_staging, staging[1])) != 0) {
    d->dev_staging = NULL;
    return fail(d, ringoUnhandledCudaError, "ringoDdpBroadcastParams: allocating a %zu-byte device staging buffer "
                "failed: %s", staging[1], d->dev.error_string(e));
  }
  return ringoSuccess;
}

/* ---- the communication thread ---- */

static ringoResult_t allreduce_failed(const struct ringoDdp* d, const struct ddp_bucket* b, ringoResult_t res,
                                      char* msg) {
  snprintf(msg, MSG_BYTES, "bucket %d all-reduce (%zu x %s%s) failed: %s: %s", (int)(b - d->buckets), b->count,
           type_name(b->type), b->mem == ringoMemDevice ? ", device memory" : "", ringoGetErrorString(res),
           ringoGetLastError(d->comm));
  return res;
}

/* One host bucket: pre-scale by w_r (packing into staging unless the gradients tile memory), one
 * ringoSum all-reduce, unpack. On failure the ringo message is copied into msg. */
static ringoResult_t run_host_bucket(struct ringoDdp* d, const struct ddp_bucket* b, char* msg) {
  const size_t esize = float_size(b->type);
  char* buf = b->inplace ? b->inplace : d->staging;
  size_t off = 0;
  if (b->inplace) ringo_ddp_host_scale(buf, buf, b->count, b->type, d->weight);
  else
    for (int k = 0; k < b->n; k++) {
      const struct ddp_param* p = &d->params[d->order[b->first + k]];
      ringo_ddp_host_scale(buf + off, p->grad, p->count, p->type, d->weight);
      off += p->count * esize;
    }
  const ringoResult_t res = ringoAllReduce(buf, buf, b->count, b->type, ringoSum, d->comm, NULL);
  if (res != ringoSuccess) return allreduce_failed(d, b, res, msg);
  off = 0;
  if (!b->inplace)
    for (int k = 0; k < b->n; k++) {
      const struct ddp_param* p = &d->params[d->order[b->first + k]];
      if (p->count) memcpy(p->grad, buf + off, p->count * esize);
      off += p->count * esize;
    }
  return ringoSuccess;
}

static ringoResult_t device_failed(const struct ringoDdp* d, const struct ddp_bucket* b, const char* what, int e,
                                   char* msg) {
  snprintf(msg, MSG_BYTES, "bucket %d (device memory): %s failed: %s", (int)(b - d->buckets), what,
           d->dev.error_string(e));
  return ringoUnhandledCudaError;
}

/* One device bucket, enqueued on the side stream behind the bucket's ready event: the same steps
 * as a host bucket (scale-and-pack, all-reduce, unpack), none of which waits for the GPU. Errors
 * here are enqueue errors; those of the all-reduce itself reach ringoCommGetAsyncError. */
static ringoResult_t run_device_bucket(struct ringoDdp* d, const struct ddp_bucket* b, char* msg) {
  const struct ringo_ddp_device_ops* o = &d->dev;
  const size_t esize = float_size(b->type);
  char* buf = b->inplace ? b->inplace : d->dev_staging;
  if (b->count == 0) return ringoSuccess; /* only empty gradients: every rank skips it alike */
  if (o->bind) o->bind(o->ctx);
  int e = o->side_wait(o->ctx, (int)(b - d->buckets));
  if (e) return device_failed(d, b, "waiting for the ready event", e, msg);
  if (b->inplace && (e = o->scale(o->ctx, buf, buf, b->count, b->type, d->weight)) != 0)
    return device_failed(d, b, "the scale kernel", e, msg);
  size_t off = 0;
  for (int k = 0; !b->inplace && k < b->n; k++) {
    const struct ddp_param* p = &d->params[d->order[b->first + k]];
    if (p->count && (e = o->scale(o->ctx, buf + off, p->grad, p->count, p->type, d->weight)) != 0)
      return device_failed(d, b, "the scale kernel (packing)", e, msg);
    off += p->count * esize;
  }
  const ringoResult_t res = ringoAllReduce(buf, buf, b->count, b->type, ringoSum, d->comm, o->side_stream(o->ctx));
  if (res != ringoSuccess) return allreduce_failed(d, b, res, msg);
  off = 0;
  for (int k = 0; !b->inplace && k < b->n; k++) {
    const struct ddp_param* p = &d->params[d->order[b->first + k]];
    if (p->count && (e = o->copy(o->ctx, p->grad, buf + off, p->count * esize)) != 0)
      return device_failed(d, b, "unpacking (cudaMemcpyAsync)", e, msg);
    off += p->count * esize;
  }
  return ringoSuccess;
}

static ringoResult_t run_bucket(struct ringoDdp* d, const struct ddp_bucket* b, char* msg) {
  return b->mem == ringoMemDevice ? run_device_bucket(d, b, msg) : run_host_bucket(d, b, msg);
}

/* Takes launched buckets in order. After a failure the rest of the step's buckets are only
 * counted (the communicator is unusable), so Finish always returns. */
static void* comm_main(void* arg) {
  struct ringoDdp* d = arg;
  char msg[MSG_BYTES];
  pthread_mutex_lock(&d->mu);
  for (;;) {
    while (!d->stop && d->started == d->launched) pthread_cond_wait(&d->work, &d->mu);
    if (d->stop) break;
    const struct ddp_bucket* b = &d->buckets[d->started++];
    const int skip = d->failed != ringoSuccess;
    pthread_mutex_unlock(&d->mu);
    const double t0 = now_s();
    const ringoResult_t res = skip ? ringoSuccess : run_bucket(d, b, msg);
    const double t = now_s() - t0;
    pthread_mutex_lock(&d->mu);
    if (res != ringoSuccess && d->failed == ringoSuccess) {
      d->failed = res;
      memcpy(d->async_msg, msg, MSG_BYTES);
    }
    if (!skip && res == ringoSuccess) d->stats.buckets++, d->stats.bytes += b->bytes;
    d->stats.commSeconds += t;
    d->done++;
    pthread_cond_broadcast(&d->done_cv);
  }
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

/* Under mu: hands every bucket that is complete, and whose predecessors are launched, to the
 * thread. Launching strictly in bucket order is what keeps the ranks' all-reduces matched. */
static void launch_ready(struct ringoDdp* d) {
  const int before = d->launched;
  while (d->launched < d->nbuckets && d->pending[d->launched] == 0) d->launched++;
  if (d->launched != before) pthread_cond_signal(&d->work);
}

/* Under mu: a device operation of the step failed (message in d->msg); the context is unusable and
 * Finish returns the error once. */
static ringoResult_t ddp_step_failed(struct ringoDdp* d, ringoResult_t res) {
  if (d->failed == ringoSuccess) {
    d->failed = res;
    memcpy(d->async_msg, d->msg, MSG_BYTES);
  }
  return res;
}

/* Under mu, outside NoSync: parameter i is final. The mark that completes a device bucket records
 * its ready event on the compute stream right then, so the bucket's all-reduce waits for exactly
 * the work enqueued there before the mark. If that fails the bucket is still launched (and
 * skipped, as after any failure), so Finish returns. */
static ringoResult_t count_ready(struct ringoDdp* d, int i, const char* fn) {
  const int b = d->params[i].bucket;
  d->ready[i] = 1;
  if (--d->pending[b] != 0 || d->buckets[b].mem != ringoMemDevice) return ringoSuccess;
  const int e = d->dev.record_ready(d->dev.ctx, b, d->stream);
  if (e == 0) return ringoSuccess;
  return ddp_step_failed(d, fail(d, ringoUnhandledCudaError, "%s: recording bucket %d's ready event on the compute "
                             "stream failed: %s", fn, b, d->dev.error_string(e)));
}

/* Under mu, once every launched bucket is done: the next step starts clean. */
static void reset_step(struct ringoDdp* d) {
  memset(d->ready, 0, (size_t)d->nparams);
  for (int b = 0; b < d->nbuckets; b++) d->pending[b] = d->buckets[b].n;
  d->in_step = d->launched = d->started = d->done = 0;
}

/* Common checks of the calls that need an idle, healthy context (under mu or single-threaded). */
static ringoResult_t check_usable(struct ringoDdp* d, const char* fn, int need_frozen, int need_idle) {
  if (d->failed != ringoSuccess)
    return fail(d, ringoInvalidUsage, "%s: the context is unusable after an earlier error: %s", fn, d->async_msg);
  if (need_frozen && !d->frozen)
    return fail(d, ringoInvalidUsage, "%s: call ringoDdpBroadcastParams first (it fixes the buckets)", fn);
  if (need_idle && d->in_step)
    return fail(d, ringoInvalidUsage, "%s: a step is in progress (MarkReady was called); call ringoDdpFinish first", fn);
  return ringoSuccess;
}

static ringoResult_t comm_fail(struct ringoDdp* d, const char* fn, const char* what, ringoResult_t res) {
  return fail(d, res, "%s: %s failed: %s: %s", fn, what, ringoGetErrorString(res), ringoGetLastError(d->comm));
}

/* A device parameter: the device ops are opened on the first one (so a build or communicator
 * without a GPU says so here), then both buffers are checked to be memory of the comm's GPU. */
static ringoResult_t check_device(struct ringoDdp* d, const char* fn, int i, const void* grad, const void* param,
                                  size_t bytes) {
  if (!d->have_dev) {
    char why[MSG_BYTES / 2];
    const ringoResult_t res = ringo_ddp_device_open(d->comm, &d->dev, why, sizeof why);
    if (res != ringoSuccess) return fail(d, res, "%s: parameter %d: device memory: %s", fn, i, why);
    d->have_dev = 1;
  }
  for (int k = 0; k < 2; k++) {
    const void* p = k ? param : grad;
    const int e = d->dev.check_ptr(d->dev.ctx, p, bytes);
    if (e) return fail(d, ringoInvalidUsage, "%s: parameter %d: %s %p (%zu bytes) is not device memory of the "
                       "communicator's GPU: %s", fn, i, k ? "param" : "grad", p, bytes, d->dev.error_string(e));
  }
  return ringoSuccess;
}

ringoResult_t ringo_ddp_set_device_ops(ringoDdp_t ddp, const struct ringo_ddp_device_ops* ops) {
  if (!ddp || !ops) return fail(ddp, ringoInvalidArgument, "ringo_ddp_set_device_ops: %s is NULL", ddp ? "ops" : "ddp");
  if (ddp->have_dev)
    return fail(ddp, ringoInvalidUsage, "ringo_ddp_set_device_ops: device memory is registered already");
  ddp->dev = *ops;
  ddp->have_dev = 1;
  return ringoSuccess;
}

/* ---- the public API ---- */

RINGO_API ringoResult_t ringoDdpCreate(ringoDdp_t* ddp, ringoComm_t comm, size_t bucketBytes,
                                       size_t firstBucketBytes) {
  if (!ddp) return fail(NULL, ringoInvalidArgument, "ringoDdpCreate: ddp is NULL");
  *ddp = NULL;
  int nranks, rank;
  if (!comm || ringoCommCount(comm, &nranks) != ringoSuccess || ringoCommUserRank(comm, &rank) != ringoSuccess)
    return fail(NULL, ringoInvalidArgument, "ringoDdpCreate: comm is NULL or not a communicator");
  struct ringoDdp* d = calloc(1, sizeof *d);
  if (!d) return fail(NULL, ringoSystemError, "ringoDdpCreate: out of memory");
  d->comm = comm;
  d->nranks = nranks;
  d->rank = rank;
  d->bucket_bytes = bucketBytes ? bucketBytes : RINGO_DDP_DEFAULT_BUCKET_BYTES;
  d->first_bucket_bytes = firstBucketBytes ? firstBucketBytes : RINGO_DDP_DEFAULT_FIRST_BUCKET_BYTES;
  d->weight = 1.0 / (double)nranks; /* every rank counts as one sample until SetLocalBatch */
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->work, NULL);
  pthread_cond_init(&d->done_cv, NULL);
  const int err = pthread_create(&d->thread, NULL, comm_main, d);
  if (err) {
    pthread_cond_destroy(&d->done_cv);
    pthread_cond_destroy(&d->work);
    pthread_mutex_destroy(&d->mu);
    free(d);
    return fail(NULL, ringoSystemError, "ringoDdpCreate: cannot start the communication thread: %s", strerror(err));
  }
  *ddp = d;
  return ringoSuccess;
}

RINGO_API ringoResult_t ringoDdpRegister(ringoDdp_t ddp, void* grad, void* param, size_t count,
                                         ringoDataType_t datatype, int* index) {
  return ringoDdpRegisterMem(ddp, grad, param, count, datatype, ringoMemHost, index);
}

RINGO_API ringoResult_t ringoDdpRegisterMem(ringoDdp_t ddp, void* grad, void* param, size_t count,
                                            ringoDataType_t datatype, ringoMemKind_t mem, int* index) {
  static const char fn[] = "ringoDdpRegister";
  if (!ddp) return fail(NULL, ringoInvalidArgument, "%s: ddp is NULL", fn);
  const int i = ddp->nparams;
  if (ddp->frozen) return fail(ddp, ringoInvalidUsage, "%s: parameter %d registered after ringoDdpBroadcastParams", fn, i);
  const size_t esize = float_size(datatype);
  if (esize == 0)
    return fail(ddp, ringoInvalidArgument, "%s: parameter %d: datatype %d (%s) is not a floating-point type", fn, i,
                (int)datatype, type_name((int)datatype));
  if (count > SIZE_MAX / esize) return fail(ddp, ringoInvalidArgument, "%s: parameter %d: count %zu overflows", fn, i, count);
  if (count > 0 && (!grad || !param))
    return fail(ddp, ringoInvalidArgument, "%s: parameter %d: %s is NULL with count %zu", fn, i, grad ? "param" : "grad", count);
  if (mem != ringoMemHost && mem != ringoMemDevice)
    return fail(ddp, ringoInvalidArgument, "%s: parameter %d: unknown memory kind %d", fn, i, (int)mem);
  if (mem == ringoMemDevice) {
    const ringoResult_t res = check_device(ddp, fn, i, grad, param, count * esize);
    if (res != ringoSuccess) return res;
  } else {
    const size_t bytes = count * esize;
    const int param_written = ddp->rank != 0 && ddp->nranks > 1; /* rank 0's params are the broadcast's source */
    const char* bad = !host_readable(grad, bytes) ? "grad" : !host_readable(param, bytes) ? "param" : NULL;
    if (bad)
      return fail(ddp, ringoInvalidUsage, "%s: parameter %d: %s %p (%zu bytes) is not host memory this process can "
                  "read: a device pointer? register device memory as ringoMemDevice", fn, i, bad,
                  bad[0] == 'g' ? grad : param, bytes);
    const void* const written[2] = {grad, param};
    const int k = first_unwritable(written, param_written ? 2 : 1, bytes);
    bad = k < 0 ? NULL : k == 0 ? "grad" : "param";
    if (bad)
      return fail(ddp, ringoInvalidUsage, "%s: parameter %d: %s %p (%zu bytes) is read-only memory; ringo writes the "
                  "average into grad and rank 0's values into the other ranks' param", fn, i, bad,
                  bad[0] == 'g' ? grad : param, bytes);
  }
  if (i == ddp->cap) {
    const int cap = ddp->cap ? 2 * ddp->cap : 16;
    struct ddp_param* p = realloc(ddp->params, sizeof(struct ddp_param) * (size_t)cap);
    if (!p) return fail(ddp, ringoSystemError, "%s: out of memory for %d parameters", fn, cap);
    ddp->params = p;
    ddp->cap = cap;
  }
  ddp->params[i] = (struct ddp_param){grad, param, count, datatype, mem, -1, -1};
  ddp->nparams++;
  if (index) *index = i;
  return ringoSuccess;
}

static void describe_bucket(char* out, size_t cap, int64_t count, int64_t code) {
  if (count < 0) snprintf(out, cap, "missing");
  else snprintf(out, cap, "%lld x %s (%s memory)", (long long)count, type_name((int)(code & 0xff)), mem_name((int)(code >> 8)));
}

/* Finds the first parameter some rank registered differently from rank 0. Every rank runs both
 * gathers whatever it registered (the second is sized by the largest count of any rank), so all of
 * them reach the same verdict from the same data: a mismatch is an error everywhere, never a hang. */
static ringoResult_t check_shapes(struct ringoDdp* d, const char* fn) {
  const size_t n = (size_t)d->nranks;
  int64_t head[3] = {d->nparams, (int64_t)d->bucket_bytes, (int64_t)d->first_bucket_bytes}, maxp = 0;
  int64_t* heads = malloc(3 * n * sizeof(int64_t));
  if (!heads) return fail(d, ringoSystemError, "%s: out of memory", fn);
  ringoResult_t res = ringoAllGather(head, heads, 3, ringoInt64, d->comm, NULL);
  if (res != ringoSuccess) res = comm_fail(d, fn, "gathering the parameter counts", res);
  for (size_t r = 0; res == ringoSuccess && r < n; r++) {
    if (heads[3 * r] > maxp) maxp = heads[3 * r];
    if (heads[3 * r + 1] != heads[1] || heads[3 * r + 2] != heads[2])
      res = fail(d, ringoInvalidUsage, "%s: ranks use different bucket sizes: rank 0 has bucketBytes %lld and "
                 "firstBucketBytes %lld, rank %zu has %lld and %lld", fn, (long long)heads[1], (long long)heads[2], r,
                 (long long)heads[3 * r + 1], (long long)heads[3 * r + 2]);
  }
  const size_t m = (size_t)maxp;
  int64_t* mine = res == ringoSuccess ? malloc(2 * (m ? m : 1) * sizeof(int64_t)) : NULL;
  int64_t* all = mine ? malloc(2 * m * n * sizeof(int64_t) + 1) : NULL;
  if (res == ringoSuccess && !all) res = fail(d, ringoSystemError, "%s: out of memory", fn);
  for (size_t i = 0; res == ringoSuccess && i < m; i++) {
    const int have = i < (size_t)d->nparams;
    mine[2 * i] = have ? (int64_t)d->params[i].count : -1;
    mine[2 * i + 1] = have ? (int64_t)d->params[i].type | (int64_t)d->params[i].mem << 8 : -1;
  }
  if (res == ringoSuccess && (res = ringoAllGather(mine, all, 2 * m, ringoInt64, d->comm, NULL)) != ringoSuccess)
    res = comm_fail(d, fn, "gathering the parameter shapes", res);
  for (size_t i = 0; res == ringoSuccess && i < m; i++)
    for (size_t r = 1; r < n; r++) {
      const int64_t* a = all + 2 * i;
      const int64_t* b = all + 2 * (m * r + i);
      if (a[0] == b[0] && a[1] == b[1]) continue;
      char sa[96], sb[96];
      describe_bucket(sa, sizeof sa, a[0], a[1]);
      describe_bucket(sb, sizeof sb, b[0], b[1]);
      res = fail(d, ringoInvalidUsage, "%s: ranks registered different parameters: parameter %zu is %s on rank 0 but "
                 "%s on rank %zu (rank 0 registered %lld parameters, rank %zu %lld)", fn, i, sa, sb, r,
                 (long long)heads[0], r, (long long)heads[3 * r]);
      break;
    }
  free(all);
  free(mine);
  free(heads);
  return res;
}

/* Rank 0's values into every param, in the same order on every rank: the device ones first, on the
 * side stream behind the compute stream's work so far, then waited for (a one-time setup call may
 * block the host), then the host ones. */
static ringoResult_t broadcast_params(struct ringoDdp* d, const char* fn) {
  const struct ringo_ddp_device_ops* o = &d->dev;
  int ndev = 0, e;
  for (int i = 0; i < d->nparams; i++) ndev += d->params[i].mem == ringoMemDevice && d->params[i].count > 0;
  if (ndev && (e = o->side_after(o->ctx, d->stream)) != 0)
    return fail(d, ringoUnhandledCudaError, "%s: ordering the side stream after the compute stream failed: %s", fn,
                o->error_string(e));
  for (int pass = ndev ? 0 : 1; pass < 2; pass++) {
    const ringoMemKind_t kind = pass ? ringoMemHost : ringoMemDevice;
    for (int i = 0; i < d->nparams; i++) {
      const struct ddp_param* p = &d->params[i];
      if (p->count == 0 || p->mem != kind) continue;
      const ringoResult_t res = ringoBroadcast(p->param, p->param, p->count, p->type, 0, d->comm,
                                               kind == ringoMemDevice ? o->side_stream(o->ctx) : NULL);
      if (res != ringoSuccess) {
        char what[64];
        snprintf(what, sizeof what, "broadcasting parameter %d", i);
        return comm_fail(d, fn, what, res);
      }
    }
    if (pass == 1) break;
    ringoResult_t async = ringoSuccess;
    if ((e = o->sync_side(o->ctx)) != 0)
      return fail(d, ringoUnhandledCudaError, "%s: waiting for the device parameters' broadcast failed: %s", fn,
                  o->error_string(e));
    if (ringoCommGetAsyncError(d->comm, &async) == ringoSuccess && async != ringoSuccess)
      return comm_fail(d, fn, "broadcasting the device parameters", async);
  }
  return ringoSuccess;
}

/* Ranks of one process sharing a GPU and a default stream would deadlock: each Finish queues the
 * stream behind a collective that needs the other ranks' backward, queued behind it. */
static ringoResult_t check_compute_stream(struct ringoDdp* d, const char* fn, ringoStream_t stream) {
  if (!d->have_dev || !d->dev.stream_shared || !d->dev.stream_shared(d->dev.ctx, stream)) return ringoSuccess;
  return fail(d, ringoInvalidUsage, "%s: several ranks of this process share the GPU, and the compute stream is the "
              "default stream they all share: give each rank its own stream (ringoDdpSetStream)", fn);
}

RINGO_API ringoResult_t ringoDdpBroadcastParams(ringoDdp_t ddp) {
  static const char fn[] = "ringoDdpBroadcastParams";
  if (!ddp) return fail(NULL, ringoInvalidArgument, "%s: ddp is NULL", fn);
  ringoResult_t res = check_usable(ddp, fn, 0, 1);
  if (res != ringoSuccess) return res;
  if (ddp->frozen) return fail(ddp, ringoInvalidUsage, "%s: called twice (the buckets are fixed already)", fn);
  if ((res = check_not_grouped(ddp, fn)) != ringoSuccess) return res;
  if ((res = check_compute_stream(ddp, fn, ddp->stream)) != ringoSuccess) return res;
  /* The buckets first: their device allocations (events, staging) must be done on every rank before
   * any rank enqueues a device collective, since ranks of one process share the GPU, an allocation
   * may wait for the device work in flight, and a ring kernel in flight waits for this rank's. The
   * shape check's all-gathers are then the barrier. A retry after a failed check builds them anew. */
  if ((res = build_buckets(ddp)) != ringoSuccess || (res = check_shapes(ddp, fn)) != ringoSuccess) return res;
  if ((res = broadcast_params(ddp, fn)) != ringoSuccess) {
    ddp->failed = res; /* ranks may now hold different parameters: no training on this context */
    ddp->failure_reported = 1;
    memcpy(ddp->async_msg, ddp->msg, MSG_BYTES);
    return res;
  }
  ddp->frozen = 1;
  return ringoSuccess;
}

RINGO_API ringoResult_t ringoDdpMarkReady(ringoDdp_t ddp, int index) {
  static const char fn[] = "ringoDdpMarkReady";
  if (!ddp) return fail(NULL, ringoInvalidArgument, "%s: ddp is NULL", fn);
  pthread_mutex_lock(&ddp->mu);
  ringoResult_t res = check_usable(ddp, fn, 1, 0);
  if (res == ringoSuccess && (index < 0 || index >= ddp->nparams))
    res = fail(ddp, ringoInvalidArgument, "%s: index %d is not a registered parameter (0..%d)", fn, index, ddp->nparams - 1);
  else if (res == ringoSuccess && ddp->ready[index])
    res = fail(ddp, ringoInvalidUsage, "%s: parameter %d was already marked ready in this step", fn, index);
  if (res == ringoSuccess) {
    ddp->in_step = 1;
    if (ddp->no_sync) ddp->ready[index] = 1;
    else {
      res = count_ready(ddp, index, fn);
      launch_ready(ddp);
    }
  }
  pthread_mutex_unlock(&ddp->mu);
  return res;
}

RINGO_API ringoResult_t ringoDdpFinish(ringoDdp_t ddp) {
  static const char fn[] = "ringoDdpFinish";
  if (!ddp) return fail(NULL, ringoInvalidArgument, "%s: ddp is NULL", fn);
  pthread_mutex_lock(&ddp->mu);
  ringoResult_t res = ringoSuccess;
  if (!ddp->frozen) res = check_usable(ddp, fn, 1, 0);
  else {
    const int sync = !ddp->no_sync && ddp->failed == ringoSuccess;
    if (sync) {
      for (int i = 0; i < ddp->nparams; i++) /* unmarked gradients are final now, as they are */
        if (!ddp->ready[i]) (void)count_ready(ddp, i, fn);
      launch_ready(ddp);
    }
    /* Even after a failure, wait for what was launched: the thread must be idle before the reset. */
    const double t0 = now_s();
    while (ddp->done < ddp->launched) pthread_cond_wait(&ddp->done_cv, &ddp->mu);
    if (sync) ddp->stats.exposedSeconds += now_s() - t0, ddp->stats.steps++;
    /* Device buckets are only enqueued: the compute stream (the optimizer's) waits for the side
     * stream on the device, and the host goes on — after a failure too, since buckets enqueued
     * before it still write the gradients. */
    int e = 0;
    if (sync && ddp->ndevice_buckets && (e = ddp->dev.join(ddp->dev.ctx, ddp->stream)) && ddp->failed == ringoSuccess)
      ddp_step_failed(ddp, fail(ddp, ringoUnhandledCudaError, "%s: making the compute stream wait for the side stream "
                            "failed: %s", fn, ddp->dev.error_string(e)));
    if (ddp->failed != ringoSuccess && !ddp->failure_reported) { /* the real code, once */
      ddp->failure_reported = 1;
      res = fail(ddp, ddp->failed, "%s: %s", fn, ddp->async_msg);
    } else res = check_usable(ddp, fn, 1, 0);
    reset_step(ddp);
  }
  pthread_mutex_unlock(&ddp->mu);
  return res;
}

RINGO_API ringoResult_t ringoDdpSetLocalBatch(ringoDdp_t ddp, size_t n) {
  static const char fn[] = "ringoDdpSetLocalBatch";
  if (!ddp) return fail(NULL, ringoInvalidArgument, "%s: ddp is NULL", fn);
  ringoResult_t res = check_usable(ddp, fn, 0, 1);
  if (res == ringoSuccess) res = check_not_grouped(ddp, fn);
  if (res != ringoSuccess) return res;
  /* n in two 32-bit halves, each summed in 64 bits: with at most 65536 ranks neither sum can wrap,
   * so every rank finds exactly whether the whole sum fits (a wrapped sum would weight the
   * gradients wrongly, silently). */
  const uint64_t mine[2] = {(uint64_t)n & 0xffffffffu, (uint64_t)n >> 32};
  uint64_t sum[2] = {0, 0};
  res = ringoAllReduce(mine, sum, 2, ringoUint64, ringoSum, ddp->comm, NULL);
  if (res != ringoSuccess) return comm_fail(ddp, fn, "summing the batch sizes", res);
  const uint64_t high = sum[1] + (sum[0] >> 32);
  if (high > 0xffffffffu)
    return fail(ddp, ringoInvalidArgument, "%s: the sum of the ranks' batch sizes overflows 64 bits", fn);
  const uint64_t total = (high << 32) | (sum[0] & 0xffffffffu);
  if (total == 0) return fail(ddp, ringoInvalidArgument, "%s: every rank's batch is empty (sum of n is 0)", fn);
  ddp->weight = (double)n / (double)total;
  return ringoSuccess;
}

RINGO_API ringoResult_t ringoDdpNoSync(ringoDdp_t ddp, int enable) {
  if (!ddp) return fail(NULL, ringoInvalidArgument, "ringoDdpNoSync: ddp is NULL");
  const ringoResult_t res = check_usable(ddp, "ringoDdpNoSync", 0, 1);
  if (res == ringoSuccess) ddp->no_sync = enable != 0;
  return res;
}

RINGO_API ringoResult_t ringoDdpSetStream(ringoDdp_t ddp, ringoStream_t stream) {
  if (!ddp) return fail(NULL, ringoInvalidArgument, "ringoDdpSetStream: ddp is NULL");
  pthread_mutex_lock(&ddp->mu); /* MarkReady reads it under mu */
  ringoResult_t res = check_usable(ddp, "ringoDdpSetStream", 0, 1);
  if (res == ringoSuccess) res = check_compute_stream(ddp, "ringoDdpSetStream", stream);
  if (res == ringoSuccess) ddp->stream = stream;
  pthread_mutex_unlock(&ddp->mu);
  return res;
}

RINGO_API ringoResult_t ringoDdpGetBucketCount(ringoDdp_t ddp, int* count) {
  if (!ddp || !count) return fail(ddp, ringoInvalidArgument, "ringoDdpGetBucketCount: %s is NULL", ddp ? "count" : "ddp");
  if (!ddp->frozen) return fail(ddp, ringoInvalidUsage, "ringoDdpGetBucketCount: call ringoDdpBroadcastParams first");
  *count = ddp->nbuckets;
  return ringoSuccess;
}

RINGO_API ringoResult_t ringoDdpGetParamBucket(ringoDdp_t ddp, int index, int* bucket, int* position) {
  static const char fn[] = "ringoDdpGetParamBucket";
  if (!ddp) return fail(NULL, ringoInvalidArgument, "%s: ddp is NULL", fn);
  if (index < 0 || index >= ddp->nparams)
    return fail(ddp, ringoInvalidArgument, "%s: index %d is not a registered parameter (0..%d)", fn, index, ddp->nparams - 1);
  if (!ddp->frozen) return fail(ddp, ringoInvalidUsage, "%s: call ringoDdpBroadcastParams first", fn);
  if (bucket) *bucket = ddp->params[index].bucket;
  if (position) *position = ddp->params[index].position;
  return ringoSuccess;
}

RINGO_API ringoResult_t ringoDdpGetStats(ringoDdp_t ddp, ringoDdpStats* stats) {
  if (!ddp || !stats) return fail(ddp, ringoInvalidArgument, "ringoDdpGetStats: %s is NULL", ddp ? "stats" : "ddp");
  pthread_mutex_lock(&ddp->mu);
  *stats = ddp->stats;
  pthread_mutex_unlock(&ddp->mu);
  return ringoSuccess;
}

RINGO_API const char* ringoDdpGetLastError(ringoDdp_t ddp) { return ddp ? ddp->msg : t_msg; }

RINGO_API ringoResult_t ringoDdpDestroy(ringoDdp_t ddp) {
  if (!ddp) return fail(NULL, ringoInvalidArgument, "ringoDdpDestroy: ddp is NULL");
  pthread_mutex_lock(&ddp->mu);
  ddp->stop = 1;
  pthread_cond_signal(&ddp->work);
  pthread_mutex_unlock(&ddp->mu);
  pthread_join(ddp->thread, NULL);
  pthread_cond_destroy(&ddp->done_cv);
  pthread_cond_destroy(&ddp->work);
  pthread_mutex_destroy(&ddp->mu);
  free(ddp->staging);
  if (ddp->dev_staging) ddp->dev.free(ddp->dev.ctx, ddp->dev_staging);
  if (ddp->have_dev && ddp->dev.close) ddp->dev.close(ddp->dev.ctx);
  free(ddp->pending);
  free(ddp->ready);
  free(ddp->order);
  free(ddp->buckets);
  free(ddp->params);
  free(ddp);
  return ringoSuccess;
}
