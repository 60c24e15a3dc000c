/* device_oneshot.c — PURE: the device one-shot all-reduce's descriptor (cuda_oneshot.h) from the ring's
 * own chunks and orders, and the one decision of when a device all-reduce takes it. No CUDA, so the
 * CPU tests build it too. Tested by test/test_device_oneshot.cc and test/test_cuda_oneshot.cc. */
#include "include/cuda_oneshot.h"

#include <string.h>

#include "core/core.h"
#include "sched/schedule.h"

/* Chunk k is combined from the inputs of positions start, start + 1, ... (mod N), each step
 * op(what came before, the next input), as the ring's reduce-scatter passes it along: the same
 * elements in the same order give the same bits (oneshot.c does the same on the host). */
ringoResult_t ringo_dev_oneshot_describe(ringoDataType_t type, ringoRedOp_t op, size_t count, int nranks,
                                         const void* const* in_by_pos, void* out, struct ringo_dev_oneshot* d) {
  if (ringo_type_size(type) == 0 || (unsigned)op >= RINGO_NUM_OPS)
    return ringo_fail(ringoInvalidArgument, "device one-shot: bad datatype %d or op %d", (int)type, (int)op);
  if (nranks < 2 || nranks > RINGO_DEV_ONESHOT_MAX_RANKS)
    return ringo_fail(ringoInvalidUsage, "the device one-shot takes 2 to %d ranks, not %d", RINGO_DEV_ONESHOT_MAX_RANKS,
                      nranks);
  memset(d, 0, sizeof *d);
  d->type = (int32_t)type;
  d->op = (int32_t)op;
  d->nranks = nranks;
  d->count = count;
  d->out = out;
  for (int p = 0; p < nranks; p++) {
    size_t off, len;
    ringo_chunk_range(count, nranks, p, &off, &len);
    d->in[p] = in_by_pos[p];
    d->chunk[p] = (struct ringo_dev_oneshot_chunk){off, len, ringo_reduce_start(RINGO_COLL_ALLREDUCE, nranks, 0, p), 0};
  }
  return ringoSuccess;
}

int ringo_dev_oneshot_fits(int coll, size_t bytes, int nranks, int reach, size_t threshold) {
  return coll == RINGO_COLL_ALLREDUCE && reach && nranks >= 2 && nranks <= RINGO_DEV_ONESHOT_MAX_RANKS &&
         bytes > 0 && bytes <= threshold;
}

size_t ringo_dev_oneshot_agree(const int64_t* settings, int nranks) {
  size_t least = RINGO_DEV_ONESHOT_BYTES_DEFAULT;
  for (int r = 0; r < nranks; r++) {
    const size_t mine = settings[r] < 0 ? RINGO_DEV_ONESHOT_BYTES_DEFAULT : (size_t)settings[r];
    if (r == 0 || mine < least) least = mine;
  }
  return least;
}

/* The flags on their own page, then the two slots. */
#define BOARD_SLOTS_AT 4096

size_t ringo_dev_board_bytes(size_t slot_bytes) { return BOARD_SLOTS_AT + 2 * ((slot_bytes + 15) / 16 * 16); }

size_t ringo_dev_board_slot_offset(size_t slot_bytes, int s) {
  return BOARD_SLOTS_AT + (size_t)s * ((slot_bytes + 15) / 16 * 16);
}

ringoResult_t ringo_dev_oneshot_board_run(ringoDataType_t type, ringoRedOp_t op, size_t count, int nranks, int pos,
                                          char* const* boards, size_t slot_bytes, uint64_t k, uint64_t blocks_before,
                                          int nblocks, const void* sendbuff, void* recvbuff,
                                          struct ringo_dev_oneshot_run* run) {
  const size_t bytes = count * ringo_type_size(type);
  if (bytes > slot_bytes || nblocks < 1 || k == 0 || pos < 0 || pos >= nranks)
    return ringo_fail(ringoInvalidArgument, "device one-shot: %zu bytes in slots of %zu, %d blocks, collective %llu",
                      bytes, slot_bytes, nblocks, (unsigned long long)k);
  memset(run, 0, sizeof *run);
  const size_t at = ringo_dev_board_slot_offset(slot_bytes, (int)(k % 2));
  const void* in[RINGO_DEV_ONESHOT_MAX_RANKS];
  for (int p = 0; p < nranks && p < RINGO_DEV_ONESHOT_MAX_RANKS; p++) {
    in[p] = boards[p] + at;
    run->flags[p] = (const struct ringo_dev_board_flags*)boards[p];
  }
  RINGO_CHECK(ringo_dev_oneshot_describe(type, op, count, nranks, in, recvbuff, &run->combine));
  run->sendbuff = sendbuff;
  run->slot = boards[pos] + at;
  run->mine = (struct ringo_dev_board_flags*)boards[pos];
  run->k = k;
  run->arrive_target = blocks_before + (uint64_t)nblocks;
  run->nblocks = nblocks;
  return ringoSuccess;
}
