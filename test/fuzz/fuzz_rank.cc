// fuzz_rank.cc — libFuzzer harness for hostile peers as one rank sees them: a fake root sends raw or
// well-framed bytes with forged payloads (host names, link infos), or plays a forged ring peer.
// Depends on include/ringo.h, bootstrap.h, transport.h; run with `make fuzz`. Modes: see FakeRoot.
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
#include "boot/bootstrap_wire.h"
#include "core/core.h"
}

#include "fuzz.h"
#include "transport/transport.h"  // C++-ready on its own

namespace {

using ringo_fuzz::Cursor;
using ringo_fuzz::KnownResult;

constexpr double kRootBound = 8.0;  // the rank must have connected, spoken and left by then

const uint8_t kSecret[RINGO_BOOTSTRAP_SECRET_BYTES] = {7, 1, 7, 2, 7, 3, 7, 4, 7, 5, 7, 6, 7, 7, 7, 8};

// The fake root's end of the one connection: whole reads and writes bounded by one deadline.
class Wire {
 public:
  Wire(int fd, double deadline) : fd_(fd), deadline_(deadline) {}
  // False on EOF, error or deadline.
  bool Read(void* buf, size_t len) {
    uint8_t* p = static_cast<uint8_t*>(buf);
    while (len) {
      if (!Wait(POLLIN)) return false;
      const ssize_t n = recv(fd_, p, len, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
      if (n > 0) p += n, len -= static_cast<size_t>(n);
    }
    return true;
  }
  bool Write(const void* buf, size_t len) {
    const uint8_t* p = static_cast<const uint8_t*>(buf);
    while (len) {
      if (!Wait(POLLOUT)) return false;
      const ssize_t n = send(fd_, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
      if (n > 0) p += n, len -= static_cast<size_t>(n);
    }
    return true;
  }
  // Reads and drops until the rank closes; false if it is still there at the deadline.
  bool DrainToEof() {
    uint8_t junk[4096];
    for (;;) {
      if (!Wait(POLLIN)) return false;
      const ssize_t n = recv(fd_, junk, sizeof junk, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
    }
  }
  bool timed_out() const { return timed_out_; }

 private:
  bool Wait(short events) {
    const double left = deadline_ - ringo_now();
    pollfd p = {fd_, events, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left * 1000) + 1) == 0) {
      timed_out_ = true;
      return false;
    }
    return true;
  }
  int fd_;
  double deadline_;
  bool timed_out_ = false;
};

// What the fake root does with the input, on its own thread; the rank runs on the fuzzer's.
// Raw: the input is the whole byte stream the rank reads after its HELLO (its frame parsing).
// Framed: OK, then a RESULT for every ROUND with forged payloads for the other ranks (comm.c's
// handling of their host names and link infos, then one all-reduce over whatever links came of it).
// Peer: framed, 2 ranks, and the other rank's links are real shm links this thread drives, feeding
// the all-reduce forged slices (fingerprints, lengths) and poison.
class FakeRoot {
 public:
  FakeRoot(std::vector<uint8_t> script, bool framed, bool peer)
      : script_(std::move(script)), in_(nullptr, 0), framed_(framed), peer_(peer) {
    in_ = Cursor(script_.data(), script_.size());
  }

  // Listens on loopback and fills id so that a rank connects here.
  bool Listen(ringoUniqueId* id) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    sockaddr_in* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof *a;
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(a), len) != 0 || listen(listen_fd_, 4) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(a), &len) != 0)
      return false;
    ringo_bootstrap_id_encode(id, &ss, kSecret);
    return true;
  }
  ~FakeRoot() {
    if (listen_fd_ >= 0) close(listen_fd_);
    if (psend_) ringo_transport_shm.close(psend_);
    if (precv_) ringo_transport_shm.close(precv_);
  }

  // Serves one rank; returns false if the rank hung (never connected, spoke or left in time).
  bool Serve() {
    const double deadline = ringo_now() + kRootBound;
    pollfd p = {listen_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(kRootBound * 1000)) != 1) return false;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return false;
    const linger hard = {1, 0};  // reset on close: no TIME_WAIT per input
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    Wire w(fd, deadline);
    uint8_t hello[RINGO_BOOTSTRAP_HELLO_BYTES];
    ringo_bootstrap_hello h;
    bool ok = w.Read(hello, sizeof hello);
    if (ok) FUZZ_CHECK(ringo_bootstrap_parse_hello(hello, sizeof hello, kSecret, &h, nullptr, 0) == ringoSuccess);
    if (ok && framed_) ok = Rounds(w, h.nranks, h.rank);
    else if (ok) ok = w.Write(script_.data(), script_.size());
    shutdown(fd, SHUT_WR);
    const bool left = w.DrainToEof();
    close(fd);
    if (precv_ && psend_) Peer();
    return left || !w.timed_out();
  }

 private:
  // OK, then a RESULT for every ROUND: this rank's own payload where it belongs, the script's
  // bytes (or its edits of a copy of the rank's payload) in the other ranks' slots.
  bool Rounds(Wire& w, uint32_t nranks, uint32_t rank) {
    Cursor& in = in_;
    uint8_t frame[RINGO_BOOTSTRAP_HEADER_BYTES + 4];
    ringo_bootstrap_encode_header(frame, RINGO_BOOTSTRAP_VERSION, RINGO_BOOT_OK, 4);
    put32(frame + RINGO_BOOTSTRAP_HEADER_BYTES, nranks);
    if (!w.Write(frame, sizeof frame)) return false;
    for (;;) {
      ringo_bootstrap_header h;
      if (!w.Read(frame, RINGO_BOOTSTRAP_HEADER_BYTES)) return true;  // the rank left
      FUZZ_CHECK(ringo_bootstrap_parse_header(frame, RINGO_BOOTSTRAP_HEADER_BYTES, 4 + RINGO_BOOTSTRAP_MAX_BYTES, &h,
                                              nullptr, 0) == ringoSuccess);  // the rank speaks only valid frames
      if (h.type == RINGO_BOOT_BYE) return true;
      FUZZ_CHECK(h.type == RINGO_BOOT_ROUND && h.length >= 4);
      std::vector<uint8_t> body(h.length);
      if (!w.Read(body.data(), body.size())) return true;
      const std::vector<uint8_t> out = Result(in, body, nranks, rank);
      if (!w.Write(out.data(), out.size())) return false;
    }
  }

  std::vector<uint8_t> Result(Cursor& in, const std::vector<uint8_t>& round, uint32_t nranks, uint32_t rank) {
    const size_t bytes = round.size() - 4;
    std::vector<uint8_t> out(RINGO_BOOTSTRAP_HEADER_BYTES + 4 + nranks * bytes);
    const uint8_t how = in.Byte();
    ringo_bootstrap_encode_header(out.data(), RINGO_BOOTSTRAP_VERSION, RINGO_BOOT_RESULT,
                                  static_cast<uint32_t>(out.size() - RINGO_BOOTSTRAP_HEADER_BYTES));
    memcpy(out.data() + RINGO_BOOTSTRAP_HEADER_BYTES, round.data(), 4);  // the round number it asked for
    uint8_t* slots = out.data() + RINGO_BOOTSTRAP_HEADER_BYTES + 4;
    if (peer_ && nranks == 2 && bytes == RINGO_LINK_INFO_BYTES && !precv_) {
      Link(round.data() + 4, slots + (1 - rank) * bytes);
      memcpy(slots + rank * bytes, round.data() + 4, bytes);
      return out;
    }
    for (uint32_t q = 0; q < nranks; q++) {
      uint8_t* slot = slots + q * bytes;
      memcpy(slot, round.data() + 4, bytes);  // a copy of the rank's own: same host, its own link info
      if (q == rank) continue;
      if (how & 1) in.Bytes(slot, bytes);                              // fresh bytes
      for (int k = (how >> 1) & 7; k > 0 && bytes; k--) slot[in.U16() % bytes] = in.Byte();  // edits
    }
    return out;
  }


  // Peer mode, the link round of a 2-rank ring: attach a sender to the rank's receive FIFO and
  // describe a receive FIFO of our own in the other rank's slot, with the rank's sizes.
  void Link(const uint8_t* rank_info, uint8_t* our_info) {
    ringo_env env;
    ringo_env_read(&env);
    ringo_link_params p;
    memset(&p, 0, sizeof p);
    p.slot_bytes = env.slice_bytes;
    p.nslots = env.nslots;
    p.timeout_s = 0.05;
    p.self_rank = 1, p.peer_rank = 0;
    if (ringo_transport_shm.recv_setup(&p, &precv_, our_info) != ringoSuccess) precv_ = nullptr;
    if (ringo_transport_shm.send_connect(&p, rank_info, &psend_) != ringoSuccess) psend_ = nullptr;
    slot_bytes_ = p.slot_bytes;
  }

  // Peer mode, once the rank has its communicator and runs its all-reduce: drain its slices
  // (keeping the first 64 bytes, its fingerprint), answer with edited copies or fresh bytes of any
  // length, poison a link now and then; at the end poison both, so the rank never waits for us.
  void Peer() {
    const ringo_transport& t = ringo_transport_shm;
    t.setup_done(precv_);
    uint8_t fp[64] = {0};
    for (int ops = 0; ops < 24 && in_.left() > 0; ops++) {
      const uint8_t op = in_.Byte();
      if (op % 3 == 0) {
        const void* slot = nullptr;
        size_t bytes = 0;
        if (t.recv_acquire(precv_, &slot, &bytes) != ringoSuccess) continue;
        memcpy(fp, slot, bytes < sizeof fp ? bytes : sizeof fp);
        t.recv_release(precv_);
      } else if (op % 3 == 1) {
        void* slot = nullptr;
        if (t.send_acquire(psend_, &slot) != ringoSuccess) continue;
        uint8_t* s = static_cast<uint8_t*>(slot);
        memset(s, 0, slot_bytes_);
        memcpy(s, fp, sizeof fp);
        for (int k = (op >> 2) & 3; k > 0; k--) s[in_.Byte() % sizeof fp] = in_.Byte();
        const size_t len = (op & 0x40) ? in_.U16() % (slot_bytes_ + 1) : sizeof fp + 4 * (in_.Byte() % 40);
        in_.Bytes(s + sizeof fp, len > sizeof fp ? (len - sizeof fp) % 256 : 0);
        t.send_post(psend_, len < slot_bytes_ ? len : slot_bytes_);
      } else {
        char msg[80];
        snprintf(msg, sizeof msg, "fuzz peer poison %u", in_.Byte());
        t.poison((op & 4) ? psend_ : precv_, static_cast<ringoResult_t>(in_.Byte() % 12), msg);
      }
    }
    t.poison(psend_, ringoRemoteError, "fuzz peer left");
    t.poison(precv_, ringoRemoteError, "fuzz peer left");
  }

  std::vector<uint8_t> script_;
  Cursor in_;
  bool framed_, peer_;
  int listen_fd_ = -1;
  ringo_link* precv_ = nullptr;
  ringo_link* psend_ = nullptr;
  size_t slot_bytes_ = 0;
};

// The rank under test in raw mode: the bootstrap alone, a couple of allgathers and a barrier.
void RawRank(const ringoUniqueId& id, uint32_t n, uint32_t r, uint8_t sel) {
  ringo_bootstrap* bs = nullptr;
  ringoResult_t res = ringo_bootstrap_init(&id, static_cast<int>(n), static_cast<int>(r), 1.0, &bs);
  FUZZ_CHECK(KnownResult(res) && (res == ringoSuccess) == (bs != nullptr));
  const size_t sizes[2] = {static_cast<size_t>(sel & 15), 64};
  for (int k = 0; res == ringoSuccess && k < 3; k++) {
    std::vector<uint8_t> mine(k < 2 ? sizes[k] : 0, 0x5A), all(mine.size() * n + 1);
    res = k < 2 ? ringo_bootstrap_allgather(bs, mine.data(), mine.size(), all.data()) : ringo_bootstrap_barrier(bs);
    FUZZ_CHECK(KnownResult(res));
    if (res == ringoSuccess && !mine.empty()) FUZZ_CHECK(memcmp(all.data() + r * mine.size(), mine.data(), mine.size()) == 0);
  }
  if (bs) ringo_bootstrap_close(bs);
}

// The rank under test in framed mode: a whole communicator, one all-reduce, destroy.
void CommRank(const ringoUniqueId& id, uint32_t n, uint32_t r) {
  ringoComm_t comm = nullptr;
  const ringoResult_t res = ringoCommInitRank(&comm, static_cast<int>(n), id, static_cast<int>(r));
  FUZZ_CHECK(KnownResult(res) && (res == ringoSuccess) == (comm != nullptr));
  if (!comm) return;
  float buf[37];
  for (int i = 0; i < 37; i++) buf[i] = static_cast<float>(i);
  FUZZ_CHECK(KnownResult(ringoAllReduce(buf, buf, 37, ringoFloat32, ringoSum, comm, nullptr)));
  FUZZ_CHECK(ringoCommDestroy(comm) == ringoSuccess);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ringo_fuzz::QuietLibrary();
  setenv("RINGO_TIMEOUT", "0.5", 1);      // every wait of the rank under test stays short
  setenv("RINGO_SLICE_BYTES", "4096", 1); // small segments: cheap to create per input
  return 0;
}

// Byte 0: bit 0 raw or framed; bits 1-2 nranks - 1; bits 3-4 rank; bit 5 RINGO_ALGO=naive;
// bit 6 peer mode (framed, 2 ranks, ring).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Cursor in(data, size);
  const uint8_t sel = in.Byte();
  const bool framed = sel & 1;
  const uint32_t n = 1 + ((sel >> 1) & 3), r = ((sel >> 3) & 3) % n;
  setenv("RINGO_ALGO", (sel & 0x20) ? "naive" : "ring", 1);
  FakeRoot root(std::vector<uint8_t>(in.rest(), in.rest() + in.left()), framed, (sel & 0x60) == 0x40);
  ringoUniqueId id;
  if (!root.Listen(&id)) return 0;  // out of ports or fds: nothing to test
  bool served = false;
  std::thread server([&] { served = root.Serve(); });
  if (framed) CommRank(id, n, r);
  else RawRank(id, n, r, sel);
  server.join();
  FUZZ_CHECK(served);  // the rank connected, and left once the root stopped talking
  return 0;
}
