/* init.c — the public communicator calls: version, unique id, ringoCommInitRank (through the group
 * door, api/group.c), ringoCommInitAll, destroy, abort, the queries and the last error.
 * Tested by test/test_api.cc and every multi-rank suite. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "api/group.h"
#include "api/lifecycle.h"
#include "boot/bootstrap.h"
#include "core/wait.h"
#include "device/device.h"

ringoResult_t ringoGetVersion(int* version) {
  if (!version) return ringo_fail(ringoInvalidArgument, "ringoGetVersion: version is NULL");
  *version = RINGO_VERSION_CODE;
  return ringoSuccess;
}

ringoResult_t ringoGetUniqueId(ringoUniqueId* id) {
  if (!id) return ringo_fail(ringoInvalidArgument, "ringoGetUniqueId: id is NULL");
  return ringo_bootstrap_root_start(id);
}

/* A config's fields, checked before anything is made: the timeout within RINGO_TIMEOUT's range. */
static ringoResult_t check_config(const ringoConfig_t* config, const char* name) {
  if (!config) return ringoSuccess;
  if (config->size < offsetof(ringoConfig_t, timeoutSeconds) + sizeof config->timeoutSeconds)
    return ringo_fail(ringoInvalidArgument, "%s: config->size %zu is too small (start from RINGO_CONFIG_INITIALIZER)",
                      name, config->size);
  const double t = config->timeoutSeconds;
  if (t != 0 && !(t >= 0.001 && t <= 1e9))
    return ringo_fail(ringoInvalidArgument, "%s: config->timeoutSeconds %g is not in [0.001, 1e9] (0: RINGO_TIMEOUT)",
                      name, t);
  return ringoSuccess;
}

static ringoResult_t init_rank(ringoComm_t* out, int nranks, const ringoUniqueId* id, int rank,
                               const ringoConfig_t* config, const char* name) {
  ringo_thread_clear_error();
  if (!out) return ringo_fail(ringoInvalidArgument, "%s: comm is NULL", name);
  *out = NULL;
  /* The rendezvous's bound, checked before the communicator's per-rank tables are sized by it. */
  if (nranks < 1 || nranks > RINGO_BOOTSTRAP_MAX_RANKS)
    return ringo_fail(ringoInvalidArgument, "%s: nranks %d is not in [1, %d]", name, nranks, RINGO_BOOTSTRAP_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return ringo_fail(ringoInvalidArgument, "%s: rank %d out of range [0, %d)", name, rank, nranks);
  RINGO_CHECK(check_config(config, name));
  ringoComm_t comm = ringo_comm_alloc(nranks, rank);
  if (!comm) return ringo_fail(ringoSystemError, "%s: out of memory", name);
  if (config && config->timeoutSeconds > 0) comm->env.timeout_s = config->timeoutSeconds; /* before any wait */
  /* Inside a group it is only queued and made at ringoGroupEnd; outside, made now. */
  const ringoResult_t res = ringo_group_submit_init(comm, id);
  if (res != ringoSuccess) {
    ringo_lifecycle_free(comm);
    return res;
  }
  *out = comm;
  return ringoSuccess;
}

ringoResult_t ringoCommInitRank(ringoComm_t* out, int nranks, ringoUniqueId id, int rank) {
  return init_rank(out, nranks, &id, rank, NULL, "ringoCommInitRank");
}

ringoResult_t ringoCommInitRankConfig(ringoComm_t* out, int nranks, ringoUniqueId id, int rank,
                                      const ringoConfig_t* config) {
  return init_rank(out, nranks, &id, rank, config, "ringoCommInitRankConfig");
}

struct init_job {
  ringoComm_t* comm;
  int nranks, rank;
  int dev; /* CUDA device to bind, or -1 */
  ringoUniqueId id;
  ringoResult_t res;
  char error[RINGO_ERROR_BYTES];
};

static void* init_thread(void* arg) {
  struct init_job* job = arg;
  job->res = job->dev >= 0 ? ringo_device_select(job->dev) : ringoSuccess;
  if (job->res == ringoSuccess) job->res = ringoCommInitRank(job->comm, job->nranks, job->id, job->rank);
  snprintf(job->error, sizeof job->error, "%s", ringo_thread_last_error());
  return NULL;
}

ringoResult_t ringoCommInitAll(ringoComm_t* comms, int ndev, const int* devlist) {
  ringo_thread_clear_error();
  if (!comms) return ringo_fail(ringoInvalidArgument, "ringoCommInitAll: comms is NULL");
  /* Bounded as ringoCommInitRank bounds nranks, before a thread per rank and the tables are made. */
  if (ndev < 1 || ndev > RINGO_BOOTSTRAP_MAX_RANKS)
    return ringo_fail(ringoInvalidArgument, "ringoCommInitAll: ndev %d is not in [1, %d]", ndev,
                      RINGO_BOOTSTRAP_MAX_RANKS);
  const int ndevices = devlist ? ringo_device_count() : 0;
  if (devlist && ndevices == 0)
    return ringo_fail(ringoUnhandledCudaError, "ringoCommInitAll: devlist names CUDA devices, but %s; pass "
                      "devlist = NULL for host ranks", ringo_device_count() == 0 ? "this process sees no CUDA device"
                                                                                 : "the CUDA path is unavailable");
  for (int i = 0; devlist && i < ndev; i++)
    if (devlist[i] < 0 || devlist[i] >= ndevices)
      return ringo_fail(ringoInvalidArgument, "ringoCommInitAll: devlist[%d] = %d, but the devices are 0..%d", i,
                        devlist[i], ndevices - 1);
  ringoUniqueId id;
  RINGO_CHECK(ringoGetUniqueId(&id));
  struct init_job* jobs = calloc((size_t)ndev, sizeof *jobs);
  pthread_t* threads = calloc((size_t)ndev, sizeof *threads);
  if (!jobs || !threads) {
    free(jobs);
    free(threads);
    return ringo_fail(ringoSystemError, "ringoCommInitAll: out of memory");
  }
  int started = 0;
  for (; started < ndev; started++) {
    jobs[started] = (struct init_job){.comm = &comms[started], .nranks = ndev, .rank = started, .id = id,
                                      .dev = devlist ? devlist[started] : -1};
    if (pthread_create(&threads[started], NULL, init_thread, &jobs[started]) != 0) break;
  }
  ringoResult_t res = started == ndev ? ringoSuccess : ringo_fail(ringoSystemError, "ringoCommInitAll: pthread_create failed");
  for (int i = 0; i < started; i++) {
    pthread_join(threads[i], NULL);
    if (res == ringoSuccess && jobs[i].res != ringoSuccess) res = ringo_annotate(jobs[i].res, "ringoCommInitAll: rank %d: %s", i, jobs[i].error);
  }
  /* One failed rank fails them all: the ring is incomplete without it. */
  for (int i = 0; res != ringoSuccess && i < started; i++) {
    ringo_lifecycle_free(comms[i]);
    comms[i] = NULL;
  }
  free(jobs);
  free(threads);
  return res;
}

/* Waits until *count is 0, at most timeout_s; returns whether it got there. */
static int wait_for_zero(const atomic_int* count, double timeout_s) {
  const struct ringo_wait_policy policy = {.timeout_s = timeout_s, .sleep_ns = 1000000L, .net = RINGO_WAIT_NET_NONE};
  struct ringo_waiter w;
  ringo_waiter_start(&w, &policy, ringo_now());
  while (atomic_load(count) > 0) {
    const double now = ringo_now();
    if (ringo_waiter_check(&w, now) == RINGO_WAIT_TIMED_OUT) return atomic_load(count) == 0;
    ringo_waiter_sleep(&w, now);
  }
  return 1;
}

/* Calls in other threads still running on comm (a blocked one ends with the abort flag, or at its
 * peers or RINGO_TIMEOUT): they must leave before the memory they use goes away. */
static void wait_for_calls(ringoComm_t comm) { (void)wait_for_zero(&comm->inflight, 1e30); }

/* Calls on comm in another thread's group, queued or running at its ringoGroupEnd, would run on
 * freed memory: destroy refuses them (this thread's own are counted before). */
static ringoResult_t check_no_group_elsewhere(ringoComm_t comm, const char* fn) {
  const int held = atomic_load(&comm->grouped);
  if (held == 0) return ringoSuccess;
  return ringo_comm_record(comm, ringo_fail(ringoInvalidUsage, "%s: another thread's group holds %d call%s on rank %d's "
                                            "communicator (queued, or running at its ringoGroupEnd); free it after "
                                            "that ringoGroupEnd", fn, held, held > 1 ? "s" : "", comm->rank));
}

/* An init queued in another thread's open group (or running at its ringoGroupEnd) would make the
 * communicator in freed memory: only the thread that queued it can drop it (ringoCommAbort). own:
 * the inits of comm this thread's group holds (the abort drops those). */
static ringoResult_t check_not_being_made(ringoComm_t comm, const char* fn, size_t own) {
  if ((size_t)atomic_load(&comm->making) <= own) return ringoSuccess;
  return ringo_comm_record(comm, ringo_fail(ringoInvalidUsage, "%s: rank %d's communicator is still being created by "
                                            "another thread (its ringoCommInitRank is queued in that thread's group); "
                                            "free it after that thread's ringoGroupEnd", fn, comm->rank));
}

ringoResult_t ringoCommDestroy(ringoComm_t comm) {
  if (!comm) return ringo_fail(ringoInvalidArgument, "ringoCommDestroy: comm is NULL");
  const size_t queued = ringo_group_queued_on(comm, 0);
  if (queued > 0)
    return ringo_comm_record(comm, ringo_fail(ringoInvalidUsage, "ringoCommDestroy: this thread's open group holds "
                                              "%zu call%s on rank %d's communicator; ringoGroupEnd runs them, "
                                              "ringoCommAbort drops them", queued, queued > 1 ? "s" : "", comm->rank));
  RINGO_CHECK(check_not_being_made(comm, "ringoCommDestroy", 0));
  RINGO_CHECK(check_no_group_elsewhere(comm, "ringoCommDestroy"));
  wait_for_calls(comm);
  ringo_lifecycle_free(comm);
  return ringoSuccess;
}

ringoResult_t ringoCommAbort(ringoComm_t comm) {
  if (!comm) return ringo_fail(ringoInvalidArgument, "ringoCommAbort: comm is NULL");
  RINGO_CHECK(check_not_being_made(comm, "ringoCommAbort", ringo_group_inits_on(comm)));
  (void)ringo_group_queued_on(comm, 1); /* never to run: comm is freed below */
  /* Before anything is freed: the peers stuck in a collective on this rank learn it from the
   * poisoned links at once, while this process still lives (NCCL's abort contract). Poisoned before
   * the flag is raised, so this reason, not the one a call of ours the flag ends, is what they read. */
  ringo_fail(ringoRemoteError, "rank %d (pid %d) aborted its communicator (ringoCommAbort)", comm->rank, (int)getpid());
  ringo_comm_fail(comm, ringoRemoteError);
  ringo_thread_clear_error(); /* the abort itself succeeds */
  atomic_store(&comm->abort_flag, 1);
  ringo_device_abort(comm);
  /* Another thread's group: its calls fail at once on the flag, but only its ringoGroupEnd lets go of
   * them. Bounded: a group left open keeps the communicator, aborted, for ringoCommDestroy. */
  if (!wait_for_zero(&comm->grouped, comm->env.timeout_s))
    return ringo_comm_record(comm, ringo_fail(ringoInvalidUsage, "ringoCommAbort: rank %d's communicator is aborted, but "
                                              "another thread's open group still holds calls on it after %.1f s; they "
                                              "fail at its ringoGroupEnd, after which ringoCommDestroy frees it",
                                              comm->rank, comm->env.timeout_s));
  wait_for_calls(comm); /* a collective in another thread notices the flag within one sleep of its wait loop */
  ringo_lifecycle_free(comm);
  return ringoSuccess;
}

#define QUERY(fn, type, what, expr)                                                          \
  ringoResult_t fn(const ringoComm_t comm, type* what) {                                     \
    if (!comm) return ringo_fail(ringoInvalidArgument, #fn ": comm is NULL");                \
    if (!what) return ringo_comm_record(comm, ringo_fail(ringoInvalidArgument, #fn ": " #what " is NULL")); \
    *what = (expr);                                                                          \
    return ringoSuccess;                                                                     \
  }
QUERY(ringoCommCount, int, count, comm->nranks)
QUERY(ringoCommUserRank, int, rank, comm->rank)
QUERY(ringoCommCuDevice, int, device, comm->cuda_dev)
QUERY(ringoCommLocalRanks, int, nlocal, ringo_device_local_ranks(comm))
/* Cheap and thread-safe: two loads (the device's error word is host memory the kernel writes). */
QUERY(ringoCommGetAsyncError, ringoResult_t, asyncError,
      atomic_load(&comm->error) != ringoSuccess ? atomic_load(&comm->error) : ringo_device_async_error(comm))
QUERY(ringoCommGetStats, ringoCommStats, stats,
      ((ringoCommStats){atomic_load_explicit(&comm->bytes_sent, memory_order_relaxed),
                        atomic_load_explicit(&comm->bytes_received, memory_order_relaxed),
                        atomic_load_explicit(&comm->collectives, memory_order_relaxed)}))

const char* ringoGetLastError(ringoComm_t comm) {
  return comm ? ringo_comm_last_error(comm) : ringo_thread_last_error();
}
