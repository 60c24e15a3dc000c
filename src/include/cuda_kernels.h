/* cuda_kernels.h — C declarations of the launchers of cuda/reduce_kernels.cu (fused device reduce-copy
 * and copy), built into libringo when nvcc is found (RINGO_HAVE_CUDA). Needs ringo.h only: no CUDA
 * types, a stream is passed as void* (a cudaStream_t). Tested by test/test_cuda_kernels.cc. */
#ifndef RINGO_CUDA_KERNELS_H_
#define RINGO_CUDA_KERNELS_H_

#include <stddef.h>

#include "ringo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues dst[i] = op(a[i], b[i]) for i < count on stream (a cudaStream_t; NULL is the legacy
 * default stream) and returns without waiting. When dst2 is not NULL, dst2[i] gets the same value
 * (a and b are read once for both). The arithmetic is elementwise.h's, so the results equal
 * ringo_reduce()'s bit for bit, except that the payload of a NaN produced by arithmetic may
 * differ (elementwise.h's contract). For ringoAvg the result is sum(a, b) / divisor. All pointers
 * are device-accessible; dst may alias a or b exactly, but no buffers may partly overlap. Any
 * alignment works; 16-byte vectors are used where dst, dst2, a and b sit at the same offset
 * modulo 16, and element-aligned scalar accesses elsewhere.
 * Returns ringoSuccess (count == 0 launches nothing); ringoInvalidArgument for a bad dtype or op,
 * a divisor < 1 with ringoAvg, or a NULL dst/a/b with count > 0; ringoUnhandledCudaError when the
 * CUDA runtime refuses (no device or driver, bad stream, launch failure, an earlier sticky
 * error): ringo_cuda_last_error_string() then names the CUDA error. Never logs. */
ringoResult_t ringo_cuda_reduce(void* dst, void* dst2, const void* a, const void* b, size_t count,
                                ringoDataType_t type, ringoRedOp_t op, int divisor, void* stream);

/* Enqueues dst = src and, when dst2 is not NULL, dst2 = src (bytes bytes, one read of src), like
 * ringo_copy2(): a destination equal to src is skipped. Returns ringoSuccess;
 * ringoInvalidArgument for a NULL src or no destination with bytes > 0; ringoUnhandledCudaError
 * as ringo_cuda_reduce. */
ringoResult_t ringo_cuda_copy(void* dst, void* dst2, const void* src, size_t bytes, void* stream);

/* Name and text of the CUDA error that made this thread's last launcher return
 * ringoUnhandledCudaError ("no error" before any). Static storage; never NULL. */
const char* ringo_cuda_last_error_string(void);

/* ---- testing hooks: the kernels' own per-thread code, run on the CPU ----
 * They run the exact source the kernels run (one __host__ __device__ function per thread, the
 * same plan of head, 16-byte vectors and tail), for threads 0..nthreads-1 one after another, as
 * a grid of nthreads threads would. Only elementwise.h's few __CUDA_ARCH__ lines (the __f*_rn
 * intrinsics, bit casts) differ from the device build. Same arguments and results as above,
 * without the stream; nthreads == 0 is ringoInvalidArgument. */
ringoResult_t ringo_cuda_reduce_emulate(void* dst, void* dst2, const void* a, const void* b,
                                        size_t count, ringoDataType_t type, ringoRedOp_t op,
                                        int divisor, unsigned nthreads);
ringoResult_t ringo_cuda_copy_emulate(void* dst, void* dst2, const void* src, size_t bytes,
                                      unsigned nthreads);

#ifdef __cplusplus
}
#endif

#endif /* RINGO_CUDA_KERNELS_H_ */
