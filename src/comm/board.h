/* board.h — the one-shot board: a shared-memory segment of a communicator whose ranks all live on
 * one host, where each rank posts its input and fingerprint for small collectives (oneshot.c).
 * Knows no reductions. Tested by test/test_oneshot.cc. */
#ifndef RINGO_BOARD_H_
#define RINGO_BOARD_H_

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "comm/op.h"

/* Every host collective of a communicator with a board is a board op, numbered b = 0, 1, ...
 * in call order on every rank. Op b uses side b % 2 of the board: each rank's fingerprint slot and
 * data slot of that side. A rank that claims side b % 2 for op b waits until every rank has
 * finished op b - 2, the side's last user, so nothing is overwritten while it is read. A ring
 * collective claims and posts too (its fingerprint only): a rank in a one-shot op then finds a
 * peer that runs another collective on the ring by its fingerprint, instead of waiting for it. */

/* Makes the board when every rank is on this host and every rank allows the one-shot or the
 * two-phase path (info[r].oneshot_bytes or twophase_bytes > 0; the smallest over the ranks is each
 * one's limit; the capacity the larger of the one-shot's and the two-phase round's, which
 * RINGO_TWOPHASE_ROUND_BYTES caps), else leaves comm->board NULL.
 * Collective over rv when it makes one; decided from comm->info alone, so all ranks agree. */
ringoResult_t ringo_board_setup(ringoComm_t comm, const struct ringo_rendezvous* rv);
void ringo_board_free(ringoComm_t comm);

/* The largest input per rank a one-shot collective, and a two-phase all-reduce, may post. */
size_t ringo_board_oneshot_limit(const struct ringo_board* board);
size_t ringo_board_twophase_limit(const struct ringo_board* board);
/* The most one round of a two-phase all-reduce posts per rank (its slot): larger inputs run in rounds. */
size_t ringo_board_twophase_round(const struct ringo_board* board);
/* The segment's size: 2·N data slots of the capacity, and the counters. */
size_t ringo_board_bytes(const struct ringo_board* board);
/* The first bytes of each data slot that this rank's ops of RINGO_BOARD_ROTATE_MIN_BYTES or more
 * rotate through (0: every op at the slot's start); board.c says why. */
size_t ringo_board_rotate_span(const struct ringo_board* board);
/* Where rank r's data of op b begins in its data slot (valid once rank r has posted op b, until it
 * claims op b + 2). */
size_t ringo_board_data_offset(const struct ringo_board* board, int r, uint64_t b);
/* Pages of the rotation span of every slot not in memory (mincore): 0 after setup made them. */
size_t ringo_board_span_pages_absent(const struct ringo_board* board);

/* Op b on this rank: waits until side b % 2 is free on every rank, and gives where in this rank's
 * data slot of that side it writes the `bytes` it posts (at most the capacity; slot may be NULL, and
 * bytes 0, for an op that posts no data); peers' ringo_board_await and _await_reduced give them the
 * same place. op is named in an error. Each wait of the board has its own RINGO_TIMEOUT, as a ring
 * link's has. */
ringoResult_t ringo_board_claim(ringoComm_t comm, uint64_t b, const struct ringo_op* op, size_t bytes, void** slot);
/* Publishes this rank's fingerprint for op b (and the data slot written before). */
void ringo_board_post(ringoComm_t comm, uint64_t b, const struct ringo_fingerprint* fp);
/* Waits until rank r has posted op b (op is this rank's, named in an error); gives rank r's
 * fingerprint and data slot. */
ringoResult_t ringo_board_await(ringoComm_t comm, uint64_t b, int r, const struct ringo_op* op,
                                struct ringo_fingerprint* fp, const void** slot);
/* While this rank runs board op comm->board_op_b on another algorithm (comm->board_op set): the
 * mismatch with any rank that posted another fingerprint for it, else ringoSuccess. Never waits:
 * the ring links' waits ask it, so a rank on another root or collective is named at once even
 * when no slice of the two ever meets. */
ringoResult_t ringo_board_check_peers(ringoComm_t comm);
/* Two-phase op b: this rank has written its reduced chunk into its data slot (after which it reads
 * no other rank's input of op b). */
void ringo_board_mark_reduced(ringoComm_t comm, uint64_t b);
/* Waits until rank r has marked op b reduced; gives rank r's data slot. */
ringoResult_t ringo_board_await_reduced(ringoComm_t comm, uint64_t b, int r, const struct ringo_op* op,
                                        const void** slot);
/* This rank has finished op b: it reads no slot of it any more. */
void ringo_board_done(ringoComm_t comm, uint64_t b);
/* Stops every rank waiting on the board with this error (ringo_comm_fail). Never blocks. */
void ringo_board_poison(ringoComm_t comm, ringoResult_t code, const char* msg);
/* The error a rank of this host poisoned the board with (a failed collective, an abort), recorded
 * as this thread's last error; ringoSuccess if none. */
ringoResult_t ringo_board_poisoned(const ringoComm_t comm);

#endif /* RINGO_BOARD_H_ */
