/* p2p_device.h — ringoSend/ringoRecv on device buffers: a batch is staged through pinned host
 * memory and run by the host point-to-point engine on the communicator's proxy thread (proxy.h), in
 * stream order. Tested by test/test_p2p_device.cc (a worker thread stands in for the stream). */
#ifndef RINGO_P2P_DEVICE_H_
#define RINGO_P2P_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#include "ringo.h"
#include "device/staged.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One send or receive of a batch, as the caller made it (buf is device memory). */
struct ringo_p2p_call {
  int send; /* 1: ringoSend of buf; 0: ringoRecv into buf */
  int peer;
  void* buf;
  size_t count;
  ringoDataType_t type;
};

/* Enqueues one batch of comm's device sends and receives on the stream behind ops (after work
 * enqueued there before): the sends' bytes to st's pinned staging; the proxy's run of the batch
 * through the host engine, which the stream waits for (proxy.h: the proxy never reads a send's
 * bytes before the stream staged them); the receives' bytes back to their buffers. Returns at
 * once; an error of the host run puts comm in error (ringoCommGetAsyncError) and the stream still
 * goes on. ringo_staged_free(st) stops the proxy and frees the staging. */
ringoResult_t ringo_p2p_device_launch(ringoComm_t comm, struct ringo_stage* st, const struct ringo_p2p_call* calls,
                                      size_t n, const struct ringo_stage_ops* ops);

#ifdef __cplusplus
}
#endif

#endif /* RINGO_P2P_DEVICE_H_ */
