/* bootstrap_wire.h — the plumbing src/bootstrap.c and src/bootstrap_root.c share: big-endian byte
 * helpers and the id/listener functions the root needs from the rank side. Internal to those two files;
 * depends on bootstrap.h. Covered by test/test_bootstrap.cc through the functions in bootstrap.h. */
#ifndef RINGO_BOOTSTRAP_WIRE_H_
#define RINGO_BOOTSTRAP_WIRE_H_

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "boot/bootstrap.h"

#define HDR RINGO_BOOTSTRAP_HEADER_BYTES

/* Formats a variadic function's own arguments into buf. */
#define FORMAT_ARGS(buf, cap, fmt) \
  do { va_list ap_; va_start(ap_, fmt); vsnprintf(buf, cap, fmt, ap_); va_end(ap_); } while (0)

/* Inline so that both files share one copy of each without a call per byte pair. */
static inline void put16(uint8_t* p, uint32_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void put32(uint8_t* p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v); }
static inline uint32_t get16(const uint8_t* p) { return (uint32_t)p[0] << 8 | p[1]; }
static inline uint32_t get32(const uint8_t* p) { return get16(p) << 16 | get16(p + 2); }

struct ringo_env;

/* Writes "host:port" (or "[v6]:port") of ss into out. */
void ringo_bootstrap_addr_name(const struct sockaddr_storage* ss, char* out, size_t cap);

/* Fills id with where ss listens, our protocol version and secret (layout in bootstrap.h). */
void ringo_bootstrap_id_encode(ringoUniqueId* id, const struct sockaddr_storage* ss, const uint8_t* secret);

/* Opens the root's listening socket (non-blocking) at the address env picks; *ss gets the real port.
 * @return ringoSuccess; ringoSystemError with a message. */
ringoResult_t ringo_bootstrap_open_listener(const struct ringo_env* env, struct sockaddr_storage* ss, int* out);

#endif /* RINGO_BOOTSTRAP_WIRE_H_ */
