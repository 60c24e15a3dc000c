/* comm.h — the communicator: who is in the ring, in what order, over which links, and its state.
 * Internal. Built by comm.c, driven by collectives.c and group.c; tested through the public API. */
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
struct ringo_rank_info {
  char host[256]; /* as long as ringo_env.hostname */
  int32_t pid;
  int32_t rank;
  uint64_t oneshot_bytes; /* the largest one-shot input it allows (RINGO_ONESHOT_BYTES; 0: none) */
  uint64_t slice_bytes;   /* its RINGO_SLICE_BYTES, 0 when unset */
  int32_t algo;           /* its RINGO_ALGO: RINGO_ALGO_AUTO, _RING or _NAIVE (the ranks must agree on the links) */
  int32_t unused;
};

enum { RINGO_ALGO_AUTO = 0, RINGO_ALGO_RING = 1, RINGO_ALGO_NAIVE = 2 };

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
  /* The two ring links of this rank: to the next position (sends) and from the previous (receives). */
  struct ringo_conn send, recv;
  /* RINGO_ALGO=naive only: links between rank 0 and every other rank, indexed by peer rank. */
  struct ringo_conn *star_to, *star_from;
  int algo_naive;
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
  struct ringo_device* device;  /* the CUDA side (device.c), or NULL */
  int ready;                    /* init finished (an init queued in a group is not ready before ringoGroupEnd) */
  void* tctx;                   /* transport context (the MPI transport's communicator), or NULL */
  int spans_hosts;              /* its ranks are on more than one host (comm_setup, from the rank infos) */
  void (*tctx_free)(void*);
  atomic_int abort_flag;        /* set by ringoCommAbort; every wait watches it */
  atomic_int inflight;          /* collectives running now (Abort waits for them to leave) */
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

/* One call, as the public API received it (already validated): a collective, or one side of a
 * point-to-point message (kind SEND/RECV: peer, sendbuff or recvbuff, count, type). */
enum ringo_op_kind { RINGO_KIND_COLL = 0, RINGO_KIND_SEND, RINGO_KIND_RECV };

/* A staged collective's pipeline (staged.c): the host ring's rounds cut into n phases
 * (ringo_phase_rounds). The ring calls await(ctx, p) before the first round of phase p > 0 — its
 * input must be staged — and done(ctx, p) after the last round of phase p < n - 1 — its output
 * may go back to the device — so copies overlap the transfer (the last phase ends with the run).
 * 1 <= n <= the rounds (ringo_coll_rounds). await returns 0 when the input never will be there
 * (the stream failed, or the communicator was aborted, is in error or is being torn down). */
struct ringo_phases {
  int n;
  void* ctx;
  int (*await)(void* ctx, int p);
  void (*done)(void* ctx, int p);
};

struct ringo_op {
  enum ringo_op_kind kind;
  int peer;
  int device;            /* the buffers are CUDA device memory: enqueue on stream (device.c) */
  int defer_join;        /* device op in a group: the caller's stream waits for it after every launch */
  ringoStream_t stream;
  enum ringo_coll coll;
  const void* sendbuff;
  void* recvbuff;
  size_t count;  /* AllReduce/Broadcast/Reduce: elements; ReduceScatter: recvcount; AllGather: sendcount */
  ringoDataType_t type;
  ringoRedOp_t op;
  int root;
  ringoComm_t comm;
  uint64_t seq; /* set when it runs: the communicator's collective number */
  const struct ringo_phases* phases; /* host ring of a staged collective only, or NULL */
};

/* What every slice of a collective (and its one-shot post, oneshot.c) says it belongs to; ranks
 * compare them as bytes, so a mismatched or skipped call is named instead of hanging. */
struct ringo_fingerprint {
  uint64_t seq, count;
  uint32_t coll, op, type;
  int32_t root;
};
#define RINGO_FINGERPRINT_BYTES 64 /* room kept for one before a payload: keeps it aligned */
_Static_assert(sizeof(struct ringo_fingerprint) <= RINGO_FINGERPRINT_BYTES, "fingerprint too large");
struct ringo_fingerprint ringo_fingerprint_of(const struct ringo_op* op);
/* "ringoAllReduce #3 (count 4, float32, sum, root 0)" */
void ringo_coll_describe(const struct ringo_op* op, char* buf, size_t cap);
/* The error for a rank whose fingerprint differs from op's. */
ringoResult_t ringo_coll_mismatch(const struct ringo_op* op, const struct ringo_fingerprint* theirs, int peer);

/* How ranks meet during init: the TCP bootstrap (ringoCommInitRank) or MPI collectives
 * (ringoCommInitMPI). Both give an allgather, a barrier and a close. */
struct ringo_rendezvous {
  void* ctx;
  ringoResult_t (*allgather)(void* ctx, const void* mine, size_t bytes, void* all);
  ringoResult_t (*barrier)(void* ctx);
};

/* Creates rank `rank` of an nranks communicator over rv. tctx (may be NULL) becomes the
 * communicator's transport context and is freed with tctx_free when it goes, or here on failure. */
ringoResult_t ringo_comm_create(ringoComm_t* out, int nranks, int rank, const struct ringo_rendezvous* rv,
                                void* tctx, void (*tctx_free)(void*));

/* The two halves of ringoCommInitRank, apart so an init queued in a group can hand out its
 * handle at once: alloc (NULL when out of memory), then init over the TCP bootstrap. A failed
 * init leaves the communicator allocated, in error, for ringo_comm_free. */
ringoComm_t ringo_comm_alloc(int nranks, int rank);
ringoResult_t ringo_comm_init_tcp(ringoComm_t comm, const ringoUniqueId* id);
void ringo_comm_free(ringoComm_t comm);

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

/* Links made after init (p2p.c): the parameters of a link to or from peer, and its transport. */
void ringo_comm_link_params(const ringoComm_t comm, int peer, int channel, struct ringo_link_params* p);
ringoResult_t ringo_comm_pick_transport(const ringoComm_t comm, int peer, const struct ringo_transport** tp);

/* The message of comm's last failed call ("" before any). */
const char* ringo_comm_last_error(ringoComm_t comm);

/* Runs one collective to completion on the calling thread and records any error in the
 * communicator (collectives.c). */
ringoResult_t ringo_coll_run(const struct ringo_op* op);
/* The host ring on op as given (its seq taken at launch), from a staged device collective's host
 * function (staged.c): a failure puts the communicator in error; nothing runs once it is. */
ringoResult_t ringo_coll_run_staged(const struct ringo_op* op);
/* The rounds the host ring walks for op (round j moves slice j, of *slice_elems elements, of every
 * chunk), or 0 when the engine runs op otherwise (one rank, one-shot, RINGO_ALGO=naive): what a staged
 * collective may cut into phases. */
size_t ringo_coll_rounds(const struct ringo_op* op, size_t* slice_elems);

/* 1 when comm may have MPI links (it has MPI and spans hosts): its calls already call MPI, so its
 * waits may give MPI turns (transport.h), and its ring defaults to RINGO_SLICE_ACROSS_HOSTS. */
static inline int ringo_comm_net_turns(const struct ringoComm* comm) { return comm->tctx && comm->spans_hosts; }

/* The one-shot path (oneshot.c) for a communicator with a board (board.h): 1 when op's input fits
 * the board, which every rank decides alike from the fingerprint; then op runs as board op b. */
int ringo_oneshot_fits(const struct ringo_op* op);
ringoResult_t ringo_oneshot_run(const struct ringo_op* op, uint64_t b);
/* This rank's result of op from every rank's input (in[rank]), combined in the ring's own order, so
 * the bits equal the ring's; shared by the board and the gather path (collectives.c). */
ringoResult_t ringo_oneshot_combine(const struct ringo_op* op, const void* const* in);
/* RINGO_TRACE's one event for such a collective (board or gather path): `read` bytes from peers since t0. */
void ringo_oneshot_trace(const struct ringo_op* op, size_t read, double t0);
/* The gather path's round k: the inputs that cross in it, min(2^k, N - 2^k); and the most of any round. */
int ringo_gather_round_blocks(int nranks, int k);
int ringo_gather_max_blocks(int nranks);

/* Point-to-point (p2p.c): the mailbox made at init through rv; then n sends and receives of comm
 * progressed together to completion (one call outside a group, a group's batch at ringoGroupEnd);
 * links closed and the mailbox unmapped when the communicator goes. */
ringoResult_t ringo_p2p_setup(ringoComm_t comm, const struct ringo_rendezvous* rv);
ringoResult_t ringo_p2p_run(ringoComm_t comm, const struct ringo_op* const* ops, size_t n);
/* A batch of device sends and receives staged in phases (p2p_device.c): phase p holds bytes
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
/* The same for the proxy of device point-to-point (p2p_device.c), on staged host copies: it does
 * not wait for the communicator's device work, being part of it. phases: NULL when the whole batch
 * was staged before it runs. */
ringoResult_t ringo_p2p_run_staged(ringoComm_t comm, const struct ringo_op* const* ops, size_t n,
                                   const struct ringo_p2p_phases* phases);
/* n device sends and receives of comm, enqueued as one batch on ringo's stream (device.c); with
 * join, each op's stream then waits for it. Records its errors in the communicator. */
ringoResult_t ringo_p2p_run_device(ringoComm_t comm, const struct ringo_op* const* ops, size_t n, int join);
void ringo_p2p_free(ringoComm_t comm);

/* Queues op when this thread is inside ringoGroupStart/End; returns 1 if it was queued (group.c). */
int ringo_group_enqueue(const struct ringo_op* op, ringoResult_t* res);
/* 1 inside ringoGroupStart/End on this thread. */
int ringo_group_active(void);
/* Queues the init of comm over id likewise; returns 1 if it was queued. */
int ringo_group_enqueue_init(ringoComm_t comm, const ringoUniqueId* id, ringoResult_t* res);

#endif /* RINGO_COMM_H_ */
