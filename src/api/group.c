/* group.c — ringoGroupStart/End: communicator inits, collectives, sends and receives a thread calls
 * inside a group are queued and run at ringoGroupEnd — inits first, then the operations, one thread
 * per communicator — so one thread can create and drive every rank of a clique, as with NCCL.
 * Tested by test/test_collectives.cc (group mode), test_p2p.cc and test_api.cc. */
#include <pthread.h>
#include <stdlib.h>

#include "comm/comm.h"
#include "device/device.h"

struct queued_init {
  ringoComm_t comm;
  ringoUniqueId id;
  int dev; /* the queueing thread's CUDA device (NCCL's cudaSetDevice(i); ncclCommInitRank idiom), or -1 */
  ringoResult_t res;
};

static _Thread_local int group_depth;
static _Thread_local struct ringo_op* queued;
static _Thread_local size_t nqueued, capacity;
static _Thread_local struct queued_init* inits;
static _Thread_local size_t ninits, inits_capacity;

/* Makes room for one more element of size `elem` in *array (holding *n of *cap). */
static int reserve(void** array, size_t* cap, size_t n, size_t elem) {
  if (n < *cap) return 1;
  size_t grown_cap = *cap ? 2 * *cap : 16;
  void* grown = realloc(*array, grown_cap * elem);
  if (!grown) return 0;
  *array = grown;
  *cap = grown_cap;
  return 1;
}

int ringo_group_active(void) { return group_depth > 0; }

int ringo_group_enqueue(const struct ringo_op* op, ringoResult_t* res) {
  if (group_depth == 0) return 0;
  if (!reserve((void**)&queued, &capacity, nqueued, sizeof *queued)) {
    *res = ringo_fail(ringoSystemError, "ringoGroupEnd: out of memory queueing %zu operations", nqueued + 1);
    return 1;
  }
  queued[nqueued++] = *op;
  *res = ringoSuccess;
  return 1;
}

int ringo_group_enqueue_init(ringoComm_t comm, const ringoUniqueId* id, ringoResult_t* res) {
  if (group_depth == 0) return 0;
  if (!reserve((void**)&inits, &inits_capacity, ninits, sizeof *inits)) {
    *res = ringo_fail(ringoSystemError, "ringoCommInitRank: out of memory queueing an init in a group");
    return 1;
  }
  inits[ninits++] = (struct queued_init){comm, *id, ringo_device_current(), ringoSuccess};
  *res = ringoSuccess;
  return 1;
}

ringoResult_t ringoGroupStart(void) {
  group_depth++;
  return ringoSuccess;
}

/* Runs job(arg[i]) for i < n on a thread each (on the caller's when n is 1: nothing to wait
 * for) and joins them; the work of every element blocks until the others take part. On a failed
 * pthread_create, stop(arg[i]) is called for the elements that did not start, so those that did
 * stop waiting for them. */
static ringoResult_t run_parallel(void* (*job)(void*), void* args, size_t elem, size_t n, void (*stop)(void*)) {
  if (n == 1) {
    job(args);
    return ringoSuccess;
  }
  pthread_t* threads = calloc(n, sizeof *threads);
  if (!threads) return ringo_fail(ringoSystemError, "ringoGroupEnd: out of memory");
  size_t started = 0;
  while (started < n && pthread_create(&threads[started], NULL, job, (char*)args + started * elem) == 0) started++;
  ringoResult_t res = ringoSuccess;
  if (started < n) {
    res = ringo_fail(ringoSystemError, "ringoGroupEnd: could not start thread %zu of %zu", started, n);
    for (size_t j = started; j < n; j++) stop((char*)args + j * elem);
  }
  for (size_t j = 0; j < started; j++) pthread_join(threads[j], NULL);
  free(threads);
  return res;
}

/* ---- queued inits ---- */

static void* run_init(void* arg) {
  struct queued_init* q = arg;
  q->res = q->dev >= 0 ? ringo_device_select(q->dev) : ringoSuccess;
  if (q->res == ringoSuccess) q->res = ringo_comm_init_tcp(q->comm, &q->id); /* leaves comm in error on failure */
  else ringo_comm_fail(q->comm, q->res);
  return NULL;
}

static void stop_init(void* arg) {
  struct queued_init* q = arg;
  q->res = ringo_fail(ringoSystemError, "ringoGroupEnd: no thread to create rank %d", q->comm->rank);
  ringo_comm_fail(q->comm, q->res);
}

static ringoResult_t run_inits(struct queued_init* q, size_t n) {
  ringoResult_t res = run_parallel(run_init, q, sizeof *q, n, stop_init);
  for (size_t i = 0; res == ringoSuccess && i < n; i++)
    if (q[i].res != ringoSuccess)
      res = ringo_annotate(q[i].res, "ringoGroupEnd: ringoCommInitRank of rank %d: %s", q[i].comm->rank,
                           ringo_comm_last_error(q[i].comm));
  return res;
}

/* ---- queued operations ---- */

/* The queued work of one communicator, run in call order on its own thread: each collective
 * alone, each run of consecutive sends and receives as one batch progressed together. */
struct comm_job {
  ringoComm_t comm;
  ringoResult_t res;
  const struct ringo_op* ops;
  size_t nops;
  const struct ringo_op** batch; /* room for nops pointers */
};

static void* run_comm_job(void* arg) {
  struct comm_job* job = arg;
  job->res = ringoSuccess;
  size_t nbatch = 0;
  for (size_t i = 0; i <= job->nops && job->res == ringoSuccess; i++) {
    const struct ringo_op* op = i < job->nops ? &job->ops[i] : NULL;
    if (op && (op->comm != job->comm || op->device)) continue; /* device ops: run_device_ops */
    if (op && op->kind != RINGO_KIND_COLL) {
      job->batch[nbatch++] = op;
      continue;
    }
    if (nbatch) job->res = ringo_p2p_run(job->comm, job->batch, nbatch); /* records its errors */
    nbatch = 0;
    if (op && job->res == ringoSuccess) job->res = ringo_coll_run(op);
  }
  return NULL;
}

static void stop_comm_job(void* arg) { atomic_store(&((struct comm_job*)arg)->comm->abort_flag, 1); }

/* A device send or receive, and the device ops of its communicator after it up to the next
 * device collective, go to the proxy as one batch (progressed together, like a host batch). */
static ringoResult_t launch_p2p_batch(struct ringo_op* ops, size_t nops, size_t first, unsigned char* taken,
                                      const struct ringo_op** batch) {
  const ringoComm_t comm = ops[first].comm;
  size_t n = 0;
  for (size_t j = first; j < nops; j++) {
    if (!ops[j].device || ops[j].comm != comm) continue;
    if (ops[j].kind == RINGO_KIND_COLL) break;
    taken[j] = 1;
    ops[j].defer_join = 1;
    batch[n++] = &ops[j];
  }
  /* Records its errors in the communicator; the ops stay to be joined even after a failure, since
   * copies already queued may still write their receive buffers. */
  return ringo_p2p_run_device(comm, batch, n, 0);
}

/* Device operations only enqueue, so the calling thread does them all: first every launch, then
 * every join — were a rank's caller stream to wait for its kernel before the next rank's kernel
 * was launched, ranks sharing a stream would wait for each other in stream order. */
static ringoResult_t run_device_ops(struct ringo_op* ops, size_t nops) {
  unsigned char* taken = calloc(nops, 1);
  const struct ringo_op** batch = calloc(nops, sizeof *batch);
  ringoResult_t res = taken && batch ? ringoSuccess : ringo_fail(ringoSystemError, "ringoGroupEnd: out of memory");
  /* Every rank's pinned staging first: once one rank's work is on the GPU, another rank's allocation
   * could wait for it (device.h, ringo_device_reserve). */
  ringo_device_reserve(ops, nops);
  /* One failure does not stop the others: every communicator's work is launched (or fails on its
   * own), as outside a group. */
  for (size_t i = 0; taken && batch && i < nops; i++) {
    if (!ops[i].device || taken[i]) continue;
    ringoResult_t r;
    if (ops[i].kind == RINGO_KIND_COLL) {
      ops[i].defer_join = 1; /* joined even if it fails: part of it may be queued */
      r = ringo_coll_run(&ops[i]); /* records its errors in the communicator */
    } else {
      r = launch_p2p_batch(ops, nops, i, taken, batch);
    }
    if (r != ringoSuccess && res == ringoSuccess)
      res = ringo_annotate(r, "ringoGroupEnd: rank %d: %s", ops[i].comm->rank, ringo_comm_last_error(ops[i].comm));
  }
  for (size_t i = 0; i < nops; i++)
    if (ops[i].device && ops[i].defer_join) {
      const ringoResult_t r = ringo_device_join(&ops[i]);
      if (r != ringoSuccess && res == ringoSuccess) res = r;
    }
  free(taken);
  free(batch);
  return res;
}

/* A communicator's host sends and receives would run on this thread while its proxy runs the
 * device ones over the same links: one group may not mix them. Checked before anything runs. */
static ringoResult_t check_p2p_memory(const struct ringo_op* ops, size_t nops) {
  for (size_t i = 0; i < nops; i++) {
    if (ops[i].kind == RINGO_KIND_COLL || !ops[i].device) continue;
    for (size_t j = 0; j < nops; j++)
      if (ops[j].comm == ops[i].comm && ops[j].kind != RINGO_KIND_COLL && !ops[j].device)
        return ringo_fail(ringoInvalidUsage, "ringoGroupEnd: rank %d's sends and receives in this group mix device "
                          "and host buffers; put them in separate groups", ops[i].comm->rank);
  }
  return ringoSuccess;
}

static ringoResult_t run_queued(struct ringo_op* ops, size_t nops) {
  RINGO_CHECK(check_p2p_memory(ops, nops));
  const ringoResult_t dev_res = run_device_ops(ops, nops);
  size_t nhost = 0;
  for (size_t i = 0; i < nops; i++) nhost += !ops[i].device;
  if (nhost == 0) return dev_res;
  struct comm_job* jobs = calloc(nops, sizeof *jobs);
  if (!jobs) return ringo_fail(ringoSystemError, "ringoGroupEnd: out of memory");
  size_t njobs = 0;
  for (size_t i = 0; i < nops; i++) {
    if (ops[i].device) continue;
    size_t j = 0;
    while (j < njobs && jobs[j].comm != ops[i].comm) j++;
    if (j == njobs) jobs[njobs++] = (struct comm_job){ops[i].comm, ringoSuccess, ops, nops, NULL};
  }
  const struct ringo_op** batches = calloc(njobs * nops, sizeof *batches);
  ringoResult_t res = batches ? ringoSuccess : ringo_fail(ringoSystemError, "ringoGroupEnd: out of memory");
  for (size_t j = 0; j < njobs && batches; j++) jobs[j].batch = batches + j * nops;
  if (res == ringoSuccess) res = run_parallel(run_comm_job, jobs, sizeof *jobs, njobs, stop_comm_job);
  for (size_t j = 0; res == ringoSuccess && j < njobs; j++)
    if (jobs[j].res != ringoSuccess)
      res = ringo_annotate(jobs[j].res, "ringoGroupEnd: rank %d: %s", jobs[j].comm->rank, ringo_comm_last_error(jobs[j].comm));
  free(jobs);
  free(batches);
  return dev_res != ringoSuccess ? dev_res : res;
}

ringoResult_t ringoGroupEnd(void) {
  ringo_thread_clear_error();
  if (group_depth == 0) return ringo_fail(ringoInvalidUsage, "ringoGroupEnd without a matching ringoGroupStart");
  if (--group_depth > 0) return ringoSuccess;
  ringoResult_t res = ninits ? run_inits(inits, ninits) : ringoSuccess;
  /* Operations queued on communicators of a failed init would wait for ranks that never come. */
  if (res == ringoSuccess && nqueued) res = run_queued(queued, nqueued);
  free(queued);
  free(inits);
  queued = NULL;
  inits = NULL;
  nqueued = capacity = ninits = inits_capacity = 0;
  return res;
}
