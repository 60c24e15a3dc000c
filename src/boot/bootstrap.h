/* bootstrap.h — rendezvous of ranks over TCP through a root started by ringoGetUniqueId, and the
 * small allgather/barrier the communicator setup needs. Tested by test/test_bootstrap.cc. */
#ifndef RINGO_BOOTSTRAP_H_
#define RINGO_BOOTSTRAP_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ringo.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RINGO_BOOTSTRAP_VERSION 1
#define RINGO_BOOTSTRAP_MAX_BYTES (64 * 1024)  /* largest per-rank allgather payload */

struct ringo_bootstrap;

/* Starts the root listener (a thread of this process) and fills *id. */
ringoResult_t ringo_bootstrap_root_start(ringoUniqueId* id);

/* Joins the rendezvous described by id as rank of nranks; every wait bounded by timeout_s. */
ringoResult_t ringo_bootstrap_init(const ringoUniqueId* id, int nranks, int rank, double timeout_s,
                                   struct ringo_bootstrap** out);

/* all[r*bytes .. (r+1)*bytes) = rank r's mine. Every rank must pass the same bytes. */
ringoResult_t ringo_bootstrap_allgather(struct ringo_bootstrap* bs, const void* mine, size_t bytes, void* all);
ringoResult_t ringo_bootstrap_barrier(struct ringo_bootstrap* bs);

/* Leaves the rendezvous; the root thread ends once every rank has left. */
void ringo_bootstrap_close(struct ringo_bootstrap* bs);

/* Root threads of this process that have not yet ended: counted from before ringo_bootstrap_root_start
 * returns until the thread has freed everything, so a test that has just made an id never reads 0. */
int ringo_bootstrap_roots_alive(void);
/* After a failed init: gives a root thread in this process (at most max_s) to see the failure and
 * tell the other ranks why, before the caller returns and perhaps exits. No root here: returns. */
void ringo_bootstrap_let_root_speak(double max_s);

/* ---- The unique id and the wire protocol, exposed for tests and fuzzers ----
 *
 * Unique id (ringoUniqueId.internal, 128 bytes, integers big-endian):
 *   [0,4) magic "RGID" | [4,6) protocol version | [6,8) address family: 4 or 6 | [8,10) port |
 *   [10,12) zero | [12,16) IPv6 scope id | [16,32) address | [32,48) secret | [48,128) zero
 *
 * Every message is a frame: a 12-byte header (magic u32, version u16, type u16, body length u32,
 * big-endian) followed by `length` body bytes:
 *   HELLO  rank -> root  secret[16] | nranks u32 | rank u32
 *   OK     root -> rank  nranks u32                  every rank has joined
 *   ERROR  root -> rank  result u32 | text            refusal or end of the rendezvous; root closes
 *   ROUND  rank -> root  round u32 | payload          one allgather (barrier: empty payload)
 *   RESULT root -> rank  round u32 | payload of rank 0 | ... | payload of rank nranks-1
 *   BYE    rank -> root  (empty)                      ringo_bootstrap_close */
#define RINGO_BOOTSTRAP_ID_SECRET_OFFSET 32
#define RINGO_BOOTSTRAP_SECRET_BYTES 16
#define RINGO_BOOTSTRAP_MAX_RANKS 65536
#define RINGO_BOOTSTRAP_FRAME_MAGIC 0x52474f46u /* "RGOF" */
#define RINGO_BOOTSTRAP_HEADER_BYTES 12
#define RINGO_BOOTSTRAP_HELLO_BODY 24
#define RINGO_BOOTSTRAP_HELLO_BYTES (RINGO_BOOTSTRAP_HEADER_BYTES + RINGO_BOOTSTRAP_HELLO_BODY)
#define RINGO_BOOTSTRAP_MAX_ERROR 400 /* longest text of an ERROR frame */

enum {
  RINGO_BOOT_HELLO = 1, RINGO_BOOT_OK = 2, RINGO_BOOT_ERROR = 3,
  RINGO_BOOT_ROUND = 4, RINGO_BOOT_RESULT = 5, RINGO_BOOT_BYE = 6
};

struct ringo_bootstrap_header {
  uint32_t magic, version, type, length;
};

struct ringo_bootstrap_hello {
  uint8_t secret[RINGO_BOOTSTRAP_SECRET_BYTES];
  uint32_t nranks;
  uint32_t rank; /* UINT32_MAX when the hello was too broken to name a rank */
};

/* What a unique id says: where the root listens, the protocol version and the secret. */
struct ringo_bootstrap_id_info {
  struct sockaddr_storage addr;
  socklen_t addrlen;
  uint32_t version;
  uint8_t secret[RINGO_BOOTSTRAP_SECRET_BYTES];
};

/* Decodes id (tests use it to talk to the root without a real rank).
 * @return ringoSuccess; ringoInvalidArgument (NULL, bad magic, corrupt address) with a message. */
ringoResult_t ringo_bootstrap_id_decode(const ringoUniqueId* id, struct ringo_bootstrap_id_info* info);

/* Writes a frame header with our magic and the given version/type/length. */
void ringo_bootstrap_encode_header(uint8_t out[RINGO_BOOTSTRAP_HEADER_BYTES], uint32_t version, uint32_t type,
                                   uint32_t length);
/* Writes a whole HELLO frame; returns RINGO_BOOTSTRAP_HELLO_BYTES. */
size_t ringo_bootstrap_encode_hello(uint8_t out[RINGO_BOOTSTRAP_HELLO_BYTES], uint32_t version,
                                    const uint8_t secret[RINGO_BOOTSTRAP_SECRET_BYTES], uint32_t nranks,
                                    uint32_t rank);

/* The parsers below read untrusted bytes: they never log, allocate or read outside [buf, buf+len).
 * On failure they return ringoInvalidArgument and write a one-line reason into why (why may be NULL
 * when why_cap is 0). */

/* Checks the first 12 bytes of buf: magic, version == RINGO_BOOTSTRAP_VERSION, a known type and
 * length <= max_length. Fills *h (as far as it got) either way. */
ringoResult_t ringo_bootstrap_parse_header(const void* buf, size_t len, uint32_t max_length,
                                           struct ringo_bootstrap_header* h, char* why, size_t why_cap);

/* Checks a whole HELLO frame (header included, len must be exactly RINGO_BOOTSTRAP_HELLO_BYTES):
 * header, secret (constant time; skipped when secret is NULL), 1 <= nranks <= MAX_RANKS,
 * rank < nranks. Fills *out as far as it got. */
ringoResult_t ringo_bootstrap_parse_hello(const void* buf, size_t len, const uint8_t* secret,
                                          struct ringo_bootstrap_hello* out, char* why, size_t why_cap);

/* Checks the body of an ERROR frame (4 <= len <= 4 + MAX_ERROR): *code is its result (an unknown
 * code reads as ringoRemoteError), text its printable, NUL-terminated, possibly truncated message. */
ringoResult_t ringo_bootstrap_parse_error(const void* body, size_t len, ringoResult_t* code, char* text,
                                          size_t text_cap);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_BOOTSTRAP_H_ */
