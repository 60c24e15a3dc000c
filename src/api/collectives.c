/* collectives.c — the public collectives: each builds its op and hands it to the door (group.c),
 * which checks it and queues or runs it. Tested by test/test_collectives.cc and test_api.cc. */
#include "api/group.h"

ringoResult_t ringoAllReduce(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype,
                             ringoRedOp_t op, ringoComm_t comm, ringoStream_t stream) {
  return ringo_group_submit((struct ringo_op){.coll = RINGO_COLL_ALLREDUCE, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
                                  .type = datatype, .op = op, .comm = comm, .stream = stream});
}

ringoResult_t ringoReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ringoDataType_t datatype,
                                 ringoRedOp_t op, ringoComm_t comm, ringoStream_t stream) {
  return ringo_group_submit((struct ringo_op){.coll = RINGO_COLL_REDUCESCATTER, .sendbuff = sendbuff, .recvbuff = recvbuff,
                                  .count = recvcount, .type = datatype, .op = op, .comm = comm, .stream = stream});
}

ringoResult_t ringoAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ringoDataType_t datatype,
                             ringoComm_t comm, ringoStream_t stream) {
  return ringo_group_submit((struct ringo_op){.coll = RINGO_COLL_ALLGATHER, .sendbuff = sendbuff, .recvbuff = recvbuff,
                                  .count = sendcount, .type = datatype, .op = ringoSum, .comm = comm, .stream = stream});
}

ringoResult_t ringoBroadcast(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype, int root,
                             ringoComm_t comm, ringoStream_t stream) {
  return ringo_group_submit((struct ringo_op){.coll = RINGO_COLL_BROADCAST, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
                                  .type = datatype, .op = ringoSum, .root = root, .comm = comm, .stream = stream});
}

ringoResult_t ringoReduce(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype,
                          ringoRedOp_t op, int root, ringoComm_t comm, ringoStream_t stream) {
  return ringo_group_submit((struct ringo_op){.coll = RINGO_COLL_REDUCE, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
                                  .type = datatype, .op = op, .root = root, .comm = comm, .stream = stream});
}
