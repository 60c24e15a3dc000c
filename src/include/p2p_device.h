/* p2p_device.h — ringoSend/ringoRecv on device buffers: a batch is staged through pinned host
 * memory and run by the host point-to-point engine on a proxy thread of the communicator, in stream
 * order. Tested by test/test_p2p_device.cc (a worker thread stands in for the stream). */
#ifndef RINGO_P2P_DEVICE_H_
#define RINGO_P2P_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#include "ringo.h"
#include "staged.h"

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

/* A communicator's proxy: its thread, its queue of batches, their staging buffer. */
struct ringo_p2p_proxy;

/* Enqueues one batch of comm's device sends and receives on the stream behind ops (after work
 * enqueued there before): the sends' bytes to pinned host memory; a marker; a wait until the
 * proxy has run the batch through the host engine; the receives' bytes back to their buffers.
 * The proxy (made on first use, into *px) waits for the marker, so it never reads a send's bytes
 * before the stream staged them. Returns at once; an error of the host run puts comm in error
 * (ringoCommGetAsyncError) and the stream still goes on. ops needs wait_flag. */
ringoResult_t ringo_p2p_device_launch(ringoComm_t comm, struct ringo_p2p_proxy** px, const struct ringo_p2p_call* calls,
                                      size_t n, const struct ringo_stage_ops* ops);

/* Batches enqueued and not finished by the proxy (host work on comm must wait for them). */
int ringo_p2p_device_pending(const struct ringo_p2p_proxy* px);

/* Stops the proxy once its queue is empty and frees it; the stream must have drained (every batch
 * finished), else the caller must leave it allocated. NULL is fine. */
void ringo_p2p_device_free(struct ringo_p2p_proxy* px, const struct ringo_stage_ops* ops);

#ifdef __cplusplus
}
#endif

#endif /* RINGO_P2P_DEVICE_H_ */
