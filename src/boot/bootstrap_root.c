/* bootstrap_root.c — the root of the TCP rendezvous: a thread started by ringoGetUniqueId admits the
 * ranks that prove the id's secret, then serves allgather/barrier rounds until every rank has left.
 * Depends on core.h and bootstrap.c (id, listener, wire parsers). Tested by test/test_bootstrap.cc.
 *
 *   rank 0 ──HELLO──▶ ┌──────────────┐ ◀──HELLO── rank 2        all joined: OK to every rank
 *   rank 1 ──HELLO──▶ │  root thread │                         round k: every rank sends ROUND k,
 *   junk / slow peers │ poll() loop, │ ── refused with ERROR   the root answers all with RESULT k
 *   ─────────────────▶│ one deadline │    (never take a slot)  (payloads in rank order)
 *                     │   per peer   │                         BYE from all: the thread ends
 *                     └──────────────┘ */
#include "boot/bootstrap.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "boot/bootstrap_wire.h"
#include "core/core.h"

#define LINGER_S 1.0         /* how long a refused or dismissed peer gets to read our last words */
#define MAX_PENDING 1024     /* unauthenticated connections held at once; beyond, the oldest goes */
#define ACCEPT_BATCH 64      /* accepts per wakeup, so a connect flood cannot starve the ranks */

/* ---------------------------------------------------------------- the root thread */

static atomic_int roots_alive;   /* see ringo_bootstrap_roots_alive */
static atomic_int roots_telling;  /* roots of this process with an ERROR not yet sent to every rank */
static atomic_uint root_wakeups;  /* loops of every root thread of this process, for ringo_bootstrap_let_root_speak */
static atomic_int roots_aborted;  /* roots of this process that ended a rendezvous early */
static atomic_int roots_unsettled; /* of those, roots still telling ranks on their way in (join) */
static atomic_int roots_pid;      /* the process the counts above belong to (a fork inherits them, not the threads) */

int ringo_bootstrap_roots_alive(void) { return atomic_load(&roots_alive); }

/* A rank whose init failed may be about to exit, and the root thread in its process with it, before
 * that root has told the other ranks why: their errors would then say only "closed the connection".
 * Wait (at most max_s) until the root has seen what this rank's failure closed and has sent its
 * ERROR frames. */
void ringo_bootstrap_let_root_speak(double max_s) {
  if (atomic_load(&roots_alive) == 0 || atomic_load(&roots_pid) != (int)getpid()) return;
  const unsigned start = atomic_load(&root_wakeups);
  const double deadline = ringo_now() + max_s;
  /* Told already (the failure came from the root), or the root has looked since this rank's close. */
  while (ringo_now() < deadline && (atomic_load(&roots_telling) > 0 || atomic_load(&roots_unsettled) > 0 ||
                                    (atomic_load(&roots_aborted) == 0 && atomic_load(&root_wakeups) - start < 2)))
    nanosleep(&(struct timespec){0, 1000000}, NULL);
}

enum { CONN_PENDING, CONN_JOINED, CONN_CLOSING, CONN_DEAD };
enum { READ_MORE, READ_FRAME, READ_LOST, READ_HANDLED };

/* One RESULT frame, sent to every rank from the same memory. */
struct shared_buf {
  size_t refs, len;
  uint8_t data[];
};

struct conn {
  int fd, state, rank;                        /* rank: -1 until admitted */
  double deadline;                            /* pending: hello due; closing: give up */
  uint8_t head[RINGO_BOOTSTRAP_HELLO_BYTES];  /* frame header (+ hello body while pending) */
  size_t got;                                 /* bytes of the current frame read so far */
  struct ringo_bootstrap_header h;
  uint8_t* body;                              /* body of a ROUND being read */
  uint8_t* round_body;                        /* this rank's complete ROUND of the current round */
  const uint8_t* out;                         /* bytes being sent; reading waits until they are out */
  size_t out_len, out_off;
  struct shared_buf* shared;
  uint8_t msg[HDR + 4 + RINGO_BOOTSTRAP_MAX_ERROR]; /* an OK or ERROR frame */
};

struct root {
  int listen_fd;
  double timeout_s, listen_paused_until, join_deadline;
  uint8_t secret[RINGO_BOOTSTRAP_SECRET_BYTES];
  char name[96];
  struct conn** conns;
  size_t nconns, cap, round_bytes;
  uint32_t nranks, joined, left, ready, round;
  int all_joined, finished, first_left, first_ready;
  int aborted, telling;         /* the rendezvous ended early; ERROR frames still queued */
  ringoResult_t abort_code;
  char abort_text[RINGO_BOOTSTRAP_MAX_ERROR];
  uint32_t claims_refused;      /* hellos with the secret refused in the join (another nranks, a rank taken) */
  char last_claim[160];         /* why the last of them was */
  double round_deadline;        /* RINGO_TIMEOUT after the first rank of the round arrived */
  struct conn** by_rank; /* admitted and not yet gone */
  uint8_t* seen;         /* ranks ever admitted, so a rank cannot join twice */
};

static void release_out(struct conn* c) {
  if (c->shared && --c->shared->refs == 0) free(c->shared);
  c->shared = NULL;
  c->out = NULL;
}

/* Shut down before close: a forked child may hold a copy of the fd, and only shutdown ends the
 * connection for the peer regardless of such copies. */
static void kill_conn(struct root* rt, struct conn* c) {
  if (c->state == CONN_DEAD) return;
  shutdown(c->fd, SHUT_RDWR);
  close(c->fd);
  if (c->rank >= 0 && rt->by_rank && rt->by_rank[c->rank] == c) rt->by_rank[c->rank] = NULL;
  c->state = CONN_DEAD;
  release_out(c);
}

static void queue_msg(struct conn* c, uint32_t type, uint32_t word, const char* text) {
  const size_t n = text ? strnlen(text, RINGO_BOOTSTRAP_MAX_ERROR) : 0;
  ringo_bootstrap_encode_header(c->msg, RINGO_BOOTSTRAP_VERSION, type, (uint32_t)(4 + n));
  put32(c->msg + HDR, word);
  if (n) memcpy(c->msg + HDR + 4, text, n);
  c->out = c->msg;
  c->out_len = HDR + 4 + n;
  c->out_off = 0;
}

/* Tells the peer why in an ERROR frame, then lets it go (it never takes a rank's slot). */
static void send_error_and_close(struct conn* c, ringoResult_t code, const char* text) {
  release_out(c);
  queue_msg(c, RINGO_BOOT_ERROR, (uint32_t)code, text);
  c->state = CONN_CLOSING;
  c->deadline = ringo_now() + LINGER_S;
}

static void __attribute__((format(printf, 3, 4))) refuse(struct root* rt, struct conn* c, const char* fmt, ...) {
  char text[RINGO_BOOTSTRAP_MAX_ERROR];
  FORMAT_ARGS(text, sizeof text, fmt);
  RINGO_INFO(RINGO_LOG_BOOT, "bootstrap root %s %s", rt->name, text);
  send_error_and_close(c, ringoRemoteError, text);
}

/* The rendezvous is over: nobody new is let in and unauthenticated peers are dropped. */
static void finish(struct root* rt) {
  if (rt->aborted && !rt->finished) atomic_fetch_sub(&roots_unsettled, 1);
  rt->finished = 1;
  if (rt->listen_fd >= 0) shutdown(rt->listen_fd, SHUT_RDWR), close(rt->listen_fd);
  rt->listen_fd = -1;
  for (size_t i = 0; i < rt->nconns; i++)
    if (rt->conns[i]->state == CONN_PENDING) kill_conn(rt, rt->conns[i]);
}

static void start_telling(struct root* rt) {
  if (!rt->telling) rt->telling = 1, atomic_fetch_add(&roots_telling, 1);
}

/* Ends the rendezvous for every rank with the same reason. During the join, ranks still on their
 * way are told it too when they arrive, until every rank has been or the join deadline passes. */
static void __attribute__((format(printf, 3, 4))) root_abort(struct root* rt, ringoResult_t code, const char* fmt, ...) {
  if (rt->finished || rt->aborted) return;
  char* text = rt->abort_text;
  snprintf(text, sizeof rt->abort_text, "ended the rendezvous: ");
  const size_t n = strlen(text);
  FORMAT_ARGS(text + n, sizeof rt->abort_text - n, fmt);
  rt->aborted = 1;
  atomic_fetch_add(&roots_aborted, 1);
  atomic_fetch_add(&roots_unsettled, 1);
  rt->abort_code = code;
  start_telling(rt);
  RINGO_INFO(RINGO_LOG_BOOT, "bootstrap root %s %s", rt->name, text);
  for (size_t i = 0; i < rt->nconns; i++) {
    struct conn* c = rt->conns[i];
    /* An ERROR cannot be spliced into a half-sent frame; such a rank just sees the close. */
    if (c->state == CONN_JOINED && c->out && c->out_off) kill_conn(rt, c);
    else if (c->state == CONN_JOINED) send_error_and_close(c, code, text);
  }
  if (rt->all_joined || !rt->nranks) finish(rt);
}

/* After an abort during the join: every rank has been told, or will not come. */
static int join_settled(const struct root* rt) {
  if (ringo_now() >= rt->join_deadline) return 1;
  for (uint32_t r = 0; r < rt->nranks; r++)
    if (!rt->seen[r]) return 0;
  return 1;
}

/* The rank's host as the root saw it connect (its address), for the message that names it. */
static void peer_name(const struct conn* c, char* out, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getpeername(c->fd, (struct sockaddr*)&ss, &len) == 0) ringo_bootstrap_addr_name(&ss, out, cap);
  else snprintf(out, cap, "an unknown address");
}

static void conn_lost(struct root* rt, struct conn* c) {
  const int rank = c->rank, joined = c->state == CONN_JOINED;
  char from[80];
  peer_name(c, from, sizeof from);
  kill_conn(rt, c);
  if (joined)
    root_abort(rt, ringoRemoteError, "rank %d disconnected without ringo_bootstrap_close%s: its process (connected "
               "from %s) exited or failed", rank, rt->all_joined ? "" : " before all ranks joined", from);
}

/* Refuses a hello that proved the secret: a rank of this job, started with another nranks or a rank
 * already taken. Remembered, because it is usually why the ranks already in wait for a missing one. */
static void __attribute__((format(printf, 3, 4))) refuse_claim(struct root* rt, struct conn* c, const char* fmt, ...) {
  FORMAT_ARGS(rt->last_claim, sizeof rt->last_claim, fmt);
  rt->claims_refused++;
  refuse(rt, c, "refused %s", rt->last_claim);
}

static void admit(struct root* rt, struct conn* c, uint32_t rank) {
  c->state = CONN_JOINED;
  c->rank = (int)rank;
  rt->by_rank[rank] = c;
  rt->seen[rank] = 1;
  if (++rt->joined < rt->nranks) return;
  rt->all_joined = 1;
  RINGO_INFO(RINGO_LOG_BOOT, "bootstrap root %s: all %u ranks joined", rt->name, rt->nranks);
  for (uint32_t r = 0; r < rt->nranks; r++) queue_msg(rt->by_rank[r], RINGO_BOOT_OK, rt->nranks, NULL);
}

static void hello_in(struct root* rt, struct conn* c) {
  char why[200];
  struct ringo_bootstrap_hello hello;
  if (ringo_bootstrap_parse_hello(c->head, sizeof c->head, rt->secret, &hello, why, sizeof why) != ringoSuccess) {
    if (hello.rank == UINT32_MAX) refuse(rt, c, "refused a connection: %s", why);
    else refuse(rt, c, "refused rank %u: %s", hello.rank, why);
    return;
  }
  if (rt->nranks == 0) { /* the first valid hello fixes nranks and starts the join clock */
    if (!(rt->by_rank = calloc(hello.nranks, sizeof *rt->by_rank)) || !(rt->seen = calloc(hello.nranks, 1))) {
      free(rt->by_rank);
      rt->by_rank = NULL;
      refuse(rt, c, "refused rank %u: bootstrap root out of memory", hello.rank);
      return;
    }
    rt->nranks = hello.nranks;
    rt->join_deadline = ringo_now() + rt->timeout_s;
  }
  if (rt->aborted) {
    if (hello.rank < rt->nranks) rt->seen[hello.rank] = 1;
    send_error_and_close(c, rt->abort_code, rt->abort_text);
    start_telling(rt);
    if (join_settled(rt)) finish(rt);
  } else if (hello.nranks != rt->nranks)
    refuse_claim(rt, c, "rank %u: nranks %u disagrees with nranks %u of the ranks that joined first", hello.rank,
                 hello.nranks, rt->nranks);
  else if (rt->seen[hello.rank])
    refuse_claim(rt, c, "rank %u: rank %u already joined", hello.rank, hello.rank);
  else
    admit(rt, c, hello.rank);
}

/* Every rank has sent round k: answer all of them with the payloads in rank order. */
static void complete_round(struct root* rt) {
  const size_t bytes = rt->round_bytes, total = (size_t)rt->nranks * bytes;
  struct shared_buf* sb = total <= UINT32_MAX - 4 ? malloc(sizeof *sb + HDR + 4 + total) : NULL;
  if (!sb) {
    root_abort(rt, ringoRemoteError, "no memory for allgather round %u of %zu bytes", rt->round, total);
    return;
  }
  sb->refs = rt->nranks;
  sb->len = HDR + 4 + total;
  ringo_bootstrap_encode_header(sb->data, RINGO_BOOTSTRAP_VERSION, RINGO_BOOT_RESULT, (uint32_t)(4 + total));
  put32(sb->data + HDR, rt->round);
  for (uint32_t r = 0; r < rt->nranks; r++) {
    struct conn* c = rt->by_rank[r];
    if (bytes) memcpy(sb->data + HDR + 4 + r * bytes, c->round_body + 4, bytes);
    free(c->round_body);
    c->round_body = NULL;
    c->shared = sb;
    c->out = sb->data;
    c->out_len = sb->len;
    c->out_off = 0;
  }
  rt->round++;
  rt->ready = 0;
}

static void round_in(struct root* rt, struct conn* c) {
  uint8_t* body = c->body;
  const uint32_t round = get32(body);
  const size_t bytes = c->h.length - 4;
  const int again = c->round_body != NULL;
  c->body = NULL;
  if (rt->all_joined && !rt->left && round == rt->round && !again && (!rt->ready || bytes == rt->round_bytes)) {
    c->round_body = body;
    if (rt->ready++ == 0) rt->first_ready = c->rank, rt->round_deadline = ringo_now() + rt->timeout_s;
    rt->round_bytes = bytes;
    if (rt->ready == rt->nranks) complete_round(rt);
    return;
  }
  free(body);
  if (!rt->all_joined)
    root_abort(rt, ringoRemoteError, "rank %d sent an allgather before all ranks joined", c->rank);
  else if (rt->left)
    root_abort(rt, ringoRemoteError, "rank %d started allgather round %u after rank %d left", c->rank, round,
               rt->first_left);
  else if (round != rt->round || again)
    root_abort(rt, ringoRemoteError, "rank %d sent allgather round %u, expected round %u", c->rank, round,
               rt->round + again);
  else
    root_abort(rt, ringoRemoteError, "allgather sizes disagree in round %u: rank %d sent %zu bytes, rank %d sent %zu",
               round, c->rank, bytes, rt->first_ready, rt->round_bytes);
}

static void bye_in(struct root* rt, struct conn* c) {
  const int rank = c->rank;
  kill_conn(rt, c);
  if (rt->left++ == 0) rt->first_left = rank;
  if (!rt->all_joined || rt->ready)
    root_abort(rt, ringoRemoteError, "rank %d left while %s", rank,
               rt->all_joined ? "other ranks wait in an allgather" : "ranks were still joining");
  else if (rt->left == rt->nranks)
    finish(rt);
}

/* A whole header is in: check it at once, so a bogus length never makes us allocate or wait. */
static int header_in(struct root* rt, struct conn* c) {
  char why[200];
  const int pending = c->state == CONN_PENDING;
  const uint32_t max = pending ? RINGO_BOOTSTRAP_HELLO_BODY : 4 + RINGO_BOOTSTRAP_MAX_BYTES;
  if (ringo_bootstrap_parse_header(c->head, HDR, max, &c->h, why, sizeof why) != ringoSuccess) {
    if (pending) refuse(rt, c, "refused a connection: %s", why);
    else root_abort(rt, ringoRemoteError, "rank %d sent a malformed message: %s", c->rank, why);
    return READ_HANDLED;
  }
  if (pending && c->h.type == RINGO_BOOT_HELLO && c->h.length == RINGO_BOOTSTRAP_HELLO_BODY) return READ_MORE;
  if (!pending && c->h.type == RINGO_BOOT_BYE && c->h.length == 0) return READ_MORE;
  if (!pending && c->h.type == RINGO_BOOT_ROUND && c->h.length >= 4 && (c->body = malloc(c->h.length))) return READ_MORE;
  if (pending) refuse(rt, c, "refused a connection: expected a hello, got message type %u of %u bytes", c->h.type, c->h.length);
  else root_abort(rt, ringoRemoteError, "rank %d sent message type %u of %u bytes (or the root is out of memory)",
                  c->rank, c->h.type, c->h.length);
  return READ_HANDLED;
}

/* Reads what the current frame still lacks, never past its end. */
static int conn_read(struct root* rt, struct conn* c) {
  for (;;) {
    const int in_head = c->got < HDR || c->state == CONN_PENDING;
    const size_t want = (c->got < HDR ? HDR : HDR + (size_t)c->h.length) - c->got;
    if (want == 0) return READ_FRAME; /* before dst: an empty BYE has no body (NULL + 0 is UB) */
    uint8_t* dst = in_head ? c->head + c->got : c->body + (c->got - HDR);
    const ssize_t n = recv(c->fd, dst, want, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) return READ_LOST;
    if (n < 0 && errno != EINTR) return READ_MORE;
    if (n < 0) continue;
    c->got += (size_t)n;
    if (c->got == HDR && header_in(rt, c) == READ_HANDLED) return READ_HANDLED;
  }
}

static void flush(struct root* rt, struct conn* c) {
  while (c->out_off < c->out_len) {
    const ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) c->out_off += (size_t)n;
    else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    else if (n == 0 || errno != EINTR) {
      conn_lost(rt, c);
      return;
    }
  }
  release_out(c);
  if (c->state == CONN_CLOSING) shutdown(c->fd, SHUT_WR); /* said our piece; now wait for its close */
}

/* A closing peer may still be sending: read and drop, a bounded amount per wakeup. */
static void drain(struct root* rt, struct conn* c) {
  uint8_t junk[4096];
  for (int i = 0; i < 16; i++) {
    const ssize_t n = recv(c->fd, junk, sizeof junk, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n == 0 || (n < 0 && errno != EINTR)) {
      kill_conn(rt, c);
      return;
    }
  }
}

static void service(struct root* rt, struct conn* c, short revents) {
  if (c->state == CONN_DEAD || revents == 0) return;
  if (c->out) {
    flush(rt, c);
  } else if (c->state == CONN_CLOSING) {
    drain(rt, c);
  } else {
    const int r = conn_read(rt, c);
    if (r == READ_LOST) conn_lost(rt, c);
    if (r != READ_FRAME) return;
    c->got = 0;
    if (c->state == CONN_PENDING) hello_in(rt, c);
    else if (c->h.type == RINGO_BOOT_BYE) bye_in(rt, c);
    else round_in(rt, c);
  }
}

static void add_conn(struct root* rt, int fd) {
  size_t pending = 0, oldest = 0;
  for (size_t i = rt->nconns; i-- > 0;)
    if (rt->conns[i]->state == CONN_PENDING) pending++, oldest = i;
  if (pending >= MAX_PENDING) kill_conn(rt, rt->conns[oldest]); /* a flood costs its own oldest, not a slot */
  if (rt->nconns == rt->cap) {
    const size_t cap = rt->cap ? 2 * rt->cap : 16;
    struct conn** grown = realloc(rt->conns, cap * sizeof *grown);
    if (grown) rt->conns = grown, rt->cap = cap;
  }
  struct conn* c = rt->nconns < rt->cap ? calloc(1, sizeof *c) : NULL;
  if (!c) {
    close(fd);
    return;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->fd = fd;
  c->rank = -1;
  c->state = CONN_PENDING;
  c->deadline = ringo_now() + rt->timeout_s;
  rt->conns[rt->nconns++] = c;
}

static void accept_new(struct root* rt) {
  for (int i = 0; i < ACCEPT_BATCH; i++) {
    const int fd = accept4(rt->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) add_conn(rt, fd);
    else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
      rt->listen_paused_until = ringo_now() + 0.05; /* out of fds: back off instead of spinning */
    if (fd < 0 && errno != EINTR && errno != ECONNABORTED && errno != EPROTO) return;
  }
}

/* The ranks a timeout names, comma-separated in out (each as prefix + number, " ..." past the room):
 * in the join those never admitted, in a round the admitted ones whose part has not come. */
static void missing_ranks(const struct root* rt, int in_round, const char* prefix, char* out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (uint32_t r = 0; r < rt->nranks; r++) {
    const int missing = in_round ? rt->by_rank[r] && !rt->by_rank[r]->round_body : !rt->seen[r];
    if (!missing) continue;
    if (used >= cap - 16) {
      snprintf(out + used, cap - used, " ...");
      return;
    }
    used += (size_t)snprintf(out + used, cap - used, "%s%s%u", used ? ", " : "", prefix, r);
  }
}

static void join_timeout(struct root* rt) {
  char missing[160], claims[sizeof rt->last_claim + 80] = "";
  missing_ranks(rt, 0, "", missing, sizeof missing);
  if (rt->claims_refused)
    snprintf(claims, sizeof claims, "; %u join%s with this id refused meanwhile, the last: %s", rt->claims_refused,
             rt->claims_refused > 1 ? "s" : "", rt->last_claim);
  root_abort(rt, ringoTimeout, "only %u of %u ranks joined within RINGO_TIMEOUT=%gs (missing ranks: %s)%s", rt->joined,
             rt->nranks, rt->timeout_s, missing, claims);
}

/* A round that not every rank reached in RINGO_TIMEOUT: the root names who is missing (each rank on
 * its own could only say that it waited). */
static void round_timeout(struct root* rt) {
  char missing[160];
  missing_ranks(rt, 1, "rank ", missing, sizeof missing);
  root_abort(rt, ringoTimeout, "allgather round %u: %s did not arrive within RINGO_TIMEOUT=%gs (%u of %u ranks did)",
             rt->round, missing, rt->timeout_s, rt->ready, rt->nranks);
}

/* Drops peers past their deadline; returns the poll timeout (ms) until the next deadline. */
static int expire(struct root* rt) {
  const double now = ringo_now();
  double next = now + 60.0;
  for (size_t i = 0; i < rt->nconns; i++) {
    struct conn* c = rt->conns[i];
    if (c->state != CONN_PENDING && c->state != CONN_CLOSING) continue;
    if (now >= c->deadline) kill_conn(rt, c);
    else if (c->deadline < next) next = c->deadline;
  }
  if (rt->nranks && !rt->all_joined && !rt->finished) {
    if (rt->aborted && now >= rt->join_deadline) finish(rt);
    else if (now >= rt->join_deadline) join_timeout(rt);
    else if (rt->join_deadline < next) next = rt->join_deadline;
  }
  if (rt->all_joined && !rt->finished && rt->ready) {
    if (now >= rt->round_deadline) round_timeout(rt);
    else if (rt->round_deadline < next) next = rt->round_deadline;
  }
  if (rt->listen_paused_until > now && rt->listen_paused_until < next) next = rt->listen_paused_until;
  return (int)((next - now) * 1000.0) + 1;
}

/* Frees the connections that died in the last round of the loop. */
static void reap(struct root* rt) {
  size_t j = 0;
  for (size_t i = 0; i < rt->nconns; i++) {
    struct conn* c = rt->conns[i];
    if (c->state != CONN_DEAD) {
      rt->conns[j++] = c;
    } else {
      free(c->body);
      free(c->round_body);
      free(c);
    }
  }
  rt->nconns = j;
}

/* The ERROR frames of an abort are all out (or their ranks gone). */
static void note_told(struct root* rt) {
  if (!rt->telling) return;
  for (size_t i = 0; i < rt->nconns; i++)
    if (rt->conns[i]->state == CONN_CLOSING && rt->conns[i]->out) return;
  rt->telling = 0;
  atomic_fetch_sub(&roots_telling, 1);
}

static void* root_main(void* arg) {
  struct root* rt = arg;
  struct pollfd* pfd = NULL;
  size_t pcap = 0;
  pthread_setname_np(pthread_self(), "ringo-boot"); /* visible in top/gdb, and to the tests */
  for (;;) {
    const int timeout_ms = expire(rt);
    reap(rt);
    if (rt->finished && rt->nconns == 0) break;
    if (rt->nconns + 1 > pcap) {
      struct pollfd* grown = realloc(pfd, (rt->nconns + 1) * 2 * sizeof *grown);
      if (!grown) break; /* cannot even watch the sockets: give up, the ranks see the close */
      pfd = grown, pcap = (rt->nconns + 1) * 2;
    }
    const size_t n = rt->nconns;
    const int listening = rt->listen_fd >= 0 && ringo_now() >= rt->listen_paused_until;
    pfd[0] = (struct pollfd){.fd = listening ? rt->listen_fd : -1, .events = POLLIN};
    for (size_t i = 0; i < n; i++) {
      const struct conn* c = rt->conns[i];
      pfd[i + 1] = (struct pollfd){.fd = c->state == CONN_DEAD ? -1 : c->fd, .events = c->out ? POLLOUT : POLLIN};
    }
    if (poll(pfd, n + 1, timeout_ms) < 0 && errno != EINTR) break;
    /* Connections accepted now land after index n, so the indices below stay valid. */
    if (pfd[0].revents && rt->listen_fd >= 0) accept_new(rt);
    for (size_t i = 0; i < n; i++) service(rt, rt->conns[i], pfd[i + 1].revents);
    note_told(rt);
    atomic_fetch_add(&root_wakeups, 1);
  }
  if (rt->telling) atomic_fetch_sub(&roots_telling, 1);
  if (!rt->finished) finish(rt); /* the loop gave up: what it tracked is over too */
  for (size_t i = 0; i < rt->nconns; i++) kill_conn(rt, rt->conns[i]);
  reap(rt);
  if (rt->listen_fd >= 0) close(rt->listen_fd);
  free(pfd);
  free(rt->conns);
  free(rt->by_rank);
  free(rt->seen);
  free(rt);
  atomic_fetch_sub(&roots_alive, 1);
  return NULL;
}

/* Detached, with every signal blocked so it never takes one meant for the application. */
static ringoResult_t start_thread(struct root* rt) {
  pthread_t tid;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  atomic_fetch_add(&roots_alive, 1); /* before the thread runs, so its decrement can never come first */
  atomic_store(&roots_pid, (int)getpid());
  const int rc = pthread_create(&tid, NULL, root_main, rt);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    atomic_fetch_sub(&roots_alive, 1);
    return ringo_fail(ringoSystemError, "bootstrap root: pthread_create failed: %s", strerror(rc));
  }
  pthread_detach(tid);
  return ringoSuccess;
}

ringoResult_t ringo_bootstrap_root_start(ringoUniqueId* id) {
  if (!id) return ringo_fail(ringoInvalidArgument, "ringoGetUniqueId: id is NULL");
  struct ringo_env env;
  struct sockaddr_storage ss;
  ringoUniqueId made;
  ringoResult_t res = ringoSuccess;
  ringo_env_read(&env);
  struct root* rt = calloc(1, sizeof *rt);
  if (!rt) return ringo_fail(ringoSystemError, "bootstrap root: out of memory");
  rt->listen_fd = -1;
  rt->timeout_s = env.timeout_s;
  RINGO_CHECK_GOTO(ringo_bootstrap_open_listener(&env, &ss, &rt->listen_fd), res, fail);
  /* Up to 256 bytes, getrandom never returns short once the kernel's pool is ready. */
  if (getrandom(rt->secret, sizeof rt->secret, 0) != (ssize_t)sizeof rt->secret) {
    res = ringo_fail(ringoSystemError, "bootstrap root: getrandom failed: %s", strerror(errno));
    goto fail;
  }
  ringo_bootstrap_addr_name(&ss, rt->name, sizeof rt->name);
  ringo_bootstrap_id_encode(&made, &ss, rt->secret);
  RINGO_INFO(RINGO_LOG_BOOT, "bootstrap root listening on %s", rt->name);
  RINGO_CHECK_GOTO(start_thread(rt), res, fail); /* rt belongs to the thread from here on */
  *id = made;
  return ringoSuccess;
fail:
  if (rt->listen_fd >= 0) close(rt->listen_fd);
  free(rt);
  return res;
}
