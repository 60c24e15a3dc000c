/* proxy.h — a communicator's proxy thread: host work a device stream waits for (staged collectives,
 * device sends and receives), run in stream order on a thread of ringo's own. Needs staged.h's
 * stream operations. Tested by test/test_staged.cc and test/test_p2p_device.cc (fake streams). */
#ifndef RINGO_PROXY_H_
#define RINGO_PROXY_H_

#include "device/staged.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The work the proxy is running, as its fn sees it: the phases' markers and flag values. */
struct ringo_proxy_task;

/* Work for the proxy: run(arg, 1, task) once the stream passed the work's first marker, or
 * run(arg, 0, task) when it never will (the communicator was aborted, is in error or is being torn
 * down, or the stream failed, first: free arg, touch nothing). Either way the proxy then lets the
 * stream go on past every phase. */
typedef void (*ringo_proxy_fn)(void* arg, int run, struct ringo_proxy_task* task);

/* Makes the proxy (into *px) if there is none yet: its flag is pinned host memory (see
 * ringo_stage_reserve for why a group makes it before launching anything). */
ringoResult_t ringo_proxy_ensure(ringoComm_t comm, struct ringo_proxy** px, const struct ringo_stage_ops* ops);

/* Enqueues a marker on the stream of ops, after the copies enqueued so far: the proxy (made on
 * first use, into *px) counts the markers the stream passes. Each phase of the next work ends its
 * input copies with one. */
ringoResult_t ringo_proxy_mark(ringoComm_t comm, struct ringo_proxy** px, const struct ringo_stage_ops* ops);

/* Hands the proxy fn(arg): a work of nphases phases, whose markers are the last nphases enqueued
 * by ringo_proxy_mark, in order — and enqueues the stream's wait for phase 0, which ends once fn
 * calls ringo_proxy_phase_done(task, 0) or returns. Returns at once. *handed (may be NULL) says
 * whether the proxy took arg: after an error it may have (its phase-0 wait could not be enqueued:
 * the work is cancelled, fn gets run = 0) or not (the caller still owns arg). */
ringoResult_t ringo_proxy_submit(ringoComm_t comm, struct ringo_proxy** px, ringo_proxy_fn fn, void* arg, int nphases,
                                 const struct ringo_stage_ops* ops, int* handed);

/* Enqueues the stream's wait for phase p (1 <= p < nphases) of the work submitted last. If it
 * cannot be enqueued, the work runs on (it only touches the staging, which lives until the proxy
 * is freed); the caller puts the communicator in error so that nothing more is enqueued. */
ringoResult_t ringo_proxy_wait_phase(struct ringo_proxy* px, int p, const struct ringo_stage_ops* ops);

/* From fn, on the proxy thread: waits until the stream passed phase p's marker (1), or gives up
 * (0) for the same reasons as the first marker's (ringo_proxy_fn). */
int ringo_proxy_phase_await(struct ringo_proxy_task* task, int p);
/* From fn, without waiting: how many of its phases' markers the stream has passed (1 .. nphases
 * once fn runs), or -1 where ringo_proxy_phase_await would give up. */
int ringo_proxy_phases_staged(struct ringo_proxy_task* task);
/* From fn: phase p's output is in place; the stream's wait for it ends. */
void ringo_proxy_phase_done(struct ringo_proxy_task* task, int p);

/* Work submitted and not finished yet (host work on the communicator must wait for it). */
int ringo_proxy_pending(const struct ringo_proxy* px);
/* Work running now: past its first marker, in the host engine (tests watch it). */
int ringo_proxy_running(const struct ringo_proxy* px);

/* The stream failed (a sticky CUDA error): it passes no more markers, so work past its first
 * marker that waits for a later phase's gives up (the collective fails, the communicator goes in
 * error) and the work still queued is skipped; pending then drops to 0 and host work, or
 * teardown, may use the links. Without this a work stuck between phases would never end. */
void ringo_proxy_stream_failed(struct ringo_proxy* px);

/* Stops the thread and frees px (NULL is fine): work the stream has not reached is skipped (a
 * failed stream never will), work running is waited for. Call it before the links close. */
void ringo_proxy_free(struct ringo_proxy* px, const struct ringo_stage_ops* ops);

#ifdef __cplusplus
}
#endif

#endif /* RINGO_PROXY_H_ */
