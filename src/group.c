/* group.c — ringoGroupStart/End: host collectives a thread calls inside a group are queued and run
 * together at ringoGroupEnd, one thread per communicator, so one thread can drive every rank of a
 * ringoCommInitAll clique. Tested by test/test_collectives.cc (thread mode) and test_api.cc. */
#include <pthread.h>
#include <stdlib.h>

#include "comm.h"

static _Thread_local int group_depth;
static _Thread_local struct ringo_op* queued;
static _Thread_local size_t nqueued, capacity;

int ringo_group_enqueue(const struct ringo_op* op, ringoResult_t* res) {
  if (group_depth == 0) return 0;
  if (nqueued == capacity) {
    size_t cap = capacity ? 2 * capacity : 16;
    struct ringo_op* grown = realloc(queued, cap * sizeof *grown);
    if (!grown) {
      *res = ringo_fail(ringoSystemError, "ringoGroupEnd: out of memory queueing %zu collectives", nqueued + 1);
      return 1;
    }
    queued = grown;
    capacity = cap;
  }
  queued[nqueued++] = *op;
  *res = ringoSuccess;
  return 1;
}

ringoResult_t ringoGroupStart(void) {
  group_depth++;
  return ringoSuccess;
}

/* The queued work of one communicator, run in call order on its own thread. */
struct comm_job {
  ringoComm_t comm;
  ringoResult_t res;
  const struct ringo_op* ops;
  size_t nops;
};

static void* run_comm_job(void* arg) {
  struct comm_job* job = arg;
  job->res = ringoSuccess;
  for (size_t i = 0; i < job->nops && job->res == ringoSuccess; i++)
    if (job->ops[i].comm == job->comm) job->res = ringo_coll_run(&job->ops[i]); /* records its errors */
  return NULL;
}

static ringoResult_t run_queued(const struct ringo_op* ops, size_t nops) {
  struct comm_job* jobs = calloc(nops, sizeof *jobs);
  pthread_t* threads = calloc(nops, sizeof *threads);
  ringoResult_t res = ringoSuccess;
  if (!jobs || !threads) res = ringo_fail(ringoSystemError, "ringoGroupEnd: out of memory");
  size_t njobs = 0, started = 0;
  for (size_t i = 0; res == ringoSuccess && i < nops; i++) {
    size_t j = 0;
    while (j < njobs && jobs[j].comm != ops[i].comm) j++;
    if (j == njobs) jobs[njobs++] = (struct comm_job){ops[i].comm, ringoSuccess, ops, nops};
  }
  /* Each rank's collectives block until its neighbours take part, so every communicator needs a
   * thread of its own; a single communicator runs on the caller's. */
  if (njobs == 1) run_comm_job(&jobs[0]);
  for (; njobs > 1 && started < njobs; started++)
    if (pthread_create(&threads[started], NULL, run_comm_job, &jobs[started]) != 0) break;
  if (njobs > 1 && started < njobs) {
    res = ringo_fail(ringoSystemError, "ringoGroupEnd: could not start a thread for communicator %zu", started);
    for (size_t j = started; j < njobs; j++) atomic_store(&jobs[j].comm->abort_flag, 1); /* unblock the others */
  }
  for (size_t j = 0; j < started; j++) pthread_join(threads[j], NULL);
  for (size_t j = 0; res == ringoSuccess && j < njobs; j++)
    if (jobs[j].res != ringoSuccess)
      res = ringo_annotate(jobs[j].res, "ringoGroupEnd: rank %d: %s", jobs[j].comm->rank, jobs[j].comm->last_error);
  free(jobs);
  free(threads);
  return res;
}

ringoResult_t ringoGroupEnd(void) {
  ringo_thread_clear_error();
  if (group_depth == 0) return ringo_fail(ringoInvalidUsage, "ringoGroupEnd without a matching ringoGroupStart");
  if (--group_depth > 0) return ringoSuccess;
  ringoResult_t res = nqueued ? run_queued(queued, nqueued) : ringoSuccess;
  free(queued);
  queued = NULL;
  nqueued = capacity = 0;
  return res;
}
