/* core.h — what every ringo source file needs: error propagation, logging, the environment knobs.
 * Internal (never installed). Exercised by every test binary; see test/test_api.cc for messages. */
#ifndef RINGO_CORE_H_
#define RINGO_CORE_H_

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "ringo.h"

/* ---- logging: RINGO_DEBUG=WARN|INFO|TRACE, RINGO_DEBUG_SUBSYS=INIT,BOOT,SHM,COLL,ENV,ALL ---- */
enum { RINGO_LEVEL_NONE = 0, RINGO_LEVEL_WARN = 1, RINGO_LEVEL_INFO = 2, RINGO_LEVEL_TRACE = 3 };
enum {
  RINGO_LOG_INIT = 1u << 0, RINGO_LOG_BOOT = 1u << 1, RINGO_LOG_SHM = 1u << 2,
  RINGO_LOG_COLL = 1u << 3, RINGO_LOG_ENV = 1u << 4, RINGO_LOG_NET = 1u << 5,
  RINGO_LOG_ALL = ~0u
};
int ringo_log_enabled(int level, unsigned subsys);
void ringo_log(int level, unsigned subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define RINGO_WARN(...) ringo_log(RINGO_LEVEL_WARN, RINGO_LOG_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define RINGO_INFO(sub, ...) \
  do { if (ringo_log_enabled(RINGO_LEVEL_INFO, (sub))) ringo_log(RINGO_LEVEL_INFO, (sub), __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define RINGO_TRACE(sub, ...) \
  do { if (ringo_log_enabled(RINGO_LEVEL_TRACE, (sub))) ringo_log(RINGO_LEVEL_TRACE, (sub), __FILE__, __LINE__, __VA_ARGS__); } while (0)

/* ---- errors ----
 * Where an error starts, call ringo_fail(): it records a message in this thread's last-error
 * slot, logs it once at WARN, and returns the code. Public entry points copy the slot into the
 * communicator so ringoGetLastError(comm) can show it later. Frames above only add "->" lines
 * at INFO (RINGO_CHECK), so a log reads like a backtrace. */
ringoResult_t ringo_fail(ringoResult_t res, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* Rewrites the message of an error already reported (to add where it happened), logging the new
 * text at INFO only: an error is warned about once, where it starts. */
ringoResult_t ringo_annotate(ringoResult_t res, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends " [in <where>]" (where: the call and the point in it, e.g. "ringoRecv #3 from rank 1")
 * to the message of an error already reported, unless it already says where: an error passed on
 * by a peer names the call it started in, and each rank it travels through would add one more. */
ringoResult_t ringo_say_where(ringoResult_t res, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* ringo_thread_last_error(void);
void ringo_thread_clear_error(void);

#define RINGO_CHECK(call)                                                       \
  do {                                                                          \
    ringoResult_t ringo_res_ = (call);                                          \
    if (ringo_res_ != ringoSuccess) {                                           \
      RINGO_INFO(RINGO_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, ringo_res_); \
      return ringo_res_;                                                        \
    }                                                                           \
  } while (0)

#define RINGO_CHECK_GOTO(call, res, label)                                 \
  do {                                                                     \
    (res) = (call);                                                        \
    if ((res) != ringoSuccess) {                                           \
      RINGO_INFO(RINGO_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, (res)); \
      goto label;                                                          \
    }                                                                      \
  } while (0)

/* A system call that returns -1 and sets errno. */
#define SYS_CHECK(call, what)                                                              \
  do {                                                                                     \
    if ((call) == -1) return ringo_fail(ringoSystemError, "%s failed: %s", (what), strerror(errno)); \
  } while (0)

/* ---- environment knobs, read in one place (env.c) and logged at RINGO_DEBUG=INFO ---- */
struct ringo_env {
  double timeout_s;        /* RINGO_TIMEOUT: bound on every wait (default 300 s) */
  size_t slice_bytes;      /* RINGO_SLICE_BYTES: bytes per FIFO slot; 0 when unset: the ring's default
                              (RINGO_SLICE_ONE_HOST, or RINGO_SLICE_ACROSS_HOSTS when it leaves the host) */
  int nslots;              /* RINGO_NSLOTS: FIFO depth per link, >= 4 (default 4) */
  int spin;                /* RINGO_SPIN: polls before a waiter yields (unset, -1 here: RINGO_SPIN_FIT where
                              this host's ranks of the communicator can each have a CPU of their own, else 0; comm.c) */
  double yield_us;         /* RINGO_YIELD_US: how long a waiter yields before it sleeps (default 200) */
  char hostname[256];      /* RINGO_HOSTNAME: host identity override (default gethostname) */
  char socket_ifname[64];  /* RINGO_SOCKET_IFNAME: interface the bootstrap root binds to */
  char comm_id[256];       /* RINGO_COMM_ID: host:port the bootstrap root binds to */
  char trace_path[256];    /* RINGO_TRACE: Chrome-trace JSON file of every ring step ("": off) */
  char transport[16];      /* RINGO_TRANSPORT: shm|mpi forces every link's transport ("": per link) */
  char algo[16];           /* RINGO_ALGO: auto (default: the ring, small collectives of one host one-shot), ring
                              (the ring always), or naive (gather to rank 0 + send back: a baseline) */
  char ring_order[16];     /* RINGO_RING_ORDER: cpu (default: where a host's ranks outnumber its CPUs, they go
                              by the lowest CPU each may run on, so ranks sharing one are neighbours) or
                              rank (by rank alone); comm.c */
  size_t oneshot_bytes;    /* RINGO_ONESHOT_BYTES: the largest input (per rank) a collective of ranks all on one
                              host runs one-shot with under RINGO_ALGO=auto (0: never; unset:
                              RINGO_ONESHOT_PER_PEER, 4 KiB per other rank, at most 64 KiB) */
  size_t twophase_bytes;   /* RINGO_TWOPHASE_BYTES: the largest all-reduce input (per rank) of ranks all on one host
                              that runs in two phases through the board under RINGO_ALGO=auto, above the one-shot
                              (0: never; unset: RINGO_TWOPHASE_DEFAULT, picked per rank count in comm.c) */
  size_t twophase_round_bytes; /* RINGO_TWOPHASE_ROUND_BYTES: the most a rank posts in one round of a two-phase
                              all-reduce (its board slot); larger inputs run in rounds (unset:
                              RINGO_TWOPHASE_DEFAULT, the board's share per rank in comm.c) */
  size_t board_rotate;     /* RINGO_BOARD_ROTATE: the span of each board slot side its ops of
                              RINGO_BOARD_ROTATE_MIN_BYTES or more rotate through (0: none; unset,
                              RINGO_BOARD_ROTATE_AUTO: the L2's size where the host's ranks fit its online
                              CPUs, else none; comm/board.c) */
  int cuda_enable;         /* RINGO_CUDA: 0 keeps communicators off the GPU (no device memory, no context) */
  int cuda_channels;       /* RINGO_CUDA_CHANNELS: blocks of the ring kernel, each with its FIFOs, 1..128 (0:
                              as many as the GPU holds resident for all its ranks, at most 64) */
  size_t cuda_slice_bytes; /* RINGO_CUDA_SLICE_BYTES: bytes per device FIFO slot (default 256 KiB) */
  size_t cuda_min_slice_bytes; /* RINGO_CUDA_MIN_SLICE_BYTES: smallest slice of a collective whose chunks are
                                  too short to keep every channel busy with full slots (default 16 KiB; the
                                  slot size or more: every slice fills a slot) */
  int cuda_window;         /* RINGO_CUDA_WINDOW: rounds a ring kernel channel takes through each step
                              together (0: the most its slots allow, 2; 1: one at a time) */
  int cuda_fence;          /* RINGO_CUDA_FENCE: 0 leaves out the ring kernel's fence before each flag's
                              release (the release alone orders the slice; an experiment) */
  int cuda_gpu_scope;      /* RINGO_CUDA_GPU_SCOPE: -1 (unset): the ring kernel's flags at GPU scope when every
                              rank is a thread of this process on this GPU, else system scope; 0: system
                              scope always; 1: GPU scope when every rank is on this GPU, other processes'
                              too (outside PTX's scopes: an experiment). ringo_dev_flag_scope decides */
  int staged_phases;       /* RINGO_STAGED_PHASES: most phases a staged device collective is pipelined in
                              (default 8; 1: whole-buffer copies) */
  size_t staged_piece_bytes; /* RINGO_STAGED_PIECE_BYTES: least bytes of one chunk a phase copies (default 1 MiB) */
};
#define RINGO_ONESHOT_PER_PEER ((size_t)-1)
#define RINGO_TWOPHASE_DEFAULT ((size_t)-1)
/* Board ops of at least this many bytes rotate through their slot (comm/board.c says why; smaller
 * ones measured slower, docs/peers.md). */
#define RINGO_BOARD_ROTATE_MIN_BYTES ((size_t)2 << 10)
#define RINGO_BOARD_ROTATE_AUTO ((size_t)-1)
/* Unset RINGO_SPIN where every rank of the host has a CPU of its own: a peer a few hundred ns late
 * is caught by polling instead of a yield's system call (2 ranks, 4 KiB: 13-20 % faster, measured
 * within one launch, docs/peers.md). Where ranks outnumber CPUs polling takes the CPU from the rank
 * that is waited for (1.8-2.1x slower at 4 MiB), so none. */
#define RINGO_SPIN_FIT 2000
/* Unset RINGO_TWOPHASE_BYTES: the two-phase all-reduce runs up to this many bytes per rank (where it
 * and the ring cross on the 2-core machine, docs/performance.md: 1 MiB at N = 3), and its board, 2·N
 * slots of that, stays within RINGO_TWOPHASE_BOARD_BYTES. */
#define RINGO_TWOPHASE_MAX_BYTES ((uint64_t)2 << 20)
#define RINGO_TWOPHASE_N3_BYTES ((uint64_t)1 << 20)
#define RINGO_TWOPHASE_BOARD_BYTES ((uint64_t)32 << 20)
/* ... and the N ranks' inputs together at most this: beyond, the ring, whose slots stay in cache, was
 * faster launched alone (N = 8: 1 MiB 1.1-1.4x, 2 MiB 1.2-1.4x; N = 4: 2 MiB 1.15x; docs/performance.md). */
#define RINGO_TWOPHASE_TOTAL_BYTES ((uint64_t)4 << 20)
/* A two-phase all-reduce runs in at most this many rounds (board ops); more would mean slots too
 * small for the size, where the ring does as well. */
#define RINGO_TWOPHASE_MAX_ROUNDS 64
/* Default slices: shared-memory slots stay in cache at 128 KiB; MPI over TCP pays a handshake per
 * message, which 512 KiB amortises (docs/multi-host.md). */
#define RINGO_SLICE_ONE_HOST ((size_t)128 << 10)
#define RINGO_SLICE_ACROSS_HOSTS ((size_t)512 << 10)
/* Reads the environment now (cheap; called at every communicator init so tests may change it). */
void ringo_env_read(struct ringo_env* env);

/* Monotonic clock in seconds. */
double ringo_now(void);

/* Gives the CPU away briefly while a waiter has nothing to do; returns 1 if it did, 0 if the
 * caller should block (futex, nap) instead. A yield is cheap when the other runnable threads
 * are ranks about to hand work back, but a CPU-bound stranger on the same core keeps it for a
 * whole scheduler slice (ms), where a blocked waiter is woken (and preempts) at once
 * (docs/performance.md). So two yields slower than
 * RINGO_YIELD_SLOW_S within RINGO_YIELD_SLOW_WINDOW_S switch this thread to blocking for
 * RINGO_YIELD_BACKOFF_S, after which yields probe again. watch 0 turns that off for one yield:
 * where a host's ranks outnumber its CPUs, the busy process on the core is mostly a peer at its
 * own work, and a waiter that blocked for 50 ms after a peer computed slept through the calls
 * after it (N = 8 on 2 cores). */
#define RINGO_YIELD_SLOW_S 1e-3
#define RINGO_YIELD_SLOW_WINDOW_S 20e-3
#define RINGO_YIELD_BACKOFF_S 50e-3
int ringo_yield(int watch);

/* Element size of a datatype, 0 for an invalid one. */
size_t ringo_type_size(ringoDataType_t type);
const char* ringo_type_name(ringoDataType_t type);
const char* ringo_op_name(ringoRedOp_t op);

#endif /* RINGO_CORE_H_ */
