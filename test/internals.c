/* internals.c — the answers of internals.h: read off the engine's table of algorithms and the
 * communicator for the C++ suites. Compiled as C into the test support objects; used by
 * test_twophase.cc, test_spin.cc and test_board_rotate.cc. */
#include "internals.h"

#include "comm/board.h"
#include "comm/comm.h"
#include "engine/select.h"

const char* ringo_test_allreduce_algo(ringoComm_t comm, size_t count, ringoDataType_t type) {
  const struct ringo_op op = {.kind = RINGO_KIND_COLL, .coll = RINGO_COLL_ALLREDUCE, .count = count, .type = type,
                              .op = ringoSum, .comm = comm};
  return ringo_select_name(&op);
}

size_t ringo_test_twophase_default_bytes(int n) { return (size_t)ringo_comm_twophase_default(n); }
size_t ringo_test_twophase_round_default_bytes(int n) { return (size_t)ringo_comm_twophase_round_default(n); }
unsigned long long ringo_test_board_ops(ringoComm_t comm) { return comm->board ? comm->board_ops : 0; }
size_t ringo_test_board_bytes(ringoComm_t comm) { return comm->board ? ringo_board_bytes(comm->board) : 0; }

int ringo_test_spin(ringoComm_t comm) { return comm->env.spin; }
int ringo_test_crowded(ringoComm_t comm) { return comm->crowded; }

int ringo_test_cpus_fit(const int (*cpus)[9], int n) {
  uint64_t masks[16][RINGO_CPU_WORDS] = {{0}};
  if (n > 16) return -1;
  for (int r = 0; r < n; r++)
    for (int i = 0; i < 9 && cpus[r][i] >= 0; i++) masks[r][cpus[r][i] / 64] |= 1ULL << (cpus[r][i] % 64);
  return ringo_comm_cpus_fit((const uint64_t(*)[RINGO_CPU_WORDS])masks, n);
}

size_t ringo_test_board_span(ringoComm_t comm) { return comm->board ? ringo_board_rotate_span(comm->board) : 0; }

size_t ringo_test_board_last_offset(ringoComm_t comm) {
  if (!comm->board || comm->board_ops == 0) return 0;
  return ringo_board_data_offset(comm->board, comm->rank, comm->board_ops - 1);
}

size_t ringo_test_board_span_pages_absent(ringoComm_t comm) {
  return comm->board ? ringo_board_span_pages_absent(comm->board) : 0;
}
