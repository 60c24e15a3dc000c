/* traffic_ringo.c — N forked ranks run 1 + ITERS out-of-place float32 sum all-reduces of BYTES through
 * ringo and check the result, for traffic.sh to run under cachegrind. Run: bench/peers/traffic.sh. */
#include <ringo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int rank_main(ringoUniqueId id, int n, int rank, size_t bytes, int iters) {
  ringoComm_t comm = NULL;
  const size_t count = bytes / sizeof(float);
  float *s = malloc(bytes), *r = malloc(bytes);
  if (!s || !r) return 1;
  for (size_t i = 0; i < count; i++) s[i] = (float)(i % 1000 + (size_t)rank);
  memset(r, 0, bytes);
  ringoResult_t res = ringoCommInitRank(&comm, n, id, rank);
  for (int k = 0; res == ringoSuccess && k < 1 + iters; k++) /* one warm-up call, then ITERS */
    res = ringoAllReduce(s, r, count, ringoFloat32, ringoSum, comm, NULL);
  if (res != ringoSuccess) {
    fprintf(stderr, "rank %d: %s\n", rank, ringoGetLastError(comm));
    return 1;
  }
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) wrong += r[i] != (float)((size_t)n * (i % 1000) + (size_t)(n * (n - 1) / 2));
  ringoCommDestroy(comm);
  if (wrong) fprintf(stderr, "rank %d: %zu wrong elements\n", rank, wrong);
  return wrong != 0;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: traffic_ringo N BYTES ITERS\n");
    return 2;
  }
  const int n = atoi(argv[1]), iters = atoi(argv[3]);
  const size_t bytes = strtoull(argv[2], NULL, 0);
  ringoUniqueId id;
  if (n < 1 || iters < 0 || ringoGetUniqueId(&id) != ringoSuccess) return 2;
  for (int r = 0; r < n; r++)
    if (fork() == 0) _exit(rank_main(id, n, r, bytes, iters));
  int rc = 0, st;
  while (wait(&st) > 0) rc |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  return rc;
}
