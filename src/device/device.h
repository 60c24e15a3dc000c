/* device.h — the CUDA path seen from the rest of the library (device.c): which buffers are device
 * memory, the device side of a communicator, device collectives on a stream. Without CUDA every
 * buffer is host memory and a device call says so. Tested by test/test_device.cc (on a GPU). */
#ifndef RINGO_DEVICE_H_
#define RINGO_DEVICE_H_

#include "comm/comm.h"
#include "comm/op.h"

/* 1 when p is CUDA device (or managed) memory; 0 for host memory, and always without a GPU. */
int ringo_device_is_device_ptr(const void* p);
/* CUDA devices this process sees (0 without CUDA or a driver). */
int ringo_device_count(void);
/* The calling thread's current device, -1 without one. */
int ringo_device_current(void);
/* Makes dev the calling thread's current device (ringoCommInitAll's devlist). */
ringoResult_t ringo_device_select(int dev);

/* At init, on every rank (it takes part in two allgathers of rv): binds comm to the thread's
 * current device and makes the device FIFO region when there is a GPU; when any rank cannot, the
 * device path stays off (host collectives unaffected). Fails only when the rendezvous does. */
ringoResult_t ringo_device_setup(ringoComm_t comm, const struct ringo_rendezvous* rv);
/* Frees comm's device side, its proxy first; 0 when ringo's stream stayed busy: then nothing is
 * freed and the caller must leave comm allocated (queued work, the proxy, may still use it). */
int ringo_device_free(ringoComm_t comm);

/* Everything a device call can get wrong, before anything is enqueued (the communicator stays
 * usable): no device path, a buffer on another device, ranks of one process sharing the legacy
 * stream outside a group (grouped: the call is queued in a group). */
ringoResult_t ringo_device_check(const struct ringo_op* op, ringoStream_t stream, int grouped, const char* name);
/* Enqueues op (device buffers) after the caller's work on op->stream; ringo_device_join then makes
 * op->stream wait for it. A group launches every rank's kernel before any join, so ranks sharing
 * a stream never wait for each other in stream order. Errors a kernel hits later reach
 * ringoCommGetAsyncError and the next call. */
ringoResult_t ringo_device_launch(const struct ringo_op* op);
ringoResult_t ringo_device_join(const struct ringo_op* op);
/* Enqueues n device sends and receives of comm as one batch on ringo's stream, after the work of
 * every op's stream (p2p_device.c runs them on the communicator's proxy thread); ringo_device_join
 * then makes each op's stream wait for it. */
ringoResult_t ringo_device_p2p_launch(ringoComm_t comm, const struct ringo_op* const* ops, size_t n);
/* Before a group launches its device work (ops[0..nops), any communicators): every staged
 * communicator's pinned buffers grown for its work in the group and its proxy started
 * (ringo_stage_reserve says why). Best effort: a failure is reported again by the launch. */
void ringo_device_reserve(const struct ringo_op* ops, size_t nops);
/* The error a ring kernel of comm left (and puts comm in error), or ringoSuccess. Cheap. */
ringoResult_t ringo_device_async_error(ringoComm_t comm);
/* Before host work on comm: waits for its staged device collectives and device sends/receives
 * (their host runs use the same links from other threads); ringoTimeout after RINGO_TIMEOUT
 * without progress. Nothing to do when neither was used. */
ringoResult_t ringo_device_quiesce(ringoComm_t comm);
/* Before teardown: waits until nothing on ringo's stream can touch comm any more (bounded like
 * quiesce). 0 when it gave up: the caller must then leave comm allocated. */
int ringo_device_drain(ringoComm_t comm);
/* Ranks of this process on comm's GPU (comm's included); 0 without a device path. */
int ringo_device_local_ranks(ringoComm_t comm);
/* Makes every running ring kernel of comm give up its waits (ringoCommAbort). */
void ringo_device_abort(ringoComm_t comm);

#endif /* RINGO_DEVICE_H_ */
