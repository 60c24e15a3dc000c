/* ringo_ddp.h — data-parallel training on ringo: gradient buckets whose all-reduce overlaps the
 * backward pass (PyTorch DDP's scheme, seed section "Bucketing and overlapping"). Depends on ringo.h.
 * Implemented by src/ddp.c on the public API (device memory through src/ddp_device.c); tested by
 * test/test_ddp.cc and test/test_ddp_device.cc (make test). */
#ifndef RINGO_DDP_H_
#define RINGO_DDP_H_

#include <stddef.h>
#include <stdint.h>

#include "ringo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a training step drives it, on every rank, with the same calls in the same order:
 *
 *   ringoDdpCreate(&ddp, comm, 0, 0);                       defaults: 25 MiB buckets, 1 MiB first
 *   for each parameter, in forward order: ringoDdpRegister(ddp, grad, param, count, dtype, &idx);
 *                                           (device memory: ringoDdpRegisterMem, ringoDdpSetStream)
 *   ringoDdpBroadcastParams(ddp);                           checks shapes, copies rank 0's params
 *   each step:  ringoDdpSetLocalBatch(ddp, n_r);            when shard sizes are uneven or change
 *               forward; backward, calling ringoDdpMarkReady(ddp, idx) as each gradient is final;
 *               ringoDdpFinish(ddp);                        every gradient now holds the average
 *               optimizer step
 *
 * Buckets. Parameters are taken in reverse registration order (backward produces the last layer's
 * gradients first) and cut into buckets, one group per (dtype, memory kind): a bucket closes as soon
 * as it holds at least its limit, which is firstBucketBytes for the first bucket of a group and
 * bucketBytes after that (so a bucket overshoots by at most its last parameter). Buckets are
 * numbered by the reverse position of their first parameter, and bucket k's all-reduce starts when
 * its last gradient is marked ready AND buckets 0..k-1 have started, so every rank launches the same
 * all-reduces in the same order whatever order its backward marks them in.
 *
 * Averaging. Each rank multiplies its gradient by w_r = n_r / sum(n) (n_r from SetLocalBatch, 1 by
 * default, so w_r = 1/N), then the bucket is all-reduced with ringoSum. If every g_r is the mean
 * gradient over rank r's n_r samples, the result sum_r n_r g_r / sum(n) is, in real arithmetic,
 * exactly the gradient of the mean loss over the union batch, uneven shards included; in floating
 * point it differs from a one-rank run only by the rounding of a differently ordered sum (the tests
 * hold float32 to 1e-5). Why scale before the sum rather than after: both keep the replicas
 * bit-identical (the sum is reduced once per chunk, on one rank, and copied; a scale after it would
 * be the same multiply of the same bits everywhere), but scaling first keeps float16/bfloat16 sums
 * in range, lets an empty shard (w_r = 0) contribute zeros even if its gradient is 0/0, and leaves
 * nothing to do after the all-reduce. With equal shards and N a power of two, w_r is exact.
 *
 * Memory. Gradients live in host memory (ringoMemHost) or in CUDA device memory (ringoMemDevice;
 * both kinds may be mixed, each has its own buckets). Every bucket's all-reduce is started by a
 * communication thread owned by the context, in bucket order, in place when the bucket's gradients
 * lie back to back in registration order (e.g. all gradients in one block), else through one
 * staging buffer (of the bucket's memory kind). A host bucket is scaled, all-reduced and unpacked
 * by that thread. A device bucket is only enqueued, PyTorch-DDP style, and the host never waits for
 * the GPU: the MarkReady that completes it records an event on the compute stream (SetStream), so
 * it waits for exactly the work enqueued there before that call; the thread then enqueues, on a
 * side stream of the context, a wait for that event, the scale (a kernel), the pack, ringoAllReduce
 * and the unpack; Finish makes the compute stream wait for the side stream and returns, so work
 * the caller enqueues on the compute stream after Finish (the optimizer) sees the averages. Device
 * memory needs ringo's CUDA part and a communicator bound to a GPU; the buffers must be memory of
 * that GPU. While a step is in flight (from the first MarkReady to Finish) that thread is the only
 * user of comm: the caller must not run collectives on it and must not touch a gradient whose
 * bucket may be in flight (for device memory: until the compute stream has passed Finish's wait).
 * All functions except MarkReady are called from one thread. */

/** Opaque data-parallel context. */
typedef struct ringoDdp* ringoDdp_t;

/** Where a parameter's gradient and value live. Part of registration and of bucket grouping. */
typedef enum { ringoMemHost = 0, ringoMemDevice = 1 } ringoMemKind_t;

#define RINGO_DDP_DEFAULT_BUCKET_BYTES ((size_t)25 << 20)
#define RINGO_DDP_DEFAULT_FIRST_BUCKET_BYTES ((size_t)1 << 20)

/** Cumulative counters of one context. 1 - exposedSeconds / commSeconds is the fraction of the
 * all-reduce's wall time that ran under backward; where communication and backward share CPU cores
 * (host memory) the overlapped all-reduce also runs slower, so compare exposedSeconds with the
 * commSeconds of a step that does not overlap (no MarkReady) to see how much of its cost is hidden. */
typedef struct {
  uint64_t steps;        /* Finish calls that synchronised gradients (NoSync steps not counted) */
  uint64_t buckets;      /* bucket all-reduces completed (device buckets: enqueued) */
  uint64_t bytes;        /* gradient bytes all-reduced (per rank, before the ring's 2(N-1)/N) */
  double commSeconds;    /* wall time the communication thread spent on buckets: scale, pack,
                            all-reduce, unpack; for device buckets only the time to enqueue them,
                            since the host never waits for the GPU (time the side stream with
                            CUDA events to see the device's) */
  double exposedSeconds; /* wall time Finish blocked waiting for buckets: communication that was
                            not hidden under the backward pass (device buckets: enqueueing only) */
} ringoDdpStats;

/** Creates a context on comm (not collective; for device memory comm must be bound to a GPU). The
 * context uses comm for every DDP collective; comm must outlive it. bucketBytes 0 means
 * RINGO_DDP_DEFAULT_BUCKET_BYTES, firstBucketBytes 0 means RINGO_DDP_DEFAULT_FIRST_BUCKET_BYTES.
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp, bad comm); ringoSystemError (out of memory,
 *         no thread); the message is in ringoDdpGetLastError(NULL) on this thread. */
RINGO_API ringoResult_t ringoDdpCreate(ringoDdp_t* ddp, ringoComm_t comm, size_t bucketBytes,
                                       size_t firstBucketBytes);

/** Registers the next parameter in forward order as host memory: ringoDdpRegisterMem with
 * ringoMemHost. @return as ringoDdpRegisterMem. */
RINGO_API ringoResult_t ringoDdpRegister(ringoDdp_t ddp, void* grad, void* param, size_t count,
                                         ringoDataType_t datatype, int* index);

/** Registers the next parameter in forward order: grad (where backward writes its gradient and
 * Finish leaves the average) and param (its value, overwritten by BroadcastParams), count elements
 * of a floating-point datatype each, in memory of kind mem. *index (if not NULL) receives its
 * index, 0, 1, 2 ... for MarkReady. Only before BroadcastParams.
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp, NULL grad or param with count > 0, a
 *         datatype that is not float16/bfloat16/float32/float64, an unknown mem);
 *         ringoInvalidUsage (after BroadcastParams; mem is ringoMemHost and grad or param is not
 *         memory this process can read, e.g. a device pointer, or is read-only where ringo writes it (grad; param
 *         on ranks other than 0), as /proc/self/maps says of its first and last byte; mem is ringoMemDevice and this build
 *         has no CUDA part, comm is a host communicator, or grad or param is not device memory of
 *         comm's GPU); ringoUnhandledCudaError (the first device parameter: the side stream could
 *         not be made); ringoSystemError (out of memory). */
RINGO_API ringoResult_t ringoDdpRegisterMem(ringoDdp_t ddp, void* grad, void* param, size_t count,
                                            ringoDataType_t datatype, ringoMemKind_t mem, int* index);

/** Collective. Checks that every rank registered the same parameters (number, counts, dtypes,
 * memory kinds) and the same bucket sizes, fixes the buckets, then overwrites every param with
 * rank 0's values. Registration is closed afterwards; call it once, before the first step. Device
 * params are broadcast on the side stream after the work enqueued on the compute stream so far,
 * and this call waits for that (it is setup, and may block). Not inside ringoGroupStart/End (its
 * collectives must complete before it returns), nor is SetLocalBatch.
 * @return ringoSuccess; ringoInvalidUsage (ranks registered different parameters, with a message
 *         naming the first differing parameter and the ranks that differ, returned on every rank;
 *         called twice; called inside ringoGroupStart/End; a default compute stream shared by several ranks of the GPU, see SetStream); ringoInvalidArgument (NULL ddp); errors of ringoAllGather / ringoBroadcast;
 *         ringoUnhandledCudaError (events, device staging buffer, waiting for the side stream). */
RINGO_API ringoResult_t ringoDdpBroadcastParams(ringoDdp_t ddp);

/** Declares parameter index's gradient final for this step. When that completes a bucket, and every
 * earlier bucket has started, the bucket's all-reduce starts on the communication thread and this
 * call returns at once. Safe to call from several threads. Under NoSync it only records the mark.
 * For device memory, call it after enqueueing the gradient's last write on the compute stream: the
 * mark that completes a bucket records the bucket's ready event there (it does not wait for it).
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp, index out of range); ringoInvalidUsage
 *         (before BroadcastParams; index already marked this step; the context failed earlier);
 *         ringoUnhandledCudaError (recording the ready event; the context is then unusable). */
RINGO_API ringoResult_t ringoDdpMarkReady(ringoDdp_t ddp, int index);

/** Ends the step. Collective. Parameters not marked ready are taken as ready now with their current
 * gradient (so a backward without MarkReady calls gets a plain, non-overlapped all-reduce); waits
 * for every bucket and leaves the weighted average in every grad. Under NoSync it communicates
 * nothing and leaves the local gradients as they are (accumulate into them for the next step).
 * Device buckets: it waits only until every bucket is enqueued, makes the compute stream wait for
 * the side stream and returns; the averages are there for work enqueued on the compute stream
 * afterwards. It returns the errors of enqueueing; an error of a device all-reduce itself happens
 * later, on the GPU, and is reported by ringoCommGetAsyncError(comm) and by the next step's
 * all-reduce (comm is then in error), hence by the next Finish.
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp); ringoInvalidUsage (before
 *         BroadcastParams; the context failed earlier); the first error of a bucket all-reduce
 *         (ringoRemoteError, ringoTimeout, ...) or of a device enqueue (ringoUnhandledCudaError),
 *         after which the context is unusable. */
RINGO_API ringoResult_t ringoDdpFinish(ringoDdp_t ddp);

/** Collective (one tiny all-reduce on the calling thread). Sets this rank's sample count n for the
 * following steps: gradients are then weighted n / sum over ranks of n. The gradient a rank hands in
 * must be the mean over its n samples; n = 0 (an empty shard) contributes nothing. Between steps.
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp; sum over ranks is 0 or overflows 64 bits,
 *         on every rank); ringoInvalidUsage (during a step; inside ringoGroupStart/End; the context
 *         failed earlier); errors of ringoAllReduce. */
RINGO_API ringoResult_t ringoDdpSetLocalBatch(ringoDdp_t ddp, size_t n);

/** Gradient accumulation: with enable != 0 the following steps do not communicate (MarkReady and
 * Finish only keep count) and backward accumulates into the local gradients; after enable = 0 the
 * next step all-reduces the accumulated gradients once. Every rank must make the same calls. With k
 * micro-steps of equal size, scale each micro-step's loss by 1/k (SetLocalBatch counts the samples
 * of all k). Between steps.
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp); ringoInvalidUsage (during a step). */
RINGO_API ringoResult_t ringoDdpNoSync(ringoDdp_t ddp, int enable);

/** Sets the compute stream (a cudaStream_t of comm's GPU): where backward produces the device
 * gradients and where the optimizer will read them (PyTorch's current stream). Ready events are
 * recorded on it, Finish makes it wait for the side stream, BroadcastParams orders itself after it.
 * NULL (the default) is the legacy default stream of comm's GPU. When several ranks of this process
 * share the GPU each needs a stream of its own: on a default stream they all share, one rank's
 * Finish would hold back the others' backward, which its all-reduce waits for (refused, here and
 * at BroadcastParams). Host memory ignores it. Between steps.
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp); ringoInvalidUsage (during a step; the
 *         context failed earlier; a default stream shared by several ranks of the GPU). */
RINGO_API ringoResult_t ringoDdpSetStream(ringoDdp_t ddp, ringoStream_t stream);

/** Number of buckets (fixed by BroadcastParams).
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp or count); ringoInvalidUsage (before
 *         BroadcastParams). */
RINGO_API ringoResult_t ringoDdpGetBucketCount(ringoDdp_t ddp, int* count);

/** Bucket of parameter index and its position in that bucket's layout (a bucket's parameters lie
 * in registration order: position 0 is its lowest index). Either pointer may be NULL.
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp, index out of range); ringoInvalidUsage
 *         (before BroadcastParams). */
RINGO_API ringoResult_t ringoDdpGetParamBucket(ringoDdp_t ddp, int index, int* bucket, int* position);

/** Copies the counters. @return ringoSuccess; ringoInvalidArgument (NULL ddp or stats). */
RINGO_API ringoResult_t ringoDdpGetStats(ringoDdp_t ddp, ringoDdpStats* stats);

/** Human message for the last failure of a call on ddp (with ddp NULL: of this thread's last failed
 * ringoDdpCreate or call with a NULL ddp). Never NULL. */
RINGO_API const char* ringoDdpGetLastError(ringoDdp_t ddp);

/** Stops the communication thread (after the bucket it is running, if any: call Finish first) and
 * frees the context (with device memory, after waiting for its side stream); comm is left alone.
 * @return ringoSuccess; ringoInvalidArgument (NULL ddp). */
RINGO_API ringoResult_t ringoDdpDestroy(ringoDdp_t ddp);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_DDP_H_ */
