/* example.c — README.md's "Using it" example made whole: 2 forked ranks (the id shared through a
 * pipe) all-reduce 4 MiB of float32 with avg, in place. test/install/run.sh builds it against an
 * installed tree (pkg-config, CMake) and runs it; exit status 0 when every result checks out. */
#include <ringo.h>                      /* cc app.c $(pkg-config --cflags --libs ringo) */

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

enum { nranks = 2, count = 1 << 20 };
static int pipes[nranks][2];

/* The README leaves sharing the id to the caller: here, rank 0 writes it into every other rank's
 * pipe (a forked child reads its own). */
static void share_with_all_ranks(ringoUniqueId *id, size_t size, int rank) {
  if (rank == 0) {
    for (int p = 1; p < nranks; p++)
      if (write(pipes[p][1], id, size) != (ssize_t)size) perror("write");
  } else if (read(pipes[rank][0], id, size) != (ssize_t)size) {
    perror("read");
  }
}

/* The README's lines, in order; only the checks of the result are added. */
static int run_rank(int rank) {
  /* Rank 0 makes the id and shares it (a pipe, a file, MPI_Bcast ...) with the other ranks. */
  ringoUniqueId id;
  if (rank == 0) ringoGetUniqueId(&id);
  share_with_all_ranks(&id, sizeof id, rank);
  ringoComm_t comm;
  ringoResult_t r = ringoCommInitRank(&comm, nranks, id, rank);
  if (r != ringoSuccess) { fprintf(stderr, "%s\n", ringoGetLastError(NULL)); return 1; }
  static float grad[1 << 20];            /* ... filled by this rank ... (static: off the stack) */
  for (int i = 0; i < count; i++) grad[i] = (float)(rank + 1) * (float)(i % 7);
  r = ringoAllReduce(grad, grad, 1 << 20, ringoFloat32, ringoAvg, comm, NULL);  /* in place */
  if (r != ringoSuccess) fprintf(stderr, "%s: %s\n", ringoGetErrorString(r), ringoGetLastError(comm));
  ringoCommStats st; ringoCommGetStats(comm, &st);  /* st.bytesSent == 2(N-1)/N * 4 MiB */
  ringoCommDestroy(comm);

  int wrong = 0;
  for (int i = 0; i < count; i++) wrong += grad[i] != 1.5f * (float)(i % 7);  /* (1 + 2) / 2 */
  const unsigned long long law = 2ull * (nranks - 1) * count * sizeof(float) / nranks;
  printf("rank %d: %s, %d wrong, %llu bytes sent (ring law %llu)\n", rank, ringoGetErrorString(r),
         wrong, (unsigned long long)st.bytesSent, law);
  return r != ringoSuccess || wrong != 0 || st.bytesSent != law;
}

int main(void) {
  for (int p = 0; p < nranks; p++)
    if (pipe(pipes[p]) != 0) { perror("pipe"); return 1; }
  fflush(stdout);
  for (int rank = 1; rank < nranks; rank++)
    if (fork() == 0) _exit(run_rank(rank));
  int failed = run_rank(0), status = 0;
  while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  printf("example: %s\n", failed ? "FAILED" : "ok");
  return failed;
}
