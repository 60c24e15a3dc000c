/* transport.h — the one interface every link kind implements (shm now; mpi and cuda/ipc later).
 * A link is one direction of one ring edge: a FIFO of nslots slots of slot_bytes each. Transports
 * move bytes and know no reductions. Tested by test/test_shm.cc. */
#ifndef RINGO_TRANSPORT_H_
#define RINGO_TRANSPORT_H_

#include <stddef.h>

#include "ringo.h"

#ifdef __cplusplus
#include <atomic>
using std::atomic_int; /* so C++ tests can include this header */
extern "C" {
#else
#include <stdatomic.h>
#endif

#define RINGO_LINK_INFO_BYTES 256  /* what a receiver tells its sender, through the bootstrap */
#define RINGO_POISON_MSG_BYTES 512 /* the error text a poisoned link carries */

struct ringo_link;  /* each transport defines its own */

struct ringo_link_params {
  size_t slot_bytes;           /* capacity of one slot */
  int nslots;                  /* FIFO depth */
  double timeout_s;            /* bound on any single wait */
  int spin;                    /* polls before a waiter starts yielding/sleeping (RINGO_SPIN) */
  const atomic_int* abort_flag; /* non-zero: give up waiting (ringoCommAbort); may be NULL */
  int self_rank, peer_rank;    /* user ranks; for error messages (and MPI addressing: see mpi.c) */
  void* ctx;                   /* the transport's per-communicator context (mpi: struct ringo_mpi_ctx*) */
};

struct ringo_transport {
  const char* name;
  /* Receiver end: allocate the FIFO and describe it in info (RINGO_LINK_INFO_BYTES). */
  ringoResult_t (*recv_setup)(const struct ringo_link_params* p, struct ringo_link** link, void* info);
  /* Sender end: attach to the FIFO the receiver described. */
  ringoResult_t (*send_connect)(const struct ringo_link_params* p, const void* info, struct ringo_link** link);
  /* Both ends, once every rank has connected (a bootstrap barrier later): drop names etc. */
  ringoResult_t (*setup_done)(struct ringo_link* link);

  /* Data path. send_acquire waits for a free slot and returns its address; the caller fills up
   * to slot_bytes and send_post publishes it. recv_acquire waits for the oldest filled slot;
   * recv_release frees it. Every wait is bounded by timeout_s and stops on abort_flag. */
  ringoResult_t (*send_acquire)(struct ringo_link* link, void** slot);
  ringoResult_t (*send_post)(struct ringo_link* link, size_t bytes);
  ringoResult_t (*recv_acquire)(struct ringo_link* link, const void** slot, size_t* bytes);
  ringoResult_t (*recv_release)(struct ringo_link* link);

  /* Sender end: waits until the receiver has released every posted slot, so an error it hit
   * on them (a poisoned link) reaches this rank too. */
  ringoResult_t (*flush)(struct ringo_link* link);

  /* Tells the other end that this rank left on an error (code, msg): its waits end with that
   * error instead of a timeout. Best effort, never blocks; may be NULL (the peer times out). */
  void (*poison)(struct ringo_link* link, ringoResult_t code, const char* msg);

  void (*close)(struct ringo_link* link);
};

extern const struct ringo_transport ringo_transport_shm;
#ifdef RINGO_HAVE_MPI
extern const struct ringo_transport ringo_transport_mpi;
/* The MPI transport's context: a private duplicate of the user's MPI communicator (so ringo's
 * messages never match the user's), in which ringo rank r is MPI rank r. */
ringoResult_t ringo_mpi_ctx_create(const void* user_mpi_comm, void** ctx);
void ringo_mpi_ctx_free(void* ctx);
#endif

#ifdef __cplusplus
}
#endif
#endif /* RINGO_TRANSPORT_H_ */
