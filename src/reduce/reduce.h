/* reduce.h — fused host reduce-copy: dst = op(a, b) (and dst2 = the same) for every dtype and op.
 * The per-element arithmetic lives in elementwise.h, shared with CUDA. Tested by test/test_reduce.cc. */
#ifndef RINGO_REDUCE_H_
#define RINGO_REDUCE_H_

#include <stddef.h>

#include "ringo.h"

/* dst[i] = op(a[i], b[i]) for i < count; when dst2 is not NULL, dst2[i] gets the same value
 * (one read of a and b). dst2 is meant for a peer's FIFO slot: it is filled by memcpy from each
 * L1-sized block of the result, which writes lines the peer holds without fetching them first.
 * dst may be NULL when dst2 is not (the result is only sent on). For ringoAvg the result is (a + b) / divisor, computed as
 * a sum and then divided (integer division for integer types); callers pass ringoSum for the
 * partial steps and ringoAvg with divisor = nranks only where the final value is produced.
 * dst may alias a or b exactly (in-place), but no buffers may partly overlap. Returns
 * ringoInvalidArgument for a bad dtype/op. */
ringoResult_t ringo_reduce(void* dst, void* dst2, const void* a, const void* b, size_t count,
                           ringoDataType_t type, ringoRedOp_t op, int divisor);

/* dst = src and, when dst2 is not NULL, dst2 = src; skips a copy onto itself. */
void ringo_copy2(void* dst, void* dst2, const void* src, size_t bytes);

/* Testing hook: use at most this loop variant (0 baseline x86-64, 1 AVX2+F16C, 2 AVX-512; -1
 * restores the best the CPU has). Returns the level now in use. Not while ringo_reduce runs. */
int ringo_reduce_limit_isa(int max_level);

#endif /* RINGO_REDUCE_H_ */
