/* internals.c — the answers of internals.h: read off the engine's table of algorithms and the
 * communicator for the C++ suites. Compiled as C into the test support objects; used by
 * test_twophase.cc, test_spin.cc, test_board_rotate.cc and test_ring_order.cc. */
#include "internals.h"

#include <stdio.h>
#include <string.h>

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

/* cpus[r]'s list (-1 ends it, at most 8 CPUs below 1024) as the bits of a rank info's mask. */
static void cpu_mask(const int* cpus, uint64_t* mask) {
  for (int i = 0; i < 9 && cpus[i] >= 0; i++) mask[cpus[i] / 64] |= 1ULL << (cpus[i] % 64);
}

int ringo_test_cpus_fit(const int (*cpus)[9], int n) {
  uint64_t masks[16][RINGO_CPU_WORDS] = {{0}};
  if (n > 16) return -1;
  for (int r = 0; r < n; r++) cpu_mask(cpus[r], masks[r]);
  return ringo_comm_cpus_fit(masks, n);
}

void ringo_test_order_ring(const char* const* hosts, const int (*cpus)[9], const int* by_cpu, int n, int* ring) {
  struct ringo_rank_info info[16];
  if (n > 16) return;
  memset(info, 0, sizeof info);
  for (int r = 0; r < n; r++) {
    snprintf(info[r].host, sizeof info[r].host, "%s", hosts[r]);
    info[r].rank = r;
    info[r].ring_by_cpu = by_cpu[r];
    cpu_mask(cpus[r], info[r].cpus);
  }
  uint64_t masks[16][RINGO_CPU_WORDS];
  ringo_comm_order_ring(info, n, ring, masks);
}

int ringo_test_ring_pos(ringoComm_t comm) { return comm->pos; }

size_t ringo_test_board_span(ringoComm_t comm) { return comm->board ? ringo_board_rotate_span(comm->board) : 0; }

size_t ringo_test_board_last_offset(ringoComm_t comm) {
  if (!comm->board || comm->board_ops == 0) return 0;
  return ringo_board_data_offset(comm->board, comm->rank, comm->board_ops - 1);
}

size_t ringo_test_board_span_pages_absent(ringoComm_t comm) {
  return comm->board ? ringo_board_span_pages_absent(comm->board) : 0;
}
