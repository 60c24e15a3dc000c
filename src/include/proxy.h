/* proxy.h — a communicator's proxy thread: host work a device stream waits for (staged collectives,
 * device sends and receives), run in stream order on a thread of ringo's own. Needs staged.h's
 * stream operations. Tested by test/test_staged.cc and test/test_p2p_device.cc (fake streams). */
#ifndef RINGO_PROXY_H_
#define RINGO_PROXY_H_

#include "staged.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Work for the proxy: run(arg, 1) once the stream reached it, or run(arg, 0) when the communicator
 * was aborted first (free arg, touch nothing). Either way the proxy then lets the stream go on. */
typedef void (*ringo_proxy_fn)(void* arg, int run);

/* Enqueues on the stream of ops: a marker, then a wait until the proxy (made on first use, into
 * *px) has called fn(arg) — which it does once the stream passed the marker, so fn sees every
 * copy enqueued before. Returns at once. *handed (may be NULL) says whether the proxy took arg:
 * after an error it may have (the stream then perhaps does not wait for it) or not (the caller
 * still owns arg). */
ringoResult_t ringo_proxy_submit(ringoComm_t comm, struct ringo_proxy** px, ringo_proxy_fn fn, void* arg,
                                 const struct ringo_stage_ops* ops, int* handed);

/* Work submitted and not finished yet (host work on the communicator must wait for it). */
int ringo_proxy_pending(const struct ringo_proxy* px);
/* Work running now: past its marker, in the host engine (after a stream error, the rest of the
 * pending work will never run, but this must still finish before host work may start). */
int ringo_proxy_running(const struct ringo_proxy* px);

/* Stops the thread and frees px (NULL is fine): work the stream has not reached is skipped (a
 * failed stream never will), work running is waited for. Call it before the links close. */
void ringo_proxy_free(struct ringo_proxy* px, const struct ringo_stage_ops* ops);

#ifdef __cplusplus
}
#endif

#endif /* RINGO_PROXY_H_ */
