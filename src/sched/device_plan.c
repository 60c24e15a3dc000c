/* device_plan.c — fills the ring kernel's descriptor (cuda_ring.h) for one rank's collective from the
 * pure schedule: steps, chunk geometry, slices, rounds. No CUDA here, so the CPU tests build it too.
 * Tested by test/test_cuda_ring.cc (descriptors run by the kernel's CPU emulation). */
#include "include/cuda_ring.h"

#include <string.h>

#include "core/core.h"
#include "sched/schedule.h"

/* The fingerprint every slot of this collective carries (cuda_ring.h): the fields the ranks must
 * agree on, each exact. The root is a ring position, the same number on every rank for one root. */
static struct ringo_dev_fingerprint fingerprint_of(const struct ringo_dev_coll* c) {
  const uint64_t call = (uint64_t)(uint8_t)c->coll | (uint64_t)(uint8_t)c->type << 8 | (uint64_t)(uint8_t)c->op << 16 |
                        (uint64_t)(uint8_t)c->root_pos << 24 | (uint64_t)(uint8_t)c->nranks << 32;
  return (struct ringo_dev_fingerprint){c->seq, c->count, call};
}

/* Bytes per slice. Channel c moves rounds c, c + nchannels, ...: with full slots, a chunk of a
 * few slots keeps a few channels busy and leaves the rest idle (at N = 2, 64 channels of 256 KiB
 * slots are all busy only from 32 MiB on). So slices shrink until the longest chunk spreads over
 * every channel, down to min_slice_bytes (a slice's flag handoff costs about the same whatever its
 * size). Multiples of 16 bytes keep every slice's start at the chunk's 16-byte alignment (the
 * kernel's vector loads). The same on every rank: it depends only on what the ranks agree on. */
static size_t slice_bytes(const struct ringo_dev_coll* c, size_t longest_chunk_bytes) {
  if (c->min_slice_bytes == 0 || c->min_slice_bytes >= c->slot_bytes) return c->slot_bytes;
  size_t want = (longest_chunk_bytes + (size_t)c->nchannels - 1) / (size_t)c->nchannels;
  want = (want + 15) / 16 * 16;
  const size_t floor = (c->min_slice_bytes + 15) / 16 * 16;
  if (want < floor) want = floor;
  return want < c->slot_bytes ? want : c->slot_bytes;
}

/* PTX's .gpu scope is "all threads in the current program executing on the same compute device",
 * other grids of the program included: ranks that are threads of one process on one GPU (InitAll)
 * sync correctly at GPU scope, which costs less per slice than system scope (measured on an H200,
 * cuda/README.md). Ranks in other processes are outside every PTX scope; system scope is the
 * strongest there is, and the default; RINGO_CUDA_GPU_SCOPE=1 asks for GPU scope across processes on
 * one GPU too, as an experiment. */
int ringo_dev_flag_scope(int setting, int same_gpu, int same_process) {
  if (!same_gpu || setting == 0) return 0;
  return setting == 1 || same_process;
}

ringoResult_t ringo_dev_ring_describe(const struct ringo_dev_coll* c, struct ringo_dev_ring* d) {
  const size_t esize = ringo_type_size(c->type);
  if (esize == 0 || (unsigned)c->op >= RINGO_NUM_OPS)
    return ringo_fail(ringoInvalidArgument, "device ring: bad datatype %d or op %d", (int)c->type, (int)c->op);
  if (c->nranks < 2 || c->nranks > RINGO_DEV_MAX_RANKS)
    return ringo_fail(ringoInvalidUsage, "the device ring supports 2 to %d ranks, not %d", RINGO_DEV_MAX_RANKS,
                      c->nranks);
  if (c->nchannels < 1 || c->nchannels > RINGO_DEV_MAX_CHANNELS || c->nslots < 2 || c->slot_bytes < esize ||
      c->slot_bytes % 16 != 0)
    return ringo_fail(ringoInvalidArgument, "device ring: %d channels of %d slots of %zu bytes", c->nchannels,
                      c->nslots, c->slot_bytes);
  memset(d, 0, sizeof *d);
  d->fence = 1; /* the default path; the caller may turn it off (RINGO_CUDA_FENCE=0) */
  d->type = (int32_t)c->type;
  d->op = (int32_t)c->op;
  d->nranks = c->nranks;
  d->nchannels = c->nchannels;
  d->nslots = c->nslots;
  d->slot_bytes = c->slot_bytes;
  d->sendbuff = c->sendbuff;
  d->recvbuff = c->recvbuff;
  d->fp = fingerprint_of(c);
  struct ringo_step steps[RINGO_DEV_MAX_STEPS];
  d->nsteps = ringo_schedule(c->coll, c->nranks, c->pos, c->root_pos, steps);
  for (int t = 0; t < d->nsteps; t++) d->step[t] = (struct ringo_dev_step){(int32_t)steps[t].prim, steps[t].chunk};
  size_t max_len = 0;
  for (int k = 0; k < c->nranks; k++) {
    size_t in_off, out_off, len;
    ringo_chunk_geometry(c->coll, c->count, c->nranks, c->ring, k, &in_off, &out_off, &len);
    d->chunk[k] = (struct ringo_dev_chunk){in_off, out_off, len};
    if (len > max_len) max_len = len;
  }
  d->slice_elems = slice_bytes(c, max_len * esize) / esize;
  /* A window of W rounds: each step moves W slices before the next step, so a slice's neighbour
   * finished it W - 1 slices ago and its flag's round trip is hidden behind them. W <= nslots / 2
   * keeps the waits acyclic by a short argument: a slot sent in pass t is free again once the next
   * rank has read what it holds, sent two passes before, in its pass t - 1 (cuda/ring.cu,
   * run_channel); one window fills while the previous one drains. (A model of the schedule and
   * the emulation found no deadlock up to W = nslots - 1 either; W = nslots deadlocks.) */
  const int most = c->nslots / 2 > 1 ? c->nslots / 2 : 1;
  d->window = c->window <= 0 || c->window > most ? most : c->window;
  d->rounds = ringo_num_rounds(max_len, d->slice_elems);
  return ringoSuccess;
}
