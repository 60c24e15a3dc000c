/* cuda_ring.h — the ring kernel's contract: one launch per rank per collective walks the schedule of
 * schedule.c over device FIFOs, block b driving channel b. Filled by src/device_plan.c, run by
 * cuda/ring.cu (on the GPU, or on the CPU for tests). Tested by test/test_cuda_ring.cc. */
#ifndef RINGO_CUDA_RING_H_
#define RINGO_CUDA_RING_H_

#include <stddef.h>
#include <stdint.h>

#include "ringo.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RINGO_DEV_MAX_RANKS 64
#define RINGO_DEV_MAX_STEPS (2 * RINGO_DEV_MAX_RANKS - 1)
#define RINGO_DEV_MAX_CHANNELS 128
/* Channels a rank takes when RINGO_CUDA_CHANNELS does not ask for more (or fewer). */
#define RINGO_DEV_DEFAULT_CHANNELS 64

/* One channel's flags in the FIFO region of the link's receiver. head counts slots the sender
 * posted, tail slots the receiver released; both only grow, across collectives. poison is set
 * by either end when it leaves on an error, so the other stops waiting. Each word has its own
 * 128-byte line: the two ends write different ones. */
struct ringo_dev_flags {
  uint64_t head;
  char pad0[120];
  uint64_t tail;
  char pad1[120];
  uint32_t poison;
  char pad2[124];
};

/* What the ranks must agree on for one collective, as device_plan.c packs it: the sequence
 * number, the count, and call = coll | type << 8 | op << 16 | root position << 24 | nranks << 32
 * (each field under 256). Compared word by word, so nothing is lost to a hash. */
struct ringo_dev_fingerprint {
  uint64_t seq, count, call;
};

/* What the sender writes next to every slot it fills, before it posts head: its fingerprint and
 * the slot's serial (its channel's sent count), which the receiver expects to equal its own
 * received count. A rank that called another collective — or collectives in another order — is
 * caught at its neighbour's first receive, before a byte of its payload is read. */
struct ringo_dev_stamp {
  struct ringo_dev_fingerprint fp;
  uint64_t serial;
};

/* A receiver's FIFO region: flags of every channel; then, page-aligned, channel c's part at
 * slots_offset + c * channel_bytes: its nslots slots of slot_bytes, then its nslots stamps (stamp s
 * belongs to slot s; read only after that slot's head was posted, so never stale), the two padded
 * to a multiple of 128 bytes. */
size_t ringo_dev_region_bytes(int nchannels, int nslots, size_t slot_bytes);
size_t ringo_dev_slots_offset(int nchannels);
size_t ringo_dev_channel_bytes(int nslots, size_t slot_bytes);

/* Codes the kernel leaves in *error (0: none); the host turns them into ringo results.
 * RINGO_DEV_MISMATCH: a received slot's stamp differed from this rank's own (the previous rank
 * called another collective, count, dtype, op or root, or is a collective ahead or behind). */
enum {
  RINGO_DEV_OK = 0,
  RINGO_DEV_TIMEOUT = 1,
  RINGO_DEV_POISONED = 2,
  RINGO_DEV_ABORTED = 3,
  RINGO_DEV_MISMATCH = 4
};

struct ringo_dev_chunk { uint64_t in_off, out_off, len; }; /* elements */
struct ringo_dev_step { int32_t prim, chunk; };

/* Everything one launch needs, passed by value as the kernel's parameter (under 4 KiB). */
struct ringo_dev_ring {
  int32_t type, op, nranks, nsteps;
  int32_t nchannels, nslots;
  uint64_t slot_bytes;   /* payload bytes of one slot */
  uint64_t slice_elems;  /* elements per slot */
  uint64_t rounds;       /* slices of the longest chunk; channel c moves rounds c, c + nchannels, ... */
  const void* sendbuff;
  void* recvbuff;
  char* recv_region;     /* this rank's FIFO region: the previous rank writes into it */
  char* send_region;     /* the next rank's FIFO region (a peer pointer) */
  uint64_t* counters;    /* device memory, 2 per channel: slots sent and received so far */
  int32_t* error;        /* host-mapped: the first RINGO_DEV_* code of this rank (0 until one) */
  const int32_t* abort_flag; /* host-mapped: non-zero makes every wait give up */
  uint64_t timeout_ns;   /* bound on any single wait */
  int32_t gpu_scope;     /* 1: flags and fences at GPU scope (ringo_dev_flag_scope says where) */
  int32_t window;        /* rounds a channel takes through each step together (1 .. nslots / 2) */
  int32_t fence;         /* 1: a fence before each flag's release too (0: the release alone) */
  int32_t pad_fence;
  struct ringo_dev_fingerprint fp; /* stamped next to every slot sent, checked on every slot received */
  struct ringo_dev_chunk chunk[RINGO_DEV_MAX_RANKS];
  struct ringo_dev_step step[RINGO_DEV_MAX_STEPS];
};

/* One rank's collective as the descriptor builder needs it (the links are filled in by the caller). */
struct ringo_dev_coll {
  int coll;                  /* enum ringo_coll */
  ringoDataType_t type;
  ringoRedOp_t op;
  size_t count;              /* as the public call's count */
  int nranks, pos, root_pos; /* ring positions */
  const int* ring;           /* ring[p] = rank at position p */
  const void* sendbuff;
  void* recvbuff;
  int nchannels, nslots;
  size_t slot_bytes;
  uint64_t seq;              /* the communicator's collective number (ringo_op.seq): same on every rank */
  size_t min_slice_bytes;    /* 0: every slice fills a slot; else slices shrink (to this, at least) so
                                that the longest chunk spreads over every channel (device_plan.c) */
  int window;                /* rounds a channel takes through each step together: 0 for the most the
                                slots allow (nslots / 2), 1 for one round at a time (device_plan.c) */
};

/* Fills d's collective part (everything but the regions, counters, error, abort and timeout:
 * steps, chunks, slices and the fingerprint) from the schedule (device_plan.c; no CUDA needed).
 * ringoInvalidArgument / ringoInvalidUsage on a shape the kernel cannot run. */
ringoResult_t ringo_dev_ring_describe(const struct ringo_dev_coll* c, struct ringo_dev_ring* d);

/* The ring kernel's flag scope (ringo_dev_ring.gpu_scope): 1 (GPU scope) where every rank of the ring
 * is on this GPU (same_gpu) and either a thread of this process (same_process) or RINGO_CUDA_GPU_SCOPE
 * (setting) is 1; 0 (system scope) otherwise, and always where setting is 0. setting -1: unset. */
int ringo_dev_flag_scope(int setting, int same_gpu, int same_process);

/* Enqueues the ring kernel for d on stream (a cudaStream_t): d->nchannels blocks.
 * ringoSuccess; ringoInvalidArgument for a bad dtype/op/shape; ringoUnhandledCudaError when the
 * launch fails (ringo_cuda_last_error_string names it). */
ringoResult_t ringo_cuda_ring_launch(const struct ringo_dev_ring* d, void* stream);
/* Loads every ring kernel variant on the current device (lazy loading could otherwise stall a
 * launch behind a spinning kernel) and says how many blocks of the hungriest fit one SM.
 * ringoUnhandledCudaError on failure. */
ringoResult_t ringo_cuda_ring_preload(int* blocks_per_sm);
/* The CUDA error that made this thread's last ringo_cuda_ring_launch fail. Never NULL. */
const char* ringo_cuda_ring_last_error(void);

/* Testing hook: runs block `channel` of the kernel on the CPU, its nthreads threads one after
 * another between the waits, exactly the device code (flags through host atomics, the clock
 * from clock_gettime). Every rank's every channel must run at once (one host thread each), as
 * on the GPU. Returns what the block left in *d->error (RINGO_DEV_*). */
int ringo_cuda_ring_emulate_block(const struct ringo_dev_ring* d, int channel, unsigned nthreads);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_CUDA_RING_H_ */
