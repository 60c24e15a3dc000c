/* shim_ops.c — libnccl.so.2 on ringo: running one call. Checks the shim makes itself, the
 * collectives ringo has not (all-to-all, gather, scatter: one group of ringoSend/ringoRecv), the
 * PreMulSum operators (each input scaled into a copy, then ringo's sum), and the model time of a
 * call for ncclGroupSimulateEnd. Public ringo.h only. Tested by test/test_nccl_calls.cc. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static const char* const kNames[] = {"ncclAllReduce", "ncclReduce", "ncclBroadcast", "ncclAllGather",
                                     "ncclReduceScatter", "ncclSend", "ncclRecv", "ncclAlltoAll",
                                     "ncclGather", "ncclScatter"};

static int reduces(enum shim_kind k) { return k == SHIM_ALLREDUCE || k == SHIM_REDUCE || k == SHIM_REDUCESCATTER; }
static int has_root(enum shim_kind k) {
  return k == SHIM_REDUCE || k == SHIM_BROADCAST || k == SHIM_GATHER || k == SHIM_SCATTER || k == SHIM_SEND ||
         k == SHIM_RECV;
}

/* ---- PreMulSum operators: a table per communicator, op = ncclNumOps + index ---- */

static struct shim_redop* find_redop(struct ncclComm* c, ncclRedOp_t op) {
  const long i = (long)op - ncclNumOps;
  return i >= 0 && i < c->nredops && c->redops[i].used ? &c->redops[i] : NULL;
}

void shim_redops_free(struct ncclComm* c) {
  free(c->redops);
  c->redops = NULL;
  c->nredops = 0;
}

static int add_redop(struct ncclComm* c, const struct shim_redop* r) {
  int i = 0;
  while (i < c->nredops && c->redops[i].used) i++;
  if (i == c->nredops) {
    struct shim_redop* grown = realloc(c->redops, (size_t)(c->nredops + 8) * sizeof *grown);
    if (!grown) return -1;
    memset(grown + c->nredops, 0, 8 * sizeof *grown);
    c->redops = grown;
    c->nredops += 8;
  }
  c->redops[i] = *r;
  return i;
}

NCCL_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* bad = !comm ? "comm is NULL" : !op ? "op is NULL" : !scalar ? "scalar is NULL"
                  : (int)datatype < 0 || (int)datatype >= ncclFloat8e4m3 ? "datatype is not one ringo reduces"
                  : residence != ncclScalarDevice && residence != ncclScalarHostImmediate ? "residence is unknown"
                  : NULL;
  if (bad) return shim_fail(comm, ncclInvalidArgument, "ncclRedOpCreatePreMulSum: %s", bad);
  struct shim_redop r = {1, datatype, residence, scalar, {0}};
  if (residence == ncclScalarHostImmediate) memcpy(r.scalar, scalar, shim_type_size(datatype));
  pthread_mutex_lock(&comm->lock);
  const int i = add_redop(comm, &r);
  pthread_mutex_unlock(&comm->lock);
  if (i < 0) return shim_fail(comm, ncclSystemError, "ncclRedOpCreatePreMulSum: out of memory");
  *op = (ncclRedOp_t)(ncclNumOps + i);
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclRedOpCreatePreMulSum);

NCCL_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (!comm) return shim_fail(NULL, ncclInvalidArgument, "ncclRedOpDestroy: comm is NULL");
  pthread_mutex_lock(&comm->lock);
  struct shim_redop* r = find_redop(comm, op);
  if (r) r->used = 0;
  pthread_mutex_unlock(&comm->lock);
  if (!r)
    return shim_fail(comm, ncclInvalidArgument, "ncclRedOpDestroy: op %d is not an operator of "
                     "ncclRedOpCreatePreMulSum on this communicator", (int)op);
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclRedOpDestroy);

/* ---- the scaling, in each type's own arithmetic (products rounded to the type, as NCCL's) ---- */

/* binary16 <-> float: exact widening; narrowing rounds to nearest even, subnormals included. */
static float half_to_float(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
  return h & 0x8000 ? -v : v;
}

static uint16_t float_to_half(float f) {
  const uint16_t sign = signbit(f) ? 0x8000 : 0;
  const float a = fabsf(f);
  if (a == 0) return sign;
  if (isnan(a)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00; /* rounds past the largest half, 65504 */
  int e;
  frexpf(a, &e); /* a = m * 2^e, 0.5 <= m < 1 */
  const int shift = e < -13 ? -24 : e - 11; /* the weight of the half's last bit */
  const float q = nearbyintf(ldexpf(a, -shift)); /* round to nearest even (default mode) */
  const uint32_t units = (uint32_t)q; /* multiples of 2^shift */
  if (shift == -24) return sign | (uint16_t)units; /* subnormal (or the first normal, 1024) */
  const uint32_t exp = (uint32_t)(shift + 25), mant = units; /* mant in [1024, 2048] */
  return sign | (uint16_t)(mant == 2048 ? ((exp + 1) << 10) : ((exp << 10) | (mant - 1024)));
}

static float bf16_to_float(uint16_t b) {
  const uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint16_t float_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if (isnan(f)) return (uint16_t)((bits >> 16) | 0x40);
  return (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

#define SCALE_INT(T)                                                              \
  do {                                                                            \
    T s;                                                                          \
    memcpy(&s, scalar, sizeof s);                                                 \
    const T* x = in;                                                              \
    T* y = out;                                                                   \
    for (size_t i = 0; i < n; i++) y[i] = (T)((uint64_t)x[i] * (uint64_t)s);      \
  } while (0)
#define SCALE_FLOAT(T, LOAD, STORE)                                               \
  do {                                                                            \
    const T* x = in;                                                              \
    T* y = out;                                                                   \
    T raw;                                                                        \
    memcpy(&raw, scalar, sizeof raw);                                             \
    const float s = LOAD(raw);                                                    \
    for (size_t i = 0; i < n; i++) y[i] = STORE(LOAD(x[i]) * s);                  \
  } while (0)

/* out[i] = scalar * in[i] for n elements of datatype. A float16/bfloat16 product of two values of
 * the type is exact in float, so rounding it once to the type is the type's own multiply. Integer
 * products wrap, as in the type (done unsigned, where wrapping is defined). */
static void scale(void* out, const void* in, size_t n, ncclDataType_t datatype, const void* scalar) {
  switch (datatype) {
    case ncclInt8: SCALE_INT(int8_t); break;
    case ncclUint8: SCALE_INT(uint8_t); break;
    case ncclInt32: SCALE_INT(int32_t); break;
    case ncclUint32: SCALE_INT(uint32_t); break;
    case ncclInt64: SCALE_INT(int64_t); break;
    case ncclUint64: SCALE_INT(uint64_t); break;
    case ncclFloat16: SCALE_FLOAT(uint16_t, half_to_float, float_to_half); break;
    case ncclBfloat16: SCALE_FLOAT(uint16_t, bf16_to_float, float_to_bf16); break;
    case ncclFloat32: {
      float s;
      memcpy(&s, scalar, sizeof s);
      for (size_t i = 0; i < n; i++) ((float*)out)[i] = ((const float*)in)[i] * s;
      break;
    }
    case ncclFloat64: {
      double s;
      memcpy(&s, scalar, sizeof s);
      for (size_t i = 0; i < n; i++) ((double*)out)[i] = ((const double*)in)[i] * s;
      break;
    }
    default: break; /* refused by shim_check_op */
  }
}

/* ---- checks made before a call is queued ---- */

/* A PreMulSum op is copied into the call: NCCL lets it be destroyed as soon as the call returns,
 * so a queued call must not look it up again when ncclGroupEnd runs it. */
static ncclResult_t check_redop(struct shim_op* op, const char* name) {
  if ((int)op->op >= 0 && (int)op->op < ncclNumOps) return ncclSuccess;
  pthread_mutex_lock(&op->comm->lock);
  const struct shim_redop* r = find_redop(op->comm, op->op);
  if (r) op->premul = *r;
  pthread_mutex_unlock(&op->comm->lock);
  if (!r)
    return shim_fail(op->comm, ncclInvalidArgument, "%s: op %d is neither built in nor made by "
                     "ncclRedOpCreatePreMulSum on this communicator", name, (int)op->op);
  if (op->premul.datatype != op->datatype)
    return shim_fail(op->comm, ncclInvalidArgument, "%s: op %d was made for another datatype", name, (int)op->op);
  if (shim_is_device_ptr(op->send) || shim_is_device_ptr(op->recv))
    return shim_fail(op->comm, ncclInvalidUsage, "%s: a PreMulSum op on device buffers: ringo's NCCL shim scales "
                     "only host buffers (it runs no kernel of its own)", name);
  return ncclSuccess;
}

/* Which buffers rank me touches: the root alone reads a broadcast's or scatter's sendbuff and
 * writes a reduce's or gather's recvbuff; a send has no recvbuff, a receive no sendbuff. */
static void touches(const struct shim_op* op, int me, int* reads, int* writes) {
  const int root = me == op->root;
  *reads = op->kind != SHIM_RECV && ((op->kind != SHIM_BROADCAST && op->kind != SHIM_SCATTER) || root);
  *writes = op->kind != SHIM_SEND && ((op->kind != SHIM_REDUCE && op->kind != SHIM_GATHER) || root);
}

/* What ringo would reject at the call itself but only sees at ncclGroupEnd for a queued call, and
 * what ringo cannot know (float8, PreMulSum ops, buffers the shim slices or scales). */
ncclResult_t shim_check_op(struct shim_op* op) {
  const char* name = kNames[op->kind];
  ringoComm_t rc;
  ncclResult_t res = shim_ready(op->comm, name, &rc);
  if (res != ncclSuccess) return res;
  const size_t esize = shim_type_size(op->datatype);
  if (esize == 0)
    return shim_fail(op->comm, ncclInvalidArgument, "%s: datatype %d is out of range", name, (int)op->datatype);
  if (reduces(op->kind) && (op->datatype == ncclFloat8e4m3 || op->datatype == ncclFloat8e5m2))
    return shim_fail(op->comm, ncclInvalidArgument, "%s: ringo does not reduce float8 (datatype %d)", name,
                     (int)op->datatype);
  if (reduces(op->kind) && (res = check_redop(op, name)) != ncclSuccess) return res;
  int n = 0, me = 0;
  res = shim_result(op->comm, ringoCommCount(rc, &n));
  if (res == ncclSuccess) res = shim_result(op->comm, ringoCommUserRank(rc, &me));
  if (res != ncclSuccess) return res;
  if (has_root(op->kind) && (op->root < 0 || op->root >= n))
    return shim_fail(op->comm, ncclInvalidArgument, "%s: %s %d is out of range (%d ranks)", name,
                     op->kind == SHIM_SEND || op->kind == SHIM_RECV ? "peer" : "root", op->root, n);
  /* The shim's own byte counts (a PreMulSum's scaled copy, the blocks of all-to-all, gather and
   * scatter) are at most count * N elements. */
  if (op->count > SIZE_MAX / (size_t)n / esize)
    return shim_fail(op->comm, ncclInvalidArgument, "%s: count %zu of %zu-byte elements on %d ranks overflows the "
                     "address space", name, op->count, esize, n);
  /* Each buffer's kind, asked of the CUDA runtime once per call. */
  const int send_dev = shim_ringo_device_ptr(op->send), recv_dev = shim_ringo_device_ptr(op->recv);
  if (op->send && op->recv && send_dev != recv_dev)
    return shim_fail(op->comm, ncclInvalidArgument, "%s: sendbuff and recvbuff must both be host or both device "
                     "memory", name);
  if (op->count == 0) return ncclSuccess;
  int reads, writes;
  touches(op, me, &reads, &writes);
  if ((reads && !op->send) || (writes && !op->recv))
    return shim_fail(op->comm, ncclInvalidArgument, "%s: %s is NULL with count %zu", name,
                     reads && !op->send ? "sendbuff" : "recvbuff", op->count);
  if (op->stream && !(reads ? send_dev : recv_dev))
    return shim_fail(op->comm, ncclInvalidArgument, "%s: a stream was given with host buffers; host collectives run "
                     "on the calling thread: pass NULL", name);
  return ncclSuccess;
}

/* ---- running ---- */

/* Replaces a PreMulSum op by a sum over a scaled copy of the input (op->scratch, freed by the
 * caller once ringo has run it). The scalar of ncclScalarDevice is read now, as NCCL reads it when
 * the collective runs. */
static ncclResult_t premul(struct shim_op* op, int nranks) {
  const struct shim_redop r = op->premul;
  const char* name = kNames[op->kind];
  const size_t n = op->kind == SHIM_REDUCESCATTER ? op->count * (size_t)nranks : op->count;
  const size_t esize = shim_type_size(op->datatype);
  unsigned char s[8];
  if (r.residence == ncclScalarHostImmediate) memcpy(s, r.scalar, esize);
  else if (shim_read_memory(s, r.scalar_ptr, esize) != 0)
    return shim_fail(op->comm, ncclUnhandledCudaError, "%s: cannot read the PreMulSum scalar", name);
  op->scratch = malloc(n ? n * esize : 1);
  if (!op->scratch) return shim_fail(op->comm, ncclSystemError, "%s: out of memory for the scaled input", name);
  scale(op->scratch, op->send, n, op->datatype, s);
  op->send = op->scratch;
  op->op = ncclSum;
  return ncclSuccess;
}

/* The three composed collectives: one ringo group of sends and receives; a rank's block for
 * itself goes through a self send/receive (allowed inside a group), so device memory works too. */
static ringoResult_t exchange(const struct shim_op* op, int n, int me) {
  const size_t block = op->count * shim_type_size(op->datatype);
  const ringoDataType_t t = shim_move_type(op->datatype);
  const char* send = op->send;
  char* recv = op->recv;
  ringoComm_t rc = shim_ringo(op->comm);
  ringoResult_t first = ringoGroupStart();
  for (int p = 0; p < n && first == ringoSuccess; p++) {
    ringoResult_t res = ringoSuccess;
    const int root_in_place = op->kind == SHIM_GATHER ? send == recv + (size_t)me * block
                                                      : recv == send + (size_t)me * block;
    if (op->kind == SHIM_ALLTOALL) {
      res = ringoSend(send + (size_t)p * block, op->count, t, p, rc, op->stream);
      if (res == ringoSuccess) res = ringoRecv(recv + (size_t)p * block, op->count, t, p, rc, op->stream);
    } else if (op->kind == SHIM_GATHER) {
      if (me == op->root && !(p == me && root_in_place))
        res = ringoRecv(recv + (size_t)p * block, op->count, t, p, rc, op->stream);
      if (res == ringoSuccess && p == op->root && !(p == me && root_in_place))
        res = ringoSend(send, op->count, t, p, rc, op->stream);
    } else {
      if (me == op->root && !(p == me && root_in_place))
        res = ringoSend(send + (size_t)p * block, op->count, t, p, rc, op->stream);
      if (res == ringoSuccess && p == op->root && !(p == me && root_in_place))
        res = ringoRecv(recv, op->count, t, p, rc, op->stream);
    }
    first = res;
  }
  const ringoResult_t end = ringoGroupEnd();
  return first != ringoSuccess ? first : end;
}

static ringoResult_t run_exchange(const struct shim_op* op) {
  int n = 0, me = 0;
  ringoComm_t rc = shim_ringo(op->comm);
  ringoResult_t res = ringoCommCount(rc, &n);
  if (res == ringoSuccess) res = ringoCommUserRank(rc, &me);
  if (res != ringoSuccess || op->count == 0) return res; /* NULL buffers: refused by shim_check_op */
  return exchange(op, n, me);
}

ncclResult_t shim_run_op(struct shim_op* op) {
  ringoComm_t rc = shim_ringo(op->comm);
  if (reduces(op->kind) && (int)op->op >= ncclNumOps) {
    int n = 0;
    ncclResult_t res = shim_result(op->comm, ringoCommCount(rc, &n));
    if (res == ncclSuccess) res = premul(op, n);
    if (res != ncclSuccess) return res;
  }
  const ringoDataType_t t = shim_move_type(op->datatype);
  const ringoRedOp_t o = (ringoRedOp_t)op->op;
  ringoResult_t res = ringoInternalError;
  switch (op->kind) {
    case SHIM_ALLREDUCE: res = ringoAllReduce(op->send, op->recv, op->count, t, o, rc, op->stream); break;
    case SHIM_REDUCE: res = ringoReduce(op->send, op->recv, op->count, t, o, op->root, rc, op->stream); break;
    case SHIM_BROADCAST: res = ringoBroadcast(op->send, op->recv, op->count, t, op->root, rc, op->stream); break;
    case SHIM_ALLGATHER: res = ringoAllGather(op->send, op->recv, op->count, t, rc, op->stream); break;
    case SHIM_REDUCESCATTER: res = ringoReduceScatter(op->send, op->recv, op->count, t, o, rc, op->stream); break;
    case SHIM_SEND: res = ringoSend(op->send, op->count, t, op->root, rc, op->stream); break;
    case SHIM_RECV: res = ringoRecv(op->recv, op->count, t, op->root, rc, op->stream); break;
    case SHIM_ALLTOALL:
    case SHIM_GATHER:
    case SHIM_SCATTER:
      res = run_exchange(op);
      break;
  }
  return shim_result(op->comm, res);
}

/* ---- the model time of one call, for ncclGroupSimulateEnd ----
 * ringo's cost model (src/sched/model.h, internal) is not public, so the shim applies the same
 * alpha-beta form with two constants of its own: a ring step costs ALPHA_US, and each byte a rank
 * sends costs 1/BYTES_PER_US. An all-reduce is 2(N-1) steps moving 2(N-1)/N of the buffer. */
#define SHIM_MODEL_ALPHA_US 5.0
#define SHIM_MODEL_BYTES_PER_US 10000.0 /* 10 GB/s: a host shared-memory link */

double shim_op_time_us(const struct shim_op* op) {
  int n = 0;
  if (ringoCommCount(shim_ringo(op->comm), &n) != ringoSuccess || n < 1) return 0;
  const double b = (double)op->count * (double)shim_type_size(op->datatype), N = n, a = SHIM_MODEL_ALPHA_US,
               bw = SHIM_MODEL_BYTES_PER_US;
  if (n == 1) return 0;
  switch (op->kind) {
    case SHIM_ALLREDUCE: return 2 * (N - 1) * a + 2 * (N - 1) / N * b / bw;
    case SHIM_ALLGATHER:
    case SHIM_REDUCESCATTER: return (N - 1) * a + (N - 1) * b / bw; /* count is one rank's block */
    case SHIM_REDUCE:
    case SHIM_BROADCAST: return (N - 1) * a + b / bw;             /* pipelined along the ring */
    case SHIM_SEND:
    case SHIM_RECV: return a + b / bw;
    case SHIM_ALLTOALL:
    case SHIM_GATHER:
    case SHIM_SCATTER: return (N - 1) * (a + b / bw);
  }
  return 0;
}
