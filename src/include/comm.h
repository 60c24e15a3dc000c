/* comm.h — the communicator: who is in the ring, in what order, over which links, and its state.
 * Internal. Built by comm.c, driven by collectives.c and group.c; tested through the public API. */
#ifndef RINGO_COMM_H_
#define RINGO_COMM_H_

#include <stdatomic.h>
#include <stdint.h>

#include "core.h"
#include "schedule.h"
#include "transport.h"

#define RINGO_ERROR_BYTES 1024

/* One end of one link: its transport and the transport's state. */
struct ringo_conn {
  const struct ringo_transport* tp;
  struct ringo_link* link;
  int peer; /* the rank at the other end */
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
  void* tctx;                   /* transport context (the MPI transport's communicator), or NULL */
  void (*tctx_free)(void*);
  atomic_int abort_flag;        /* set by ringoCommAbort; every wait watches it */
  atomic_int inflight;          /* collectives running now (Abort waits for them to leave) */
  _Atomic ringoResult_t error;  /* sticky: a collective failed mid-flight, the ring is unusable */
  _Atomic uint64_t bytes_sent, bytes_received, collectives;
  struct ringo_trace* trace;    /* RINGO_TRACE recorder, or NULL */
  uint64_t seq;                 /* collectives started on this communicator (fingerprints) */
  char last_error[RINGO_ERROR_BYTES];
};

/* One collective call, as the public API received it (already validated). */
struct ringo_op {
  enum ringo_coll coll;
  const void* sendbuff;
  void* recvbuff;
  size_t count;  /* AllReduce/Broadcast/Reduce: elements; ReduceScatter: recvcount; AllGather: sendcount */
  ringoDataType_t type;
  ringoRedOp_t op;
  int root;
  ringoComm_t comm;
  uint64_t seq; /* set when it runs: the communicator's collective number */
};

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

/* Copies this thread's last error message into comm (when comm is not NULL) and returns res. */
ringoResult_t ringo_comm_record(ringoComm_t comm, ringoResult_t res);

/* Runs one collective to completion on the calling thread and records any error in the
 * communicator (collectives.c). */
ringoResult_t ringo_coll_run(const struct ringo_op* op);

/* Queues op when this thread is inside ringoGroupStart/End; returns 1 if it was queued (group.c). */
int ringo_group_enqueue(const struct ringo_op* op, ringoResult_t* res);

#endif /* RINGO_COMM_H_ */
