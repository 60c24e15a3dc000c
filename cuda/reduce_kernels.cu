/* reduce_kernels.cu — fused device reduce-copy kernels (dst = dst2 = op(a, b), 10 dtypes x 5 ops) and
 * copy/copy2: 16-byte vectors, grid-stride loops. Needs nvcc, src/include/elementwise.h (the math,
 * shared with src/reduce.c) and cuda_kernels.h (the launchers). Tested by test/test_cuda_kernels.cc. */
#include <assert.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_kernels.h"
#include "elementwise.h"

namespace {

constexpr int kThreads = 256;                  /* threads per block */
constexpr int kBlocksPerSm = 2048 / kThreads;  /* enough blocks to fill every SM once */
/* Vectors each thread loads before it stores any: more loads in flight hide HBM latency. Loading
 * ahead is safe in place (dst == a) because a thread's vectors are distinct addresses, and no
 * other thread touches them. */
constexpr size_t kUnroll = 4;

/* Fully unrolled loops keep the vectors in registers. Device pass only: the host compiler does
 * not know the pragma, and the host code (the CPU emulation) only has to be correct. */
#ifdef __CUDA_ARCH__
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif

/* What one launch does, decided once on the host (make_plan) and read by every thread. Elements
 * [head, head + nvec * V) are nvec 16-byte vectors of V = 16 / sizeof(T) elements; the head
 * before them and the tail after them are single elements. */
struct Plan {
  char* dst;
  char* dst2; /* NULL: one destination */
  const char* a;
  const char* b; /* NULL for a copy */
  size_t count;  /* elements */
  size_t head;   /* elements before the first vector (all of them when nvec == 0) */
  size_t nvec;
  int divisor;   /* ringoAvg only */
  int unaligned; /* some pointer is not a multiple of the element size: go through memcpy */
};

/* Vectors need dst, dst2, a and b at the same offset modulo 16: then the head that brings dst to
 * a 16-byte boundary brings all of them there. Otherwise every element is a scalar. */
Plan make_plan(void* dst, void* dst2, const void* a, const void* b, size_t count, size_t esz,
               int divisor) {
  Plan p = {(char*)dst, (char*)dst2, (const char*)a, (const char*)b, count, count, 0, divisor, 0};
  const uintptr_t d = (uintptr_t)dst;
  const uintptr_t a_off = (uintptr_t)a - d, b_off = b ? (uintptr_t)b - d : 0;
  const uintptr_t d2_off = dst2 ? (uintptr_t)dst2 - d : 0;
  if ((d | (uintptr_t)a | (uintptr_t)b | (uintptr_t)dst2) % esz != 0) {
    p.unaligned = 1;
    return p;
  }
  if ((a_off | b_off | d2_off) % 16 != 0) return p;
  const size_t head = ((16 - d % 16) % 16) / esz;
  if (head >= count) return p;
  p.head = head;
  p.nvec = (count - head) * esz / 16;
  return p;
}

/* The GPU faults on a misaligned access; the CPU would not, so the emulation asserts alignment
 * where the device would need it, and tests catch a wrong plan on the CPU too. */
#ifdef __CUDA_ARCH__
#define ASSERT_ALIGNED(p, n) ((void)0)
#else
#define ASSERT_ALIGNED(p, n) assert((uintptr_t)(p) % (n) == 0)
#endif

__host__ __device__ inline uint4 load_vec(const char* p) {
  ASSERT_ALIGNED(p, 16);
  return *reinterpret_cast<const uint4*>(p);
}
__host__ __device__ inline void store_vec(char* p, uint4 v) {
  ASSERT_ALIGNED(p, 16);
  *reinterpret_cast<uint4*>(p) = v;
}

template <class T>
__host__ __device__ inline T load_one(const char* p, int unaligned) {
  T v;
  if (unaligned) {
    memcpy(&v, p, sizeof v);
  } else {
    ASSERT_ALIGNED(p, sizeof(T));
    v = *reinterpret_cast<const T*>(p);
  }
  return v;
}

template <class T>
__host__ __device__ inline void store_one(char* p, T v, int unaligned) {
  if (unaligned) {
    memcpy(p, &v, sizeof v);
  } else {
    ASSERT_ALIGNED(p, sizeof(T));
    *reinterpret_cast<T*>(p) = v;
  }
}

/* The op on the V elements of two vectors. The memcpys between a vector and an element array
 * are register moves after optimisation (ptxas -v shows no stack frame). */
template <class Op>
__host__ __device__ inline uint4 apply_vec(uint4 x, uint4 y, int divisor) {
  typedef typename Op::T T;
  if constexpr (Op::kUnary) {
    (void)y, (void)divisor;
    return x;
  } else {
    constexpr int V = 16 / sizeof(T);
    T ex[V], ey[V];
    memcpy(ex, &x, 16);
    memcpy(ey, &y, 16);
    UNROLL
    for (int k = 0; k < V; k++) ex[k] = Op::apply(ex[k], ey[k], divisor);
    memcpy(&x, ex, 16);
    return x;
  }
}

template <class Op>
__host__ __device__ inline void do_vec(const Plan& p, size_t off, uint4 x, uint4 y) {
  const uint4 r = apply_vec<Op>(x, y, p.divisor);
  store_vec(p.dst + off, r);
  if (p.dst2) store_vec(p.dst2 + off, r);
}

/* Everything thread tid of an nthreads-thread grid does; the kernel and the CPU emulation both
 * run exactly this. Vector v goes to thread v % nthreads, so a warp's loads are contiguous. */
template <class Op>
__host__ __device__ void run_thread(const Plan& p, size_t tid, size_t nthreads) {
  typedef typename Op::T T;
  const size_t base = p.head * sizeof(T); /* byte offset of vector 0 */
  size_t v = tid;
  for (; v + (kUnroll - 1) * nthreads < p.nvec; v += kUnroll * nthreads) {
    uint4 x[kUnroll], y[kUnroll];
    UNROLL
    for (size_t k = 0; k < kUnroll; k++) {
      const size_t off = base + 16 * (v + k * nthreads);
      x[k] = load_vec(p.a + off);
      y[k] = Op::kUnary ? x[k] : load_vec(p.b + off);
    }
    UNROLL
    for (size_t k = 0; k < kUnroll; k++) do_vec<Op>(p, base + 16 * (v + k * nthreads), x[k], y[k]);
  }
  for (; v < p.nvec; v += nthreads) {
    const size_t off = base + 16 * v;
    const uint4 x = load_vec(p.a + off);
    do_vec<Op>(p, off, x, Op::kUnary ? x : load_vec(p.b + off));
  }
  /* The scalars: the head, then the tail, numbered together. */
  const size_t tail = p.head + p.nvec * (16 / sizeof(T));
  const size_t nscalar = p.head + (p.count - tail);
  for (size_t j = tid; j < nscalar; j += nthreads) {
    const size_t off = (j < p.head ? j : tail + (j - p.head)) * sizeof(T);
    const T x = load_one<T>(p.a + off, p.unaligned);
    const T r = Op::apply(x, Op::kUnary ? x : load_one<T>(p.b + off, p.unaligned), p.divisor);
    store_one<T>(p.dst + off, r, p.unaligned);
    if (p.dst2) store_one<T>(p.dst2 + off, r, p.unaligned);
  }
}

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

/* ---- the (dtype, op) table, generated from elementwise.h's dtype list ---- */
#define OP_STRUCT(op, sfx, Type, call)                                    \
  struct op##_##sfx {                                                     \
    typedef Type T;                                                       \
    static constexpr bool kUnary = false;                                 \
    static __host__ __device__ Type apply(Type x, Type y, int divisor) {  \
      (void)divisor;                                                      \
      return call;                                                        \
    }                                                                     \
  };
#define DTYPE_OPS(sfx, Type, dtype)                         \
  OP_STRUCT(sum, sfx, Type, ringo_ew_sum_##sfx(x, y))       \
  OP_STRUCT(prod, sfx, Type, ringo_ew_prod_##sfx(x, y))     \
  OP_STRUCT(max, sfx, Type, ringo_ew_max_##sfx(x, y))       \
  OP_STRUCT(min, sfx, Type, ringo_ew_min_##sfx(x, y))       \
  OP_STRUCT(avg, sfx, Type, ringo_ew_avg_##sfx(x, y, divisor))
RINGO_EW_TYPES(DTYPE_OPS)

/* A copy moves units of U (the widest that every pointer and the length allow) and reads no b. */
template <class U>
struct Copy {
  typedef U T;
  static constexpr bool kUnary = true;
  static __host__ __device__ U apply(U x, U, int) { return x; }
};

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
