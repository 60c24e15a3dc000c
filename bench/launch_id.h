/* launch_id.h — hands a ringo unique id from a launcher to the ranks it forked, through one pipe, so
 * the ranks are forked before ringoGetUniqueId starts the rendezvous root's thread. Header-only,
 * needs include/ringo.h. Tested through ringo-bench by test/test_bench.cc (also under ASan).
 *
 * Why: a child forked while another thread of its parent holds a lock inherits the lock held and
 * no thread to free it. glibc's malloc guards itself across fork; gcc 12's AddressSanitizer
 * allocator does not, and a rank forked beside the root's thread once hung on it for good. */
#ifndef RINGO_BENCH_LAUNCH_ID_H_
#define RINGO_BENCH_LAUNCH_ID_H_

#include <errno.h>
#include <unistd.h>

#include "ringo.h"

/* Parent, after forking every rank: one copy of the id per rank. Each write is one id, below
 * PIPE_BUF, so it lands whole, and each rank's read takes exactly one. Returns 0 or -1 (errno). */
static int launch_id_send(int wfd, const ringoUniqueId* id, int copies) {
  for (int i = 0; i < copies; i++) {
    ssize_t n;
    do n = write(wfd, id, sizeof *id);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof *id) return -1;
  }
  return 0;
}

/* Rank, right after fork (having closed its copy of the write end): blocks for the id. Returns -1
 * at end of file, which is how the parent says it has no id to give (ringoGetUniqueId failed). */
static int launch_id_receive(int rfd, ringoUniqueId* id) {
  size_t got = 0;
  while (got < sizeof *id) {
    const ssize_t n = read(rfd, (char*)id + got, sizeof *id - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  return 0;
}

#endif /* RINGO_BENCH_LAUNCH_ID_H_ */
