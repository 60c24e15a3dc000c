// fuzz_wire.cc — libFuzzer harness for the pure bootstrap parsers: frame header, HELLO, ERROR body
// and the unique id, each fed bytes exactly as long as the input (so ASan sees any over-read).
// Depends on src/include/bootstrap.h; build and run with `make fuzz` (clang, see the Makefile).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include "boot/bootstrap.h"
#include "boot/bootstrap_wire.h"
}

#include "fuzz.h"

namespace {

// On failure the reason is one NUL-terminated line inside its capacity; success or failure, the
// guard bytes past the capacity stay untouched.
void check_why(const std::vector<char>& why, size_t cap, bool failed) {
  for (size_t i = cap; i < why.size(); i++) FUZZ_CHECK(why[i] == 'Z');
  if (failed && cap) FUZZ_CHECK(memchr(why.data(), '\0', cap) != nullptr);
}

void fuzz_header(const uint8_t* data, size_t size, uint32_t max_length, size_t why_cap) {
  std::vector<char> why(why_cap + 8, 'Z');
  ringo_bootstrap_header h;
  const ringoResult_t res =
      ringo_bootstrap_parse_header(data, size, max_length, &h, why_cap ? why.data() : nullptr, why_cap);
  check_why(why, why_cap, res != ringoSuccess);
  if (res != ringoSuccess) {
    FUZZ_CHECK(res == ringoInvalidArgument);
    return;
  }
  FUZZ_CHECK(size >= RINGO_BOOTSTRAP_HEADER_BYTES);
  FUZZ_CHECK(h.magic == RINGO_BOOTSTRAP_FRAME_MAGIC && h.version == RINGO_BOOTSTRAP_VERSION);
  FUZZ_CHECK(h.type >= RINGO_BOOT_HELLO && h.type <= RINGO_BOOT_BYE && h.length <= max_length);
  // What parses must be what the encoder writes.
  uint8_t again[RINGO_BOOTSTRAP_HEADER_BYTES];
  ringo_bootstrap_encode_header(again, h.version, h.type, h.length);
  FUZZ_CHECK(memcmp(again, data, sizeof again) == 0);
}

void fuzz_hello(const uint8_t* data, size_t size, const uint8_t* secret, size_t why_cap) {
  std::vector<char> why(why_cap + 8, 'Z');
  ringo_bootstrap_hello hello;
  const ringoResult_t res = ringo_bootstrap_parse_hello(data, size, secret, &hello, why_cap ? why.data() : nullptr, why_cap);
  check_why(why, why_cap, res != ringoSuccess);
  if (res != ringoSuccess) {
    FUZZ_CHECK(res == ringoInvalidArgument);
    return;
  }
  FUZZ_CHECK(size == RINGO_BOOTSTRAP_HELLO_BYTES);
  FUZZ_CHECK(hello.nranks >= 1 && hello.nranks <= RINGO_BOOTSTRAP_MAX_RANKS && hello.rank < hello.nranks);
  if (secret) FUZZ_CHECK(memcmp(hello.secret, secret, RINGO_BOOTSTRAP_SECRET_BYTES) == 0);
  uint8_t again[RINGO_BOOTSTRAP_HELLO_BYTES];
  ringo_bootstrap_encode_hello(again, RINGO_BOOTSTRAP_VERSION, hello.secret, hello.nranks, hello.rank);
  FUZZ_CHECK(memcmp(again, data, sizeof again) == 0);
}

void fuzz_error(const uint8_t* data, size_t size, size_t text_cap) {
  std::vector<char> text(text_cap + 8, 'Z');
  ringoResult_t code = ringoSuccess;
  const ringoResult_t res = ringo_bootstrap_parse_error(data, size, &code, text.data(), text_cap);
  FUZZ_CHECK(code != ringoSuccess);  // an ERROR frame never reads as success
  for (size_t i = text_cap; i < text.size(); i++) FUZZ_CHECK(text[i] == 'Z');
  if (res != ringoSuccess) return;
  FUZZ_CHECK(size >= 4 && size <= 4 + RINGO_BOOTSTRAP_MAX_ERROR);
  if (text_cap == 0) return;
  const size_t n = strnlen(text.data(), text_cap);
  FUZZ_CHECK(n < text_cap && n <= size - 4);
  for (size_t i = 0; i < n; i++) FUZZ_CHECK(text[i] >= 0x20 && text[i] < 0x7f);  // safe to log as is
}

void fuzz_id(const uint8_t* data, size_t size) {
  ringoUniqueId id;
  memset(&id, 0, sizeof id);
  if (size) memcpy(id.internal, data, size < sizeof id.internal ? size : sizeof id.internal);
  ringo_bootstrap_id_info info;
  if (ringo_bootstrap_id_decode(&id, &info) != ringoSuccess) return;
  FUZZ_CHECK(info.addr.ss_family == AF_INET || info.addr.ss_family == AF_INET6);
  FUZZ_CHECK(info.addrlen <= sizeof info.addr);
  // Re-encoding what was decoded gives back the address and secret bytes (the rest may differ).
  ringoUniqueId again;
  ringo_bootstrap_id_encode(&again, &info.addr, info.secret);
  FUZZ_CHECK(memcmp(again.internal + 6, id.internal + 6, 4) == 0);  // family and port
  FUZZ_CHECK(memcmp(again.internal + RINGO_BOOTSTRAP_ID_SECRET_OFFSET, id.internal + RINGO_BOOTSTRAP_ID_SECRET_OFFSET,
                    RINGO_BOOTSTRAP_SECRET_BYTES) == 0);
  char name[96];
  ringo_bootstrap_addr_name(&info.addr, name, sizeof name);
  FUZZ_CHECK(memchr(name, '\0', sizeof name) != nullptr);
}

}  // namespace

// Byte 0 picks the parser and its limits; the rest is the hostile message, copied to a buffer of
// exactly its length.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ringo_fuzz::QuietLibrary();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t sel = data[0];
  const std::vector<uint8_t> msg(data + 1, data + size);
  const uint8_t* p = msg.empty() ? nullptr : msg.data();
  static const uint8_t secret[RINGO_BOOTSTRAP_SECRET_BYTES] = {'r', 'i', 'n', 'g', 'o', '-', 'f', 'u',
                                                               'z', 'z', '-', 's', 'e', 'c', 'r', 't'};
  static const size_t caps[4] = {0, 1, 17, 200};
  switch (sel & 3) {
    case 0: {
      static const uint32_t limits[4] = {0, RINGO_BOOTSTRAP_HELLO_BODY, 4 + RINGO_BOOTSTRAP_MAX_BYTES, UINT32_MAX};
      fuzz_header(p, msg.size(), limits[(sel >> 2) & 3], caps[(sel >> 4) & 3]);
      break;
    }
    case 1:
      fuzz_hello(p, msg.size(), (sel & 4) ? secret : nullptr, caps[(sel >> 4) & 3]);
      break;
    case 2:
      fuzz_error(p, msg.size(), caps[(sel >> 4) & 3] + ((sel >> 2) & 3) * 200);
      break;
    default:
      fuzz_id(p, msg.size());
      break;
  }
  return 0;
}
