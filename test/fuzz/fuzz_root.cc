// fuzz_root.cc — libFuzzer harness for hostile input at the bootstrap port: per input a fresh root
// (ringoGetUniqueId) gets the bytes over TCP from a stranger or from a member next to genuine ranks.
// Depends on src/include/bootstrap.h; run with `make fuzz`. The checks: see LLVMFuzzerTestOneInput.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

extern "C" {
#include "boot/bootstrap.h"
#include "core/core.h"
}

#include "fuzz.h"

namespace {

using ringo_fuzz::Cursor;
using ringo_fuzz::KnownResult;

constexpr double kRankTimeout = 2.0;  // genuine ranks' RINGO_TIMEOUT-like bound
constexpr double kCloseBound = 5.0;   // the root must have closed our connection by then

// Why the last Connect gave up (0: it did not), so a failed check can say what the input met.
int last_connect_errno = 0;

// A client socket closed with a reset, so thousands of inputs leave no TIME_WAIT behind. A
// transient local shortage (no free port, a signal) is retried for a while: giving up would leave
// this input's root unjoined, and such a root waits for its first rank for ever, by design.
int Connect(const ringo_bootstrap_id_info& info) {
  const double give_up = ringo_now() + 2.0;
  for (;;) {
    const int fd = socket(info.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FUZZ_CHECK(fd >= 0);
    const linger hard = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&info.addr), info.addrlen) == 0) return fd;
    last_connect_errno = errno;
    close(fd);
    const bool transient = last_connect_errno == EINTR || last_connect_errno == EADDRNOTAVAIL ||
                           last_connect_errno == EAGAIN;
    if (!transient || ringo_now() > give_up) return -1;
    usleep(10000);
  }
}

// Sends out (all of it, unless the root closes first) while reading whatever the root says; with
// until_bytes > 0 stops once that much has arrived, else shuts our side down and reads to EOF.
// Returns false when the root neither answered nor closed within kCloseBound.
bool Exchange(int fd, const std::vector<uint8_t>& out, std::vector<uint8_t>* got, size_t until_bytes) {
  const double deadline = ringo_now() + kCloseBound;
  size_t sent = 0;
  bool shut = false;
  for (;;) {
    if (until_bytes && got->size() >= until_bytes) return true;
    if (!until_bytes && sent == out.size() && !shut) {
      shutdown(fd, SHUT_WR);
      shut = true;
    }
    pollfd p = {fd, static_cast<short>(POLLIN | (sent < out.size() ? POLLOUT : 0)), 0};
    const double left = deadline - ringo_now();
    if (left <= 0) return false;
    if (poll(&p, 1, static_cast<int>(left * 1000) + 1) < 0 && errno != EINTR) return true;
    if (p.revents & POLLIN) {
      uint8_t buf[4096];
      const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;  // closed (or reset)
      if (n > 0) got->insert(got->end(), buf, buf + n);
    }
    if ((p.revents & POLLOUT) && sent < out.size()) {
      const ssize_t n = send(fd, out.data() + sent, out.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
      else if (n < 0 && errno != EAGAIN && errno != EINTR) sent = out.size();  // root gone: stop sending
    }
    if ((p.revents & (POLLERR | POLLHUP)) && !(p.revents & POLLIN)) return true;
  }
}

// Everything the root writes is a sequence of whole, valid OK / ERROR / RESULT frames; only the
// last may be cut short (the root closes a half-sent RESULT rather than splice in an ERROR).
void CheckRootStream(const std::vector<uint8_t>& s) {
  size_t at = 0;
  while (at + RINGO_BOOTSTRAP_HEADER_BYTES <= s.size()) {
    ringo_bootstrap_header h;
    FUZZ_CHECK(ringo_bootstrap_parse_header(s.data() + at, RINGO_BOOTSTRAP_HEADER_BYTES, UINT32_MAX, &h, nullptr, 0) ==
               ringoSuccess);
    FUZZ_CHECK(h.type == RINGO_BOOT_OK || h.type == RINGO_BOOT_ERROR || h.type == RINGO_BOOT_RESULT);
    const size_t body = at + RINGO_BOOTSTRAP_HEADER_BYTES;
    if (body + h.length > s.size()) return;
    if (h.type == RINGO_BOOT_OK) FUZZ_CHECK(h.length == 4);
    if (h.type == RINGO_BOOT_RESULT) FUZZ_CHECK(h.length >= 4);
    if (h.type == RINGO_BOOT_ERROR) {
      ringoResult_t code;
      char text[RINGO_BOOTSTRAP_MAX_ERROR + 1];
      FUZZ_CHECK(ringo_bootstrap_parse_error(s.data() + body, h.length, &code, text, sizeof text) == ringoSuccess);
    }
    at = body + h.length;
  }
}

// A genuine rank: join, a few allgathers, leave. Its outcome is not checked (the hostile peer may
// legitimately end the rendezvous), only that it ends within its timeouts with a known code.
void GenuineRank(const ringoUniqueId& id, int n, int r, int rounds, double timeout_s) {
  ringo_bootstrap* bs = nullptr;
  ringoResult_t res = ringo_bootstrap_init(&id, n, r, timeout_s, &bs);
  FUZZ_CHECK(KnownResult(res));
  for (int k = 0; res == ringoSuccess && k < rounds; k++) {
    uint8_t mine[8], all[8 * 4];
    memset(mine, r + 16 * k, sizeof mine);
    res = ringo_bootstrap_allgather(bs, mine, sizeof mine, all);
    FUZZ_CHECK(KnownResult(res));
  }
  if (bs) ringo_bootstrap_close(bs);
}

// Waits (bounded) until no root is left, so no input's root outlives it. The library counts a
// root from before ringoGetUniqueId returns, so this cannot pass before the root has even started.
bool RootsGone(double within_s) {
  const double end = ringo_now() + within_s;
  while (ringo_bootstrap_roots_alive() > 0) {
    if (ringo_now() > end) return false;
    usleep(500);
  }
  return true;
}

void PatchSecret(std::vector<uint8_t>& raw, const uint8_t* secret) {
  // Where a HELLO carries its secret, so the fuzzer can reach the checks behind it.
  if (raw.size() >= RINGO_BOOTSTRAP_HEADER_BYTES + RINGO_BOOTSTRAP_SECRET_BYTES)
    memcpy(raw.data() + RINGO_BOOTSTRAP_HEADER_BYTES, secret, RINGO_BOOTSTRAP_SECRET_BYTES);
}

// A stranger: raw bytes on a connection that has not joined.
void Stranger(const ringoUniqueId& id, const ringo_bootstrap_id_info& info, uint8_t flags, Cursor& in) {
  std::vector<uint8_t> raw(in.rest(), in.rest() + in.left()), got;
  if (flags & 0x20) PatchSecret(raw, info.secret);
  const int fd = Connect(info);
  if (fd < 0) return;
  FUZZ_CHECK(Exchange(fd, raw, &got, 0));
  close(fd);
  CheckRootStream(got);
  // Unless the bytes joined (then our close ended the rendezvous and the root with it), a genuine
  // one-rank job gets in at once, and its leaving ends the root thread. (When the root is gone
  // its refused connects are retried until the timeout, so that is short.)
  GenuineRank(id, 1, 0, 1, 0.25);
}

// A peer that joined as rank r of n with a genuine HELLO, next to genuine ranks; once the root
// says OK it sends the fuzz bytes (ROUNDs, BYEs, junk) and leaves.
void Member(const ringoUniqueId& id, const ringo_bootstrap_id_info& info, uint8_t flags, Cursor& in) {
  const int n = 1 + ((flags >> 1) & 3), r = ((flags >> 3) & 3) % n, rounds = (flags >> 5) & 3;
  const int fd = Connect(info);
  if (fd < 0) return;
  std::vector<uint8_t> hello(RINGO_BOOTSTRAP_HELLO_BYTES), got;
  ringo_bootstrap_encode_hello(hello.data(), RINGO_BOOTSTRAP_VERSION, info.secret, static_cast<uint32_t>(n),
                               static_cast<uint32_t>(r));
  std::vector<std::thread> ranks;
  for (int q = 0; q < n; q++)
    if (q != r) ranks.emplace_back(GenuineRank, std::cref(id), n, q, rounds, kRankTimeout);
  const bool answered = Exchange(fd, hello, &got, RINGO_BOOTSTRAP_HEADER_BYTES + 4);
  FUZZ_CHECK(answered);
  std::vector<uint8_t> raw(in.rest(), in.rest() + in.left());
  FUZZ_CHECK(Exchange(fd, raw, &got, 0));
  close(fd);
  for (std::thread& t : ranks) t.join();
  CheckRootStream(got);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ringo_fuzz::QuietLibrary();
  setenv("RINGO_TIMEOUT", "2", 1);  // the root's hello deadline for a silent stranger
  return 0;
}

// Byte 0: bit 0 picks a stranger or a member; the other bits shape the job. The rest is sent.
// Checks: the root closes every connection within a bound, writes only well-formed frames, keeps
// admitting genuine ranks (their codes are known ones), and its thread ends with its rendezvous.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Cursor in(data, size);
  const uint8_t flags = in.Byte();
  last_connect_errno = 0;
  ringoUniqueId id;
  if (ringoGetUniqueId(&id) != ringoSuccess) return 0;  // out of ports or fds: nothing to test
  ringo_bootstrap_id_info info;
  FUZZ_CHECK(ringo_bootstrap_id_decode(&id, &info) == ringoSuccess);
  if (flags & 1) Member(id, info, flags, in);
  else Stranger(id, info, flags, in);
  // The rendezvous is over (or never began, if a slow cleanup join missed it: then one more):
  // its root thread must end. The bounds are generous because a loaded 2-core CI machine can
  // stall a thread for seconds; a root that really hangs is still caught. With the connect retries,
  // the exchanges and the fallback rank an input can take about 26 s here; .ci/fuzz.sh's -timeout
  // is past that, so this message, not libFuzzer's, reports it.
  if (!RootsGone(3.0)) {
    GenuineRank(id, 1, 0, 1, kRankTimeout);
    if (!RootsGone(6.0)) {
      fprintf(stderr, "fuzz_root: %d root thread(s) still running after the input (flags 0x%02x, %zu bytes; last "
              "connect error: %s)\n", ringo_bootstrap_roots_alive(), flags, size,
              last_connect_errno ? strerror(last_connect_errno) : "none");
      FUZZ_CHECK(!"the root outlived its rendezvous");
    }
  }
  return 0;
}
