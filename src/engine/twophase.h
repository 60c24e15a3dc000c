/* twophase.h — the two-phase all-reduce through the board for ranks of one host (twophase.c):
 * the ring's two halves in one hand-off each, the same bits as the ring. Tested by
 * test/test_twophase.cc. */
#ifndef RINGO_ENGINE_TWOPHASE_H_
#define RINGO_ENGINE_TWOPHASE_H_

#include <stdint.h>

#include "comm/op.h"

/* 1 when op is an all-reduce whose input fits the board's two-phase limit, in at most
 * RINGO_TWOPHASE_MAX_ROUNDS rounds, which every rank decides alike from the fingerprint. */
int ringo_twophase_fits(const struct ringo_op* op);
/* The rounds op runs in, each a board op: one where its input fits the board's two-phase slot. */
uint64_t ringo_twophase_rounds(const struct ringo_op* op);
/* Runs op as board ops b .. b + ringo_twophase_rounds(op) - 1. */
ringoResult_t ringo_twophase_run(const struct ringo_op* op, uint64_t b);

#endif /* RINGO_ENGINE_TWOPHASE_H_ */
