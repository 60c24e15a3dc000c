/* bootstrap.c — unique-id rendezvous over TCP: a root thread started by ringoGetUniqueId admits the
 * ranks that prove the id's secret, then serves allgather/barrier rounds until every rank has left.
 * Depends on core.h only (errors, env, clock). Tested by test/test_bootstrap.cc; wire format in bootstrap.h.
 *
 *   rank 0 ──HELLO──▶ ┌──────────────┐ ◀──HELLO── rank 2        all joined: OK to every rank
 *   rank 1 ──HELLO──▶ │  root thread │                         round k: every rank sends ROUND k,
 *   junk / slow peers │ poll() loop, │ ── refused with ERROR   the root answers all with RESULT k
 *   ─────────────────▶│ one deadline │    (never take a slot)  (payloads in rank order)
 *                     │   per peer   │                         BYE from all: the thread ends
 *                     └──────────────┘ */
#include "bootstrap.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

#define ID_MAGIC 0x52474944u /* "RGID" */
#define LINGER_S 1.0         /* how long a refused or dismissed peer gets to read our last words */
#define JOIN_GRACE_S 0.5     /* a joining rank waits this much past its timeout, so the root's fuller
                                "k of n joined" report arrives before the rank's own deadline */
#define MAX_PENDING 1024     /* unauthenticated connections held at once; beyond, the oldest goes */
#define ACCEPT_BATCH 64      /* accepts per wakeup, so a connect flood cannot starve the ranks */
#define HDR RINGO_BOOTSTRAP_HEADER_BYTES

/* Formats a variadic function's own arguments into buf. */
#define FORMAT_ARGS(buf, cap, fmt) \
  do { va_list ap_; va_start(ap_, fmt); vsnprintf(buf, cap, fmt, ap_); va_end(ap_); } while (0)

/* ---------------------------------------------------------------- bytes on the wire */

static void put16(uint8_t* p, uint32_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t* p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v); }
static uint32_t get16(const uint8_t* p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t get32(const uint8_t* p) { return get16(p) << 16 | get16(p + 2); }

static ringoResult_t __attribute__((format(printf, 3, 4))) say_why(char* why, size_t cap, const char* fmt, ...) {
  if (why && cap) FORMAT_ARGS(why, cap, fmt);
  return ringoInvalidArgument;
}

void ringo_bootstrap_encode_header(uint8_t out[HDR], uint32_t version, uint32_t type, uint32_t length) {
  put32(out, RINGO_BOOTSTRAP_FRAME_MAGIC);
  put16(out + 4, version);
  put16(out + 6, type);
  put32(out + 8, length);
}

size_t ringo_bootstrap_encode_hello(uint8_t out[RINGO_BOOTSTRAP_HELLO_BYTES], uint32_t version,
                                    const uint8_t secret[RINGO_BOOTSTRAP_SECRET_BYTES], uint32_t nranks, uint32_t rank) {
  ringo_bootstrap_encode_header(out, version, RINGO_BOOT_HELLO, RINGO_BOOTSTRAP_HELLO_BODY);
  memcpy(out + HDR, secret, RINGO_BOOTSTRAP_SECRET_BYTES);
  put32(out + HDR + 16, nranks);
  put32(out + HDR + 20, rank);
  return RINGO_BOOTSTRAP_HELLO_BYTES;
}

ringoResult_t ringo_bootstrap_parse_header(const void* buf, size_t len, uint32_t max_length,
                                           struct ringo_bootstrap_header* h, char* why, size_t why_cap) {
  const uint8_t* p = buf;
  memset(h, 0, sizeof *h);
  if (len < HDR) return say_why(why, why_cap, "truncated message header (%zu of %d bytes)", len, HDR);
  h->magic = get32(p);
  h->version = get16(p + 4);
  h->type = get16(p + 6);
  h->length = get32(p + 8);
  if (h->magic != RINGO_BOOTSTRAP_FRAME_MAGIC)
    return say_why(why, why_cap, "not a ringo bootstrap message (magic 0x%08x)", h->magic);
  if (h->version != RINGO_BOOTSTRAP_VERSION)
    return say_why(why, why_cap, "bootstrap protocol version mismatch: the message has version %u, expected version %d",
                   h->version, RINGO_BOOTSTRAP_VERSION);
  if (h->type < RINGO_BOOT_HELLO || h->type > RINGO_BOOT_BYE)
    return say_why(why, why_cap, "unknown message type %u", h->type);
  if (h->length > max_length)
    return say_why(why, why_cap, "message length %u exceeds the limit of %u bytes", h->length, max_length);
  return ringoSuccess;
}

/* Constant time, so the time a refusal takes says nothing about how much of a guess was right. */
static int same_secret(const uint8_t* a, const uint8_t* b) {
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < RINGO_BOOTSTRAP_SECRET_BYTES; i++) diff |= (uint8_t)(a[i] ^ b[i]);
  return diff == 0;
}

ringoResult_t ringo_bootstrap_parse_hello(const void* buf, size_t len, const uint8_t* secret,
                                          struct ringo_bootstrap_hello* out, char* why, size_t why_cap) {
  struct ringo_bootstrap_header h;
  memset(out, 0, sizeof *out);
  out->rank = UINT32_MAX;
  if (ringo_bootstrap_parse_header(buf, len, RINGO_BOOTSTRAP_HELLO_BODY, &h, why, why_cap) != ringoSuccess)
    return ringoInvalidArgument;
  if (h.type != RINGO_BOOT_HELLO || h.length != RINGO_BOOTSTRAP_HELLO_BODY)
    return say_why(why, why_cap, "expected a hello of %d bytes, got message type %u of %u bytes",
                   RINGO_BOOTSTRAP_HELLO_BODY, h.type, h.length);
  if (len != RINGO_BOOTSTRAP_HELLO_BYTES)
    return say_why(why, why_cap, "hello is %zu bytes long, expected %d", len, RINGO_BOOTSTRAP_HELLO_BYTES);
  const uint8_t* p = (const uint8_t*)buf + HDR;
  memcpy(out->secret, p, RINGO_BOOTSTRAP_SECRET_BYTES);
  out->nranks = get32(p + 16);
  out->rank = get32(p + 20);
  if (secret && !same_secret(out->secret, secret))
    return say_why(why, why_cap, "wrong secret (the unique id was not made by this root)");
  if (out->nranks < 1 || out->nranks > RINGO_BOOTSTRAP_MAX_RANKS)
    return say_why(why, why_cap, "nranks %u out of range [1, %d]", out->nranks, RINGO_BOOTSTRAP_MAX_RANKS);
  if (out->rank >= out->nranks)
    return say_why(why, why_cap, "rank %u out of range for nranks %u", out->rank, out->nranks);
  return ringoSuccess;
}

ringoResult_t ringo_bootstrap_parse_error(const void* body, size_t len, ringoResult_t* code, char* text,
                                          size_t text_cap) {
  const uint8_t* p = body;
  *code = ringoRemoteError;
  if (text_cap) text[0] = '\0';
  if (len < 4 || len > 4 + RINGO_BOOTSTRAP_MAX_ERROR) return ringoInvalidArgument;
  const uint32_t c = get32(p);
  if (c > ringoSuccess && c <= ringoTimeout) *code = (ringoResult_t)c;
  size_t n = 0;
  for (size_t i = 4; i < len && n + 1 < text_cap; i++) text[n++] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
  if (text_cap) text[n] = '\0';
  return ringoSuccess;
}

/* ---------------------------------------------------------------- addresses and the unique id */

/* Where a socket address keeps its port and IP (both big-endian), so IPv4 and IPv6 share code. */
static size_t addr_parts(const struct sockaddr_storage* ss, uint8_t** port, uint8_t** ip) {
  if (ss->ss_family == AF_INET) {
    struct sockaddr_in* a = (struct sockaddr_in*)ss;
    *port = (uint8_t*)&a->sin_port, *ip = (uint8_t*)&a->sin_addr;
    return 4;
  }
  struct sockaddr_in6* a = (struct sockaddr_in6*)ss;
  *port = (uint8_t*)&a->sin6_port, *ip = (uint8_t*)&a->sin6_addr;
  return 16;
}

static void addr_name(const struct sockaddr_storage* ss, char* out, size_t cap) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint8_t *port, *ip;
  const size_t n = addr_parts(ss, &port, &ip);
  inet_ntop(ss->ss_family, ip, host, sizeof host);
  snprintf(out, cap, n == 4 ? "%s:%u" : "[%s]:%u", host, get16(port));
}

static int is_loopback(const struct sockaddr_storage* ss) {
  if (ss->ss_family == AF_INET) return (ntohl(((const struct sockaddr_in*)ss)->sin_addr.s_addr) >> 24) == 127;
  return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6*)ss)->sin6_addr);
}

static void id_encode(ringoUniqueId* id, const struct sockaddr_storage* ss, const uint8_t* secret) {
  uint8_t *p = (uint8_t*)id->internal, *port, *ip;
  const size_t n = addr_parts(ss, &port, &ip);
  memset(p, 0, RINGO_UNIQUE_ID_BYTES);
  put32(p, ID_MAGIC);
  put16(p + 4, RINGO_BOOTSTRAP_VERSION);
  put16(p + 6, n == 4 ? 4 : 6);
  memcpy(p + 8, port, 2);
  if (n == 16) put32(p + 12, ((const struct sockaddr_in6*)ss)->sin6_scope_id);
  memcpy(p + 16, ip, n);
  memcpy(p + RINGO_BOOTSTRAP_ID_SECRET_OFFSET, secret, RINGO_BOOTSTRAP_SECRET_BYTES);
}

ringoResult_t ringo_bootstrap_id_decode(const ringoUniqueId* id, struct ringo_bootstrap_id_info* info) {
  if (!id || !info) return ringo_fail(ringoInvalidArgument, "bootstrap: NULL unique id");
  const uint8_t* p = (const uint8_t*)id->internal;
  uint8_t *port, *ip;
  memset(info, 0, sizeof *info);
  if (get32(p) != ID_MAGIC)
    return ringo_fail(ringoInvalidArgument, "not a ringo unique id (bad magic); pass the id ringoGetUniqueId made");
  const uint32_t family = get16(p + 6);
  if (family != 4 && family != 6)
    return ringo_fail(ringoInvalidArgument, "corrupt ringo unique id (address family %u)", family);
  if (get16(p + 8) == 0) return ringo_fail(ringoInvalidArgument, "corrupt ringo unique id (port 0)");
  info->version = get16(p + 4);
  info->addr.ss_family = family == 4 ? AF_INET : AF_INET6;
  info->addrlen = family == 4 ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  const size_t n = addr_parts(&info->addr, &port, &ip);
  memcpy(port, p + 8, 2);
  memcpy(ip, p + 16, n);
  if (n == 16) ((struct sockaddr_in6*)&info->addr)->sin6_scope_id = get32(p + 12);
  memcpy(info->secret, p + RINGO_BOOTSTRAP_ID_SECRET_OFFSET, RINGO_BOOTSTRAP_SECRET_BYTES);
  return ringoSuccess;
}

/* RINGO_COMM_ID=host:port (or [v6]:port); the host may be a name. */
static ringoResult_t addr_from_comm_id(const char* spec, struct sockaddr_storage* ss, socklen_t* len) {
  const char* colon = strrchr(spec, ':');
  char host[256], *end = NULL, *h = host;
  const size_t n = colon ? (size_t)(colon - spec) : 0;
  if (n == 0 || n >= sizeof host || !colon[1]) return ringo_fail(ringoSystemError, "RINGO_COMM_ID=%s is not host:port", spec);
  if (strtoul(colon + 1, &end, 10) > 65535 || *end) return ringo_fail(ringoSystemError, "RINGO_COMM_ID=%s: bad port", spec);
  memcpy(host, spec, n);
  host[n] = '\0';
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') host[n - 1] = '\0', h++;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
  const int rc = getaddrinfo(h, colon + 1, &hints, &ai);
  if (rc != 0) return ringo_fail(ringoSystemError, "RINGO_COMM_ID=%s: cannot resolve %s: %s", spec, h, gai_strerror(rc));
  memcpy(ss, ai->ai_addr, ai->ai_addrlen);
  *len = ai->ai_addrlen;
  freeaddrinfo(ai);
  return ringoSuccess;
}

/* RINGO_SOCKET_IFNAME=prefix (or =exact): the first matching interface that is up, IPv4 first. */
static ringoResult_t addr_from_ifname(const char* want, struct sockaddr_storage* ss, socklen_t* len) {
  const int exact = want[0] == '=';
  const char* name = want + exact;
  struct ifaddrs *list = NULL, *pick = NULL;
  if (getifaddrs(&list) != 0) return ringo_fail(ringoSystemError, "getifaddrs failed: %s", strerror(errno));
  for (int pass = 0; pass < 2 && !pick; pass++)
    for (struct ifaddrs* ifa = list; ifa && !pick; ifa = ifa->ifa_next)
      if (ifa->ifa_addr && (ifa->ifa_flags & IFF_UP) && ifa->ifa_addr->sa_family == (pass ? AF_INET6 : AF_INET) &&
          (exact ? strcmp(ifa->ifa_name, name) == 0 : strncmp(ifa->ifa_name, name, strlen(name)) == 0))
        pick = ifa;
  if (pick) {
    uint8_t *port, *ip;
    *len = pick->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    memcpy(ss, pick->ifa_addr, *len);
    addr_parts(ss, &port, &ip);
    memset(port, 0, 2); /* an ephemeral port */
  }
  freeifaddrs(list);
  if (!pick) return ringo_fail(ringoSystemError, "RINGO_SOCKET_IFNAME=%s: no interface up with that name and an IP", want);
  return ringoSuccess;
}

/* Binds and listens where the environment says: RINGO_COMM_ID, else RINGO_SOCKET_IFNAME, else
 * loopback (everything is assumed local). On return *ss holds the real port. */
static ringoResult_t open_listener(const struct ringo_env* env, struct sockaddr_storage* ss, int* out) {
  socklen_t len = sizeof(struct sockaddr_in);
  char name[96];
  memset(ss, 0, sizeof *ss);
  if (env->comm_id[0]) RINGO_CHECK(addr_from_comm_id(env->comm_id, ss, &len));
  else if (env->socket_ifname[0]) RINGO_CHECK(addr_from_ifname(env->socket_ifname, ss, &len));
  else ss->ss_family = AF_INET, ((struct sockaddr_in*)ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr_name(ss, name, sizeof name);
  const int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
  if (fd < 0) return ringo_fail(ringoSystemError, "bootstrap root: socket failed: %s", strerror(errno));
  /* A fixed RINGO_COMM_ID port must be reusable right after the previous rendezvous on it. */
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr*)ss, len) != 0 || listen(fd, 1024) != 0 || getsockname(fd, (struct sockaddr*)ss, &len) != 0) {
    const int err = errno;
    close(fd);
    return ringo_fail(ringoSystemError, "bootstrap root: cannot listen on %s: %s", name, strerror(err));
  }
  *out = fd;
  return ringoSuccess;
}

/* ---------------------------------------------------------------- the root thread */

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
  rt->finished = 1;
  if (rt->listen_fd >= 0) shutdown(rt->listen_fd, SHUT_RDWR), close(rt->listen_fd);
  rt->listen_fd = -1;
  for (size_t i = 0; i < rt->nconns; i++)
    if (rt->conns[i]->state == CONN_PENDING) kill_conn(rt, rt->conns[i]);
}

/* Ends the rendezvous for every rank with the same reason. */
static void __attribute__((format(printf, 3, 4))) root_abort(struct root* rt, ringoResult_t code, const char* fmt, ...) {
  if (rt->finished) return;
  char text[RINGO_BOOTSTRAP_MAX_ERROR] = "ended the rendezvous: ";
  const size_t n = strlen(text);
  FORMAT_ARGS(text + n, sizeof text - n, fmt);
  RINGO_INFO(RINGO_LOG_BOOT, "bootstrap root %s %s", rt->name, text);
  for (size_t i = 0; i < rt->nconns; i++) {
    struct conn* c = rt->conns[i];
    /* An ERROR cannot be spliced into a half-sent frame; such a rank just sees the close. */
    if (c->state == CONN_JOINED && c->out && c->out_off) kill_conn(rt, c);
    else if (c->state == CONN_JOINED) send_error_and_close(c, code, text);
  }
  finish(rt);
}

static void conn_lost(struct root* rt, struct conn* c) {
  const int rank = c->rank, joined = c->state == CONN_JOINED;
  kill_conn(rt, c);
  if (joined)
    root_abort(rt, ringoRemoteError, "rank %d disconnected without ringo_bootstrap_close%s", rank,
               rt->all_joined ? "" : " before all ranks joined");
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
  if (hello.nranks != rt->nranks)
    refuse(rt, c, "refused rank %u: nranks %u disagrees with nranks %u of the ranks that joined first", hello.rank,
           hello.nranks, rt->nranks);
  else if (rt->seen[hello.rank])
    refuse(rt, c, "refused rank %u: rank %u already joined", hello.rank, hello.rank);
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
    if (rt->ready++ == 0) rt->first_ready = c->rank;
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
    uint8_t* dst = in_head ? c->head + c->got : c->body + (c->got - HDR);
    if (want == 0) return READ_FRAME;
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

static void join_timeout(struct root* rt) {
  char missing[160] = "";
  size_t used = 0;
  for (uint32_t r = 0; r < rt->nranks && used < sizeof missing - 16; r++)
    if (!rt->seen[r]) used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%u", used ? ", " : "", r);
  root_abort(rt, ringoTimeout, "only %u of %u ranks joined within RINGO_TIMEOUT=%gs (missing ranks: %s%s)", rt->joined,
             rt->nranks, rt->timeout_s, missing, used >= sizeof missing - 16 ? " ..." : "");
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
    if (now >= rt->join_deadline) join_timeout(rt);
    else if (rt->join_deadline < next) next = rt->join_deadline;
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
  }
  for (size_t i = 0; i < rt->nconns; i++) kill_conn(rt, rt->conns[i]);
  reap(rt);
  if (rt->listen_fd >= 0) close(rt->listen_fd);
  free(pfd);
  free(rt->conns);
  free(rt->by_rank);
  free(rt->seen);
  free(rt);
  return NULL;
}

/* Detached, with every signal blocked so it never takes one meant for the application. */
static ringoResult_t start_thread(struct root* rt) {
  pthread_t tid;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int rc = pthread_create(&tid, NULL, root_main, rt);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) return ringo_fail(ringoSystemError, "bootstrap root: pthread_create failed: %s", strerror(rc));
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
  RINGO_CHECK_GOTO(open_listener(&env, &ss, &rt->listen_fd), res, fail);
  /* Up to 256 bytes, getrandom never returns short once the kernel's pool is ready. */
  if (getrandom(rt->secret, sizeof rt->secret, 0) != (ssize_t)sizeof rt->secret) {
    res = ringo_fail(ringoSystemError, "bootstrap root: getrandom failed: %s", strerror(errno));
    goto fail;
  }
  addr_name(&ss, rt->name, sizeof rt->name);
  id_encode(&made, &ss, rt->secret);
  RINGO_INFO(RINGO_LOG_BOOT, "bootstrap root listening on %s", rt->name);
  RINGO_CHECK_GOTO(start_thread(rt), res, fail); /* rt belongs to the thread from here on */
  *id = made;
  return ringoSuccess;
fail:
  if (rt->listen_fd >= 0) close(rt->listen_fd);
  free(rt);
  return res;
}

/* ---------------------------------------------------------------- a rank's side */

struct ringo_bootstrap {
  int fd, rank, nranks;
  double timeout_s;
  uint32_t round;
  ringoResult_t failed; /* the first failure of a round; later calls repeat it */
  char root[96];
  char first_error[512];
};

static int ms_until(double deadline) {
  const double left = deadline - ringo_now();
  return left <= 0 ? 0 : left > 60.0 ? 60000 : (int)(left * 1000.0) + 1;
}

/* The peer (or the network) is at fault for these; anything else is our own system's failure. */
static ringoResult_t net_code(int err) {
  return (err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
          err == ECONNREFUSED) ? ringoRemoteError : ringoSystemError;
}

/* Every blocking wait of a rank goes through here, so every wait ends by the deadline. */
static ringoResult_t wait_fd(const struct ringo_bootstrap* bs, short events, double deadline, const char* what) {
  for (;;) {
    if (ringo_now() >= deadline)
      return ringo_fail(ringoTimeout, "rank %d timed out after %gs (RINGO_TIMEOUT) during %s; bootstrap root at %s",
                        bs->rank, bs->timeout_s, what, bs->root);
    struct pollfd p = {.fd = bs->fd, .events = events};
    const int n = poll(&p, 1, ms_until(deadline));
    if (n > 0) return ringoSuccess;
    if (n < 0 && errno != EINTR) return ringo_fail(ringoSystemError, "rank %d: poll failed: %s", bs->rank, strerror(errno));
  }
}

static ringoResult_t recv_all(const struct ringo_bootstrap* bs, void* buf, size_t len, double deadline, const char* what) {
  for (uint8_t* p = buf; len;) {
    const ssize_t n = recv(bs->fd, p, len, MSG_DONTWAIT);
    if (n > 0) p += n, len -= (size_t)n;
    else if (n == 0)
      return ringo_fail(ringoRemoteError, "rank %d: the bootstrap root at %s closed the connection during %s", bs->rank,
                        bs->root, what);
    else if (errno == EAGAIN || errno == EWOULDBLOCK) RINGO_CHECK(wait_fd(bs, POLLIN, deadline, what));
    else if (errno != EINTR)
      return ringo_fail(net_code(errno), "rank %d: connection to the bootstrap root at %s failed during %s: %s",
                        bs->rank, bs->root, what, strerror(errno));
  }
  return ringoSuccess;
}

/* Reads the next frame header and insists on the expected type and body length. An ERROR frame
 * instead becomes the root's reason, verbatim, with its result code. */
static ringoResult_t read_header(const struct ringo_bootstrap* bs, uint32_t type, uint64_t length, double deadline,
                                 const char* what) {
  uint8_t head[HDR], body[4 + RINGO_BOOTSTRAP_MAX_ERROR];
  char text[RINGO_BOOTSTRAP_MAX_ERROR + 1];
  struct ringo_bootstrap_header h;
  ringoResult_t code;
  RINGO_CHECK(recv_all(bs, head, HDR, deadline, what));
  const uint64_t cap = length > 4 + RINGO_BOOTSTRAP_MAX_ERROR ? length : 4 + RINGO_BOOTSTRAP_MAX_ERROR;
  if (ringo_bootstrap_parse_header(head, HDR, (uint32_t)cap, &h, text, sizeof text) != ringoSuccess)
    return ringo_fail(ringoRemoteError, "rank %d: the bootstrap root at %s sent a malformed message during %s: %s",
                      bs->rank, bs->root, what, text);
  if (h.type == RINGO_BOOT_ERROR && h.length >= 4 && h.length <= 4 + RINGO_BOOTSTRAP_MAX_ERROR) {
    RINGO_CHECK(recv_all(bs, body, h.length, deadline, what));
    ringo_bootstrap_parse_error(body, h.length, &code, text, sizeof text);
    return ringo_fail(code == ringoTimeout ? ringoTimeout : ringoRemoteError, "bootstrap root at %s %s", bs->root, text);
  }
  if (h.type != type || h.length != length)
    return ringo_fail(ringoRemoteError, "rank %d: the bootstrap root at %s sent message type %u of %u bytes during %s",
                      bs->rank, bs->root, h.type, h.length, what);
  return ringoSuccess;
}

/* Whether the root has said something we did not ask for: it only does so to end the rendezvous. */
static int root_spoke(const struct ringo_bootstrap* bs) {
  struct pollfd p = {.fd = bs->fd, .events = POLLIN};
  return poll(&p, 1, 0) > 0;
}

static ringoResult_t send_all(const struct ringo_bootstrap* bs, const void* buf, size_t len, double deadline,
                              const char* what) {
  for (const uint8_t* p = buf; len;) {
    const ssize_t n = send(bs->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n, len -= (size_t)n;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RINGO_CHECK(wait_fd(bs, POLLOUT, deadline, what));
    } else if (errno != EINTR) {
      const int err = errno;
      /* The root may have said why before it hung up; its ERROR frame would be queued here. */
      if (root_spoke(bs)) return read_header(bs, 0, 0, deadline, what);
      return ringo_fail(net_code(err), "rank %d lost its connection to the bootstrap root at %s during %s: %s",
                        bs->rank, bs->root, what, strerror(err));
    }
  }
  return ringoSuccess;
}

/* One non-blocking connect bounded by the deadline; returns 0 or an errno. */
static int try_connect(int fd, const struct ringo_bootstrap_id_info* info, double deadline) {
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int n, err = 0;
  socklen_t len = sizeof err;
  if (connect(fd, (const struct sockaddr*)&info->addr, info->addrlen) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  while ((n = poll(&p, 1, ms_until(deadline))) < 0 && errno == EINTR) continue;
  if (n == 0) return ETIMEDOUT;
  if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

/* The root may not be listening yet (its process is still starting): retry refusals until the deadline. */
static ringoResult_t connect_root(struct ringo_bootstrap* bs, const struct ringo_bootstrap_id_info* info,
                                  double deadline) {
  for (double backoff = 0.005;; backoff = backoff * 2 > 0.1 ? 0.1 : backoff * 2) {
    const int fd = socket(info->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0) return ringo_fail(ringoSystemError, "rank %d: socket failed: %s", bs->rank, strerror(errno));
    const int err = try_connect(fd, info, deadline);
    if (err == 0) {
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      bs->fd = fd;
      return ringoSuccess;
    }
    close(fd);
    const double now = ringo_now();
    if (err != ECONNREFUSED && err != ECONNRESET && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH &&
        err != EAGAIN)
      return ringo_fail(ringoSystemError, "rank %d cannot connect to the bootstrap root at %s: %s", bs->rank, bs->root,
                        strerror(err));
    if (now >= deadline)
      return ringo_fail(ringoTimeout, "rank %d could not connect to the bootstrap root at %s within %gs (RINGO_TIMEOUT): %s%s",
                        bs->rank, bs->root, bs->timeout_s, strerror(err),
                        is_loopback(&info->addr) ? " (it listens on loopback; across hosts set RINGO_SOCKET_IFNAME or "
                                                   "RINGO_COMM_ID where ringoGetUniqueId runs)" : "");
    const double nap = backoff < deadline - now ? backoff : deadline - now;
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = (long)(nap * 1e9)}, NULL);
  }
}

static ringoResult_t join(struct ringo_bootstrap* bs, const struct ringo_bootstrap_id_info* info) {
  const double deadline = ringo_now() + bs->timeout_s;
  uint8_t hello[RINGO_BOOTSTRAP_HELLO_BYTES], ok[4];
  char what[64];
  snprintf(what, sizeof what, "the join of %d ranks", bs->nranks);
  RINGO_CHECK(connect_root(bs, info, deadline));
  ringo_bootstrap_encode_hello(hello, RINGO_BOOTSTRAP_VERSION, info->secret, (uint32_t)bs->nranks, (uint32_t)bs->rank);
  RINGO_CHECK(send_all(bs, hello, sizeof hello, deadline, what));
  RINGO_CHECK(read_header(bs, RINGO_BOOT_OK, 4, deadline + JOIN_GRACE_S, what));
  RINGO_CHECK(recv_all(bs, ok, sizeof ok, deadline + JOIN_GRACE_S, what));
  if (get32(ok) != (uint32_t)bs->nranks)
    return ringo_fail(ringoRemoteError, "rank %d: the bootstrap root at %s admitted %u ranks, expected %d", bs->rank,
                      bs->root, get32(ok), bs->nranks);
  return ringoSuccess;
}

ringoResult_t ringo_bootstrap_init(const ringoUniqueId* id, int nranks, int rank, double timeout_s,
                                   struct ringo_bootstrap** out) {
  struct ringo_bootstrap_id_info info;
  if (!out) return ringo_fail(ringoInvalidArgument, "bootstrap init: out is NULL");
  *out = NULL;
  if (!id) return ringo_fail(ringoInvalidArgument, "bootstrap init: unique id is NULL");
  if (nranks < 1 || nranks > RINGO_BOOTSTRAP_MAX_RANKS)
    return ringo_fail(ringoInvalidArgument, "bootstrap init: nranks %d out of range [1, %d]", nranks, RINGO_BOOTSTRAP_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return ringo_fail(ringoInvalidArgument, "bootstrap init: rank %d out of range [0, %d)", rank, nranks);
  if (!(timeout_s > 0)) return ringo_fail(ringoInvalidArgument, "bootstrap init: timeout %g is not positive", timeout_s);
  RINGO_CHECK(ringo_bootstrap_id_decode(id, &info));
  if (info.version != RINGO_BOOTSTRAP_VERSION)
    return ringo_fail(ringoInvalidArgument, "the unique id speaks bootstrap protocol version %u, this library version %d "
                      "(ranks built from different ringo versions?)", info.version, RINGO_BOOTSTRAP_VERSION);
  struct ringo_bootstrap* bs = calloc(1, sizeof *bs);
  if (!bs) return ringo_fail(ringoSystemError, "bootstrap init: out of memory");
  *bs = (struct ringo_bootstrap){.fd = -1, .rank = rank, .nranks = nranks, .timeout_s = timeout_s};
  addr_name(&info.addr, bs->root, sizeof bs->root);
  const ringoResult_t res = join(bs, &info);
  if (res == ringoSuccess) {
    *out = bs;
    return ringoSuccess;
  }
  if (bs->fd >= 0) close(bs->fd);
  free(bs);
  return res;
}

static ringoResult_t run_round(struct ringo_bootstrap* bs, const void* mine, size_t bytes, void* all) {
  const double deadline = ringo_now() + bs->timeout_s;
  const size_t total = (size_t)bs->nranks * bytes;
  uint8_t head[HDR + 4], round[4];
  char what[64];
  snprintf(what, sizeof what, "%s round %u", bytes ? "allgather" : "barrier", bs->round);
  if (root_spoke(bs)) return read_header(bs, 0, 0, deadline, what); /* hear the root's last words first */
  ringo_bootstrap_encode_header(head, RINGO_BOOTSTRAP_VERSION, RINGO_BOOT_ROUND, (uint32_t)(4 + bytes));
  put32(head + HDR, bs->round);
  RINGO_CHECK(send_all(bs, head, sizeof head, deadline, what));
  if (bytes) RINGO_CHECK(send_all(bs, mine, bytes, deadline, what));
  RINGO_CHECK(read_header(bs, RINGO_BOOT_RESULT, 4 + (uint64_t)total, deadline, what));
  RINGO_CHECK(recv_all(bs, round, sizeof round, deadline, what));
  if (get32(round) != bs->round)
    return ringo_fail(ringoRemoteError, "rank %d: the bootstrap root answered round %u during %s", bs->rank,
                      get32(round), what);
  if (total) RINGO_CHECK(recv_all(bs, all, total, deadline, what));
  bs->round++;
  return ringoSuccess;
}

ringoResult_t ringo_bootstrap_allgather(struct ringo_bootstrap* bs, const void* mine, size_t bytes, void* all) {
  if (!bs) return ringo_fail(ringoInvalidArgument, "bootstrap allgather: handle is NULL");
  if (bytes > RINGO_BOOTSTRAP_MAX_BYTES || (uint64_t)bs->nranks * bytes > UINT32_MAX - 4)
    return ringo_fail(ringoInvalidArgument, "bootstrap allgather of %zu bytes per rank exceeds the limit of %d",
                      bytes, RINGO_BOOTSTRAP_MAX_BYTES);
  if (bytes && (!mine || !all)) return ringo_fail(ringoInvalidArgument, "bootstrap allgather: NULL buffer");
  if (bs->failed) return ringo_fail(bs->failed, "rank %d: the bootstrap failed earlier: %s", bs->rank, bs->first_error);
  const ringoResult_t res = run_round(bs, mine, bytes, all);
  if (res != ringoSuccess) {
    bs->failed = res;
    snprintf(bs->first_error, sizeof bs->first_error, "%s", ringo_thread_last_error());
  }
  return res;
}

ringoResult_t ringo_bootstrap_barrier(struct ringo_bootstrap* bs) { return ringo_bootstrap_allgather(bs, NULL, 0, NULL); }

void ringo_bootstrap_close(struct ringo_bootstrap* bs) {
  if (!bs) return;
  uint8_t bye[HDR];
  ringo_bootstrap_encode_header(bye, RINGO_BOOTSTRAP_VERSION, RINGO_BOOT_BYE, 0);
  /* Between rounds the send buffer is empty, so this goes out at once; after a failure, or with
   * the root gone, there is nobody left to tell. */
  if (!bs->failed) (void)send(bs->fd, bye, sizeof bye, MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(bs->fd, SHUT_RDWR);
  close(bs->fd);
  free(bs);
}
