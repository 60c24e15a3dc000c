// result_hashes.h — run a list of collective cases on every rank with inexact inputs and keep a hash of
// each rank's result, in memory forked ranks share, so a test compares two algorithms bit for bit (the
// one-shot and the two-phase paths against the ring). Header-only; used by test_oneshot.cc and
// test_twophase.cc.
#ifndef RINGO_TEST_RESULT_HASHES_H_
#define RINGO_TEST_RESULT_HASHES_H_

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "collective_cases.h"
#include "harness.h"
#include "ring_order.h"
#include "ringo.h"

namespace ringo_hashes {

inline uint64_t Fnv(const unsigned char* p, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Bytes of the result rank r holds for c (none: a reduce's other ranks).
inline size_t ResultBytes(const ringo_cases::Case& c, int n, int r) {
  const size_t bytes = c.count * ringo_cases::TypeSize(c.type);
  if (c.coll == ringo_cases::Coll::kReduce && r != c.root) return 0;
  return c.coll == ringo_cases::Coll::kAllGather ? bytes * size_t(n) : bytes;
}

// What a case moved on this rank (its counters' growth), for a check of which path ran.
using MovedCheck = std::function<void(const ringo_cases::Case&, const ringoCommStats& grew)>;

// Runs every case on this rank with inexact inputs (ring_order.h: any other order of adding changes
// the bits) and stores the hash of each result in row[case]; check (if set) sees what each moved.
inline void HashCases(ringo_test::Team& t, uint64_t* row, const std::vector<ringo_cases::Case>& cases,
                      const MovedCheck& check = nullptr) {
  const int n = t.nranks, r = t.ranks[0];
  for (size_t i = 0; i < cases.size(); i++) {
    const ringo_cases::Case& c = cases[i];
    const ringo_order::InexactPattern pat(c.type, n);
    ringo_cases::CaseBufs b;
    ringo_cases::Prepare(c, pat, n, r, &b);
    ringoCommStats before{}, after{};
    ASSERT_EQ(ringoSuccess, ringoCommGetStats(t.comms[0], &before));
    ASSERT_EQ(ringoSuccess, ringo_cases::Call(c, b, t.comms[0])) << ringo_cases::Label(c) << ": "
                                                                   << ringoGetLastError(t.comms[0]);
    ASSERT_EQ(ringoSuccess, ringoCommGetStats(t.comms[0], &after));
    ASSERT_TRUE(b.GuardsIntact()) << ringo_cases::Label(c);
    if (check) {
      const ringoCommStats grew{after.bytesSent - before.bytesSent, after.bytesReceived - before.bytesReceived,
                                after.collectives - before.collectives};
      check(c, grew);
    }
    row[i] = Fnv(b.recv, ResultBytes(c, n, r));
  }
}

// rows[mode][rank][case] in memory the forked ranks share with the test.
struct HashTable {
  size_t cases, bytes;
  uint64_t* mem;
  HashTable(int n, size_t ncases) : cases(ncases), bytes(2 * size_t(n) * ncases * sizeof(uint64_t)) {
    mem = static_cast<uint64_t*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  }
  ~HashTable() { munmap(mem, bytes); }
  HashTable(const HashTable&) = delete;
  HashTable& operator=(const HashTable&) = delete;
  uint64_t* Row(int mode, int n, int r) { return mem + (size_t(mode) * size_t(n) + size_t(r)) * cases; }
  // A failure per differing result (at most ten), naming the path of mode 1 against mode 0's.
  void ExpectModesEqual(int n, const std::vector<ringo_cases::Case>& cs, const char* path) {
    int reported = 0;
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < cs.size(); i++)
        if (Row(0, n, r)[i] != Row(1, n, r)[i] && ++reported <= 10)
          ADD_FAILURE() << "rank " << r << ": " << ringo_cases::Label(cs[i]) << ": " << path
                        << " bits differ from the ring's";
  }
};

}  // namespace ringo_hashes

#endif  // RINGO_TEST_RESULT_HASHES_H_
