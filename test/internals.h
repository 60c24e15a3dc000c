// internals.h — questions the C++ suites ask of the library's internals, answered in C by
// internals.c (the communicator's header uses C11 atomics, which C++ cannot include).
// Used by test_twophase.cc, test_spin.cc, test_board_rotate.cc and test_ring_order.cc; linked into every suite with the
// other support objects.
#ifndef RINGO_TEST_INTERNALS_H_
#define RINGO_TEST_INTERNALS_H_

#include <stddef.h>

#include "ringo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The name of the algorithm comm's engine picks for an all-reduce of count elements of type
 * (engine/select.c's table: "one-shot", "two-phase", "ring", ...). */
const char* ringo_test_allreduce_algo(ringoComm_t comm, size_t count, ringoDataType_t type);
/* The two-phase all-reduce's default limit per rank for n ranks (core/core.h), as comm.c sets it. */
size_t ringo_test_twophase_default_bytes(int n);
/* Unset RINGO_TWOPHASE_ROUND_BYTES: the two-phase slot per rank for n ranks, as comm.c sets it. */
size_t ringo_test_twophase_round_default_bytes(int n);
/* How many board ops comm has run (one per collective, a two-phase all-reduce one per round); 0
 * without a board. */
unsigned long long ringo_test_board_ops(ringoComm_t comm);
/* The size of comm's board segment in bytes (0: none). */
size_t ringo_test_board_bytes(ringoComm_t comm);
/* How many times comm's waiters poll before they yield (RINGO_SPIN, or comm.c's default). */
int ringo_test_spin(ringoComm_t comm);
/* 1 when the communicator found its host's ranks outnumber its CPUs (waits keep yielding). */
int ringo_test_crowded(ringoComm_t comm);
/* comm.c's ringo_comm_cpus_fit over n ranks, rank i allowed the CPUs listed in cpus[i] (-1 ends each
 * list, at most 8 CPUs below 1024 per rank). */
int ringo_test_cpus_fit(const int (*cpus)[9], int n);
/* comm.c's ringo_comm_order_ring over n ranks (at most 16): rank i on host hosts[i], allowed the CPUs
 * listed in cpus[i] (-1 ends each list, as above), its RINGO_RING_ORDER cpu where by_cpu[i]. */
void ringo_test_order_ring(const char* const* hosts, const int (*cpus)[9], const int* by_cpu, int n, int* ring);
/* This rank's position in comm's ring. */
int ringo_test_ring_pos(ringoComm_t comm);
/* The span of each board slot that comm's ops rotate through (comm/board.c; 0: none, or no board). */
size_t ringo_test_board_span(ringoComm_t comm);
/* Where this rank's data of comm's latest board op began in its slot (0 without a board op). */
size_t ringo_test_board_last_offset(ringoComm_t comm);
/* Pages of the board's rotation span (every slot, both sides) not in memory; 0 without a board. */
size_t ringo_test_board_span_pages_absent(ringoComm_t comm);

#ifdef __cplusplus
}
#endif
#endif  // RINGO_TEST_INTERNALS_H_
