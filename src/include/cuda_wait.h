/* cuda_wait.h — the wait kernel of cuda/wait.cu: a stream waits until the host moves a flag, which
 * is how device point-to-point (p2p_device.c) holds a stream until its proxy thread has run a batch.
 * Needs ringo's CUDA build; tested by test/test_cuda_wait.cc (the kernel's code on the CPU). */
#ifndef RINGO_CUDA_WAIT_H_
#define RINGO_CUDA_WAIT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues a one-thread kernel on stream (a cudaStream_t) that ends once *flag >= value, or once
 * *abort_flag is non-zero, leaving RINGO_DEV_ABORTED in *error (if it was 0). flag, abort_flag and
 * error are device-accessible addresses of pinned host memory. No clock bounds the wait: the host
 * side always moves the flag, error or not. Returns the launch's cudaError_t (0: enqueued). */
int ringo_cuda_wait_flag(const uint64_t* flag, uint64_t value, const int32_t* abort_flag, int32_t* error, void* stream);

/* Loads the kernel on the current device now: loaded lazily, its first launch could wait behind a
 * spinning ring kernel. Returns the cudaError_t (0: loaded). */
int ringo_cuda_wait_preload(void);

/* Testing hook: the kernel's code on the calling thread, same arguments without the stream; returns
 * what it left in *error's place (0, or RINGO_DEV_ABORTED). */
int ringo_cuda_wait_flag_emulate(const uint64_t* flag, uint64_t value, const int32_t* abort_flag);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_CUDA_WAIT_H_ */
