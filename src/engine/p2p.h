/* p2p.h — the point-to-point engine: n sends and receives of one communicator progressed together
 * to completion, so no pattern deadlocks. Implemented in p2p.c; tested by test/test_p2p.cc. */
#ifndef RINGO_ENGINE_P2P_H_
#define RINGO_ENGINE_P2P_H_

#include <stddef.h>

#include "comm/comm.h"
#include "comm/op.h"

/* A batch of device sends and receives staged in phases (device/p2p_device.c): phase p holds bytes
 * [p * piece, (p + 1) * piece) of every message. The engine sends a slice only once the phases
 * staged(ctx) says the stream has copied cover it (it does not wait: -1 means they never will, the
 * stream failed or the communicator was aborted, is in error or is being torn down), and calls
 * done(ctx, p) once every receive holds phase p < n - 1 (the last ends with the run), so the copies
 * each way overlap the transfer. What crosses the links is unchanged. */
struct ringo_p2p_phases {
  int n;
  size_t piece;
  void* ctx;
  int (*staged)(void* ctx);
  void (*done)(void* ctx, int p);
};

/* Runs n host sends and receives of comm (one call outside a group, a group's batch at
 * ringoGroupEnd, or the proxy's staged copies of device ones with phases; NULL: all staged) on the
 * calling thread. A failure puts the communicator in error and is recorded in it, except a host batch
 * of self sends and receives that do not pair up: refused before anything moved, only recorded. */
ringoResult_t ringo_p2p_run(ringoComm_t comm, const struct ringo_op* const* ops, size_t n,
                            const struct ringo_p2p_phases* phases);
/* "ringoSend" or "ringoRecv". */
const char* ringo_p2p_name(const struct ringo_op* op);

#endif /* RINGO_ENGINE_P2P_H_ */
