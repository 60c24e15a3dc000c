/* p2p_device.c — device ringoSend/ringoRecv: each batch is staged through pinned host memory in
 * stream order and run by the host point-to-point engine (p2p.c) on the communicator's proxy thread
 * (proxy.c), so the caller's thread never waits and every link kind (shm, MPI) serves device buffers.
 * Tested without a GPU by test/test_p2p_device.cc; on a GPU through test/test_device.cc.
 *
 *   ringo's stream:  [sends 0 -> staging] [m] [sends 1] [m] ... [wait 0] [staging 0 -> receives] [wait 1] ...
 *   the proxy:       sends what is staged, tells the stream each phase every receive holds
 */
#include "device/p2p_device.h"

#include <stdlib.h>

#include "comm/comm.h"
#include "engine/p2p.h"
#include "core/core.h"
#include "device/proxy.h"

#define STAGE_ALIGN RINGO_STAGE_ALIGN

/* The proxy's work: the calls, with their buffers replaced by slices of the staging, and the
 * phases they are staged in (phase p: bytes [p * piece, (p + 1) * piece) of every message). */
struct p2p_batch {
  ringoComm_t comm;
  size_t n;
  const struct ringo_op** ptrs;
  struct ringo_proxy_task* task;
  struct ringo_p2p_phases phases;
  struct ringo_op ops[];
};

static int phases_staged(void* ctx) { return ringo_proxy_phases_staged(((struct p2p_batch*)ctx)->task); }
static void p2p_phase_done(void* ctx, int p) { ringo_proxy_phase_done(((struct p2p_batch*)ctx)->task, p); }

static void proxy_run_batch(void* arg, int run, struct ringo_proxy_task* task) {
  struct p2p_batch* b = arg;
  b->task = task;
  /* One phase: the proxy ends it, and the stream staged everything before the run began. */
  if (run) (void)ringo_p2p_run(b->comm, b->ptrs, b->n, b->phases.n > 1 ? &b->phases : NULL);
  free(b);
}

/* The phases of the longest message (ringo_stage_phase_count), in pieces of a multiple of
 * STAGE_ALIGN bytes; rounding a piece up may leave one phase fewer. */
static int p2p_choose_phases(const ringoComm_t comm, const struct ringo_p2p_call* calls, size_t n, size_t* piece) {
  size_t longest = 0;
  for (size_t i = 0; i < n; i++) {
    const size_t bytes = calls[i].count * ringo_type_size(calls[i].type);
    if (bytes > longest) longest = bytes;
  }
  const size_t np = (size_t)ringo_stage_phase_count(comm, longest, SIZE_MAX);
  *piece = ((longest + np - 1) / np + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
  if (*piece == 0) *piece = STAGE_ALIGN;
  const size_t phases = (longest + *piece - 1) / *piece;
  return phases > 1 ? (int)phases : 1;
}

static size_t staged_bytes(const struct ringo_p2p_call* c) { return ringo_stage_p2p_bytes(c->count, c->type); }

static struct p2p_batch* make_batch(ringoComm_t comm, char* staging, const struct ringo_p2p_call* calls, size_t n) {
  struct p2p_batch* b = calloc(1, sizeof *b + n * (sizeof(struct ringo_op) + sizeof(struct ringo_op*)));
  if (!b) return NULL;
  b->comm = comm;
  b->n = n;
  b->ptrs = (const struct ringo_op**)(b->ops + n);
  for (size_t i = 0; i < n; i++) {
    const struct ringo_p2p_call* c = &calls[i];
    void* host = c->count ? staging : NULL;
    b->ops[i] = (struct ringo_op){.kind = c->send ? RINGO_KIND_SEND : RINGO_KIND_RECV, .peer = c->peer,
                                  .sendbuff = c->send ? host : NULL, .recvbuff = c->send ? NULL : host,
                                  .count = c->count, .type = c->type, .comm = comm};
    b->ptrs[i] = &b->ops[i];
    staging += staged_bytes(c);
  }
  return b;
}

/* Enqueues phase p's copies of one direction: the sends' bytes [p * piece, (p + 1) * piece) to
 * their slices, or those of the slices back to the receives' buffers. */
static ringoResult_t copy_slices(char* staging, const struct ringo_p2p_call* calls, size_t n, int sends, int p,
                                 size_t piece, const struct ringo_stage_ops* ops) {
  for (size_t i = 0; i < n; i++) {
    const struct ringo_p2p_call* c = &calls[i];
    const size_t bytes = c->count * ringo_type_size(c->type), at = (size_t)p * piece;
    const size_t len = at < bytes ? (bytes - at < piece ? bytes - at : piece) : 0;
    if (len && c->send && sends) RINGO_CHECK(ops->to_host(ops->ctx, staging + at, (const char*)c->buf + at, len));
    if (len && !c->send && !sends) RINGO_CHECK(ops->to_device(ops->ctx, (char*)c->buf + at, staging + at, len));
    staging += staged_bytes(c);
  }
  return ringoSuccess;
}

ringoResult_t ringo_p2p_device_launch(ringoComm_t comm, struct ringo_stage* st, const struct ringo_p2p_call* calls,
                                      size_t n, const struct ringo_stage_ops* ops) {
  size_t need = 0;
  for (size_t i = 0; i < n; i++) need += staged_bytes(&calls[i]);
  RINGO_CHECK(ringo_stage_grow(st, &st->p2p, &st->p2p_cap, need, ops));
  struct p2p_batch* b = make_batch(comm, st->p2p, calls, n);
  if (!b) return ringo_fail(ringoSystemError, "out of memory for a batch of %zu device sends/receives", n);
  size_t piece;
  const int nphases = p2p_choose_phases(comm, calls, n, &piece);
  b->phases = (struct ringo_p2p_phases){nphases, piece, b, phases_staged, p2p_phase_done};
  /* Each phase's send copies end with its marker; then, phase by phase, the stream waits for the
   * proxy to have received it everywhere and copies it back (as staged.c does for collectives). */
  ringoResult_t res = ringoSuccess;
  for (int p = 0; p < nphases && res == ringoSuccess; p++) {
    res = copy_slices(st->p2p, calls, n, 1, p, piece, ops);
    if (res == ringoSuccess) res = ringo_proxy_mark(comm, &st->proxy, ops);
  }
  int handed = 0;
  if (res == ringoSuccess) res = ringo_proxy_submit(comm, &st->proxy, proxy_run_batch, b, nphases, ops, &handed);
  if (!handed) free(b);
  /* After a failure the receives stay uncopied and the caller puts the communicator in error; a
   * batch whose stream wait could not be enqueued is cancelled by the proxy (proxy.c). */
  for (int p = 0; p < nphases && res == ringoSuccess; p++) {
    if (p > 0) res = ringo_proxy_wait_phase(st->proxy, p, ops);
    if (res == ringoSuccess) res = copy_slices(st->p2p, calls, n, 0, p, piece, ops);
  }
  return res;
}
