/* cuda_oneshot.h — the device one-shot all-reduce's contract: one kernel per rank reads all N inputs
 * (pointers it can reach: ranks of one process, or buffers mapped over CUDA IPC) and writes its
 * result, each chunk combined in the ring's order, so the bits equal the ring's. The descriptor and
 * the decision are pure (src/sched/device_oneshot.c), the kernel is cuda/oneshot.cu. Tested by
 * test/test_device_oneshot.cc (decision, descriptor; no CUDA) and test/test_cuda_oneshot.cc. */
#ifndef RINGO_CUDA_ONESHOT_H_
#define RINGO_CUDA_ONESHOT_H_

#include <stddef.h>
#include <stdint.h>

#include "ringo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One-shot reads (N - 1) x D per rank where the ring moves 2(N-1)/N x D: it pays only where the
 * ring's 2(N-1) hand-offs cost more than the bytes, so a few ranks and small buffers. */
#define RINGO_DEV_ONESHOT_MAX_RANKS 16

/* THE threshold, in bytes of one rank's buffer: a device all-reduce of at most this many bytes runs
 * one-shot where ringo_dev_oneshot_fits says it may. NOT YET MEASURED ON A GPU. Chosen from the
 * H200 figures that exist (cuda/README.md): with every rank on one GPU a one-shot moves N(N + 1) x D
 * through HBM (each rank reads N inputs, writes one result) against the ring's (6N - 4) x D, so at
 * 4.2 TB/s a 1 MiB one-shot at N = 8 costs about 18 us of traffic where the ring measured 68 us, and
 * the two cross near 8 MiB; 1 MiB, the size the targets name, stays well below that crossing for
 * every N <= 8. `make gpu-check` measures both paths at 64 KiB-4 MiB to replace this guess. */
#define RINGO_DEV_ONESHOT_BYTES_DEFAULT ((size_t)1 << 20)

struct ringo_dev_oneshot_chunk {
  uint64_t off, len; /* elements: ringo_chunk_range's chunk */
  int32_t start;     /* the ring position whose input starts the chunk's reduction (ringo_reduce_start) */
  int32_t pad;
};

/* Everything one launch needs, passed by value as the kernel's parameter (under 4 KiB). */
struct ringo_dev_oneshot {
  int32_t type, op, nranks, pad;
  uint64_t count;
  const void* in[RINGO_DEV_ONESHOT_MAX_RANKS]; /* in[p]: the input of ring position p */
  void* out;
  struct ringo_dev_oneshot_chunk chunk[RINGO_DEV_ONESHOT_MAX_RANKS];
};

/* ---- the boarded one-shot: one kernel per rank, its own synchronisation ----
 * Rank r's board (device memory every rank maps: the pointer within a process, a CUDA IPC handle
 * across processes): its flags, then two slots of slot_bytes. The communicator's k-th one-shot
 * (k = 1, 2, ...: the same on every rank, which all take the same decisions) uses slot k % 2:
 *   1. every block copies its share of sendbuff into the slot; the last block to arrive writes the
 *      slot's fingerprint and releases posted = k;
 *   2. wait until every rank's posted >= k, check its fingerprint (another collective: MISMATCH);
 *   3. combine every rank's slot into recvbuff in the ring's order.
 * Two slots are enough without a flag for "read": rank a writes slot k % 2 again at k + 2, after its
 * kernel k + 1 saw rank b's posted >= k + 1, which b's last block of kernel k + 1 released, and that
 * kernel started (stream order) only after every block of b's kernel k, its reads of slot k % 2
 * included, had ended. recvbuff may be sendbuff: the combine starts only after this rank's own
 * posted, so after every block of it has copied. Every wait is bounded (timeout_ns, the abort
 * word) and leaves its RINGO_DEV_* code (cuda_ring.h) in *error. Each flag word has its own
 * 128-byte line. */
struct ringo_dev_board_fp {
  uint64_t k, count, call; /* call: type | op << 8 | nranks << 16 */
};
struct ringo_dev_board_flags {
  uint64_t posted;
  char pad0[120];
  uint64_t arrived; /* blocks of this rank's kernels through step 1, ever */
  char pad1[120];
  struct ringo_dev_board_fp fp[2]; /* the fingerprint of what slot s holds */
  char pad2[80];
};
/* Bytes of a board with slots of slot_bytes (a multiple of 16), and where slot s starts in it. */
size_t ringo_dev_board_bytes(size_t slot_bytes);
size_t ringo_dev_board_slot_offset(size_t slot_bytes, int s);

/* One rank's launch of the boarded one-shot. */
struct ringo_dev_oneshot_run {
  struct ringo_dev_oneshot combine;  /* in[p]: position p's slot for k; out: recvbuff */
  const void* sendbuff;
  void* slot;                        /* this rank's slot for k */
  struct ringo_dev_board_flags* mine;
  const struct ringo_dev_board_flags* flags[RINGO_DEV_ONESHOT_MAX_RANKS]; /* position p's */
  uint64_t k;
  uint64_t arrive_target;            /* mine->arrived once every block of this launch has copied */
  uint64_t timeout_ns;
  int32_t* error;
  const int32_t* abort_flag;
  int32_t gpu_scope;                 /* 1: flags at GPU scope (every rank on this GPU, in this process) */
  int32_t nblocks;                   /* the grid */
};

/* Fills run for this rank's k-th one-shot all-reduce: boards[p] is position p's board (this rank's at
 * its own position), blocks_before the blocks this rank's earlier one-shot kernels ran (the
 * counters' values before this launch). Pure; the errors of ringo_dev_oneshot_describe, and
 * ringoInvalidArgument when the buffer does not fit a slot. */
ringoResult_t ringo_dev_oneshot_board_run(ringoDataType_t type, ringoRedOp_t op, size_t count, int nranks, int pos,
                                          char* const* boards, size_t slot_bytes, uint64_t k, uint64_t blocks_before,
                                          int nblocks, const void* sendbuff, void* recvbuff,
                                          struct ringo_dev_oneshot_run* run);

/* Fills d for an all-reduce of count elements over nranks ring positions, in_by_pos[p] being position
 * p's input (device-accessible from the launching rank) and out this rank's result. Pure.
 * ringoInvalidArgument for a bad dtype or op, ringoInvalidUsage for a rank count the one-shot does
 * not take (1 or over RINGO_DEV_ONESHOT_MAX_RANKS). */
ringoResult_t ringo_dev_oneshot_describe(ringoDataType_t type, ringoRedOp_t op, size_t count, int nranks,
                                         const void* const* in_by_pos, void* out, struct ringo_dev_oneshot* d);

/* Whether a device collective runs one-shot: an all-reduce (coll: enum ringo_coll) of 1 to
 * `threshold` bytes per rank over 2 to RINGO_DEV_ONESHOT_MAX_RANKS ranks that can all read each
 * other's buffers (reach: every rank a thread of one process on one GPU, or every buffer mapped
 * over IPC). The same answer on every rank when they pass the same arguments. */
int ringo_dev_oneshot_fits(int coll, size_t bytes, int nranks, int reach, size_t threshold);

/* The threshold the ranks use, from each rank's setting (settings[r]: bytes, or -1 for the default
 * RINGO_DEV_ONESHOT_BYTES_DEFAULT; 0 turns the path off): the smallest, so that no two ranks
 * disagree on which path a collective takes. */
size_t ringo_dev_oneshot_agree(const int64_t* settings, int nranks);

/* Enqueues the one-shot kernel for d on stream (a cudaStream_t). It only combines: the caller makes
 * sure every input is complete before it runs and stays unchanged until every rank's kernel is
 * done (out may be this rank's own input only when no other rank reads that). ringoSuccess;
 * ringoInvalidArgument for a bad descriptor; ringoUnhandledCudaError when the launch fails
 * (ringo_cuda_oneshot_last_error names it). */
ringoResult_t ringo_cuda_oneshot_launch(const struct ringo_dev_oneshot* d, void* stream);
/* The CUDA error that made this thread's last ringo_cuda_oneshot_launch fail. Never NULL. */
const char* ringo_cuda_oneshot_last_error(void);

/* Enqueues the boarded one-shot kernel for run (run->nblocks blocks) on stream; as
 * ringo_cuda_oneshot_launch. */
ringoResult_t ringo_cuda_oneshot_run_launch(const struct ringo_dev_oneshot_run* run, void* stream);
/* Testing hook: block `block` of the boarded kernel on the CPU, its nthreads threads one after
 * another between the waits. Every rank's every block must run at once (a host thread each), as on
 * the GPU. Returns the block's RINGO_DEV_* code (-1 for a bad descriptor). */
int ringo_cuda_oneshot_run_emulate_block(const struct ringo_dev_oneshot_run* run, int block, unsigned nthreads);

/* Testing hook: the kernel's per-thread code on the CPU, threads 0..nthreads-1 one after another,
 * as a grid of nthreads threads would run it. Same results as the kernel; ringoInvalidArgument as
 * the launcher (and for nthreads == 0). */
ringoResult_t ringo_cuda_oneshot_emulate(const struct ringo_dev_oneshot* d, unsigned nthreads);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_CUDA_ONESHOT_H_ */
