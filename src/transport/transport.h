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
  double yield_s;              /* then how long it yields the CPU before it sleeps (RINGO_YIELD_US) */
  int crowded;                 /* the host's ranks outnumber its CPUs (struct ringo_wait_policy) */
  const atomic_int* abort_flag; /* non-zero: give up waiting (ringoCommAbort); may be NULL */
  int self_rank, peer_rank;    /* user ranks; for error messages (and MPI addressing: see mpi.c) */
  int peer_pid;                /* the peer's process id when it shares this host, else 0 (shm: a
                                  peer that dies before it attaches is noticed, not waited out) */
  void* ctx;                   /* the transport's per-communicator context (mpi: struct ringo_mpi_ctx*) */
  int channel;                 /* which family of links (RINGO_CHANNEL_*): keeps MPI messages of a ring
                                  link, a star link and a point-to-point link between one pair apart */
  int net_turns;               /* the communicator has MPI links, so its calls already call MPI on this
                                  thread: its waits may give MPI turns (core/wait.h) */
  /* Also ends a wait, between polls, with the error it returns (with its message set): another
   * link the waiter's caller knows a failure would show on first (comm.c, the two-level ring's
   * links). NULL: none. Called only on the waiting thread. */
  ringoResult_t (*interrupt)(void* ctx);
  void* interrupt_ctx;
};

enum {
  RINGO_CHANNEL_RING = 0, RINGO_CHANNEL_STAR = 1, RINGO_CHANNEL_P2P = 2, RINGO_CHANNEL_GATHER = 3,
  RINGO_CHANNEL_HOST_RING = 4, RINGO_CHANNEL_NET_RING = 5 /* the two-level ring's (comm.h) */
};

/* What a transport is asked about the two ends of a link it might make (can_connect). */
struct ringo_link_ends {
  int same_host; /* both ranks say they run on one host (RINGO_HOSTNAME may fake that) */
  int has_net;   /* the communicator has a network context (ringoCommInitMPI) */
  int forced;    /* RINGO_TRANSPORT names this transport for every link */
};

struct ringo_transport {
  const char* name;
  /* 1 when this transport can join the two ends (the table asks each in turn). */
  int (*can_connect)(const struct ringo_link_ends* ends);
  /* 1: a posted send moves only while this rank calls into the transport (MPI over TCP), so the
   * engine finishes a collective's sends (flush) before the call returns, rather than leave a
   * receiver on another host waiting for this rank's next call. */
  int sends_need_turns;
  /* Receiver end: allocate the FIFO and describe it in info (RINGO_LINK_INFO_BYTES). */
  ringoResult_t (*recv_setup)(const struct ringo_link_params* p, struct ringo_link** link, void* info);
  /* Sender end: attach to the FIFO the receiver described. */
  ringoResult_t (*send_connect)(const struct ringo_link_params* p, const void* info, struct ringo_link** link);
  /* Both ends, once every rank has connected (a bootstrap barrier later): drop names etc. The
   * sender's end may also call it alone, right after send_connect (links made on first use). */
  ringoResult_t (*setup_done)(struct ringo_link* link);
  /* Links made on first use (point-to-point). With local_info, neither end needs to hear from the
   * other: the sender writes into info what the receiver's recv_setup would have, and each end sets
   * up alone (mpi). Without it (NULL), the sender makes the link — send_setup allocates and fills
   * info, so a first message never waits for the receiver — and the receiver attaches with
   * recv_connect once info reaches it (shm). Either pair may be NULL when the other is there. */
  void (*local_info)(const struct ringo_link_params* p, void* info);
  ringoResult_t (*send_setup)(const struct ringo_link_params* p, struct ringo_link** link, void* info);
  ringoResult_t (*recv_connect)(const struct ringo_link_params* p, const void* info, struct ringo_link** link);
  /* Receiver of a link made on first use that it will never attach to (it leaves first): frees
   * what info names (shm: the segment's name). May be NULL. */
  void (*discard)(const void* info);

  /* Data path. send_acquire waits for a free slot and returns its address; the caller fills up
   * to slot_bytes and send_post publishes it. recv_acquire waits for the oldest filled slot;
   * recv_release frees it. Every wait is bounded by timeout_s and stops on abort_flag. */
  ringoResult_t (*send_acquire)(struct ringo_link* link, void** slot);
  ringoResult_t (*send_post)(struct ringo_link* link, size_t bytes);
  ringoResult_t (*recv_acquire)(struct ringo_link* link, const void** slot, size_t* bytes);
  ringoResult_t (*recv_release)(struct ringo_link* link);
  /* Never waits: *ready = 1 when the next send_acquire (sender) or recv_acquire (receiver) will
   * not wait. Reports poison, abort and a dead peer as errors; the caller bounds the time. Lets
   * one thread progress many links at once (the sends and receives of a group). */
  ringoResult_t (*poll)(struct ringo_link* link, int* ready);

  /* Sender end: waits until the receiver has released every posted slot, so an error it hit
   * on them (a poisoned link) reaches this rank too. */
  ringoResult_t (*flush)(struct ringo_link* link);

  /* Tells the other end that this rank left on an error (code, msg): its waits end with that
   * error instead of a timeout. Best effort, never blocks; may be NULL (the peer times out). */
  void (*poison)(struct ringo_link* link, ringoResult_t code, const char* msg);
  /* Never waits: the error the other end poisoned this link with (its code and message), or
   * ringoSuccess. Either end may ask, whatever it is doing with the link. */
  ringoResult_t (*peer_poisoned)(const struct ringo_link* link);

  void (*close)(struct ringo_link* link);
};

/* ONE TABLE of the transports (table.c), in the order they are asked: a new transport is one file
 * exporting its struct plus one line there. */
/* The first transport that can connect ends, or NULL when none can. */
const struct ringo_transport* ringo_transport_pick(const struct ringo_link_ends* ends);
/* The transport called name (RINGO_TRANSPORT), or NULL; names, when not NULL, gets the known names
 * ("shm mpi") for an error message. */
const struct ringo_transport* ringo_transport_by_name(const char* name, char* names, size_t cap);

extern const struct ringo_transport ringo_transport_shm;
#ifdef RINGO_HAVE_MPI
extern const struct ringo_transport ringo_transport_mpi;
/* The MPI transport's context: a private duplicate of the user's MPI communicator (so ringo's
 * messages never match the user's), in which ringo rank r is MPI rank r. */
ringoResult_t ringo_mpi_ctx_create(const void* user_mpi_comm, void** ctx);
void ringo_mpi_ctx_free(void* ctx);
/* 1 when MPI runs at MPI_THREAD_MULTIPLE, so MPI links may be driven from another thread while
 * the user calls MPI (staged device collectives and device sends run on ringo's proxy thread). */
int ringo_mpi_links_thread_safe(void);
/* The most threads that were inside MPI through the mpi transport at once since the last reset
 * (reset: return it and start again from 0). Below MPI_THREAD_MULTIPLE it must stay 1. For tests. */
int ringo_mpi_most_concurrent_calls(int reset);
#endif

#ifdef __cplusplus
}
#endif
#endif /* RINGO_TRANSPORT_H_ */
