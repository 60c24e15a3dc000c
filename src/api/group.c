/* group.c — the one door: every public call's op comes here (ringo_group_submit), is checked, and
 * is queued (inside ringoGroupStart/End) or run now as a group of one; host or device is decided
 * here once. Communicator inits, collectives, sends and receives a thread calls
 * inside a group are queued and run at ringoGroupEnd — inits first, then the operations, one thread
 * per communicator — so one thread can create and drive every rank of a clique, as with NCCL.
 * Tested by test/test_collectives.cc (group mode), test_p2p.cc and test_api.cc. */
#include <pthread.h>
#include <stdlib.h>

#include "api/group.h"

#include "api/check.h"
#include "api/lifecycle.h"
#include "device/device.h"
#include "engine/select.h"
#include "engine/p2p.h"

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

/* ---- the door: run now as a group of one, host or device decided once ---- */

/* One call at a time on a communicator (NCCL's rule too): a second thread's call would drive the
 * same links and collective numbers at once, and both could return success with the other's data
 * mixed in. So it is refused before it touches anything, and the call already running goes on.
 * Counted in inflight first, so an abort in another thread either sees the call (and waits for it)
 * or has failed the communicator before the call's usability check reads it. Records its refusal. */
static ringoResult_t take_guard(ringoComm_t comm, const char* name) {
  atomic_fetch_add(&comm->inflight, 1);
  if (!atomic_exchange(&comm->calling, 1)) return ringoSuccess;
  const ringoResult_t res = ringo_comm_record(
      comm, ringo_fail(ringoInvalidUsage, "%s: another thread is inside a call on rank %d's communicator; calls on one "
                       "communicator must not overlap (one thread at a time, or a communicator per thread)", name,
                       comm->rank));
  atomic_fetch_sub(&comm->inflight, 1); /* the last touch: comm may be freed from here on */
  return res;
}

/* The last touch of comm: once inflight drops, a ringoCommAbort in another thread may free it. */
static void leave_call(ringoComm_t comm) {
  atomic_store(&comm->calling, 0);
  atomic_fetch_sub(&comm->inflight, 1);
}

static void end_call(ringoComm_t comm, int held) {
  if (!held) leave_call(comm);
}

/* A call's start: its own guard unless its ringoGroupEnd holds it, then the usability check (an
 * earlier call of the group may have failed the communicator). A refusal records itself and ends. */
static ringoResult_t begin_call(ringoComm_t comm, int held, const char* name) {
  if (!held) RINGO_CHECK(take_guard(comm, name));
  const ringoResult_t res = ringo_comm_check_usable(comm, name);
  if (res == ringoSuccess) return res;
  ringo_comm_record(comm, res);
  end_call(comm, held);
  return res;
}

/* A collective of a group of one, or one of a group's: host or device decided here, once. Records
 * its own errors in the communicator. */
static ringoResult_t run_coll(const struct ringo_op* in_op) {
  struct ringo_op op = *in_op;
  const ringoComm_t comm = op.comm;
  ringoResult_t res = begin_call(comm, op.held, ringo_op_coll_name(op.coll));
  if (res != ringoSuccess) return res;
  op.seq = comm->seq++;
  if (ringo_log_enabled(RINGO_LEVEL_INFO, RINGO_LOG_COLL)) {
    char fp[160];
    ringo_op_describe(&op, fp, sizeof fp);
    RINGO_INFO(RINGO_LOG_COLL, "rank %d: %s", comm->rank, fp);
  }
  if (op.device) { /* enqueued on the stream: returns at once */
    res = ringo_device_launch(&op);
    /* Joined even after a failure: what was queued before it may still touch the buffers. */
    if (!op.defer_join) {
      const ringoResult_t joined = ringo_device_join(&op);
      if (res == ringoSuccess) res = joined;
    }
  }
  else {
    res = ringo_device_quiesce(comm); /* the proxy drives the same links from its thread */
    if (res == ringoSuccess) res = ringo_select_run(&op);
  }
  if (res == ringoSuccess) {
    atomic_fetch_add_explicit(&comm->collectives, 1, memory_order_relaxed);
  } else {
    ringo_comm_fail(comm, res); /* the FIFOs are out of step now: no further collective */
  }
  end_call(comm, op.held);
  return res;
}


/* n sends and receives of comm on host memory, on the calling thread. */
static ringoResult_t run_p2p_host(ringoComm_t comm, const struct ringo_op* const* ops, size_t n) {
  ringoResult_t res = begin_call(comm, ops[0]->held, ringo_p2p_name(ops[0]));
  if (res != ringoSuccess) return res;
  /* The proxy of device sends and receives drives the same links from its own thread. */
  res = ringo_device_quiesce(comm);
  if (res != ringoSuccess) ringo_comm_fail(comm, res);
  else res = ringo_p2p_run(comm, ops, n, NULL); /* records its errors */
  end_call(comm, ops[0]->held);
  return res;
}

/* n device sends and receives of comm, enqueued as one batch on ringo's stream (device.c); with
 * join, each op's stream then waits for it. Records its errors in the communicator. */
static ringoResult_t run_p2p_device(ringoComm_t comm, const struct ringo_op* const* ops, size_t n, int join) {
  ringoResult_t res = begin_call(comm, ops[0]->held, ringo_p2p_name(ops[0]));
  if (res != ringoSuccess) return res;
  res = ringo_device_p2p_launch(comm, ops, n);
  /* Joined even after a failure: copies already queued may still write the receive buffers. */
  for (size_t i = 0; join && i < n; i++) {
    const ringoResult_t r = ringo_device_join(ops[i]);
    if (res == ringoSuccess) res = r;
  }
  if (res != ringoSuccess) ringo_comm_fail(comm, res); /* a half-enqueued batch leaves the links out of step */
  end_call(comm, ops[0]->held);
  return res;
}

/* A send or receive outside a group, or on entering one. */
static int enqueue(const struct ringo_op* op, ringoResult_t* res);

static ringoResult_t submit_p2p(struct ringo_op op) {
  const ringoComm_t comm = op.comm;
  const char* name = ringo_p2p_name(&op);
  ringoResult_t res;
  /* An empty message moves nothing at either end (the engine skips it too): queueing it would
   * only make a group wait, e.g. for the communicator's device work before a host batch. A
   * communicator in error still says so, as a collective of count 0 does. */
  if (op.count == 0 && atomic_load(&comm->error) != ringoSuccess)
    return ringo_comm_record(comm, ringo_comm_check_usable(comm, name));
  if (op.count == 0) return ringoSuccess;
  if (enqueue(&op, &res)) return ringo_comm_record(comm, res);
  /* Caught before anything moves, so the communicator stays usable. */
  if (op.peer == comm->rank)
    return ringo_comm_record(comm, ringo_fail(ringoInvalidUsage, "%s: rank %d %s itself outside a group; put the "
                                              "ringoSend and the ringoRecv in one ringoGroupStart/End", name,
                                              comm->rank, op.kind == RINGO_KIND_SEND ? "sends to" : "receives from"));
  const struct ringo_op* one = &op;
  if (op.device) return run_p2p_device(comm, &one, 1, 1);
  return run_p2p_host(comm, &one, 1);
}


ringoResult_t ringo_group_submit(struct ringo_op op) {
  ringo_thread_clear_error();
  ringoResult_t res = ringo_check_op(&op, group_depth > 0);
  if (res != ringoSuccess) return ringo_comm_record(op.comm, res);
  if (op.kind != RINGO_KIND_COLL) return submit_p2p(op);
  if (enqueue(&op, &res)) return ringo_comm_record(op.comm, res);
  return run_coll(&op); /* records its own errors: comm may be gone (aborted) once it returns */
}

/* Queues op when this thread is inside ringoGroupStart/End; returns 1 if it was queued. */
static int enqueue(const struct ringo_op* op, ringoResult_t* res) {
  if (group_depth == 0) return 0;
  if (!reserve((void**)&queued, &capacity, nqueued, sizeof *queued)) {
    *res = ringo_fail(ringoSystemError, "ringoGroupEnd: out of memory queueing %zu operations", nqueued + 1);
    return 1;
  }
  queued[nqueued++] = *op;
  atomic_fetch_add(&op->comm->grouped, 1); /* until ringoGroupEnd is done with it (or abort drops it) */
  *res = ringoSuccess;
  return 1;
}

ringoResult_t ringo_group_submit_init(ringoComm_t comm, const ringoUniqueId* id) {
  if (group_depth == 0) return ringo_lifecycle_init_tcp(comm, id);
  if (!reserve((void**)&inits, &inits_capacity, ninits, sizeof *inits))
    return ringo_fail(ringoSystemError, "ringoCommInitRank: out of memory queueing an init in a group");
  inits[ninits++] = (struct queued_init){comm, *id, ringo_device_current(), ringoSuccess};
  atomic_fetch_add(&comm->making, 1); /* until ringoGroupEnd has made it (or abort drops it) */
  return ringoSuccess;
}

size_t ringo_group_queued_on(ringoComm_t comm, int forget) {
  size_t found = 0, kept = 0;
  for (size_t i = 0; i < nqueued; i++) {
    if (queued[i].comm == comm) found++;
    else if (forget) queued[kept++] = queued[i];
  }
  if (forget) {
    nqueued = kept;
    atomic_fetch_sub(&comm->grouped, (int)found);
  }
  const size_t made = ringo_group_inits_on(comm);
  kept = 0;
  for (size_t i = 0; forget && i < ninits; i++)
    if (inits[i].comm != comm) inits[kept++] = inits[i];
  if (forget) {
    ninits = kept;
    atomic_fetch_sub(&comm->making, (int)made);
  }
  return found + made;
}

size_t ringo_group_inits_on(ringoComm_t comm) {
  size_t found = 0;
  for (size_t i = 0; i < ninits; i++) found += inits[i].comm == comm;
  return found;
}

ringoResult_t ringoGroupStart(void) {
  group_depth++;
  return ringoSuccess;
}

ringoResult_t ringoGroupDepth(int* depth) {
  if (!depth) return ringo_fail(ringoInvalidArgument, "ringoGroupDepth: depth is NULL");
  *depth = group_depth;
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
  if (q->res == ringoSuccess) q->res = ringo_lifecycle_init_tcp(q->comm, &q->id); /* leaves comm in error on failure */
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
    if (nbatch) job->res = run_p2p_host(job->comm, job->batch, nbatch); /* records its errors */
    nbatch = 0;
    if (op && job->res == ringoSuccess) job->res = run_coll(op);
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
  return run_p2p_device(comm, batch, n, 0);
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
      r = run_coll(&ops[i]); /* records its errors in the communicator */
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

/* The one-call guard of every communicator of the group, taken for the whole group before anything
 * moves: another thread's call slipping in between two of the group's would be ordered differently
 * on this rank than on its peers. Refused as a whole, with nothing moved, when one is busy (a
 * communicator in error still fails only its own calls, at each). Fills comms with the distinct
 * communicators (n of them) and marks every op held. */
static ringoResult_t hold_comms(struct ringo_op* ops, size_t nops, ringoComm_t* comms, size_t* n) {
  *n = 0;
  for (size_t i = 0; i < nops; i++) {
    size_t j = 0;
    while (j < *n && comms[j] != ops[i].comm) j++;
    if (j < *n) continue;
    const ringoResult_t res = take_guard(ops[i].comm, "ringoGroupEnd");
    if (res != ringoSuccess) {
      while (*n > 0) leave_call(comms[--*n]);
      return res;
    }
    comms[(*n)++] = ops[i].comm;
  }
  for (size_t i = 0; i < nops; i++) ops[i].held = 1;
  return ringoSuccess;
}

static ringoResult_t run_held(struct ringo_op* ops, size_t nops) {
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

static ringoResult_t run_queued(struct ringo_op* ops, size_t nops) {
  RINGO_CHECK(check_p2p_memory(ops, nops));
  ringoComm_t* comms = calloc(nops, sizeof *comms);
  if (!comms) return ringo_fail(ringoSystemError, "ringoGroupEnd: out of memory");
  size_t ncomms = 0;
  ringoResult_t res = hold_comms(ops, nops, comms, &ncomms);
  if (res == ringoSuccess) res = run_held(ops, nops);
  for (size_t i = 0; i < ncomms; i++) leave_call(comms[i]); /* grouped still keeps each alive */
  free(comms);
  return res;
}

ringoResult_t ringoGroupEnd(void) {
  ringo_thread_clear_error();
  /* Groups are per thread: a group started by another thread (a pool handing work on) is not this one's. */
  if (group_depth == 0)
    return ringo_fail(ringoInvalidUsage, "ringoGroupEnd without a matching ringoGroupStart in this thread (a group "
                      "belongs to the thread that started it)");
  if (--group_depth > 0) return ringoSuccess;
  ringoResult_t res = ninits ? run_inits(inits, ninits) : ringoSuccess;
  /* The last touch of each init's communicator (its queued calls are counted in grouped). */
  for (size_t i = 0; i < ninits; i++) atomic_fetch_sub(&inits[i].comm->making, 1);
  /* Operations queued on communicators of a failed init would wait for ranks that never come. */
  if (res == ringoSuccess && nqueued) res = run_queued(queued, nqueued);
  /* The last touch of each communicator: an abort in another thread waits for its count to drop. */
  for (size_t i = 0; i < nqueued; i++) atomic_fetch_sub(&queued[i].comm->grouped, 1);
  free(queued);
  free(inits);
  queued = NULL;
  inits = NULL;
  nqueued = capacity = ninits = inits_capacity = 0;
  return res;
}
