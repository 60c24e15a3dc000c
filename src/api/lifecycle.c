/* lifecycle.c — a communicator made and unmade whole: the communicator's own setup (comm/), then
 * its device side (device/) and its trace (engine/), over the TCP bootstrap or any rendezvous; and
 * the reverse. Used by api/init.c, init_mpi.c and group.c; tested by test/test_api.cc. */
#include "api/lifecycle.h"

#include <string.h>

#include "boot/bootstrap.h"
#include "device/device.h"
#include "engine/select.h"
#include "engine/trace.h"

/* Everything after the rendezvous is up: links, mailbox, board, device side, trace. On failure the communicator is
 * left in error with what was made, for ringo_comm_free. */
static ringoResult_t comm_init(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  /* RINGO_ALGO and RINGO_RING_ORDER are checked in ringo_comm_setup, once the ranks have met. */
  ringoResult_t res = ringo_comm_setup(comm, rv);
  if (res == ringoSuccess) res = ringo_select_setup(comm, rv);
  if (res == ringoSuccess) res = ringo_device_setup(comm, rv);
  if (res == ringoSuccess) ringo_comm_log_ring(comm);
  if (res == ringoSuccess && comm->env.trace_path[0])
    res = ringo_trace_open(&comm->trace, comm->env.trace_path, comm->rank);
  if (res != ringoSuccess) {
    ringo_comm_set_error(comm, res);
    return res;
  }
  comm->ready = 1;
  RINGO_INFO(RINGO_LOG_INIT, "rank %d of %d ready at ring position %d", comm->rank, comm->nranks, comm->pos);
  return ringoSuccess;
}

ringoResult_t ringo_lifecycle_create(ringoComm_t* out, int nranks, int rank, const struct ringo_rendezvous* rv,
                                void* tctx, void (*tctx_free)(void*)) {
  ringoComm_t comm = ringo_comm_alloc(nranks, rank);
  if (!comm) {
    if (tctx_free) tctx_free(tctx);
    return ringo_fail(ringoSystemError, "out of memory creating a communicator");
  }
  comm->tctx = tctx;
  comm->tctx_free = tctx_free;
  ringoResult_t res = comm_init(comm, rv);
  if (res != ringoSuccess) {
    ringo_lifecycle_free(comm);
    return res;
  }
  *out = comm;
  return ringoSuccess;
}

static ringoResult_t tcp_allgather(void* bs, const void* mine, size_t bytes, void* all) {
  return ringo_bootstrap_allgather(bs, mine, bytes, all);
}
static ringoResult_t tcp_barrier(void* bs) { return ringo_bootstrap_barrier(bs); }

ringoResult_t ringo_lifecycle_init_tcp(ringoComm_t comm, const ringoUniqueId* id) {
  struct ringo_bootstrap* bs = NULL;
  ringoResult_t res = ringo_bootstrap_init(id, comm->nranks, comm->rank, comm->env.timeout_s, &bs);
  if (res == ringoSuccess) {
    const struct ringo_rendezvous rv = {bs, tcp_allgather, tcp_barrier};
    res = comm_init(comm, &rv);
    ringo_bootstrap_close(bs);
  }
  if (res != ringoSuccess) {
    ringo_comm_set_error(comm, res);
    ringo_bootstrap_let_root_speak(1.0); /* the caller may exit at once, and a root here with it */
  }
  return res;
}


void ringo_lifecycle_free(ringoComm_t comm) {
  if (!comm) return;
  /* The proxy runs host work over the links for queued device work: nothing may close under it. */
  if (!ringo_device_drain(comm)) {
    RINGO_WARN("rank %d: device work still queued after %.0f s without progress; the communicator is left "
               "allocated", comm->rank, comm->env.timeout_s);
    return;
  }
  /* The proxy goes first (device.c): it may be running host work over the links closed below. */
  if (!ringo_device_free(comm)) return;
  if (comm->trace && ringo_trace_close(comm->trace) != ringoSuccess)
    RINGO_WARN("rank %d: could not write RINGO_TRACE=%s: %s", comm->rank, comm->env.trace_path, ringo_thread_last_error());
  ringo_comm_free(comm);
}
