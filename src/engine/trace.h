/* trace.h — RINGO_TRACE=file.json: every slice of every ring step a rank runs (and every one-shot
 * collective), kept in memory and appended to one Chrome-trace JSON file (one track per rank) when
 * the communicator is destroyed.
 * Implemented in src/trace.c; tested by test/test_trace.cc; drawn by ringo-trace --timeline. */
#ifndef RINGO_TRACE_H_
#define RINGO_TRACE_H_

#include <stddef.h>
#include <stdint.h>

#include "ringo.h"
#include "sched/schedule.h"

struct ringo_trace;

/* Which ring a step went around: the one ring, or a walk of the two-level ring (collectives.c). */
enum ringo_walk_level { RINGO_WALK_FLAT, RINGO_WALK_HOST_RS, RINGO_WALK_ACROSS, RINGO_WALK_HOST_AG };

/* One event: rank ran step `step` (of the schedule of `coll`, or of a walk of the two-level ring) on slice `round` of `chunk`,
 * receiving from recv_peer and/or sending to send_peer (-1: none), bytes of payload, from t0 to t1
 * (ringo_now() seconds). seq numbers the communicator's collectives from 0. A one-shot or two-phase
 * collective (oneshot.c, twophase.c) is one event with board set to its name: bytes it read from its
 * peers, no step, chunk or peer. */
struct ringo_trace_event {
  enum ringo_coll coll;
  enum ringo_prim prim;
  uint64_t seq;
  int step, chunk, recv_peer, send_peer;
  int level;     /* enum ringo_walk_level */
  int ring_size; /* ranks of the ring the step went around */
  int part;      /* a two-level reduce-scatter's or all-gather's host walks: the host the walk serves */
  size_t round, bytes;
  double t0, t1;
  const char* board; /* a collective of one hand-off or two ("one-shot", "two-phase"), else NULL */
};

/* Starts recording for this rank; path is where ringo_trace_close appends the events. */
ringoResult_t ringo_trace_open(struct ringo_trace** out, const char* path, int rank);
/* Keeps one event in memory (no I/O on the hot path). */
void ringo_trace_record(struct ringo_trace* t, const struct ringo_trace_event* ev);
/* Appends every kept event to the file (locked, so ranks of several processes share it) and frees t. */
ringoResult_t ringo_trace_close(struct ringo_trace* t);

#endif /* RINGO_TRACE_H_ */
