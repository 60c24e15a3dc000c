/* ringo_chaos.c — the chaos test: forks N = 2..8 ranks that init, run collectives and point-to-point
 * and destroy, SIGKILLs or SIGSTOPs one of them at a random instant, and checks every survivor's
 * result, its time to error, and /dev/shm. Run: build/bin/ringo-chaos [--seed S] [--runs R]
 * (make check runs it; a failed run prints its seed and index, and --seed S --only I replays it).
 *
 * Each run: the parent (or rank 0, when the run says so) starts the rendezvous root, the ranks run
 * one fixed workload, and the parent strikes the victim at a uniform instant within the workload's
 * measured length. A survivor passes when it finished with success, or failed with ringoRemoteError
 * (a kill) or ringoTimeout/ringoRemoteError (a stop) naming the victim within the bound. The parent's
 * watchdog kills everything past its deadline, so a hang is a failure, never a hung suite. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ringo.h"

#define MAX_RANKS 8
#define NO_ID (-1)          /* a rank's result when rank 0 was struck before it made the id */
#define MSG_BYTES 320
#define KILL_BOUND_S 1.0    /* a SIGKILLed peer is noticed within this (init, collective, destroy) */
#define STOP_SLACK_S 2.0    /* a stopped peer, or one that never joined: RINGO_TIMEOUT plus this */

enum phase { PH_START, PH_INIT, PH_WORK, PH_DESTROY, PH_DONE, PH_COUNT };
static const char* const phase_name[PH_COUNT] = {"not joined", "init", "collectives", "destroy", "after"};

struct rank_slot {
  atomic_int phase;
  int result;        /* the first failing call's code, ringoSuccess if none */
  double error_at;   /* CLOCK_MONOTONIC when that call returned */
  char msg[MSG_BYTES];
  double entered_at;          /* when it entered the mismatched step (a mismatch run) */
};

struct shared {
  atomic_int id_ready;
  double aborted_at;          /* when the victim's thread called ringoCommAbort (an abort run) */
  ringoUniqueId id;
  struct rank_slot slot[MAX_RANKS];
};

/* What is done to the victim: a signal from the parent, or a call of its own. */
enum kind { K_NONE, K_KILL, K_STOP, K_MISMATCH, K_ABORT, K_COUNT };
static const char* const kind_name[K_COUNT] = {"none", "SIGKILL", "SIGSTOP", "mismatch", "abort"};

struct run {
  int n, victim, sig, root_in_rank0;
  double strike_s;   /* after the fork (a signal) or after the victim's init (an abort) */
  int kind, step, variant; /* a mismatch: the victim's call at workload step `step` differs */
};

#define STEPS 10     /* 7 all-reduces of 256 .. 1M floats, a broadcast, a ring of sends, an all-reduce */
#define MISMATCH_BOUND_S 1.0 /* every rank of a mismatch, and every peer of an abort, errs within this */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void note_error(struct rank_slot* s, ringoResult_t res, ringoComm_t comm) {
  if (s->result != ringoSuccess) return;
  s->error_at = now_s();
  s->result = res;
  snprintf(s->msg, sizeof s->msg, "%s", ringoGetLastError(comm));
}

/* Step `step` of the workload; `odd`: the mismatched victim's different call at that step. */
static ringoResult_t workload_step(ringoComm_t comm, const struct run* run, int rank, int step, int odd, float* a, float* b) {
  const int n = run->n;
  if (step < 7) {
    const size_t count = (size_t)256 << (2 * step);
    if (!odd) return ringoAllReduce(a, b, count, ringoFloat32, ringoSum, comm, NULL);
    if (run->variant == 0) return ringoAllReduce(a, b, count / 2, ringoFloat32, ringoSum, comm, NULL);
    if (run->variant == 1) return ringoReduce(a, b, count, ringoFloat32, ringoSum, rank, comm, NULL);
    return ringoAllReduce(a, b, count, ringoInt32, ringoSum, comm, NULL);
  }
  if (step == 7) {
    const size_t count = 1u << 18;
    if (!odd) return ringoBroadcast(a, b, count, ringoFloat32, n - 1, comm, NULL);
    if (run->variant == 0) return ringoBroadcast(a, b, count, ringoFloat32, n - 2, comm, NULL); /* another root */
    if (run->variant == 2) return ringoBroadcast(a, b, count, ringoFloat32, (rank + 1) % n, comm, NULL);
    return ringoReduce(a, b, count, ringoFloat32, ringoSum, n - 1, comm, NULL);
  }
  if (step == 8) {
    ringoGroupStart();
    ringoSend(a, 65536, ringoFloat32, (rank + 1) % n, comm, NULL);
    ringoRecv(b, 65536, ringoFloat32, (rank + n - 1) % n, comm, NULL);
    return ringoGroupEnd();
  }
  return ringoAllReduce(a, b, 1024, ringoFloat32, ringoSum, comm, NULL); /* "the next call" */
}

struct abort_arg { ringoComm_t comm; double delay_s; struct shared* sh; };

static void* abort_later(void* p) {
  struct abort_arg* arg = p;
  usleep((useconds_t)(arg->delay_s * 1e6));
  arg->sh->aborted_at = now_s();
  ringoCommAbort(arg->comm);
  return NULL;
}

/* An abort run's victim: its main thread blocks in a receive nobody sends, the peers in collectives
 * that wait for it; another thread aborts the communicator, and the process stays alive a while. */
static int abort_victim(struct shared* sh, const struct run* run, ringoComm_t comm, struct rank_slot* s, float* a) {
  struct abort_arg arg = {comm, run->strike_s, sh};
  pthread_t t;
  if (pthread_create(&t, NULL, abort_later, &arg) != 0) return 2;
  const ringoResult_t res = ringoRecv(a, 1024, ringoFloat32, (run->victim + 1) % run->n, comm, NULL);
  if (res != ringoSuccess) { /* the receive must end, with an error (its comm is gone: no message) */
    s->result = res;
    s->error_at = now_s();
    snprintf(s->msg, sizeof s->msg, "%s", ringoGetErrorString(res));
  }
  pthread_join(t, NULL);
  atomic_store(&s->phase, PH_DONE);
  usleep(1500 * 1000);
  return 0;
}

/* The workload of one rank: init, all-reduces of growing size, a broadcast, a ring of sends, destroy. */
static int rank_main(struct shared* sh, const struct run* run, int rank) {
  struct rank_slot* s = &sh->slot[rank];
  atomic_store(&s->phase, PH_INIT);
  if (run->root_in_rank0 && rank == 0) {
    if (ringoGetUniqueId(&sh->id) != ringoSuccess) return 2;
    atomic_store(&sh->id_ready, 1);
  }
  /* The id comes out of band; a rank 0 struck before it made one never sends it. */
  for (const double give_up = now_s() + 2.0; !atomic_load(&sh->id_ready); usleep(100)) {
    if (now_s() > give_up) {
      s->result = NO_ID;
      atomic_store(&s->phase, PH_DONE);
      return 0;
    }
  }
  ringoComm_t comm = NULL;
  ringoResult_t res = ringoCommInitRank(&comm, run->n, sh->id, rank);
  if (res != ringoSuccess) {
    note_error(s, res, NULL);
    atomic_store(&s->phase, PH_DONE);
    return 0;
  }
  atomic_store(&s->phase, PH_WORK);
  const size_t max_count = 1u << 20;
  float* a = malloc(max_count * sizeof *a);
  float* b = malloc(max_count * sizeof *b);
  if (!a || !b) return 2;
  for (size_t i = 0; i < max_count; i++) a[i] = (float)(rank + 1);
  if (run->kind == K_ABORT && rank == run->victim) return abort_victim(sh, run, comm, s, a);
  /* Variant 2 of the broadcast: every rank names another root, so no two ranks' slices ever meet. */
  const int odd = run->kind == K_MISMATCH && (rank == run->victim || (run->step == 7 && run->variant == 2));
  for (int step = 0; step < STEPS && res == ringoSuccess; step++) {
    if (run->kind == K_MISMATCH && step == run->step) s->entered_at = now_s();
    res = workload_step(comm, run, rank, step, odd && step == run->step, a, b);
  }
  if (res != ringoSuccess) note_error(s, res, comm);
  atomic_store(&s->phase, PH_DESTROY);
  ringoCommDestroy(comm);
  atomic_store(&s->phase, PH_DONE);
  free(a);
  free(b);
  return 0;
}

/* Names in /dev/shm that ringo made for one of pids ("ringo-<pid>-..." after any prefix of digits). */
static int leftovers(const pid_t* pids, int n, char* first, size_t cap) {
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  int found = 0;
  struct dirent* e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "ringo-", 6) != 0) continue;
    for (int r = 0; r < n; r++) {
      char mark[32];
      snprintf(mark, sizeof mark, "-%d-", (int)pids[r]);
      char padded[300];
      snprintf(padded, sizeof padded, "-%s", e->d_name + 6);
      if (strstr(padded, mark)) {
        if (!found++) snprintf(first, cap, "/dev/shm/%s", e->d_name);
        break;
      }
    }
  }
  closedir(d);
  return found;
}

/* Every rank of every run, for the last check: nothing of theirs is left once a later ringo
 * process (the closing run's init) has removed what the SIGKILLed stopped ranks left. */
#define MAX_PIDS 4096
static pid_t all_pids[MAX_PIDS];
static int nall_pids;
static int verbose;

struct outcome {
  int failed;
  int victim_phase;
  double worst_s;    /* the slowest survivor's time from the strike to its error */
  int left_at_exit;  /* ringo names of the run's ranks in /dev/shm once they had all exited */
};

/* Every rank's result against what the run's kind promises; 1 on a failure (printed). */
static int check_ranks(const struct shared* sh, const struct run* run, const int* status, double strike_at,
                       double timeout_s, const char* label, double* worst, int* unjoined) {
  char victim_name[32];
  snprintf(victim_name, sizeof victim_name, "rank %d", run->victim);
  const int signal_run = run->kind == K_KILL || run->kind == K_STOP;
  /* The instant the clock starts: the strike; the abort call; the last rank's entry into the odd step. */
  double t_ref = strike_at;
  if (run->kind == K_ABORT) t_ref = sh->aborted_at;
  if (run->kind == K_MISMATCH)
    for (int r = 0; r < run->n; r++)
      if (sh->slot[r].entered_at > t_ref) t_ref = sh->slot[r].entered_at;
  int failed = 0, errors = 0, named_by = 0;
  for (int r = 0; r < run->n; r++) {
    if (signal_run && r == run->victim) continue;
    const struct rank_slot* s = &sh->slot[r];
    if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0) {
      printf("%s: FAILED: rank %d did not exit cleanly (status 0x%x)\n", label, r, status[r]);
      failed = 1;
      continue;
    }
    const double took = s->result == ringoSuccess || s->result == NO_ID ? 0.0 : s->error_at - t_ref;
    if (verbose)
      printf("%s: rank %d: %s after %.3f s: %s\n", label, r, s->result == NO_ID ? "no id" : ringoGetErrorString(s->result),
             took, s->msg);
    if (s->result == NO_ID) continue;
    if (s->result == ringoSuccess) {
      /* A mismatch fails every rank, at the odd call or the next one; an abort every peer. */
      if (run->kind == K_MISMATCH || run->kind == K_ABORT) {
        printf("%s: FAILED: rank %d finished with success\n", label, r);
        failed = 1;
      }
      continue;
    }
    errors++;
    if (took > *worst) *worst = took;
    int code_ok, named = strstr(s->msg, victim_name) != NULL;
    double bound;
    if (run->kind == K_MISMATCH) {
      code_ok = s->result == ringoInvalidUsage && strstr(s->msg, "mismatch");
      bound = MISMATCH_BOUND_S;
      named = 1; /* both fingerprints are in the message; which rank is odd is for the user to see */
    } else if (run->kind == K_ABORT) {
      code_ok = r == run->victim ? s->result != ringoSuccess : s->result == ringoRemoteError;
      bound = MISMATCH_BOUND_S;
      named |= r == run->victim;
    } else {
      /* A rank killed before its hello reached the root never joined: nothing can tell it from a
       * slow one, so the join waits out RINGO_TIMEOUT and names it missing. */
      const int never_joined = s->result == ringoTimeout && strstr(s->msg, "missing ranks");
      *unjoined |= never_joined;
      code_ok = run->kind != K_NONE &&
                (s->result == ringoRemoteError || (s->result == ringoTimeout && (run->kind == K_STOP || never_joined)));
      bound = run->kind == K_STOP || never_joined ? timeout_s + STOP_SLACK_S : KILL_BOUND_S;
      named |= never_joined || (run->root_in_rank0 && run->victim == 0 && strstr(s->msg, "root"));
    }
    if (named) named_by++;
    /* A kill is named by every survivor. A stop is not a death: every rank waits out RINGO_TIMEOUT at
     * about the same moment, each naming the rank it waits for, so one of them must name the victim. */
    if (!code_ok || took > bound || (!named && run->kind != K_STOP)) {
      printf("%s: FAILED: rank %d got %s after %.3f s (bound %.1f s): %s\n", label, r, ringoGetErrorString(s->result),
             took, bound, s->msg);
      failed = 1;
    }
  }
  if (run->kind == K_STOP && errors > 0 && named_by == 0) {
    printf("%s: FAILED: no survivor's error names the stopped rank %d\n", label, run->victim);
    failed = 1;
  }
  return failed;
}

/* Forks the ranks of one run, strikes (sig 0: no strike), waits with a watchdog, checks. */
static struct outcome one_run(const struct run* run, double timeout_s, const char* label, double* length_s, int later) {
  struct outcome out = {0, PH_START, 0.0, 0};
  struct shared* sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) {
    printf("%s: FAILED: mmap: %s\n", label, strerror(errno));
    out.failed = 1;
    return out;
  }
  memset(sh, 0, sizeof *sh);
  if (!run->root_in_rank0) {
    if (ringoGetUniqueId(&sh->id) != ringoSuccess) {
      printf("%s: FAILED: ringoGetUniqueId: %s\n", label, ringoGetLastError(NULL));
      out.failed = 1;
      munmap(sh, sizeof *sh);
      return out;
    }
    atomic_store(&sh->id_ready, 1);
  }
  pid_t pids[MAX_RANKS];
  fflush(stdout);
  const double t0 = now_s();
  for (int r = 0; r < run->n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(rank_main(sh, run, r));
  }
  double strike_at = 0.0;
  if (run->sig) {
    const double wait = t0 + run->strike_s - now_s();
    if (wait > 0) usleep((useconds_t)(wait * 1e6));
    out.victim_phase = atomic_load(&sh->slot[run->victim].phase);
    strike_at = now_s();
    kill(pids[run->victim], run->sig);
  }
  /* The watchdog: every survivor must be done by then, however the run goes. */
  const double deadline = now_s() + timeout_s + 10.0;
  int alive = run->n, status[MAX_RANKS] = {0}, reaped[MAX_RANKS] = {0}, hung = 0;
  while (alive > 0) {
    int survivors_left = 0;
    for (int r = 0; r < run->n; r++) {
      if (reaped[r]) continue;
      if (waitpid(pids[r], &status[r], WNOHANG) == pids[r]) reaped[r] = 1, alive--;
      else if (!(run->kind == K_STOP && r == run->victim)) survivors_left++;
    }
    if (alive == 0) break;
    if (survivors_left == 0) { /* only the stopped victim is left: end it */
      kill(pids[run->victim], SIGKILL);
      waitpid(pids[run->victim], &status[run->victim], 0);
      reaped[run->victim] = 1;
      break;
    }
    if (now_s() > deadline) {
      hung = 1;
      for (int r = 0; r < run->n; r++)
        if (!reaped[r]) kill(pids[r], SIGKILL), waitpid(pids[r], &status[r], 0), reaped[r] = 1;
      break;
    }
    usleep(2000);
  }
  if (length_s) *length_s = now_s() - t0;
  if (hung) {
    printf("%s: FAILED: hung past the watchdog (%.1f s after the strike); phases:", label, deadline - strike_at);
    for (int r = 0; r < run->n; r++) printf(" %s", phase_name[atomic_load(&sh->slot[r].phase)]);
    printf("\n");
    out.failed = 1;
  }
  int unjoined = 0;
  if (!hung) out.failed |= check_ranks(sh, run, status, strike_at, timeout_s, label, &out.worst_s, &unjoined);
  if (unjoined) out.victim_phase = PH_START; /* struck before its hello reached the root */
  for (int r = 0; r < run->n; r++) all_pids[nall_pids < MAX_PIDS ? nall_pids++ : nall_pids - 1] = pids[r];
  /* A rank killed while a name only it (or its dead peer) could still use existed leaves it; any
   * later ringo process proves the name stale (its maker's pid is gone) and removes it. Here that is
   * a two-rank init, the smallest later ringo process. */
  char first[300] = "";
  out.left_at_exit = leftovers(pids, run->n, first, sizeof first);
  if (out.left_at_exit && later) {
    struct run next = {.n = 2};
    one_run(&next, timeout_s, "a later ringo process", NULL, 0);
    const int left = leftovers(pids, run->n, first, sizeof first);
    if (left) {
      printf("%s: FAILED: %d ringo name(s) left in /dev/shm after a later ringo process, e.g. %s\n", label, left, first);
      out.failed = 1;
    }
  }
  munmap(sh, sizeof *sh);
  return out;
}

int main(int argc, char** argv) {
  uint64_t seed = (uint64_t)time(NULL);
  int runs = 48, only = -1;
  double timeout_s = 2.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--only")) only = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--timeout")) timeout_s = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--verbose")) verbose = atoi(argv[i + 1]);
  }
  char tbuf[32];
  snprintf(tbuf, sizeof tbuf, "%g", timeout_s);
  setenv("RINGO_TIMEOUT", tbuf, 1);
  setenv("RINGO_DEBUG", "NONE", 0); /* the survivors' warnings would drown the report */
  signal(SIGPIPE, SIG_IGN);
  printf("ringo-chaos: seed %" PRIu64 ", %d runs, RINGO_TIMEOUT=%s (replay: --seed %" PRIu64 " --only I)\n", seed,
         runs, tbuf, seed);
  /* The length of each N's workload, measured once without a strike: strikes fall uniformly in it. */
  double length[MAX_RANKS + 1] = {0};
  int passed = 0, failed = 0;
  for (int n = 2; n <= MAX_RANKS; n++) {
    char label[64];
    snprintf(label, sizeof label, "calibration N=%d", n);
    struct run cal = {.n = n};
    struct outcome o = one_run(&cal, timeout_s, label, &length[n], 1);
    o.failed ? failed++ : passed++;
  }
  double worst[K_COUNT][PH_COUNT] = {{0}};
  int tried[K_COUNT][PH_COUNT] = {{0}}, swept = 0, mismatches = 0;
  for (int i = 0; i < runs; i++) {
    uint64_t s = seed ^ (0x51ed2701ull * (uint64_t)(i + 1));
    struct run run = {0};
    run.n = 2 + (int)(splitmix(&s) % (MAX_RANKS - 1));
    run.victim = (int)(splitmix(&s) % (uint64_t)run.n);
    const unsigned pick = (unsigned)(splitmix(&s) % 20); /* 9 kills, 3 stops, 4 mismatches, 4 aborts in 20 */
    run.kind = pick < 9 ? K_KILL : pick < 12 ? K_STOP : pick < 16 ? K_MISMATCH : K_ABORT;
    run.sig = run.kind == K_KILL ? SIGKILL : run.kind == K_STOP ? SIGSTOP : 0;
    run.root_in_rank0 = splitmix(&s) % 3 == 0;
    run.step = (int)(splitmix(&s) % 8);
    run.variant = (int)(splitmix(&s) % 3);
    /* Every kind in the first four runs, and the broadcast's mismatches (whose slices may never meet)
     * first among the mismatches, so a regression of any fix fails every seed. */
    if (i < 4) run.kind = (const int[]){K_MISMATCH, K_ABORT, K_KILL, K_STOP}[i];
    run.sig = run.kind == K_KILL ? SIGKILL : run.kind == K_STOP ? SIGSTOP : 0;
    if (run.kind == K_MISMATCH && mismatches < 3) run.step = 7, run.variant = (2 + mismatches) % 3;
    mismatches += run.kind == K_MISMATCH;
    const double len = length[run.n] > 0 ? length[run.n] : 0.5;
    /* Half the strikes fall in the first tenth of the workload, where init and link setup are. */
    const double span = splitmix(&s) % 2 ? len : len / 10.0;
    run.strike_s = span * (double)(splitmix(&s) % 1000) / 1000.0;
    if (only >= 0 && i != only) continue;
    char label[200], what[96];
    if (run.kind == K_MISMATCH)
      snprintf(what, sizeof what, "rank %d's call %d differs (variant %d)", run.victim, run.step, run.variant);
    else
      snprintf(what, sizeof what, "%s rank %d at %.0f ms", kind_name[run.kind], run.victim, 1e3 * run.strike_s);
    snprintf(label, sizeof label, "run %d (N=%d, %s, root in %s)", i, run.n, what, run.root_in_rank0 ? "rank 0" : "the parent");
    struct outcome o = one_run(&run, timeout_s, label, NULL, 1);
    swept += o.left_at_exit > 0;
    if (!run.sig) o.victim_phase = PH_WORK;
    tried[run.kind][o.victim_phase]++;
    if (o.worst_s > worst[run.kind][o.victim_phase]) worst[run.kind][o.victim_phase] = o.worst_s;
    if (o.failed) {
      failed++;
      printf("  replay: ringo-chaos --seed %" PRIu64 " --only %d\n", seed, i);
    } else {
      passed++;
    }
  }
  /* A later ringo process: its init removes what the stopped-then-killed ranks left. */
  struct run closing = {.n = 2};
  struct outcome o = one_run(&closing, timeout_s, "closing run", NULL, 0);
  char first[300] = "";
  const int left = leftovers(all_pids, nall_pids, first, sizeof first);
  if (left) printf("closing check: FAILED: %d ringo name(s) of this test's ranks left in /dev/shm, e.g. %s\n", left, first);
  (o.failed || left) ? failed++ : passed++;
  printf("runs whose ranks left a name in /dev/shm that a later ringo process removed: %d of %d\n", swept, runs);
  printf("workload length without a strike (ms):");
  for (int n = 2; n <= MAX_RANKS; n++) printf(" N=%d %.0f", n, 1e3 * length[n]);
  printf("\n");
  printf("time to error, worst over the ranks that must fail (the victim's phase when struck, \"not joined\":\n"
         "before its hello reached the root; a mismatch from the last rank's entry into the odd call, an\n"
         "abort from the call):\n");
  printf("  %-12s %-12s %6s %10s\n", "what", "phase", "runs", "worst s");
  for (int k = 1; k < K_COUNT; k++)
    for (int p = 0; p < PH_COUNT; p++)
      if (tried[k][p]) printf("  %-12s %-12s %6d %10.3f\n", kind_name[k], phase_name[p], tried[k][p], worst[k][p]);
  printf("%d passed, %d failed, 0 skipped\n", passed, failed);
  return failed ? 1 : 0;
}
