// test_env.cc — how the RINGO_* knobs are read (src/core/env.c): a value that is not wholly a number in
// its range is ignored with a warning, never cut or wrapped into a different one. Run: make test.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

extern "C" {
#include "core/core.h"
}
#include "harness.h"

namespace {

struct ringo_env Read() {
  struct ringo_env env;
  ringo_env_read(&env);
  return env;
}

// RINGO_TIMEOUT=5x was 5 s and nan a NaN deadline (no range refuses NaN): both now the default.
TEST(Env, NumbersMustBeWholeAndFinite) {
  const double dflt = Read().timeout_s;
  for (const char* bad : {"5x", "nan", "inf", "1e999", "-3", "0", "", " "}) {
    ringo_test::ScopedEnv env("RINGO_TIMEOUT", bad);
    EXPECT_EQ(Read().timeout_s, dflt) << "RINGO_TIMEOUT=" << bad;
  }
  ringo_test::ScopedEnv env("RINGO_TIMEOUT", "7.5 ");
  EXPECT_EQ(Read().timeout_s, 7.5);
}

// Knobs that count take whole numbers: RINGO_NSLOTS=8.5 was 8.
TEST(Env, CountsMustBeWhole) {
  for (const char* bad : {"8.5", "8x", "1e9", "3"}) {
    ringo_test::ScopedEnv env("RINGO_NSLOTS", bad);
    EXPECT_EQ(Read().nslots, 4) << "RINGO_NSLOTS=" << bad;
  }
  ringo_test::ScopedEnv env("RINGO_NSLOTS", "8");
  EXPECT_EQ(Read().nslots, 8);
  ringo_test::ScopedEnv cuda("RINGO_CUDA", "0.5");
  EXPECT_EQ(Read().cuda_enable, 1) << "RINGO_CUDA=0.5 was 0";
}

// Sizes: a number and one K/M/G, nothing after; no shift that wraps (2^34 G wrapped to 0).
TEST(Env, BytesTakeOneUnitAndNeverWrap) {
  const size_t dflt = Read().staged_piece_bytes;
  for (const char* bad : {"64Kx", "1MB", "-1", "x", "17179869184G", "18446744073709551615K", "99999999999999999999"}) {
    ringo_test::ScopedEnv env("RINGO_STAGED_PIECE_BYTES", bad);
    EXPECT_EQ(Read().staged_piece_bytes, dflt) << "RINGO_STAGED_PIECE_BYTES=" << bad;
  }
  for (auto [text, bytes] : {std::pair<const char*, size_t>{"4096", 4096}, {"64K", 65536}, {"2m", 2u << 20},
                             {"1G", size_t{1} << 30}}) {
    ringo_test::ScopedEnv env("RINGO_STAGED_PIECE_BYTES", text);
    EXPECT_EQ(Read().staged_piece_bytes, bytes) << text;
  }
  ringo_test::ScopedEnv rotate("RINGO_BOARD_ROTATE", "17179869184G");  // range starts at 0: the wrap passed it
  EXPECT_EQ(Read().board_rotate, static_cast<size_t>(RINGO_BOARD_ROTATE_AUTO));
}

// RINGO_DEBUG and RINGO_DEBUG_SUBSYS are read once per process: each case runs in a fresh one (a
// death test re-executes this binary). A value ringo does not know is warned about, not taken
// silently as WARN (RINGO_DEBUG=info2 was quietly no INFO at all).
void LogOnceWith(const char* level, const char* subsys) {
  setenv("RINGO_DEBUG", level, 1);
  if (subsys) setenv("RINGO_DEBUG_SUBSYS", subsys, 1);
  ringo_log_enabled(RINGO_LEVEL_INFO, RINGO_LOG_INIT);
  std::exit(0);
}

TEST(EnvDeathTest, UnknownDebugValuesAreWarnedAbout) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(LogOnceWith("info2", nullptr), testing::ExitedWithCode(0),
              "RINGO_DEBUG=\"info2\" is not NONE, WARN, INFO or TRACE; WARN is used");
  EXPECT_EXIT(LogOnceWith("INFO", "COLL,shmem"), testing::ExitedWithCode(0),
              "RINGO_DEBUG_SUBSYS: \"shmem\" is not INIT, BOOT, SHM, COLL, ENV, NET or ALL; ignored");
  EXPECT_EXIT(LogOnceWith("none", "shmem"), testing::ExitedWithCode(0), "^$") << "NONE stays silent";
  EXPECT_EXIT(LogOnceWith("trace", "coll"), testing::ExitedWithCode(0), "^$") << "known values, any case";
}

}  // namespace
