// fuzz.h — what every libFuzzer harness in test/fuzz/ shares: a check that crashes loudly (so
// libFuzzer keeps the input), quiet library logs, and a cursor over the fuzz input.
// Header-only; depends on include/ringo.h. Built by `make fuzz`.
#ifndef RINGO_TEST_FUZZ_H_
#define RINGO_TEST_FUZZ_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ringo.h"

// A broken invariant is a bug: say which and crash, so libFuzzer saves the input as a reproducer.
#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond);    \
      abort();                                                                             \
    }                                                                                      \
  } while (0)

namespace ringo_fuzz {

// Every code the library may return; anything else is a bug (an uninitialised result, say).
inline bool KnownResult(ringoResult_t r) { return r >= ringoSuccess && r <= ringoTimeout; }

// The library logs every error at WARN; a fuzzer makes millions of them. Called before any ringo call.
inline void QuietLibrary() { setenv("RINGO_DEBUG", "NONE", 1); }

// Reads the fuzz input front to back; past the end it yields zeros, so every input is usable.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  uint8_t Byte() {
    if (left_ == 0) return 0;
    left_--;
    return *p_++;
  }
  uint32_t U16() { return static_cast<uint32_t>(Byte()) << 8 | Byte(); }
  uint32_t U32() { return U16() << 16 | U16(); }
  // Up to n bytes (fewer at the end of the input); returns how many were copied.
  size_t Bytes(void* out, size_t n) {
    const size_t k = n < left_ ? n : left_;
    if (k) memcpy(out, p_, k);
    p_ += k;
    left_ -= k;
    return k;
  }
  const uint8_t* rest() const { return p_; }
  size_t left() const { return left_; }

 private:
  const uint8_t* p_;
  size_t left_;
};

}  // namespace ringo_fuzz

#endif  // RINGO_TEST_FUZZ_H_
