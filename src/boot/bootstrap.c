/* bootstrap.c — unique-id rendezvous over TCP, rank side: the id, where the root binds, the wire
 * encode/parse helpers, and a rank's join/allgather/barrier/close. The root thread is bootstrap_root.c.
 * Depends on core.h only (errors, env, clock). Tested by test/test_bootstrap.cc; wire format in bootstrap.h. */
#include "boot/bootstrap.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "boot/bootstrap_wire.h"
#include "core/core.h"

#define ID_MAGIC 0x52474944u /* "RGID" */
#define JOIN_GRACE_S 0.5     /* a joining rank waits this much past its timeout, so the root's fuller
                                "k of n joined" report arrives before the rank's own deadline */

/* ---------------------------------------------------------------- bytes on the wire */

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

void ringo_bootstrap_addr_name(const struct sockaddr_storage* ss, char* out, size_t cap) {
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

void ringo_bootstrap_id_encode(ringoUniqueId* id, const struct sockaddr_storage* ss, const uint8_t* secret) {
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
ringoResult_t ringo_bootstrap_open_listener(const struct ringo_env* env, struct sockaddr_storage* ss, int* out) {
  socklen_t len = sizeof(struct sockaddr_in);
  char name[96];
  memset(ss, 0, sizeof *ss);
  if (env->comm_id[0]) RINGO_CHECK(addr_from_comm_id(env->comm_id, ss, &len));
  else if (env->socket_ifname[0]) RINGO_CHECK(addr_from_ifname(env->socket_ifname, ss, &len));
  else ss->ss_family = AF_INET, ((struct sockaddr_in*)ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ringo_bootstrap_addr_name(ss, name, sizeof name);
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

/* Set when this thread's connection to the root ended without a word from the root (EOF, reset, broken
 * pipe): what a join whose connection raced the root's closing listener sees (join). */
static _Thread_local int connection_dropped;

static ringoResult_t recv_all(const struct ringo_bootstrap* bs, void* buf, size_t len, double deadline, const char* what) {
  for (uint8_t* p = buf; len;) {
    const ssize_t n = recv(bs->fd, p, len, MSG_DONTWAIT);
    if (n > 0) p += n, len -= (size_t)n;
    else if (n == 0) {
      connection_dropped = 1;
      return ringo_fail(ringoRemoteError, "rank %d: the bootstrap root at %s closed the connection during %s: the "
                        "process that called ringoGetUniqueId exited or failed", bs->rank, bs->root, what);
    }
    else if (errno == EAGAIN || errno == EWOULDBLOCK) RINGO_CHECK(wait_fd(bs, POLLIN, deadline, what));
    else if (errno != EINTR) {
      const int err = errno;
      connection_dropped = err == ECONNRESET;
      return ringo_fail(net_code(err), "rank %d: connection to the bootstrap root at %s failed during %s: %s",
                        bs->rank, bs->root, what, strerror(err));
    }
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
      connection_dropped = err == EPIPE || err == ECONNRESET;
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

/* The root listens before ringoGetUniqueId returns the id, so a refusal that lasts means its listener
 * is closed: its process exited, or the rendezvous of this id is over. Refusals are retried only this
 * long (a listener can refuse for a moment when its backlog overflows), unreachable routes until the
 * deadline (a network coming up). */
#define REFUSED_GRACE_S 0.25
/* Connections a join makes when the root drops them unanswered (join): the second one is refused where
 * the rendezvous is over; more would only hide a root that keeps dropping it. */
#define JOIN_ATTEMPTS 3

static ringoResult_t connect_root(struct ringo_bootstrap* bs, const struct ringo_bootstrap_id_info* info,
                                  double deadline) {
  double refused_since = 0;
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
    /* Refusals and unreachable routes: the root is not up yet; EAGAIN/EADDRNOTAVAIL: no free local
     * port for now (they come back as TIME_WAIT ends). Anything else will not heal by waiting. */
    if (err != ECONNREFUSED && err != ECONNRESET && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH &&
        err != EAGAIN && err != EADDRNOTAVAIL)
      return ringo_fail(ringoSystemError, "rank %d cannot connect to the bootstrap root at %s: %s", bs->rank, bs->root,
                        strerror(err));
    if (err != ECONNREFUSED) refused_since = 0;
    else if (refused_since == 0) refused_since = now;
    else if (now - refused_since >= REFUSED_GRACE_S)
      return ringo_fail(ringoRemoteError, "rank %d: the bootstrap root at %s refuses connections: the process that "
                        "called ringoGetUniqueId exited or failed, or the rendezvous of this unique id is over",
                        bs->rank, bs->root);
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
  ringo_bootstrap_encode_hello(hello, RINGO_BOOTSTRAP_VERSION, info->secret, (uint32_t)bs->nranks, (uint32_t)bs->rank);
  /* A connection the root drops unanswered landed in its listener's backlog as the listener closed (the
   * rendezvous ended, or the root's process exited): connecting again is refused then, and says so. */
  for (int attempt = 1;; attempt++) {
    RINGO_CHECK(connect_root(bs, info, deadline));
    connection_dropped = 0;
    ringoResult_t res = send_all(bs, hello, sizeof hello, deadline, what);
    if (res == ringoSuccess) res = read_header(bs, RINGO_BOOT_OK, 4, deadline + JOIN_GRACE_S, what);
    if (res == ringoSuccess) break;
    if (!connection_dropped || attempt == JOIN_ATTEMPTS || ringo_now() >= deadline) return res;
    close(bs->fd);
    bs->fd = -1;
  }
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
  ringo_bootstrap_addr_name(&info.addr, bs->root, sizeof bs->root);
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
  /* The root times the round out itself, naming the ranks that did not come: wait a little longer. */
  RINGO_CHECK(read_header(bs, RINGO_BOOT_RESULT, 4 + (uint64_t)total, deadline + JOIN_GRACE_S, what));
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
