/* check.c — every argument of a public collective or point-to-point call checked before anything
 * moves, so a rejected call leaves the communicator usable; also where its memory is decided (host
 * or device). Called by the door (group.c); tested by test/test_api.cc and test_p2p.cc. */
#include "api/check.h"

#include <stdint.h>

#include "device/device.h"
#include "engine/p2p.h"

/* A send and receive buffer that share bytes are either the collective's in-place layout (NCCL's:
 * the same address, or this rank's block of the larger one) or wrong: the ring would overwrite input
 * it has yet to read, and return a result off in some elements only. */
static ringoResult_t check_overlap(const struct ringo_op* op, const char* name) {
  const size_t esize = ringo_type_size(op->type), n = (size_t)op->comm->nranks, me = (size_t)op->comm->rank;
  size_t in_bytes = op->count * esize, out_bytes = in_bytes;
  uintptr_t in = (uintptr_t)op->sendbuff, out = (uintptr_t)op->recvbuff, in_place = out;
  if (op->coll == RINGO_COLL_ALLGATHER) {
    out_bytes *= n;
    in_place = out + me * in_bytes;
  } else if (op->coll == RINGO_COLL_REDUCESCATTER) {
    in_bytes *= n;
    in_place = out - me * out_bytes; /* recvbuff is block `me` of sendbuff */
  }
  if (in == in_place || in + in_bytes <= out || out + out_bytes <= in) return ringoSuccess;
  return ringo_fail(ringoInvalidArgument, "%s: sendbuff (%zu bytes) and recvbuff (%zu bytes) overlap, and not in "
                    "place (%s)", name, in_bytes, out_bytes,
                    op->coll == RINGO_COLL_ALLGATHER       ? "sendbuff == recvbuff + rank * sendcount elements"
                    : op->coll == RINGO_COLL_REDUCESCATTER ? "recvbuff == sendbuff + rank * recvcount elements"
                                                           : "sendbuff == recvbuff");
}

/* Everything a call can get wrong is caught here, before any byte moves, so a rejected call
 * leaves the communicator usable. */
static ringoResult_t check_coll(struct ringo_op* op, int grouped) {
  const char* name = ringo_op_coll_name(op->coll);
  const ringoStream_t stream = op->stream;
  const ringoComm_t comm = op->comm;
  if (!comm) return ringo_fail(ringoInvalidArgument, "%s: comm is NULL", name);
  if (atomic_load(&comm->abort_flag)) return ringo_fail(ringoInvalidUsage, "%s: comm was aborted", name);
  const size_t esize = ringo_type_size(op->type);
  if (esize == 0) return ringo_fail(ringoInvalidArgument, "%s: invalid datatype %d", name, (int)op->type);
  if ((unsigned)op->op >= RINGO_NUM_OPS) return ringo_fail(ringoInvalidArgument, "%s: invalid op %d", name, (int)op->op);
  if (op->root < 0 || op->root >= comm->nranks)
    return ringo_fail(ringoInvalidArgument, "%s: root %d out of range [0, %d)", name, op->root, comm->nranks);
  if (op->count > SIZE_MAX / (size_t)comm->nranks / esize)
    return ringo_fail(ringoInvalidArgument, "%s: count %zu of %s on %d ranks overflows the address space", name,
                      op->count, ringo_type_name(op->type), comm->nranks);
  /* Which buffers this rank touches: broadcast reads sendbuff only on the root, reduce writes
   * recvbuff only on the root. */
  const int is_root = comm->rank == op->root;
  const int reads = op->coll != RINGO_COLL_BROADCAST || is_root;
  const int writes = op->coll != RINGO_COLL_REDUCE || is_root;
  if (op->count > 0 && reads && !op->sendbuff)
    return ringo_fail(ringoInvalidArgument, "%s: sendbuff is NULL with count %zu", name, op->count);
  if (op->count > 0 && writes && !op->recvbuff)
    return ringo_fail(ringoInvalidArgument, "%s: recvbuff is NULL with count %zu", name, op->count);
  if (op->count > 0 && reads && writes) {
    ringoResult_t res = check_overlap(op, name);
    if (res != ringoSuccess) return res;
  }
  /* Device memory goes to the CUDA path, host memory to the host ring; one call cannot mix them. */
  const int dev_in = reads && ringo_device_is_device_ptr(op->sendbuff);
  const int dev_out = writes && ringo_device_is_device_ptr(op->recvbuff);
  if (op->count > 0 && reads && writes && dev_in != dev_out)
    return ringo_fail(ringoInvalidArgument, "%s: sendbuff is %s memory but recvbuff is %s memory", name,
                      dev_in ? "device" : "host", dev_out ? "device" : "host");
  op->device = op->count > 0 && (dev_in || dev_out);
  if (op->device) return ringo_device_check(op, stream, grouped, name);
  if (stream && op->count > 0) /* count 0 with a stream is a no-op, as in NCCL */
    return ringo_fail(ringoInvalidArgument, "%s: a stream was given with host buffers; host collectives run on the "
                      "calling thread: pass NULL", name);
  return ringoSuccess;
}

static ringoResult_t check_p2p(struct ringo_op* o, int grouped) {
  const struct ringo_op op = *o;
  const ringoStream_t stream = op.stream;
  const char* name = ringo_p2p_name(&op);
  const ringoComm_t comm = op.comm;
  if (!comm) return ringo_fail(ringoInvalidArgument, "%s: comm is NULL", name);
  const size_t esize = ringo_type_size(op.type);
  const void* buf = op.kind == RINGO_KIND_SEND ? op.sendbuff : op.recvbuff;
  ringoResult_t res = ringoSuccess;
  if (atomic_load(&comm->abort_flag)) res = ringo_fail(ringoInvalidUsage, "%s: comm was aborted", name);
  else if (esize == 0) res = ringo_fail(ringoInvalidArgument, "%s: invalid datatype %d", name, (int)op.type);
  else if (op.peer < 0 || op.peer >= comm->nranks)
    res = ringo_fail(ringoInvalidArgument, "%s: peer %d out of range [0, %d)", name, op.peer, comm->nranks);
  else if (op.count > SIZE_MAX / esize)
    res = ringo_fail(ringoInvalidArgument, "%s: count %zu of %s overflows the address space", name, op.count,
                     ringo_type_name(op.type));
  else if (op.count > 0 && !buf)
    res = ringo_fail(ringoInvalidArgument, "%s: %s is NULL with count %zu", name,
                     op.kind == RINGO_KIND_SEND ? "sendbuff" : "recvbuff", op.count);
  else if ((o->device = op.count > 0 && ringo_device_is_device_ptr(buf)))
    res = ringo_device_check(o, stream, grouped, name);
  else if (stream && op.count > 0) /* count 0 with a stream is a no-op, as in NCCL */
    res = ringo_fail(ringoInvalidArgument, "%s: a stream was given with a host buffer; point-to-point on host "
                     "memory runs on the calling thread: pass NULL", name);
  return res;
}

ringoResult_t ringo_check_op(struct ringo_op* op, int grouped) {
  return op->kind == RINGO_KIND_COLL ? check_coll(op, grouped) : check_p2p(op, grouped);
}
