/* bench_launch.h — how ringo-bench's ranks come to be: forked local ranks sharing a unique id
 * (standalone), or one rank per process under mpirun (ringoCommInitMPI); and the bench's own
 * coordination. Header-only, needs bench.h and bench_mpi.h. Run: ringo-bench -N 4, or mpirun -np 4 ringo-bench. */
#ifndef RINGO_BENCH_LAUNCH_H_
#define RINGO_BENCH_LAUNCH_H_

#include <math.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "bench.h"
#include "bench_barrier.h"
#include "bench_bind.h"
#include "bench_bound.h"
#include "bench_mpi.h"
#include "launch_id.h"

/* ---------------------------------------------------------------- fork launcher */

static void kill_all(const pid_t* pids, int n) {
  for (int r = 0; r < n; r++)
    if (pids[r] > 0) kill(pids[r], SIGKILL);
  for (int r = 0; r < n; r++)
    if (pids[r] > 0) waitpid(pids[r], NULL, 0);
}

/* Reaps the children that have ended. A rank that exits 0 or EXIT_WRONG (it reported its results)
 * gives the others EXIT_GRACE_S to follow; any other end returns 1 so the rest are stopped. */
static int reap(pid_t* pids, int n, int* alive, double* deadline, int* code) {
  int st;
  pid_t p;
  while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
    int r = 0;
    while (r < n && pids[r] != p) r++;
    if (r == n) continue;
    pids[r] = 0;
    (*alive)--;
    int ex = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (ex == 0 || ex == EXIT_WRONG) {
      *code = ex > *code ? ex : *code;
      if (*deadline > now_s() + EXIT_GRACE_S) *deadline = now_s() + EXIT_GRACE_S;
      continue;
    }
    if (ex < 0) fprintf(stderr, "ringo-bench: rank %d killed by signal %d (%s)", r, WTERMSIG(st), strsignal(WTERMSIG(st)));
    else fprintf(stderr, "ringo-bench: rank %d exited with status %d", r, ex);
    fprintf(stderr, "%s\n", *alive ? "; stopping the other ranks" : "");
    *code = ex < 0 ? EXIT_LAUNCH : ex;
    return 1;
  }
  return 0;
}

/* Waits for every rank, bounded by timeout_s; kills what is left on any failure. */
static int launch_wait(pid_t* pids, int n, double timeout_s) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  double deadline = now_s() + timeout_s;
  int alive = n, code = 0;
  while (alive > 0 && !reap(pids, n, &alive, &deadline, &code)) {
    double left = deadline - now_s();
    if (alive == 0) break;
    if (!(left > 0)) { /* NaN too: it would make a garbage timespec, and sigtimedwait would spin */
      fprintf(stderr, "ringo-bench: timed out: ranks");
      for (int r = 0; r < n; r++) if (pids[r] > 0) fprintf(stderr, " %d", r);
      fprintf(stderr, " still running (--timeout %g s, or %.0f s after a rank finished); killing them\n",
              timeout_s, EXIT_GRACE_S);
      code = EXIT_LAUNCH;
      break;
    }
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    sigtimedwait(&chld, NULL, &ts);
  }
  kill_all(pids, n);
  return code;
}

/* Parent, once every rank is forked: starts the rendezvous root (ringoGetUniqueId's thread) and
 * hands each rank the id. Returns 0, or EXIT_RINGO / EXIT_LAUNCH having stopped the ranks. */
static int share_id(pid_t* pids, int n, int wfd) {
  ringoUniqueId id;
  const ringoResult_t res = ringoGetUniqueId(&id);
  int code = 0;
  if (res != ringoSuccess) {
    fprintf(stderr, "ringo-bench: ringoGetUniqueId failed: %s: %s\n", ringoGetErrorString(res),
            ringoGetLastError(NULL));
    code = EXIT_RINGO;
  } else if (launch_id_send(wfd, &id, n) != 0) {
    fprintf(stderr, "ringo-bench: cannot hand the ranks their unique id: %s\n", strerror(errno));
    code = EXIT_LAUNCH;
  }
  close(wfd); /* a rank still waiting for the id now reads end of file and exits */
  if (code) kill_all(pids, n);
  return code;
}

/* Returns 1 in a child (L filled: go run the rank) and 0 in the parent once every rank has ended,
 * with *code the run's exit code. The ranks are forked first, while this process has one thread
 * (launch_id.h says why); then the parent starts the rendezvous root, keeps it alive and sends
 * the ranks its id. */
static int launch_fork(struct opts* o, struct launch* L, int* code) {
  sigset_t chld, old;
  int fds[2];
  pid_t* pids = calloc((size_t)o->nranks, sizeof *pids);
  if (!pids || pipe(fds) != 0) die(EXIT_LAUNCH);
  *L = (struct launch){.kind = "fork", .nranks = o->nranks};
  if (o->barrier && !(L->barrier = bench_barrier_map())) {
    fprintf(stderr, "ringo-bench: cannot map the ranks' shared barrier page: %s\n", strerror(errno));
    die(EXIT_LAUNCH);
  }
  CPU_ZERO(&L->allowed);
  if (o->bind == BENCH_BIND_CORE && sched_getaffinity(0, sizeof L->allowed, &L->allowed) != 0) {
    fprintf(stderr, "ringo-bench: the forked ranks run unbound: this process's CPUs are not known (%s)\n",
            strerror(errno));
    o->bind = BENCH_BIND_NONE;
  }
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old); /* so sigtimedwait sees every SIGCHLD */
  fflush(NULL);                        /* or children would print the parent's buffered output again */
  pid_t parent = getpid();
  for (int r = 0; r < o->nranks; r++) {
    pid_t p = fork();
    if (p == 0) {
      sigprocmask(SIG_SETMASK, &old, NULL);
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed parent takes its ranks along */
      close(fds[1]);
      if (getppid() != parent || launch_id_receive(fds[0], &L->id) != 0) _exit(EXIT_LAUNCH);
      close(fds[0]);
      free(pids);
      L->rank = r;
      if (o->bind == BENCH_BIND_CORE) bench_bind_self(&L->allowed, r);
      return 1;
    }
    if (p < 0) {
      fprintf(stderr, "ringo-bench: fork failed: %s\n", strerror(errno));
      kill_all(pids, r);
      *code = EXIT_LAUNCH;
      free(pids);
      close(fds[0]);
      close(fds[1]);
      return 0;
    }
    pids[r] = p;
  }
  close(fds[0]);
  *code = share_id(pids, o->nranks, fds[1]);
  if (*code == 0) *code = launch_wait(pids, o->nranks, o->timeout_s);
  free(pids);
  return 0;
}

/* ---------------------------------------------------------------- MPI launcher */

/* mpirun (Open MPI), PMI/PMIx launchers (MPICH's hydra, Slurm) and MVAPICH each leave one of these. */
static int under_mpirun(void) {
  static const char* const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                                     "MV2_COMM_WORLD_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i])) return 1;
  return 0;
}

#ifdef RINGO_HAVE_MPI
/* --timeout under mpirun: this rank ends, and mpirun then ends the others. */
static void on_alarm(int sig) {
  static const char msg[] = "ringo-bench: timed out (--timeout); ending the job\n";
  (void)sig;
  if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(EXIT_LAUNCH);
  _exit(EXIT_LAUNCH);
}

/* --bound under mpirun: rank 0 measures with every core while the other ranks wait in a sleeping
 * poll (a blocking MPI wait would spin and steal the cores being measured), then all take its
 * numbers. The bound is per host, so it assumes the ranks share one host, as fork ranks do. */
static void share_bound(struct opts* o, int rank) {
  double bw[2] = {0, 0};
  MPI_Request req;
  int done = 0;
  if (rank == 0) {
    measure_bound(o);
    bw[0] = o->bw_copy;
    bw[1] = o->bw_add;
  }
  MB_CHECK(MPI_Ibcast(bw, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req));
  for (;;) {
    MB_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) break;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  o->bw_copy = bw[0];
  o->bw_add = bw[1];
}

/* One rank per process of MPI_COMM_WORLD; -N is ignored (mpirun's -np decides). Ranks are made
 * with ringoCommInitMPI, which needs MPI_THREAD_SERIALIZED. */
static void launch_mpi(struct opts* o, struct launch* L, int* argc, char*** argv) {
  int provided = MPI_THREAD_SINGLE, size = 0, rank = 0;
  MB_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  bench_mpi_live = 1;
  MB_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  MB_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  if (provided < MPI_THREAD_SERIALIZED) {
    if (rank == 0) fprintf(stderr, "ringo-bench: this MPI offers thread level %d, ringo needs "
                           "MPI_THREAD_SERIALIZED (%d)\n", provided, MPI_THREAD_SERIALIZED);
    die(EXIT_LAUNCH);
  }
  *L = (struct launch){.kind = "mpi", .nranks = size, .rank = rank, .mpi = 1};
  signal(SIGALRM, on_alarm);
  alarm((unsigned)ceil(o->timeout_s));
  if (rank == 0 && o->nranks_explicit && o->nranks != size)
    fprintf(stderr, "ringo-bench: -N %d ignored under mpirun: %d ranks, one per process\n", o->nranks, size);
  o->nranks = size;
  if (o->root >= size) {
    if (rank == 0) fprintf(stderr, "ringo-bench: bad root %d (must be below the %d ranks)\n", o->root, size);
    bench_mpi_live = 0;
    MPI_Finalize();
    exit(EXIT_USAGE);
  }
  if (o->bound) share_bound(o, rank);
}

static int launch_mpi_end(int code) {
  alarm(0);
  bench_mpi_live = 0;
  MPI_Finalize();
  return code;
}
#endif /* RINGO_HAVE_MPI */

/* ---------------------------------------------------------------- after launch */

static void comm_init(struct bench* b) {
#ifdef RINGO_HAVE_MPI
  if (b->L->mpi) {
    RB_CHECK(b, ringoCommInitMPI(&b->comm, MPI_COMM_WORLD));
    return;
  }
#endif
  RB_CHECK(b, ringoCommInitRank(&b->comm, b->L->nranks, b->L->id, b->L->rank));
}

/* The bench's own agreement between ranks (iteration counts, slowest times, totals): over MPI when
 * there is one, so none of it passes through the library being measured; else over ringo. */
static void coord_allreduce(const struct bench* b, void* buf, size_t count, ringoDataType_t t, ringoRedOp_t op) {
#ifdef RINGO_HAVE_MPI
  if (b->L->mpi) {
    MB_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(t), mpi_op(op), MPI_COMM_WORLD));
    return;
  }
#endif
  RB_CHECK(b, ringoAllReduce(buf, buf, count, t, op, b->comm, NULL));
}

#endif /* RINGO_BENCH_LAUNCH_H_ */
