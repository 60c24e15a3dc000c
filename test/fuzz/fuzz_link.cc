// fuzz_link.cc — libFuzzer harness for what a transport reads from its peer: shm and mpi link infos,
// and the shared shm segment (header, counters, slot lengths, poison) a hostile peer pokes between
// calls. Depends on src/include/transport.h and POSIX shm; run with `make fuzz`.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "transport/transport.h"  // C++-ready on its own

#include "fuzz.h"

namespace {

using ringo_fuzz::Cursor;
using ringo_fuzz::KnownResult;

constexpr size_t kPage = 4096;  // the shm header lives in the segment's first page(s)

ringo_link_params Params(size_t slot_bytes, int nslots, int self, int peer) {
  ringo_link_params p;
  memset(&p, 0, sizeof p);
  p.slot_bytes = slot_bytes;
  p.nslots = nslots;
  p.timeout_s = 0.002;  // every wait the hostile peer stalls ends fast, as a timeout
  p.spin = 0;
  p.self_rank = self;
  p.peer_rank = peer;
  return p;
}

// A hostile receiver's description of a shm link: any 256 bytes, exactly 256 long.
void FuzzShmInfo(Cursor& in) {
  static const size_t kSlots[4] = {4096, 131072, 1, 4096 * 3 + 5};
  const uint8_t sel = in.Byte();
  const ringo_link_params p = Params(kSlots[sel & 3], 1 + ((sel >> 2) & 7), 0, 1);
  std::vector<uint8_t> info(RINGO_LINK_INFO_BYTES, 0);
  in.Bytes(info.data(), info.size());
  static char sentinel;
  ringo_link* link = reinterpret_cast<ringo_link*>(&sentinel);  // must become NULL on failure
  const ringoResult_t res = ringo_transport_shm.send_connect(&p, info.data(), &link);
  FUZZ_CHECK(KnownResult(res));
  if (res != ringoSuccess) {
    FUZZ_CHECK(link == nullptr);
    return;
  }
  ringo_transport_shm.close(link);  // attached to someone's live segment: only with a real name
}

#ifdef RINGO_HAVE_MPI
// The same for the MPI transport; without a communicator context a matching info ends in
// ringoInvalidUsage, so this reaches every check the sender makes on the info.
void FuzzMpiInfo(Cursor& in) {
  const uint8_t sel = in.Byte();
  ringo_link_params p = Params((sel & 1) ? 131072 : 4096, 4 + ((sel >> 1) & 3), 0, (sel >> 3) & 7);
  std::vector<uint8_t> info(RINGO_LINK_INFO_BYTES, 0);
  in.Bytes(info.data(), info.size());
  ringo_link* link = nullptr;
  const ringoResult_t res = ringo_transport_mpi.send_connect(&p, info.data(), &link);
  FUZZ_CHECK(KnownResult(res) && res != ringoSuccess && link == nullptr);
}
#endif

// Both ends of one real shm link in this process; the fuzz input plays the peer that scribbles on
// the shared header page and the info between the library's calls.
class SegmentGame {
 public:
  explicit SegmentGame(Cursor& in) : in_(in) {}
  ~SegmentGame() {
    if (send_) ringo_transport_shm.close(send_);
    if (recv_) ringo_transport_shm.close(recv_);
    if (page_ != MAP_FAILED) munmap(page_, kPage);
  }

  void Play() {
    const uint8_t sel = in_.Byte();
    slot_bytes_ = 64 * (1 + (sel & 7));
    const ringo_link_params rp = Params(slot_bytes_, 1 + ((sel >> 3) & 3), 1, 0);
    uint8_t info[RINGO_LINK_INFO_BYTES];
    FUZZ_CHECK(ringo_transport_shm.recv_setup(&rp, &recv_, info) == ringoSuccess);
    if (!MapHeader(info)) return;
    // Before the sender attaches: a forged info or header must be refused, never mapped wrongly.
    for (int n = in_.Byte() & 3; n > 0; n--) info[in_.Byte() % sizeof info] = in_.Byte();
    if (sel & 0x40) Poke();
    ringo_link_params sp = rp;
    sp.self_rank = 0, sp.peer_rank = 1;
    const ringoResult_t res = ringo_transport_shm.send_connect(&sp, info, &send_);
    FUZZ_CHECK(KnownResult(res) && (res == ringoSuccess) == (send_ != nullptr));
    for (int ops = 0; ops < 48 && in_.left() > 0; ops++) Step();
  }

 private:
  // The receiver keeps the segment name alive until setup_done; map its first page as the peer.
  bool MapHeader(const uint8_t* info) {
    const void* at = memmem(info, RINGO_LINK_INFO_BYTES, "/ringo-", 7);
    FUZZ_CHECK(at != nullptr);
    const char* name = static_cast<const char*>(at);
    const size_t max = RINGO_LINK_INFO_BYTES - static_cast<size_t>(name - reinterpret_cast<const char*>(info));
    const std::string path(name, strnlen(name, max));
    const int fd = shm_open(path.c_str(), O_RDWR, 0);
    FUZZ_CHECK(fd >= 0);
    page_ = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    FUZZ_CHECK(page_ != MAP_FAILED);
    return true;
  }

  // The peer writes up to 16 arbitrary bytes anywhere in the header page.
  void Poke() {
    const size_t off = in_.U16() % kPage;
    const size_t n = 1 + in_.Byte() % 16;
    uint8_t bytes[16];
    const size_t got = in_.Bytes(bytes, n < kPage - off ? n : kPage - off);
    memcpy(static_cast<uint8_t*>(page_) + off, bytes, got);
  }

  void Step() {
    const ringo_transport& t = ringo_transport_shm;
    switch (in_.Byte() % 8) {
      case 0: Poke(); break;
      case 1: Acquire(); break;
      case 2:
        if (send_) FUZZ_CHECK(KnownResult(t.send_post(send_, in_.U16() % (slot_bytes_ + 2))));
        break;
      case 3: Receive(); break;
      case 4: FUZZ_CHECK(KnownResult(t.recv_release(recv_))); break;
      case 5:
        if (send_) FUZZ_CHECK(KnownResult(t.flush(send_)));
        break;
      case 6: Poison(); break;
      default:
        FUZZ_CHECK(KnownResult(t.setup_done(recv_)));
        if (send_) FUZZ_CHECK(KnownResult(t.setup_done(send_)));
        break;
    }
  }

  void Acquire() {
    if (!send_) return;
    void* slot = nullptr;
    const ringoResult_t r = ringo_transport_shm.send_acquire(send_, &slot);
    FUZZ_CHECK(KnownResult(r));
    if (r == ringoSuccess) memset(slot, 0xA5, slot_bytes_);  // the whole slot is ours to fill
  }

  void Receive() {
    const void* slot = nullptr;
    size_t bytes = 0;
    const ringoResult_t r = ringo_transport_shm.recv_acquire(recv_, &slot, &bytes);
    FUZZ_CHECK(KnownResult(r));
    if (r != ringoSuccess) return;
    FUZZ_CHECK(slot != nullptr && bytes <= slot_bytes_);  // a forged length never escapes the slot
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < bytes; i++) sum = static_cast<uint8_t>(sum + static_cast<const uint8_t*>(slot)[i]);
  }

  // Either end may poison the link with any code and text; the other end must report it sanely.
  void Poison() {
    char msg[600];
    const size_t want = in_.Byte() * 3u;
    const size_t n = in_.Bytes(msg, want < sizeof msg - 1 ? want : sizeof msg - 1);
    msg[n] = '\0';
    ringo_link* end = (in_.Byte() & 1) && send_ ? send_ : recv_;
    ringo_transport_shm.poison(end, static_cast<ringoResult_t>(in_.Byte() % 12), msg);
  }

  Cursor& in_;
  size_t slot_bytes_ = 0;
  ringo_link* recv_ = nullptr;
  ringo_link* send_ = nullptr;
  void* page_ = MAP_FAILED;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ringo_fuzz::QuietLibrary();
  return 0;
}

// Byte 0 picks the target: a shm info, an mpi info, or a game on a live shm segment.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Cursor in(data, size);
  switch (in.Byte() % 3) {
    case 0: FuzzShmInfo(in); break;
#ifdef RINGO_HAVE_MPI
    case 1: FuzzMpiInfo(in); break;
#endif
    default: {
      SegmentGame game(in);
      game.Play();
      break;
    }
  }
  return 0;
}
