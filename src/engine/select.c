/* select.c — ONE TABLE of the host engine's algorithms: for each, when it fits a collective, how it
 * makes its links at init, and how it runs; the choice is made here and nowhere else. On a
 * communicator with a board every host collective is also a board op: the one-shot and two-phase
 * entries run on it, the others post their fingerprint there (the one-shot's contract, oneshot.h).
 * Tested by test/test_collectives.cc, test_oneshot.cc, test_twophase.cc, test_naive.cc,
 * test_staged.cc and the MPI suites (gather, two-level). */
#include "engine/select.h"

#include "comm/board.h"
#include "engine/collectives.h"
#include "engine/oneshot.h"
#include "engine/twophase.h"

struct algo {
  const char* name;
  int (*fits)(const struct ringo_op* op);                               /* NULL: fits everything */
  ringoResult_t (*setup)(ringoComm_t comm, const struct ringo_rendezvous* rv); /* its links; NULL: none */
  ringoResult_t (*run)(const struct ringo_op* op);                      /* NULL: runs on the board */
  ringoResult_t (*board_run)(const struct ringo_op* op, uint64_t b);    /* as board op b (needs the board) */
  uint64_t (*board_ops)(const struct ringo_op* op); /* how many board ops from b it runs as; NULL: one */
};

static int single_fits(const struct ringo_op* op) { return op->comm->nranks == 1; }
static int naive_fits(const struct ringo_op* op) {
  return op->comm->algo == RINGO_ALGO_NAIVE && op->coll == RINGO_COLL_ALLREDUCE;
}
/* In the order they are asked: the first that fits runs. Setup runs for every entry, in this
 * order, on every rank alike (each makes nothing where its algorithm cannot run). */
static const struct algo algos[] = {
    {"one rank", single_fits, NULL, ringo_single_run, NULL, NULL},
    {"one-shot", ringo_oneshot_fits, ringo_board_setup, NULL, ringo_oneshot_run, NULL},
    {"two-phase", ringo_twophase_fits, NULL, NULL, ringo_twophase_run, ringo_twophase_rounds},
    {"naive", naive_fits, ringo_comm_connect_star, ringo_naive_run, NULL, NULL},
    {"gather", ringo_gather_fits, ringo_comm_connect_gather, ringo_gather_run, NULL, NULL},
    {"two-level", ringo_two_level_fits, ringo_comm_connect_two_level, ringo_two_level_run, NULL, NULL},
    {"ring", NULL, ringo_comm_connect_ring, ringo_ring_run, NULL, NULL},
};
#define NUM_ALGOS (sizeof algos / sizeof algos[0])
enum { ALGO_SINGLE = 0, ALGO_BOARD = 1 /* the entry that makes the board */, ALGO_RING = NUM_ALGOS - 1 };

static size_t pick(const struct ringo_op* op) {
  size_t i = 0;
  while (i < ALGO_RING && !(algos[i].fits(op) && (!algos[i].board_run || op->comm->board))) i++;
  return i;
}

ringoResult_t ringo_select_setup(ringoComm_t comm, const struct ringo_rendezvous* rv) {
  /* The links of the ring come first, then those of the others, as the ranks always made them;
   * the board last, beside them. A communicator of one rank has links to no one. */
  if (comm->nranks > 1) RINGO_CHECK(algos[ALGO_RING].setup(comm, rv));
  for (size_t i = 0; comm->nranks > 1 && i < ALGO_RING; i++)
    if (algos[i].setup && i != ALGO_BOARD) RINGO_CHECK(algos[i].setup(comm, rv));
  return algos[ALGO_BOARD].setup(comm, rv);
}

const char* ringo_select_name(const struct ringo_op* op) { return algos[pick(op)].name; }

ringoResult_t ringo_select_run(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  const size_t a = pick(op);
  if (a == ALGO_SINGLE || !comm->board) return algos[a].run(op);
  const uint64_t b = comm->board_ops;
  comm->board_ops += algos[a].board_ops ? algos[a].board_ops(op) : 1;
  if (algos[a].board_run) return algos[a].board_run(op, b);
  return ringo_oneshot_bracket(op, b, algos[a].run);
}

ringoResult_t ringo_select_run_staged(const struct ringo_op* op) {
  const ringoComm_t comm = op->comm;
  atomic_fetch_add(&comm->inflight, 1);
  ringoResult_t res = atomic_load(&comm->error); /* after a failure the FIFOs are out of step: run nothing */
  if (res == ringoSuccess && atomic_load(&comm->abort_flag)) /* being torn down: touch nothing */
    res = ringo_fail(ringoInvalidUsage, "rank %d: communicator aborted before a staged collective ran", comm->rank);
  else if (res == ringoSuccess) {
    res = ringo_select_run(op);
    if (res != ringoSuccess) ringo_comm_fail(comm, res);
  }
  atomic_fetch_sub(&comm->inflight, 1);
  return res;
}

size_t ringo_select_rounds(const struct ringo_op* op, size_t* slice_elems) {
  if (pick(op) == ALGO_RING) return ringo_ring_rounds(op, slice_elems);
  *slice_elems = ringo_ring_slice_elems(op);
  return 0;
}
