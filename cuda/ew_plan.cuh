/* ew_plan.cuh — what one thread of a fused reduce-copy does over a buffer (the Plan, 16-byte vectors,
 * head and tail scalars) and the (dtype, op) functors on elementwise.h: shared by the stand-alone
 * kernels (reduce_kernels.cu) and the ring kernel (ring.cu), compiled for the device and the host
 * (the CPU emulation). Tested by test/test_cuda_kernels.cc and test/test_cuda_ring.cc. */
#ifndef RINGO_EW_PLAN_CUH_
#define RINGO_EW_PLAN_CUH_

#include <assert.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "include/elementwise.h"
#include "ringo.h"

namespace ringo_ew {

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
__host__ __device__ inline Plan make_plan(void* dst, void* dst2, const void* a, const void* b, size_t count, size_t esz,
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

/* Scalar j of the head-then-tail numbering, as a byte offset. */
template <class T>
__host__ __device__ inline size_t scalar_offset(const Plan& p, size_t j, size_t tail) {
  return (j < p.head ? j : tail + (j - p.head)) * sizeof(T);
}

template <class Op>
__host__ __device__ inline void do_one(const Plan& p, size_t off, typename Op::T x, typename Op::T y) {
  const typename Op::T r = Op::apply(x, y, p.divisor);
  store_one<typename Op::T>(p.dst + off, r, p.unaligned);
  if (p.dst2) store_one<typename Op::T>(p.dst2 + off, r, p.unaligned);
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
  /* The scalars: the head, then the tail, numbered together — all of the buffer when the pointers
   * are not at one offset modulo 16 (a chunk of an all-reduce whose count the ranks do not divide
   * by 16 bytes' worth, say). Loaded kUnroll at a time like the vectors, so that even then each
   * thread keeps several loads in flight. */
  const size_t tail = p.head + p.nvec * (16 / sizeof(T));
  const size_t nscalar = p.head + (p.count - tail);
  size_t j = tid;
  for (; j + (kUnroll - 1) * nthreads < nscalar; j += kUnroll * nthreads) {
    T x[kUnroll], y[kUnroll];
    size_t off[kUnroll];
    UNROLL
    for (size_t k = 0; k < kUnroll; k++) {
      off[k] = scalar_offset<T>(p, j + k * nthreads, tail);
      x[k] = load_one<T>(p.a + off[k], p.unaligned);
      y[k] = Op::kUnary ? x[k] : load_one<T>(p.b + off[k], p.unaligned);
    }
    UNROLL
    for (size_t k = 0; k < kUnroll; k++) do_one<Op>(p, off[k], x[k], y[k]);
  }
  for (; j < nscalar; j += nthreads) {
    const size_t off = scalar_offset<T>(p, j, tail);
    const T x = load_one<T>(p.a + off, p.unaligned);
    do_one<Op>(p, off, x, Op::kUnary ? x : load_one<T>(p.b + off, p.unaligned));
  }
}

/* ---- the (dtype, op) functors, generated from elementwise.h's dtype list ---- */
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

}  // namespace ringo_ew

#endif /* RINGO_EW_PLAN_CUH_ */
