/* check.h — validation of a public call's op before it is queued or run (check.c).
 * Tested by test/test_api.cc and test/test_p2p.cc. */
#ifndef RINGO_API_CHECK_H_
#define RINGO_API_CHECK_H_

#include "comm/op.h"

/* Checks op (its stream already set) and decides op->device. grouped: the call is inside a
 * ringoGroupStart/End. Returns the error with its message, without recording it in the communicator. */
ringoResult_t ringo_check_op(struct ringo_op* op, int grouped);

#endif /* RINGO_API_CHECK_H_ */
