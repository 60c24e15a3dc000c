/* bench_gloo.h — ringo-bench's --compare gloo side, C view: open a Gloo context over the bench's own
 * ranks, run Gloo's counterpart of a row's collective on ringo's buffers, close. Implemented in
 * bench_gloo.cc (C++, libgloo), built when Gloo's headers are found. Run: ringo-bench -N 4 --compare gloo. */
#ifndef RINGO_BENCH_GLOO_H_
#define RINGO_BENCH_GLOO_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The collectives Gloo runs for the bench; the bench maps its own to these. */
enum gloo_coll { GLOO_ALL_REDUCE, GLOO_ALL_GATHER, GLOO_BROADCAST, GLOO_REDUCE, GLOO_SENDRECV };

/* One call: count is the row's elements (all_gather: the whole output), type and op ringo's enums
 * (op < 0 for copies), s and r the bench's buffers; inplace = 1 reads the input from r, laid out
 * as ringo's in-place call expects (all_gather: this rank's block at its offset in r). */
struct gloo_call {
  int coll, type, op, root, inplace;
  void *s, *r;
  size_t count;
};

/* The bench's exchange, used once by Gloo's rendezvous: every rank passes `bytes` bytes and
 * receives every rank's, rank r's at all + r * bytes. Returns 0, or -1 when it failed. */
typedef int (*gloo_exchange_fn)(void* ctx, const void* mine, void* all, size_t bytes);

struct gloo_side;

/* Connects rank `rank` of `nranks` to every other over Gloo's TCP transport: on the interface
 * GLOO_SOCKET_IFNAME names when set, else on loopback when one_host, else on the address this host's
 * name resolves to. NULL on failure, with the reason in err. */
struct gloo_side* gloo_side_open(int rank, int nranks, int one_host, double timeout_s, gloo_exchange_fn exchange,
                                 void* ctx, char* err, size_t errlen);

/* Runs one call to completion; 0, or -1 with Gloo's message in err. */
int gloo_side_run(struct gloo_side* g, const struct gloo_call* c, char* err, size_t errlen);

/* Gloo's barrier, untimed, between the bench's calls; 0, or -1 with the message in err. */
int gloo_side_barrier(struct gloo_side* g, char* err, size_t errlen);

/* Where the context listens ("loopback", "interface eth0", "host name node1"), for the header. */
const char* gloo_side_where(const struct gloo_side* g);

/* The Gloo these functions were built with, "0.5.0". */
const char* gloo_side_version(void);

void gloo_side_close(struct gloo_side* g);

#ifdef __cplusplus
}
#endif

#endif /* RINGO_BENCH_GLOO_H_ */
