/* shim_comm.c — libnccl.so.2 on ringo: the record behind an ncclComm_t and its life cycle (init
 * with and without a config, non-blocking init on a thread, several ids, ncclCommInitAll, split,
 * finalize, destroy, abort). Public ringo.h only: a split is two all-gathers over the parent and
 * a ringoCommInitRank. Tested by test/test_nccl_calls.cc and test/test_nccl_abi.cc (make test). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* ---- the record ---- */

static struct ncclComm* comm_new(const struct shim_config* config) {
  struct ncclComm* c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->config = *config;
  atomic_init(&c->pending, 0);
  c->init_result = ncclSuccess;
  c->device = -1;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->init_done, NULL);
  return c;
}

static void comm_free(struct ncclComm* c) {
  shim_redops_free(c);
  shim_tokens_free(c);
  pthread_cond_destroy(&c->init_done);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* Waits for a non-blocking init to end or be aborted; the first caller after its end joins its
 * thread (which by then only returns). Not under the lock: the thread takes it to finish. */
static void comm_wait_init(struct ncclComm* c) {
  pthread_mutex_lock(&c->lock);
  while (atomic_load(&c->pending)) pthread_cond_wait(&c->init_done, &c->lock);
  const int join = c->init_thread_live;
  c->init_thread_live = 0;
  pthread_mutex_unlock(&c->lock);
  if (join) pthread_join(c->init_thread, NULL);
}

ringoComm_t shim_ringo(struct ncclComm* comm) {
  if (!comm) return NULL;
  if (atomic_load(&comm->pending)) comm_wait_init(comm);
  return comm->rc;
}

ncclResult_t shim_ready(struct ncclComm* comm, const char* function, ringoComm_t* rc) {
  *rc = shim_ringo(comm);
  if (*rc) return ncclSuccess;
  if (!comm) return shim_fail(NULL, ncclInvalidArgument, "%s: comm is NULL", function);
  if (comm->init_result != ncclSuccess)
    return shim_fail(comm, comm->init_result, "%s: the communicator's non-blocking init failed: %s", function,
                     comm->init_msg[0] ? comm->init_msg : ncclGetErrorString(comm->init_result));
  return shim_fail(comm, ncclInvalidUsage, "%s: the communicator was aborted (ncclCommAbort); make a new one",
                   function);
}

size_t shim_type_size(ncclDataType_t datatype) {
  static const size_t bytes[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return (int)datatype >= 0 && (int)datatype < ncclNumTypes ? bytes[datatype] : 0;
}

ringoDataType_t shim_move_type(ncclDataType_t datatype) {
  return datatype == ncclFloat8e4m3 || datatype == ncclFloat8e5m2 ? ringoUint8 : (ringoDataType_t)datatype;
}

/* ---- configs ---- */

static const struct shim_config kDefaultConfig = {1, 0, ""};

/* Reads the fields of config that its size covers (a program built against an older nccl.h
 * passes a shorter struct), into out. NCCL refuses a config without its magic: so does ringo. */
static ncclResult_t read_config(const ncclConfig_t* config, const struct shim_config* base, struct shim_config* out,
                                const char* function) {
  *out = *base;
  if (!config) return ncclSuccess;
  if (config->magic != NCCL_API_MAGIC || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
    return shim_fail(NULL, ncclInvalidArgument,
                     "%s: config was not initialised with NCCL_CONFIG_INITIALIZER (magic 0x%x, size %zu)", function,
                     config->magic, config->size);
  if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1)
    return shim_fail(NULL, ncclInvalidArgument, "%s: config->blocking is %d; it must be 0 or 1", function,
                     config->blocking);
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) out->blocking = config->blocking;
  if (config->size >= offsetof(ncclConfig_t, splitShare) + sizeof(int) && config->splitShare != NCCL_CONFIG_UNDEF_INT)
    out->splitShare = config->splitShare;
  if (config->size >= offsetof(ncclConfig_t, commName) + sizeof(char*) && config->commName) {
    strncpy(out->name, config->commName, sizeof out->name - 1);
    out->name[sizeof out->name - 1] = '\0';
  }
  return ncclSuccess;
}

/* ---- init ---- */

/* The non-blocking init's thread: the caller's CUDA device first (ringo takes a communicator's
 * device from the initialising thread, as NCCL does), then a plain blocking ringo init. When
 * ncclCommAbort gave the record up meanwhile, the record is the aborted list's (never freed) and the
 * communicator made is aborted here, so the peers that joined it learn that this rank left. */
static void* init_thread_main(void* arg) {
  struct ncclComm* c = arg;
  if (c->device >= 0) shim_set_device(c->device);
  ringoComm_t handle = NULL;
  const ringoResult_t res = ringoCommInitRank(&handle, c->nranks, c->id, c->rank);
  pthread_mutex_lock(&c->lock);
  if (c->abandoned) {
    pthread_mutex_unlock(&c->lock);
    if (handle) ringoCommAbort(handle);
    return NULL;
  }
  if (res != ringoSuccess) {
    snprintf(c->init_msg, sizeof c->init_msg, "%s", ringoGetLastError(NULL));
    snprintf(c->msg, sizeof c->msg, "%s", c->init_msg);
    c->msg_set = 1;
  }
  c->rc = handle;
  c->init_result = shim_result(NULL, res);
  atomic_store(&c->pending, 0);
  pthread_cond_broadcast(&c->init_done);
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

/* Creates the record and starts ringo's init: blocking (or queued, inside a group) on this
 * thread, or on a thread of its own when the config says non-blocking outside a group. */
static ncclResult_t init_rank(ncclComm_t* comm, int nranks, const ringoUniqueId* id, int rank,
                              const struct shim_config* config) {
  if (!comm) return shim_result(NULL, ringoCommInitRank(NULL, nranks, *id, rank));
  *comm = NULL;
  struct ncclComm* c = comm_new(config);
  if (!c) return shim_fail(NULL, ncclSystemError, "ncclCommInitRank: out of memory");
  if (!config->blocking && !shim_in_group()) {
    if (nranks < 1 || rank < 0 || rank >= nranks) {
      comm_free(c);
      return shim_result(NULL, ringoCommInitRank(NULL, nranks, *id, rank)); /* ringo's message */
    }
    c->nranks = nranks, c->rank = rank, c->id = *id, c->device = shim_current_device();
    atomic_store(&c->pending, 1);
    c->init_thread_live = 1;
    if (pthread_create(&c->init_thread, NULL, init_thread_main, c) != 0) {
      comm_free(c);
      return shim_fail(NULL, ncclSystemError, "ncclCommInitRankConfig: cannot start the init thread");
    }
    *comm = c;
    return ncclInProgress;
  }
  ringoComm_t handle = NULL;
  const ringoResult_t res = ringoCommInitRank(&handle, nranks, *id, rank);
  if (!handle) {
    comm_free(c);
    return shim_result(NULL, res);
  }
  c->rc = handle;
  c->init_result = shim_result(c, res);
  *comm = c;
  return c->init_result;
}

NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  ringoUniqueId id;
  memcpy(&id, &commId, sizeof id);
  return init_rank(comm, nranks, &id, rank, &kDefaultConfig);
}
NCCL_PROFILING_ALIAS(ncclCommInitRank);

NCCL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                ncclConfig_t* config) {
  if (comm) *comm = NULL; /* also when the config is refused: no stale handle is left to destroy */
  struct shim_config cfg;
  const ncclResult_t res = read_config(config, &kDefaultConfig, &cfg, "ncclCommInitRankConfig");
  if (res != ncclSuccess) return res;
  ringoUniqueId id;
  memcpy(&id, &commId, sizeof id);
  return init_rank(comm, nranks, &id, rank, &cfg);
}
NCCL_PROFILING_ALIAS(ncclCommInitRankConfig);

/* ringo's rendezvous has one root, so the first id serves; every rank holds the same list. */
NCCL_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                  ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || !commIds)
    return shim_fail(NULL, ncclInvalidArgument, "ncclCommInitRankScalable: %s",
                     nId < 1 ? "nId must be at least 1" : "commIds is NULL");
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}
NCCL_PROFILING_ALIAS(ncclCommInitRankScalable);

/* devlist is passed on as is: NULL means host ranks on ringo, where NCCL would take CUDA devices
 * 0..ndev-1 (ringo has no device to pick for a host buffer). */
NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (!comm || ndev < 1) {
    ringoComm_t unused;
    return shim_result(NULL, ringoCommInitAll(comm ? &unused : NULL, ndev, devlist));
  }
  ringoComm_t* handles = calloc((size_t)ndev, sizeof *handles);
  struct ncclComm** made = calloc((size_t)ndev, sizeof *made);
  int ok = handles && made;
  for (int i = 0; ok && i < ndev; i++) ok = (made[i] = comm_new(&kDefaultConfig)) != NULL;
  ringoResult_t res = ok ? ringoCommInitAll(handles, ndev, devlist) : ringoSystemError;
  for (int i = 0; i < ndev; i++) {
    if (res == ringoSuccess) made[i]->rc = handles[i];
    else if (made && made[i]) comm_free(made[i]);
    comm[i] = res == ringoSuccess ? made[i] : NULL;
  }
  free(handles);
  free(made);
  return ok ? shim_result(NULL, res) : shim_fail(NULL, ncclSystemError, "ncclCommInitAll: out of memory");
}
NCCL_PROFILING_ALIAS(ncclCommInitAll);

/* ---- end of life ---- */

/* As NCCL: NULL is nothing to finalize, and a second finalize is refused. */
NCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  ringoComm_t rc;
  const ncclResult_t res = shim_ready(comm, "ncclCommFinalize", &rc);
  if (res != ncclSuccess) return res;
  pthread_mutex_lock(&comm->lock);
  const int again = comm->finalized;
  comm->finalized = 1;
  pthread_mutex_unlock(&comm->lock);
  if (again) return shim_fail(comm, ncclInvalidArgument, "ncclCommFinalize: the communicator was finalized already");
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommFinalize);

/* NCCL accepts NULL in ncclCommDestroy and ncclCommAbort as a no-op (cleanup paths rely on it). A
 * failed init leaves a record without a ringo communicator: only the record is freed. */
/* Whether ncclCommAbort took comm (its record then stays on the aborted list). */
static int was_aborted(struct ncclComm* comm) {
  pthread_mutex_lock(&comm->lock);
  const int aborted = comm->aborted;
  pthread_mutex_unlock(&comm->lock);
  return aborted;
}

NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  const size_t recorded = shim_group_recorded_on(comm, 0);
  if (recorded > 0) /* ncclGroupEnd would run them on a freed communicator */
    return shim_fail(comm, ncclInvalidUsage, "ncclCommDestroy: this thread's open group holds %zu call%s on this "
                     "communicator; ncclGroupEnd runs them, ncclCommAbort drops them", recorded,
                     recorded > 1 ? "s" : "");
  const int held = atomic_load(&comm->grouped);
  if (held > 0) /* that thread's ncclGroupEnd would run them on a freed communicator */
    return shim_fail(comm, ncclInvalidUsage, "ncclCommDestroy: another thread's open group holds %d call%s on this "
                     "communicator; destroy it after that ncclGroupEnd", held, held > 1 ? "s" : "");
  if (was_aborted(comm)) /* the record stays for the calls the abort ended (and an abandoned init's thread) */
    return shim_fail(comm, ncclInvalidUsage, "ncclCommDestroy: the communicator was aborted (ncclCommAbort), which "
                     "freed it already");
  comm_wait_init(comm); /* joins the init thread, also one that has finished */
  ringoComm_t rc = comm->rc;
  const ncclResult_t res = rc ? shim_result(comm, ringoCommDestroy(rc)) : ncclSuccess;
  if (res != ncclSuccess) /* refused (an init queued in the open group): nothing freed */
    return shim_fail(comm, res, "ncclCommDestroy: %s", ringoGetLastError(rc));
  comm_free(comm);
  return res;
}
NCCL_PROFILING_ALIAS(ncclCommDestroy);

/* Abort is for a communicator other threads may be blocked in; they return through its record
 * (their messages), so the record is never freed: it forgets its ringo communicator (which
 * ringoCommAbort frees once those calls are out) and joins a list that keeps it reachable, a few
 * hundred bytes per aborted communicator. */
static pthread_mutex_t aborted_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm* aborted;

/* Gives up a non-blocking init still running, as NCCL's abort flag stops its init: the caller
 * returns at once, and the init's thread aborts whatever it makes (init_thread_main). */
static void abandon_init(struct ncclComm* c) {
  pthread_mutex_lock(&c->lock);
  if (atomic_load(&c->pending)) {
    c->abandoned = 1;
    pthread_detach(c->init_thread);
    c->init_thread_live = 0;
    atomic_store(&c->pending, 0); /* the record reads "aborted" from now on (rc stays NULL) */
    pthread_cond_broadcast(&c->init_done);
  }
  pthread_mutex_unlock(&c->lock);
}

NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  if (was_aborted(comm)) return ncclSuccess; /* nothing left to end; the record stays on the list once */
  shim_group_recorded_on(comm, 1); /* never to run: its ringo communicator goes below */
  abandon_init(comm);
  comm_wait_init(comm); /* joins an init thread that had finished */
  pthread_mutex_lock(&comm->lock); /* the record stays, its registrations go (a later deregister is refused) */
  shim_tokens_free(comm);
  pthread_mutex_unlock(&comm->lock);
  ringoComm_t rc = comm->rc;
  comm->rc = NULL; /* calls from now on read "aborted" */
  const ringoResult_t res = rc ? ringoCommAbort(rc) : ringoSuccess;
  if (res != ringoSuccess) { /* refused, aborted but kept (another thread's group): ncclCommDestroy frees it later */
    comm->rc = rc;
    return shim_fail(comm, shim_result(NULL, res), "ncclCommAbort: %s; ncclCommDestroy frees it after that",
                     ringoGetLastError(rc));
  }
  pthread_mutex_lock(&comm->lock);
  comm->aborted = 1;
  pthread_mutex_unlock(&comm->lock);
  pthread_mutex_lock(&aborted_lock);
  comm->next_aborted = aborted;
  aborted = comm;
  pthread_mutex_unlock(&aborted_lock);
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommAbort);

/* ---- split ---- */

/* Where this rank lands: the parent ranks of its color ordered by (key, parent rank); the first is
 * the leader, whose process starts the child's rendezvous. */
struct split_place {
  int size, rank, leader;
};

static struct split_place split_place(const int32_t* all, int n, int me) {
  struct split_place p = {0, 0, -1};
  const int32_t color = all[3 * me], key = all[3 * me + 1];
  for (int r = 0; r < n; r++) {
    if (all[3 * r] != color) continue;
    const int32_t k = all[3 * r + 1];
    p.size++;
    if (k < key || (k == key && r < me)) p.rank++;
    if (p.leader < 0 || k < all[3 * p.leader + 1]) p.leader = r;
  }
  return p;
}

/* Both exchanges run on host memory with stream NULL, which ringo accepts on any communicator. */
static ncclResult_t split_exchange(struct ncclComm* c, int color, int key, struct split_place* place,
                                   ringoUniqueId* id) {
  int n = 0, me = 0;
  ringoComm_t rc;
  ncclResult_t res = shim_ready(c, "ncclCommSplit", &rc);
  if (res == ncclSuccess) res = shim_result(c, ringoCommCount(rc, &n));
  if (res == ncclSuccess) res = shim_result(c, ringoCommUserRank(rc, &me));
  if (res != ncclSuccess) return res;
  int32_t* all = malloc(3 * sizeof(int32_t) * (size_t)n);
  ringoUniqueId* ids = calloc((size_t)n, sizeof *ids);
  if (!all || !ids) res = shim_fail(c, ncclSystemError, "ncclCommSplit: out of memory");
  const int32_t mine[3] = {color, key, me};
  if (res == ncclSuccess) res = shim_result(c, ringoAllGather(mine, all, 3, ringoInt32, rc, NULL));
  if (res == ncclSuccess) {
    *place = split_place(all, n, me);
    if (color != NCCL_SPLIT_NOCOLOR && place->leader == me) res = shim_result(c, ringoGetUniqueId(&ids[me]));
  }
  /* Every rank joins the second exchange, a failed leader too (with zeros), so none is left waiting. */
  const ncclResult_t sent =
      shim_result(c, ringoAllGather(&ids[me], ids, sizeof *ids, ringoUint8, rc, NULL));
  if (res == ncclSuccess) res = sent;
  if (res == ncclSuccess && color != NCCL_SPLIT_NOCOLOR) *id = ids[place->leader];
  free(all);
  free(ids);
  return res;
}

NCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                       ncclConfig_t* config) {
  if (!comm || !newcomm || color < NCCL_SPLIT_NOCOLOR)
    return shim_fail(comm, ncclInvalidArgument, "ncclCommSplit: %s",
                     !comm ? "comm is NULL" : !newcomm ? "newcomm is NULL" : "color must be >= 0 or NCCL_SPLIT_NOCOLOR");
  *newcomm = NULL;
  if (shim_in_group())
    return shim_fail(comm, ncclInvalidUsage, "ncclCommSplit: ringo cannot split inside ncclGroupStart/ncclGroupEnd "
                                             "(the split exchanges over the parent before it returns)");
  struct shim_config cfg;
  ncclResult_t res = read_config(config, &comm->config, &cfg, "ncclCommSplit");
  if (res != ncclSuccess) return res;
  struct split_place place;
  ringoUniqueId id;
  res = split_exchange(comm, color, key, &place, &id);
  if (res != ncclSuccess || color == NCCL_SPLIT_NOCOLOR) return res;
  return init_rank(newcomm, place.size, &id, place.rank, &cfg);
}
NCCL_PROFILING_ALIAS(ncclCommSplit);
