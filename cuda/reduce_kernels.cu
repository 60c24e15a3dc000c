/* reduce_kernels.cu — fused device reduce-copy kernels (dst = dst2 = op(a, b), 10 dtypes x 5 ops) and
 * copy/copy2: 16-byte vectors, grid-stride loops. Needs nvcc, src/include/elementwise.h (the math,
 * shared with src/reduce.c) and cuda_kernels.h (the launchers). Tested by test/test_cuda_kernels.cc. */
#include <assert.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "include/cuda_kernels.h"
#include "ew_plan.cuh"

namespace {

using namespace ringo_ew;

constexpr int kThreads = 256;                  /* threads per block */
constexpr int kBlocksPerSm = 2048 / kThreads;  /* enough blocks to fill every SM once */

template <class Op>
__global__ void __launch_bounds__(kThreads) reduce_copy_kernel(Plan p) {
  run_thread<Op>(p, (size_t)blockIdx.x * blockDim.x + threadIdx.x, (size_t)gridDim.x * blockDim.x);
}

/* One thread per kUnroll vectors (or per scalar, if there are more), capped at one full wave of
 * the device; the grid-stride loops cover the rest. */
template <class Op>
cudaError_t launch(const Plan& p, cudaStream_t stream) {
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  const size_t steps = (p.nvec + kUnroll - 1) / kUnroll;
  const size_t nscalar = p.count - p.nvec * (16 / sizeof(typename Op::T));
  const size_t want = ((steps > nscalar ? steps : nscalar) + kThreads - 1) / kThreads;
  const size_t cap = (size_t)(sms > 0 ? sms : 1) * kBlocksPerSm;
  const unsigned blocks = (unsigned)(want < 1 ? 1 : want > cap ? cap : want);
  /* The last-error slot may still hold an earlier, unrelated failure that its caller got as a
   * return code; clear it so it is not blamed on this launch. Sticky errors come back anyway. */
  (void)cudaGetLastError();
  reduce_copy_kernel<Op><<<blocks, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <class Op>
void emulate(const Plan& p, unsigned nthreads) {
  for (unsigned t = 0; t < nthreads; t++) run_thread<Op>(p, t, nthreads);
}

/* ---- the (dtype, op) table ---- */
struct Kernel {
  cudaError_t (*launch)(const Plan&, cudaStream_t);
  void (*emulate)(const Plan&, unsigned);
  size_t esz;
};
#define KERNEL(Op) {launch<Op>, emulate<Op>, sizeof(Op::T)}
#define KERNEL_ROW(sfx, Type, dtype) \
  {KERNEL(sum_##sfx), KERNEL(prod_##sfx), KERNEL(max_##sfx), KERNEL(min_##sfx), KERNEL(avg_##sfx)},
const Kernel kReduce[RINGO_NUM_TYPES][RINGO_NUM_OPS] = {RINGO_EW_TYPES(KERNEL_ROW)};
const Kernel kCopy[4] = {KERNEL(Copy<uint8_t>), KERNEL(Copy<uint16_t>), KERNEL(Copy<uint32_t>),
                         KERNEL(Copy<uint64_t>)};

/* kReduce is indexed by the enum values, so the dtype list must be in enum order. */
#define DTYPE_VALUE(sfx, Type, dtype) dtype,
constexpr ringoDataType_t kListed[] = {RINGO_EW_TYPES(DTYPE_VALUE)};
constexpr bool listed_in_enum_order() {
  for (int i = 0; i < RINGO_NUM_TYPES; i++)
    if (kListed[i] != i) return false;
  return sizeof kListed / sizeof kListed[0] == RINGO_NUM_TYPES;
}
static_assert(listed_in_enum_order(), "RINGO_EW_TYPES must list every dtype in enum order");
static_assert(ringoSum == 0 && ringoProd == 1 && ringoMax == 2 && ringoMin == 3 && ringoAvg == 4,
              "kReduce's columns are sum, prod, max, min, avg");

/* ---- argument checks shared by the launchers and their emulations ---- */
thread_local char last_error[256] = "no error";

ringoResult_t cuda_result(cudaError_t err) {
  if (err == cudaSuccess) return ringoSuccess;
  snprintf(last_error, sizeof last_error, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
  return ringoUnhandledCudaError;
}

/* Same checks, in the same order, as ringo_reduce(). Sets *k to NULL when there is nothing to do. */
ringoResult_t prepare_reduce(void* dst, void* dst2, const void* a, const void* b, size_t count,
                             ringoDataType_t type, ringoRedOp_t op, int divisor, const Kernel** k,
                             Plan* p) {
  *k = NULL;
  if ((unsigned)type >= RINGO_NUM_TYPES || (unsigned)op >= RINGO_NUM_OPS) return ringoInvalidArgument;
  if (op == ringoAvg && divisor < 1) return ringoInvalidArgument;
  if (count == 0) return ringoSuccess;
  if (dst == NULL || a == NULL || b == NULL) return ringoInvalidArgument;
  *k = &kReduce[type][op];
  *p = make_plan(dst, dst2, a, b, count, (*k)->esz, divisor);
  return ringoSuccess;
}

/* ringo_copy2()'s rules: a destination equal to src (or to the other one) is skipped. */
ringoResult_t prepare_copy(void* dst, void* dst2, const void* src, size_t bytes, const Kernel** k,
                           Plan* p) {
  *k = NULL;
  if (bytes == 0) return ringoSuccess;
  if (src == NULL || (dst == NULL && dst2 == NULL)) return ringoInvalidArgument;
  if (dst == src) dst = NULL;
  if (dst2 == src || dst2 == dst) dst2 = NULL;
  if (dst == NULL) dst = dst2, dst2 = NULL;
  if (dst == NULL) return ringoSuccess;
  const uintptr_t all = (uintptr_t)dst | (uintptr_t)dst2 | (uintptr_t)src | (uintptr_t)bytes;
  int unit = 3; /* log2 of the unit: 8, 4, 2 or 1 bytes */
  while (all % ((uintptr_t)1 << unit) != 0) unit--;
  *k = &kCopy[unit];
  *p = make_plan(dst, dst2, src, NULL, bytes >> unit, (size_t)1 << unit, 1);
  return ringoSuccess;
}

}  // namespace

extern "C" ringoResult_t ringo_cuda_reduce(void* dst, void* dst2, const void* a, const void* b,
                                           size_t count, ringoDataType_t type, ringoRedOp_t op,
                                           int divisor, void* stream) {
  const Kernel* k;
  Plan p;
  const ringoResult_t res = prepare_reduce(dst, dst2, a, b, count, type, op, divisor, &k, &p);
  if (res != ringoSuccess || k == NULL) return res;
  return cuda_result(k->launch(p, (cudaStream_t)stream));
}

extern "C" ringoResult_t ringo_cuda_copy(void* dst, void* dst2, const void* src, size_t bytes,
                                         void* stream) {
  const Kernel* k;
  Plan p;
  const ringoResult_t res = prepare_copy(dst, dst2, src, bytes, &k, &p);
  if (res != ringoSuccess || k == NULL) return res;
  return cuda_result(k->launch(p, (cudaStream_t)stream));
}

extern "C" const char* ringo_cuda_last_error_string(void) { return last_error; }

extern "C" ringoResult_t ringo_cuda_reduce_emulate(void* dst, void* dst2, const void* a,
                                                   const void* b, size_t count, ringoDataType_t type,
                                                   ringoRedOp_t op, int divisor, unsigned nthreads) {
  const Kernel* k;
  Plan p;
  if (nthreads == 0) return ringoInvalidArgument;
  const ringoResult_t res = prepare_reduce(dst, dst2, a, b, count, type, op, divisor, &k, &p);
  if (res == ringoSuccess && k != NULL) k->emulate(p, nthreads);
  return res;
}

extern "C" ringoResult_t ringo_cuda_copy_emulate(void* dst, void* dst2, const void* src, size_t bytes,
                                                 unsigned nthreads) {
  const Kernel* k;
  Plan p;
  if (nthreads == 0) return ringoInvalidArgument;
  const ringoResult_t res = prepare_copy(dst, dst2, src, bytes, &k, &p);
  if (res == ringoSuccess && k != NULL) k->emulate(p, nthreads);
  return res;
}
