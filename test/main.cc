// main.cc — the one main() every test binary links: GoogleTest with ringo's defaults.
// Built into each test/test_*.cc binary by the Makefile; run any binary with --help for gtest flags.
#include <gtest/gtest.h>

#include <csignal>

int main(int argc, char** argv) {
  // A peer that dies must show up as an error code, never as SIGPIPE killing the test.
  std::signal(SIGPIPE, SIG_IGN);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
