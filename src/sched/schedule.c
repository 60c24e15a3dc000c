/* schedule.c — PURE: which chunk each ring position sends, receives and reduces at every step, and
 * where chunks and slices begin and end. No I/O and no bytes; collectives.c walks it and
 * tools print it. Tested by test/test_schedule.cc (it replays the ring symbolically).
 *
 *   All-reduce over N = 4 positions, reduce-scatter then all-gather (seed's names):
 *
 *        +------> p0 ------> p1 ------+      rs step s:  p sends chunk (p - s), receives (p - s - 1)
 *        |                            |                  and reduces it with its own copy
 *        +------- p3 <------ p2 <-----+      after N-1:  p owns chunk (p + 1), fully reduced
 *                                            ag step s:  p sends chunk (p + 1 - s), receives (p - s)
 *
 * The send of each step is fused with the receive of the step before it: a received slice is
 * reduced (or copied) straight into the next rank's FIFO, so the rank touches it once. */
#include "sched/schedule.h"

int ringo_mod(int a, int n) {
  int m = a % n;
  return m < 0 ? m + n : m;
}

int ringo_rs_send_chunk(int nranks, int pos, int step) { return ringo_mod(pos - step, nranks); }
int ringo_rs_recv_chunk(int nranks, int pos, int step) { return ringo_mod(pos - step - 1, nranks); }
int ringo_ag_send_chunk(int nranks, int pos, int step) { return ringo_mod(pos + 1 - step, nranks); }
int ringo_ag_recv_chunk(int nranks, int pos, int step) { return ringo_mod(pos - step, nranks); }

static void put(struct ringo_step* steps, int* n, enum ringo_prim prim, int chunk) {
  steps[*n].prim = prim;
  steps[*n].chunk = chunk;
  (*n)++;
}

/* Reduce-scatter part: step 0 sends the own chunk; steps 1..N-2 reduce what arrives and pass it
 * on; step N-1 produces the final value of chunk pos+1 (and, for all-reduce, sends it on as the
 * first all-gather step). */
static void reduce_scatter_steps(int nranks, int pos, int then_gather, struct ringo_step* steps, int* n) {
  put(steps, n, RINGO_PRIM_SEND, ringo_rs_send_chunk(nranks, pos, 0));
  for (int s = 1; s < nranks - 1; s++)
    put(steps, n, RINGO_PRIM_RECV_REDUCE_SEND, ringo_rs_recv_chunk(nranks, pos, s - 1));
  put(steps, n, then_gather ? RINGO_PRIM_RECV_REDUCE_COPY_SEND : RINGO_PRIM_RECV_REDUCE_COPY,
      ringo_rs_recv_chunk(nranks, pos, nranks - 2));
}

/* All-gather part after the first send: all-gather step s-1's chunk arrives and is stored, and
 * passed on unless it is the last one (step N-1 only receives). */
static void all_gather_steps(int nranks, int pos, struct ringo_step* steps, int* n) {
  for (int s = 1; s < nranks; s++)
    put(steps, n, s < nranks - 1 ? RINGO_PRIM_RECV_COPY_SEND : RINGO_PRIM_RECV,
        ringo_ag_recv_chunk(nranks, pos, s - 1));
}

/* A chain along the ring that starts at position first and ends at first - 1. */
static void chain_steps(int nranks, int pos, int first, enum ringo_prim head, enum ringo_prim middle,
                        enum ringo_prim tail, struct ringo_step* steps, int* n) {
  int d = ringo_mod(pos - first, nranks);
  put(steps, n, d == 0 ? head : (d == nranks - 1 ? tail : middle), 0);
}

int ringo_reduce_start(enum ringo_coll coll, int nranks, int root_pos, int c) {
  if (coll == RINGO_COLL_REDUCE) return ringo_mod(root_pos + 1, nranks);
  return ringo_rs_send_chunk(nranks, c, 0);
}

int ringo_schedule(enum ringo_coll coll, int nranks, int pos, int root_pos, struct ringo_step* steps) {
  int n = 0;
  if (nranks <= 1) return 0;
  switch (coll) {
    case RINGO_COLL_ALLREDUCE:
      reduce_scatter_steps(nranks, pos, 1, steps, &n);
      all_gather_steps(nranks, pos, steps, &n);
      break;
    case RINGO_COLL_REDUCESCATTER:
      reduce_scatter_steps(nranks, pos, 0, steps, &n);
      break;
    case RINGO_COLL_ALLGATHER:
      put(steps, &n, RINGO_PRIM_COPY_SEND, ringo_ag_send_chunk(nranks, pos, 0));
      all_gather_steps(nranks, pos, steps, &n);
      break;
    case RINGO_COLL_BROADCAST:
      chain_steps(nranks, pos, root_pos, RINGO_PRIM_COPY_SEND, RINGO_PRIM_RECV_COPY_SEND, RINGO_PRIM_RECV,
                  steps, &n);
      break;
    case RINGO_COLL_REDUCE:
      chain_steps(nranks, pos, ringo_mod(root_pos + 1, nranks), RINGO_PRIM_SEND,
                  RINGO_PRIM_RECV_REDUCE_SEND, RINGO_PRIM_RECV_REDUCE_COPY, steps, &n);
      break;
  }
  return n;
}

int ringo_owned_chunk(int nranks, int pos) { return ringo_rs_recv_chunk(nranks, pos, nranks - 2); }

int ringo_schedule_half(enum ringo_half half, int nranks, int pos, struct ringo_step* steps) {
  int n = 0;
  if (nranks <= 1) return 0;
  if (half == RINGO_HALF_REDUCE_SCATTER) {
    reduce_scatter_steps(nranks, pos, 0, steps, &n);
  } else {
    put(steps, &n, RINGO_PRIM_SEND, ringo_owned_chunk(nranks, pos));
    all_gather_steps(nranks, pos, steps, &n);
  }
  return n;
}

/* Short chunks: count / N each, the count % N extra elements one each to the first chunks. */
static void spread_range(size_t count, size_t n, size_t i, size_t* off, size_t* len) {
  const size_t base = count / n, extra = count % n;
  *off = i * base + (i < extra ? i : extra);
  *len = base + (i < extra ? 1 : 0);
}

/* Long chunks: the same spread over units of RINGO_CHUNK_ALIGN elements, the last unit cut short at
 * count. Every boundary is then a multiple of 16 elements, 16 bytes or more whatever the dtype, so a
 * chunk starts where its buffer's 16-byte vectors do (the ring kernel goes scalar on a chunk that
 * does not: N = 3 lost a third of the copy bandwidth so, cuda/README.md). The short unit is in the
 * last chunk, and the first chunks get the extra units: the first chunk stays the longest. */
static void aligned_range(size_t count, size_t n, size_t i, size_t* off, size_t* len) {
  const size_t q = RINGO_CHUNK_ALIGN, units = (count + q - 1) / q;
  size_t uoff, ulen;
  spread_range(units, n, i, &uoff, &ulen);
  const size_t end = (uoff + ulen) * q < count ? (uoff + ulen) * q : count;
  *off = uoff * q < count ? uoff * q : count;
  *len = end - *off;
}

int ringo_chunk_aligned(size_t count, int nchunks) {
  return nchunks > 1 && count / (size_t)nchunks >= RINGO_CHUNK_ALIGN_MIN;
}

void ringo_chunk_range(size_t count, int nchunks, int c, size_t* off, size_t* len) {
  if (ringo_chunk_aligned(count, nchunks)) aligned_range(count, (size_t)nchunks, (size_t)c, off, len);
  else spread_range(count, (size_t)nchunks, (size_t)c, off, len);
}

size_t ringo_num_rounds(size_t max_len, size_t slice_elems) {
  return (max_len + slice_elems - 1) / slice_elems;
}

void ringo_slice_range(size_t chunk_len, size_t slice_elems, size_t round, size_t* off, size_t* len) {
  const size_t start = round * slice_elems;
  *off = start < chunk_len ? start : chunk_len;
  *len = start < chunk_len ? (chunk_len - start < slice_elems ? chunk_len - start : slice_elems) : 0;
}

void ringo_phase_rounds(size_t rounds, int nphases, int p, size_t* first, size_t* end) {
  const size_t n = nphases > 0 ? (size_t)nphases : 1;
  *first = rounds * (size_t)p / n;
  *end = rounds * ((size_t)p + 1) / n;
}

void ringo_chunk_geometry(enum ringo_coll coll, size_t count, int nranks, const int* ring, int c, size_t* in_off,
                          size_t* out_off, size_t* len) {
  *in_off = *out_off = 0;
  *len = count;
  switch (coll) {
    case RINGO_COLL_ALLREDUCE:
      ringo_chunk_range(count, nranks, c, in_off, len);
      *out_off = *in_off;
      break;
    case RINGO_COLL_REDUCESCATTER: /* reads every block, writes only its own into recvbuff */
      *in_off = (size_t)ring[ringo_mod(c - 1, nranks)] * count;
      break;
    case RINGO_COLL_ALLGATHER: /* reads only its own block from sendbuff, writes every block */
      *out_off = (size_t)ring[ringo_mod(c - 1, nranks)] * count;
      break;
    default: /* broadcast, reduce: one chunk, the whole buffer */
      break;
  }
}

/* The gather path (engine/collectives.c) in rounds k = 0, 1, ...: how many inputs cross in round k. */
int ringo_gather_round_blocks(int nranks, int k) {
  const int d = 1 << k;
  return d < nranks - d ? d : nranks - d;
}

int ringo_gather_max_blocks(int nranks) {
  int most = 1;
  for (int k = 0; 1 << k < nranks; k++) {
    const int m = ringo_gather_round_blocks(nranks, k);
    most = m > most ? m : most;
  }
  return most;
}

