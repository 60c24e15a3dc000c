/* comm.h — the communicator: who is in the ring, in what order, over which links, and its state.
 * Internal. Built by comm.c (and api/lifecycle.c on top); tested through the public API. */
#ifndef RINGO_COMM_H_
#define RINGO_COMM_H_

#include <stdatomic.h>
#include <stdint.h>

#include "core/core.h"
#include "sched/schedule.h"
#include "transport/transport.h"

#define RINGO_ERROR_BYTES 1024

/* One end of one link: its transport and the transport's state. */
struct ringo_conn {
  const struct ringo_transport* tp;
  struct ringo_link* link;
  int peer; /* the rank at the other end */
};

/* What each rank tells the others about itself during init; kept, since links made on first use
 * (point-to-point) choose their transport from it. */
#define RINGO_CPU_WORDS 16 /* 1024 CPUs, as glibc's cpu_set_t */

struct ringo_rank_info {
  char host[256]; /* as long as ringo_env.hostname */
  int32_t pid;
  int32_t rank;
  uint64_t oneshot_bytes; /* the largest one-shot input it allows (RINGO_ONESHOT_BYTES; 0: none) */
  uint64_t slice_bytes;   /* its RINGO_SLICE_BYTES, 0 when unset */
  int32_t algo;           /* its RINGO_ALGO: RINGO_ALGO_AUTO, _RING or _NAIVE (the ranks must agree on the links) */
  int32_t ring_by_cpu;   /* its RINGO_RING_ORDER: 1 cpu, 0 rank (the ring goes by CPU only where all say cpu) */
  uint64_t twophase_bytes; /* the largest two-phase all-reduce input it allows (RINGO_TWOPHASE_BYTES; 0: none) */
  uint64_t twophase_round_bytes; /* the most one round of it posts (RINGO_TWOPHASE_ROUND_BYTES) */
  uint64_t cpus[RINGO_CPU_WORDS]; /* the CPUs it may run on at setup (sched_getaffinity), one bit each */
};

enum { RINGO_ALGO_AUTO = 0, RINGO_ALGO_RING = 1, RINGO_ALGO_NAIVE = 2 }; /* what RINGO_ALGO says; engine/select.c chooses */

/* Point-to-point state of one peer (p2p.c): the two links, made on first use, and how many
 * messages went each way (every slice carries its message's number). */
struct ringo_p2p_peer {
  struct ringo_conn send, recv;
  uint64_t sent, received;
};

/* A ring of the two-level ring (collectives.c): this rank's two links in it, its size and this
 * rank's place in it, and the slot size of its links. n == 0: there is none. */
struct ringo_ring_links {
  struct ringo_conn send, recv;
  int n, pos;
  size_t slot_bytes;
};

struct ringoComm {
  int nranks, rank;
  int pos;                      /* this rank's position in the ring */
  int* ring;                    /* ring[pos] = user rank at that position */
  int* pos_of;                  /* pos_of[rank] = its ring position */
  int cuda_dev;                 /* -1: host communicator */
  struct ringo_env env;
  size_t slot_bytes;
  size_t host_slot_bytes;       /* the two-level ring's host-ring slots (agreed at init) */
  /* The two ring links of this rank: to the next position (sends) and from the previous (receives). */
  struct ringo_conn send, recv;
  /* RINGO_ALGO=naive only: links between rank 0 and every other rank, indexed by peer rank. */
  struct ringo_conn *star_to, *star_from;
  int algo;                     /* RINGO_ALGO parsed once (ringo_comm_alloc): RINGO_ALGO_*, or -1 unknown */
  int ring_by_cpu;              /* RINGO_RING_ORDER parsed once: 1 cpu, 0 rank, -1 unknown */
  /* The gather path (collectives.c) of a communicator that leaves the host: in round k this rank
   * sends to ring position pos - 2^k and receives from pos + 2^k; gather_bytes is the largest input
   * per rank it takes (0: none), gather_buf holds every rank's input, by ring position. */
  struct ringo_conn *gather_to, *gather_from;
  int gather_rounds;
  size_t gather_bytes;
  char* gather_buf;
  /* A two-level reduce-scatter's partial sums, one block per host (ringo_comm_scratch): grown to
   * the largest asked for, freed with the communicator. Used by whichever thread runs the
   * communicator's host work, one collective at a time (a host collective quiesces the proxy). */
  void* scratch;
  size_t scratch_bytes;
  /* The two-level ring of a communicator under RINGO_ALGO=auto whose hosts (two or more) each hold
   * the same number of ranks (two or more): an all-reduce goes around this rank's host (host_ring),
   * across hosts among the ranks at the same place on theirs (net_ring), and around the host again;
   * a reduce-scatter or all-gather goes around the host once per host and across hosts once. */
  struct ringo_ring_links host_ring, net_ring;
  struct ringo_rank_info* info; /* info[rank], from init */
  struct ringo_p2p_peer* p2p;   /* p2p[peer] */
  void* mailbox;                /* this host's point-to-point mailbox segment (p2p.c), or NULL */
  size_t mailbox_bytes;
  struct ringo_board* board;    /* the one-shot board (board.c): all ranks on one host; or NULL */
  uint64_t board_ops;           /* host collectives run on a communicator with a board (board.h) */
  /* The board op running on another algorithm now (engine/oneshot.c's bracket), which the ring
   * links' waits check against the peers' posts (ringo_board_check_peers); NULL: none. Read and
   * written only by the thread running the communicator's host work. */
  const struct ringo_op* board_op;
  uint64_t board_op_b;
  struct ringo_device* device;  /* the CUDA side (device.c), or NULL */
  atomic_int ready;             /* init finished (an init queued in a group is not ready before ringoGroupEnd) */
  atomic_int making;            /* its inits queued in a thread's group, until that ringoGroupEnd has run them */
  void* tctx;                   /* transport context (the MPI transport's communicator), or NULL */
  int spans_hosts;              /* its ranks are on more than one host (comm_setup, from the rank infos) */
  void (*tctx_free)(void*);
  atomic_int abort_flag;        /* set by ringoCommAbort; every wait watches it */
  int crowded;                  /* this host's ranks outnumber its CPUs: waits keep yielding however
                                   slow a yield is (core/wait.h; comm.c decides) */
  atomic_int inflight;          /* collectives running now (Abort waits for them to leave) */
  atomic_int grouped;           /* its calls in threads' open groups, until their ringoGroupEnd is done with them */
  atomic_int calling;           /* a public call runs on it (api/group.c): another thread's is refused */
  _Atomic ringoResult_t error;  /* sticky: a collective failed mid-flight, the ring is unusable */
  atomic_int failing;           /* the first failure claimed it: later ones keep error and fail_error */
  _Atomic uint64_t bytes_sent, bytes_received, collectives;
  struct ringo_trace* trace;    /* RINGO_TRACE recorder, or NULL */
  uint64_t seq;                 /* collectives started on this communicator (fingerprints) */
  /* The last call's message, written by any thread that fails on comm (the caller's, the proxy's):
   * two buffers, the one being written never the one published, so a string a reader got stays
   * whole until the failure after next. */
  char last_error[2][RINGO_ERROR_BYTES];
  atomic_int last_slot;         /* the published buffer */
  atomic_flag last_lock;        /* writers one at a time */
  char fail_error[RINGO_ERROR_BYTES]; /* what put the communicator in error (later rejected calls
                                         overwrite last_error, never this) */
};

/* How ranks meet during init: the TCP bootstrap (ringoCommInitRank) or MPI collectives
 * (ringoCommInitMPI). Both give an allgather, a barrier and a close. */
struct ringo_rendezvous {
  void* ctx;
  ringoResult_t (*allgather)(void* ctx, const void* mine, size_t bytes, void* all);
  ringoResult_t (*barrier)(void* ctx);
};

/* A communicator of nranks with this rank, its environment read (NULL when out of memory); then,
 * collective over rv, what the ranks agree on, the ring order, the links of every algorithm, the
 * point-to-point mailbox and the board. The device side and the trace come on top (api/lifecycle.c).
 * ringo_comm_free closes and frees what setup made, whatever it got to. */
ringoComm_t ringo_comm_alloc(int nranks, int rank);
ringoResult_t ringo_comm_setup(ringoComm_t comm, const struct ringo_rendezvous* rv);
void ringo_comm_free(ringoComm_t comm);
/* The links of each algorithm (engine/select.c's table calls them at init, collective over rv):
 * the ring's two; RINGO_ALGO=naive's star around rank 0; the gather path's rounds across hosts;
 * the two-level ring's host and net rings. Each makes nothing where its algorithm cannot run. */
ringoResult_t ringo_comm_connect_ring(ringoComm_t comm, const struct ringo_rendezvous* rv);
ringoResult_t ringo_comm_connect_star(ringoComm_t comm, const struct ringo_rendezvous* rv);
ringoResult_t ringo_comm_connect_gather(ringoComm_t comm, const struct ringo_rendezvous* rv);
ringoResult_t ringo_comm_connect_two_level(ringoComm_t comm, const struct ringo_rendezvous* rv);
/* Unset RINGO_TWOPHASE_BYTES: the largest two-phase all-reduce input per rank of n ranks, up to where
 * the ring wins (core.h): 4 MiB / N, at most 2 MiB, within the board's share (one round). */
uint64_t ringo_comm_twophase_default(int nranks);
/* Unset RINGO_TWOPHASE_ROUND_BYTES: the board's share of each of n ranks' two slots. */
uint64_t ringo_comm_twophase_round_default(int nranks);
/* 1 when n ranks whose allowed CPUs are cpus[0..n-1] can each have a CPU of its own (RINGO_SPIN's
 * default polls only then), 0 when they cannot (the communicator is crowded), -1 when not known (a
 * rank's CPUs are not). Greedy, ranks with the fewest CPUs first: it may say 0 where an assignment
 * exists, never 1 where none does. Sorts cpus in place (so it allocates nothing and every rank
 * decides alike). */
int ringo_comm_cpus_fit(uint64_t (*cpus)[RINGO_CPU_WORDS], int n);
/* The ring order of n ranks from their infos, into ring[0..n-1]: hosts in the order of their lowest
 * rank, a host's ranks next to each other, by rank; but where every rank asked for RINGO_RING_ORDER=cpu
 * and a host's ranks outnumber the CPUs they may run on (ringo_comm_cpus_fit: 0), that host's ranks
 * by the lowest CPU each may run on, ties by rank, so ranks that share a CPU are neighbours. masks
 * is scratch for n ranks' CPU masks. */
void ringo_comm_order_ring(const struct ringo_rank_info* info, int n, int* ring, uint64_t (*masks)[RINGO_CPU_WORDS]);
/* RINGO_DEBUG=INFO's lines on the ring order, once init is through. */
void ringo_comm_log_ring(const ringoComm_t comm);
/* Puts comm in error for good, keeping the first failure's code and message (no poison). */
void ringo_comm_set_error(ringoComm_t comm, ringoResult_t res);

/* Copies this thread's last error message into comm (when comm is not NULL) and returns res. */
ringoResult_t ringo_comm_record(ringoComm_t comm, ringoResult_t res);

/* A collective or message failed mid-flight: the FIFOs are out of step, so the communicator
 * refuses further work (sticky error), every link is poisoned so the neighbours stop waiting and
 * report the same error, and the message is recorded. */
void ringo_comm_fail(ringoComm_t comm, ringoResult_t res);
/* *out = comm's scratch buffer of at least bytes (grown as needed; kept until the communicator goes). */
ringoResult_t ringo_comm_scratch(ringoComm_t comm, size_t bytes, void** out);

/* The error a communicator in error (or not yet initialised) gives any new call, or ringoSuccess. */
ringoResult_t ringo_comm_check_usable(ringoComm_t comm, const char* what);


/* The message of comm's last failed call ("" before any). */
const char* ringo_comm_last_error(ringoComm_t comm);

/* 1 when comm may have MPI links (it has MPI and spans hosts): its calls already call MPI, so its
 * waits may give MPI turns (transport.h), and its ring defaults to RINGO_SLICE_ACROSS_HOSTS. */
static inline int ringo_comm_net_turns(const struct ringoComm* comm) { return comm->tctx && comm->spans_hosts; }

#endif /* RINGO_COMM_H_ */
