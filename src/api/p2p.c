/* p2p.c — the public point-to-point calls, ringoSend and ringoRecv: each builds its op and hands it
 * to the door (group.c). Tested by test/test_p2p.cc. */
#include "api/group.h"

ringoResult_t ringoSend(const void* sendbuff, size_t count, ringoDataType_t datatype, int peer, ringoComm_t comm,
                        ringoStream_t stream) {
  return ringo_group_submit((struct ringo_op){.kind = RINGO_KIND_SEND, .peer = peer, .sendbuff = sendbuff, .count = count,
                                  .type = datatype, .comm = comm, .stream = stream});
}

ringoResult_t ringoRecv(void* recvbuff, size_t count, ringoDataType_t datatype, int peer, ringoComm_t comm,
                        ringoStream_t stream) {
  return ringo_group_submit((struct ringo_op){.kind = RINGO_KIND_RECV, .peer = peer, .recvbuff = recvbuff, .count = count,
                                  .type = datatype, .comm = comm, .stream = stream});
}
