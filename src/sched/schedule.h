/* schedule.h — the ring made precise, as pure functions of (nranks, position, step, count).
 * No I/O, no bytes: collectives.c walks it, ringo-trace prints it. Tested by test/test_schedule.cc. */
#ifndef RINGO_SCHEDULE_H_
#define RINGO_SCHEDULE_H_

#include <stddef.h>

/* What one rank does with one chunk's slice at one step. Every step that sends passes the slice
 * to the next rank of the ring; every step that receives takes it from the previous rank. */
enum ringo_prim {
  RINGO_PRIM_SEND,                  /* send(in) */
  RINGO_PRIM_RECV_REDUCE_SEND,      /* send(op(recv, in)) */
  RINGO_PRIM_RECV_REDUCE_COPY_SEND, /* out = send(final(op(recv, in))) — last reduce-scatter step, fused */
  RINGO_PRIM_RECV_REDUCE_COPY,      /* out = final(op(recv, in)) */
  RINGO_PRIM_COPY_SEND,             /* out = send(in) */
  RINGO_PRIM_RECV_COPY_SEND,        /* out = send(recv) */
  RINGO_PRIM_RECV,                  /* out = recv */
};

enum ringo_coll {
  RINGO_COLL_ALLREDUCE, RINGO_COLL_REDUCESCATTER, RINGO_COLL_ALLGATHER,
  RINGO_COLL_BROADCAST, RINGO_COLL_REDUCE
};

/* Whether a primitive takes a slice from the previous rank, and whether it passes one to the next:
 * the one definition the host engine, the ring kernel, the counters and the tools all use. */
#ifdef __CUDACC__
#define RINGO_HOST_DEVICE __host__ __device__
#else
#define RINGO_HOST_DEVICE
#endif
static inline RINGO_HOST_DEVICE int ringo_prim_receives(int prim) {
  return prim != RINGO_PRIM_SEND && prim != RINGO_PRIM_COPY_SEND;
}
static inline RINGO_HOST_DEVICE int ringo_prim_sends(int prim) {
  return prim != RINGO_PRIM_RECV && prim != RINGO_PRIM_RECV_REDUCE_COPY;
}

struct ringo_step {
  enum ringo_prim prim;
  int chunk;  /* chunk this step handles (always 0 for broadcast and reduce) */
};

#define RINGO_MAX_STEPS(nranks) (2 * (nranks) - 1)

/* Fills steps[] with what ring position pos does, in order, and returns how many steps there are
 * (0 when nranks == 1: nothing moves). root_pos is the root's ring position (broadcast, reduce).
 * All-reduce, with the seed's names: reduce-scatter step s sends chunk (pos - s) and reduces
 * chunk (pos - s - 1) received from pos - 1; after N-1 steps pos owns chunk (pos + 1); all-gather
 * step s sends chunk (pos + 1 - s) and receives chunk (pos - s). Sends of one step are fused with
 * the receive of the step before, giving 2N-1 steps, 2N-2 of them sending. */
int ringo_schedule(enum ringo_coll coll, int nranks, int pos, int root_pos, struct ringo_step* steps);

/* An all-reduce's two halves on their own, as the two-level ring (collectives.c) runs them around
 * the ring of one host, with an all-reduce across hosts in between. The reduce-scatter half is the
 * all-reduce's first N steps, the last one keeping the value (RECV_REDUCE_COPY), after which
 * position pos holds chunk ringo_owned_chunk(N, pos); the all-gather half starts by sending that
 * chunk from the output (SEND) and is the all-reduce's remaining N-1 steps. The chunks are the
 * all-reduce's (ringo_chunk_range over N). Returns the number of steps (0 when nranks == 1). */
enum ringo_half { RINGO_HALF_REDUCE_SCATTER, RINGO_HALF_ALL_GATHER };
int ringo_schedule_half(enum ringo_half half, int nranks, int pos, struct ringo_step* steps);
/* The chunk position pos holds, fully reduced, after the reduce-scatter: pos + 1. */
int ringo_owned_chunk(int nranks, int pos);

/* Chunk c of N over count elements: [off, off + len), the one cut every path uses (host ring,
 * device ring, one-shot, two-level, staged, ringo-trace), so that all of them combine the same
 * elements in the same order and give the same bits. Short chunks (count / N below
 * RINGO_CHUNK_ALIGN_MIN): count / N each, the count % N extra elements one each to the first
 * chunks; count < N and count == 0 are legal (some chunks are empty). Long chunks: every boundary
 * at a multiple of RINGO_CHUNK_ALIGN elements (16: 16 bytes or more for every dtype, so the
 * schedule still knows no bytes), units of 16 spread the same way, the last chunk ending at count;
 * lengths then differ by under 32 elements, so a rank's bytes are off the 2(N-1)/N law by under
 * 0.4 % (8192 elements a chunk keeps it there; shorter chunks, the worked example's among them, keep
 * the seed's exact spread). Either way the first chunk is the longest: the host engine's rounds and
 * the staged phases are counted from it. */
#define RINGO_CHUNK_ALIGN ((size_t)16)
#define RINGO_CHUNK_ALIGN_MIN ((size_t)8192)
void ringo_chunk_range(size_t count, int nchunks, int c, size_t* off, size_t* len);
/* 1 when ringo_chunk_range cuts count elements into nchunks at aligned boundaries (long chunks). */
int ringo_chunk_aligned(size_t count, int nchunks);

/* Where chunk c of a collective of count elements lives, in elements: its offset in sendbuff and
 * in recvbuff, and its length. All-reduce cuts the buffer into N chunks; reduce-scatter and
 * all-gather have one block of count per rank, and chunk c is the block of the rank at ring
 * position c - 1 (ring[p] = rank at position p) — the position that owns chunk c after
 * reduce-scatter — so every rank ends with its own block; broadcast and reduce have one chunk. */
void ringo_chunk_geometry(enum ringo_coll coll, size_t count, int nranks, const int* ring, int c, size_t* in_off,
                          size_t* out_off, size_t* len);

/* Slices of slice_elems elements: how many rounds a chunk of at most max_len elements takes, and
 * the part [off, off + len) of a chunk of chunk_len elements moved in round j (len may be 0). */
size_t ringo_num_rounds(size_t max_len, size_t slice_elems);
void ringo_slice_range(size_t chunk_len, size_t slice_elems, size_t round, size_t* off, size_t* len);

/* Phases of a pipeline over the rounds (a staged collective's, staged.c): rounds [first, end) of
 * nphases as even as can be, none empty when nphases <= rounds. */
void ringo_phase_rounds(size_t rounds, int nphases, int p, size_t* first, size_t* end);

/* The ring position whose input starts the reduction of chunk c: the ring combines the inputs of
 * positions start, start + 1, ..., start + N - 1 (mod N) in that order, each step op(what came in,
 * its own input), the last step producing the final value. All-reduce and reduce-scatter: chunk
 * c starts at position c (reduce-scatter step 0 sends chunk pos); reduce: the chain starts after
 * the root. The one-shot path (oneshot.c) follows this order, so both give the same bits. */
int ringo_reduce_start(enum ringo_coll coll, int nranks, int root_pos, int c);

/* The seed's step formulas, exposed for tools and tests. */
int ringo_mod(int a, int n);
int ringo_rs_send_chunk(int nranks, int pos, int step);
int ringo_rs_recv_chunk(int nranks, int pos, int step);
int ringo_ag_send_chunk(int nranks, int pos, int step);
int ringo_ag_recv_chunk(int nranks, int pos, int step);

/* The gather path's round k (Bruck's all-gather over ring positions): the inputs that cross in it,
 * min(2^k, N - 2^k); and the most of any round. */
int ringo_gather_round_blocks(int nranks, int k);
int ringo_gather_max_blocks(int nranks);

#endif /* RINGO_SCHEDULE_H_ */
