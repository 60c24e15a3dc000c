// test_p2p.cc — ringoSend/ringoRecv and deferred ringoCommInitRank in groups, through the public API: shifts
// and all-to-alls of every dtype between every pair, self-sends, count 0, bad arguments, mismatches, a dead
// peer, huge messages, counters, p2p mixed with collectives. Depends on include/ringo.h, test/harness.h,
// test/collective_cases.h. Run: make tests && ./build/test/test_p2p
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "collective_cases.h"
#include "harness.h"
#include "ringo.h"

namespace {

using ringo_cases::kAllTypes;
using ringo_cases::TypeName;
using ringo_cases::TypeSize;
using ringo_test::Options;
using ringo_test::ResultName;
using ringo_test::Shared;
using ringo_test::Team;
using ringo_test::TeamCall;

// The default link FIFO (ringo.h, RINGO_SLICE_BYTES x RINGO_NSLOTS): messages up to one slot never
// wait for their receiver outside a group; messages above the FIFO always do.
constexpr size_t kSlot = 128 * 1024;
constexpr size_t kFifo = 4 * kSlot;
constexpr size_t kGuard = 64;  // bytes behind every receive buffer that must stay unwritten
constexpr unsigned char kUnwritten = 0xA5;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The bytes of a message follow from its seed alone, so both ends know them without talking. They
// are random, NaN and subnormal patterns of the float types included: a library that converted or
// reduced the elements instead of copying them would change bits.
void FillBytes(unsigned char* p, size_t bytes, uint64_t seed) {
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t w = Mix(seed ^ (static_cast<uint64_t>(i) * 0xd1b54a32d192ed03ull));
    memcpy(p + i, &w, std::min<size_t>(8, bytes - i));
  }
}

// The seed of message `index` from src to dst.
uint64_t Seed(int src, int dst, int index) {
  return Mix((static_cast<uint64_t>(src) << 40) ^ (static_cast<uint64_t>(dst) << 20) ^ static_cast<uint64_t>(index));
}

// "" when got holds exactly the content of seed, else where it differs.
std::string CheckContent(const unsigned char* got, size_t bytes, uint64_t seed) {
  std::vector<unsigned char> want(bytes);
  FillBytes(want.data(), bytes, seed);
  if (bytes == 0 || memcmp(got, want.data(), bytes) == 0) return "";
  size_t first = 0, wrong = 0;
  while (got[first] == want[first]) first++;
  for (size_t i = 0; i < bytes; i++) wrong += got[i] != want[i];
  std::ostringstream os;
  os << wrong << " of " << bytes << " bytes differ, the first at byte " << first << " (got "
     << int(got[first]) << ", want " << int(want[first]) << ")";
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// A plan: the calls each rank makes, in its call order. Exchange runs a plan on a team and checks
// every byte.

struct Call {
  bool send;
  int peer;
  ringoDataType_t type;
  size_t count;
  uint64_t seed;  // the content of the message
};
Call Send(int peer, ringoDataType_t t, size_t count, uint64_t seed) { return {true, peer, t, count, seed}; }
Call Recv(int peer, ringoDataType_t t, size_t count, uint64_t seed) { return {false, peer, t, count, seed}; }

using Plan = std::function<std::vector<Call>(int rank, int nranks)>;

std::string Describe(int rank, const Call& c, size_t i) {
  std::ostringstream os;
  os << "rank " << rank << " call #" << i << (c.send ? " ringoSend to " : " ringoRecv from ") << c.peer << " ("
     << c.count << " x " << TypeName(c.type) << ")";
  return os.str();
}

// Calls exactly what a rank's plan says; no message is to itself when this is true, so every byte
// of it goes over a link and must show in the counters.
bool OnLinksOnly(const std::vector<Call>& calls, int rank) {
  return std::none_of(calls.begin(), calls.end(), [rank](const Call& c) { return c.peer == rank; });
}

// Every received message equals its content, nothing is written past a receive buffer, every send
// buffer is unchanged, and (when no message is to self, whose copy is on no link) bytesSent and
// bytesReceived grew by exactly the payload while the collectives counter did not move.
void VerifyRank(Team& t, size_t k, const std::vector<Call>& calls,
                const std::vector<std::vector<unsigned char>>& bufs, const ringoCommStats& before,
                const std::string& what) {
  const int me = t.ranks[k];
  uint64_t sent = 0, received = 0;
  for (size_t i = 0; i < calls.size(); i++) {
    const Call& c = calls[i];
    const size_t bytes = c.count * TypeSize(c.type);
    const std::string err = CheckContent(bufs[i].data(), bytes, c.seed);
    EXPECT_EQ(err, "") << what << ": " << Describe(me, c, i) << (c.send ? ": send buffer changed" : "");
    const bool guard_ok = std::all_of(bufs[i].begin() + static_cast<long>(bytes), bufs[i].end(),
                                      [](unsigned char b) { return b == kUnwritten; });
    EXPECT_TRUE(c.send || guard_ok) << what << ": " << Describe(me, c, i) << " wrote past the receive buffer";
    (c.send ? sent : received) += bytes;
  }
  ringoCommStats after;
  ASSERT_EQ(ringoCommGetStats(t.comms[k], &after), ringoSuccess);
  EXPECT_EQ(after.collectives, before.collectives) << what << ": p2p counted as a collective on rank " << me;
  if (!OnLinksOnly(calls, me)) return;
  EXPECT_EQ(after.bytesSent - before.bytesSent, sent) << what << ": bytesSent of rank " << me;
  EXPECT_EQ(after.bytesReceived - before.bytesReceived, received) << what << ": bytesReceived of rank " << me;
}

// Runs plan on every rank the team drives, then VerifyRank. The calls are made inside one
// ringoGroupStart/End when in_group, and always for a grouped team (its one thread cannot block in
// one rank's call while the other ranks it drives wait). Returns false after reporting a failed
// call: the ranks may be out of step then, so the caller must stop.
bool Exchange(Team& t, const Plan& plan, bool in_group, const std::string& what) {
  const size_t nk = t.size();
  std::vector<std::vector<Call>> calls(nk);
  std::vector<std::vector<std::vector<unsigned char>>> bufs(nk);
  std::vector<ringoCommStats> before(nk);
  for (size_t k = 0; k < nk; k++) {
    calls[k] = plan(t.ranks[k], t.nranks);
    for (const Call& c : calls[k]) {
      const size_t bytes = c.count * TypeSize(c.type);
      bufs[k].emplace_back(bytes + kGuard, kUnwritten);
      if (c.send) FillBytes(bufs[k].back().data(), bytes, c.seed);
    }
    EXPECT_EQ(ringoCommGetStats(t.comms[k], &before[k]), ringoSuccess);
  }
  ringoResult_t first = ringoSuccess;
  std::string where, message;
  auto note = [&](ringoResult_t res, const std::string& w, ringoComm_t comm) {
    if (res == ringoSuccess || first != ringoSuccess) return;
    first = res, where = w, message = ringoGetLastError(comm);
  };
  auto call = [&](size_t k, size_t i) {
    const Call& c = calls[k][i];
    unsigned char* p = bufs[k][i].data();
    return c.send ? ringoSend(p, c.count, c.type, c.peer, t.comms[k], nullptr)
                  : ringoRecv(p, c.count, c.type, c.peer, t.comms[k], nullptr);
  };
  if (in_group || t.grouped()) {
    note(ringoGroupStart(), "ringoGroupStart", nullptr);
    for (size_t k = 0; k < nk; k++)
      for (size_t i = 0; i < calls[k].size(); i++) note(call(k, i), Describe(t.ranks[k], calls[k][i], i), t.comms[k]);
    note(ringoGroupEnd(), "ringoGroupEnd", nullptr);
  } else {
    for (size_t i = 0; i < calls[0].size() && first == ringoSuccess; i++)
      note(call(0, i), Describe(t.ranks[0], calls[0][i], i), t.comms[0]);
  }
  if (first != ringoSuccess) {
    ADD_FAILURE() << what << ": " << where << " returned " << ResultName(first) << ": " << message;
    return false;
  }
  for (size_t k = 0; k < nk; k++) VerifyRank(t, k, calls[k], bufs[k], before[k], what);
  return true;
}

// Rank r sends to r+k and receives from r-k, for k = 1..n-1 one shift after another: every ordered
// pair, neighbours and not, a different dtype per shift. Each message fits in one FIFO slot, so no
// send waits for its receiver and the shifts work outside a group.
Plan Shifts(size_t bytes) {
  return [bytes](int r, int n) {
    std::vector<Call> out;
    for (int k = 1; k < n; k++) {
      const ringoDataType_t t = kAllTypes[k % RINGO_NUM_TYPES];
      const size_t count = bytes / TypeSize(t) + static_cast<size_t>(k);
      const int to = (r + k) % n, from = (r + n - k) % n;
      out.push_back(Send(to, t, count, Seed(r, to, k)));
      out.push_back(Recv(from, t, count, Seed(from, r, k)));
    }
    return out;
  };
}

// The message of an all-to-all from src to dst: about `bytes`, odd sizes, a dtype per pair.
Call AllToAllMessage(bool send, int src, int dst, size_t bytes) {
  const ringoDataType_t t = kAllTypes[(3 * src + dst) % RINGO_NUM_TYPES];
  const size_t count = bytes / TypeSize(t) + static_cast<size_t>((src + dst) % 3);
  return {send, send ? dst : src, t, count, Seed(src, dst, 100)};
}

// for peer: Send(peer); Recv(peer) — self included. Needs a group once bytes exceed the FIFO.
Plan AllToAll(size_t bytes) {
  return [bytes](int r, int n) {
    std::vector<Call> out;
    for (int p = 0; p < n; p++) {
      out.push_back(AllToAllMessage(true, r, p, bytes));
      out.push_back(AllToAllMessage(false, p, r, bytes));
    }
    return out;
  };
}

// In one group: a message of every dtype to and from every other rank, then a train of messages to
// the next rank (from the previous): three of the same shape and content size, small ones, a zero,
// one above the FIFO. Each must arrive in call order; the train alone is a ring shift of ~1.6 MiB.
Plan ManyMessages() {
  return [](int r, int n) {
    std::vector<Call> out;
    auto count_of = [](int s, int d, int t) { return static_cast<size_t>(1 + (3 * s + 5 * d + 7 * t) % 61); };
    for (int t = 0; t < RINGO_NUM_TYPES; t++)
      for (int p = 0; p < n; p++) {
        if (p == r) continue;
        out.push_back(Send(p, kAllTypes[t], count_of(r, p, t), Seed(r, p, 200 + t)));
        out.push_back(Recv(p, kAllTypes[t], count_of(p, r, t), Seed(p, r, 200 + t)));
      }
    const size_t train[] = {300 * 1024 + 1, 300 * 1024 + 1, 300 * 1024 + 1, 17, 0, kFifo + 3, 17};
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (int i = 0; i < 7; i++) out.push_back(Send(next, ringoUint8, train[i], Seed(r, next, 300 + i)));
    for (int i = 0; i < 7; i++) out.push_back(Recv(prev, ringoUint8, train[i], Seed(prev, r, 300 + i)));
    return out;
  };
}

// Ranks paired with the rank n/2 away (n even) trade one `bytes` message of uint8 and one of
// float16 each way; the lower rank sends first, so outside a group each send waits for a receiver
// that is already there.
Plan PairedRoundTrip(size_t bytes) {
  return [bytes](int r, int n) {
    const int peer = (r + n / 2) % n;
    std::vector<Call> out;
    for (int i = 0; i < 2; i++) {
      const ringoDataType_t t = i == 0 ? ringoUint8 : ringoFloat16;
      const size_t count = bytes / TypeSize(t);
      const int low = std::min(r, peer), high = std::max(r, peer);
      const uint64_t there = Seed(low, high, 400 + i), back = Seed(high, low, 400 + i);
      if (r == low) out.push_back(Send(peer, t, count, there)), out.push_back(Recv(peer, t, count, back));
      else out.push_back(Recv(peer, t, count, there)), out.push_back(Send(peer, t, count, back));
    }
    return out;
  };
}

// ---------------------------------------------------------------------------------------------
// Collectives with known answers, to mix with p2p.

bool AllReduceCheck(Team& t, int salt) {
  const size_t count = 1031;
  const int n = t.nranks;
  std::vector<std::vector<int32_t>> data(t.size(), std::vector<int32_t>(count));
  for (size_t k = 0; k < t.size(); k++)
    for (size_t i = 0; i < count; i++) data[k][i] = (t.ranks[k] + 1) * static_cast<int32_t>((i + salt) % 5 + 1);
  const ringoResult_t res = TeamCall(t, [&](size_t k) {
    return ringoAllReduce(data[k].data(), data[k].data(), count, ringoInt32, ringoSum, t.comms[k], nullptr);
  });
  EXPECT_EQ(res, ringoSuccess) << "ringoAllReduce #" << salt << ": " << ringoGetLastError(t.comms[0]);
  if (res != ringoSuccess) return false;
  for (size_t k = 0; k < t.size(); k++)
    for (size_t i = 0; i < count; i++) {
      const int32_t want = n * (n + 1) / 2 * static_cast<int32_t>((i + salt) % 5 + 1);
      if (data[k][i] != want) {
        ADD_FAILURE() << "ringoAllReduce #" << salt << " rank " << t.ranks[k] << " element " << i << ": got "
                      << data[k][i] << ", want " << want;
        return false;
      }
    }
  return true;
}

bool BroadcastCheck(Team& t, int root) {
  const size_t bytes = 70001;
  std::vector<std::vector<unsigned char>> data(t.size(), std::vector<unsigned char>(bytes, 0));
  for (size_t k = 0; k < t.size(); k++)
    if (t.ranks[k] == root) FillBytes(data[k].data(), bytes, Seed(root, root, 500));
  const ringoResult_t res = TeamCall(t, [&](size_t k) {
    return ringoBroadcast(data[k].data(), data[k].data(), bytes, ringoUint8, root, t.comms[k], nullptr);
  });
  EXPECT_EQ(res, ringoSuccess) << "ringoBroadcast: " << ringoGetLastError(t.comms[0]);
  if (res != ringoSuccess) return false;
  for (size_t k = 0; k < t.size(); k++)
    EXPECT_EQ(CheckContent(data[k].data(), bytes, Seed(root, root, 500)), "") << "ringoBroadcast on rank " << t.ranks[k];
  return true;
}

// ---------------------------------------------------------------------------------------------
// Scenarios, each run by fork, thread and group mode.

// Shifts outside a group, a large all-to-all in a group, many messages per pair in a group, then
// p2p interleaved with collectives on the same communicator.
void MainScenario(Team& t) {
  if (!Exchange(t, Shifts(48 * 1024), false, "shifts outside a group")) return;
  if (!Exchange(t, AllToAll(kFifo + 88 * 1024 + 5), true, "all-to-all of ~600 KiB per peer in a group")) return;
  if (!Exchange(t, ManyMessages(), true, "every dtype to every peer, then a train, in one group")) return;
  if (!AllReduceCheck(t, 1)) return;
  if (!Exchange(t, AllToAll(100 * 1024), true, "all-to-all between all-reduces")) return;
  if (!AllReduceCheck(t, 2)) return;
  if (!Exchange(t, Shifts(1000), false, "shifts between collectives")) return;
  if (!BroadcastCheck(t, t.nranks - 1)) return;
  AllReduceCheck(t, 3);
}

Options Bounded(double deadline_s = 40) {
  Options o;
  o.deadline_s = deadline_s;
  o.ringo_timeout_s = 10;
  return o;
}

class P2PFork : public testing::TestWithParam<int> {};
TEST_P(P2PFork, ShiftsAllToAllsAndCollectivesMixed) { ringo_test::RunForked(GetParam(), MainScenario, Bounded()); }
INSTANTIATE_TEST_SUITE_P(N, P2PFork, testing::Values(2, 3, 4, 5, 8));

class P2PThreads : public testing::TestWithParam<int> {};
TEST_P(P2PThreads, ShiftsAllToAllsAndCollectivesMixed) { ringo_test::RunThreads(GetParam(), MainScenario, Bounded()); }
INSTANTIATE_TEST_SUITE_P(N, P2PThreads, testing::Values(2, 3, 5));

class P2PGroup : public testing::TestWithParam<int> {};
TEST_P(P2PGroup, ShiftsAllToAllsAndCollectivesMixed) { ringo_test::RunGroup(GetParam(), MainScenario, Bounded()); }
INSTANTIATE_TEST_SUITE_P(N, P2PGroup, testing::Values(2, 3, 4, 8));

// An all-to-all of 3 MiB (and odd bytes) per peer, six times the FIFO, written as the plain loop
// in one group: must complete, not deadlock.
TEST(P2PAllToAll, SeveralMiBPerPeerInOneGroup) {
  const Plan big = AllToAll(3 * 1024 * 1024 + 5);
  ringo_test::RunForked(4, [&](Team& t) { Exchange(t, big, true, "all-to-all of 3 MiB per peer"); }, Bounded());
  ringo_test::RunThreads(3, [&](Team& t) { Exchange(t, big, true, "all-to-all of 3 MiB per peer"); }, Bounded());
}

// 9 MiB + 13 bytes (not a multiple of the slot) there and back, bit for bit; between ring
// neighbours (N = 2) and between non-neighbours (N = 4: 0 <-> 2, 1 <-> 3); outside a group, so
// each send waits for its receiver, and in group mode.
TEST(P2PLarge, NineMiBAndOddBytesRoundTripBitExactly) {
  const Plan trip = PairedRoundTrip(9 * 1024 * 1024 + 13);
  auto run = [&](Team& t) { Exchange(t, trip, false, "9 MiB + 13 bytes round trip"); };
  ringo_test::RunForked(2, run, Bounded());
  ringo_test::RunForked(4, run, Bounded());
  ringo_test::RunThreads(2, run, Bounded());
  ringo_test::RunGroup(2, run, Bounded());
}

// A FIFO of 4 x 4 KiB (RINGO_SLICE_BYTES, RINGO_NSLOTS): small shifts still work outside a group,
// a ring shift of 100 KiB (six FIFOs) in a group, an all-to-all in a group, and 1 MiB round trips.
TEST(P2PSmallFifo, EnvironmentShrinksTheFifoAndEverythingStillWorks) {
  Options o = Bounded();
  o.env = {{"RINGO_SLICE_BYTES", "4096"}, {"RINGO_NSLOTS", "4"}};
  const Plan shift100k = [](int r, int n) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    return std::vector<Call>{Send(next, ringoInt64, 12801, Seed(r, next, 600)),
                             Recv(prev, ringoInt64, 12801, Seed(prev, r, 600))};
  };
  ringo_test::RunForked(4, [&](Team& t) {
    if (!Exchange(t, Shifts(3000), false, "3000-byte shifts, 4 KiB slots")) return;
    if (!Exchange(t, shift100k, true, "100 KiB ring shift in a group, 16 KiB FIFO")) return;
    if (!Exchange(t, AllToAll(100 * 1024 + 1), true, "all-to-all, 16 KiB FIFO")) return;
    Exchange(t, PairedRoundTrip(1024 * 1024 + 3), false, "1 MiB round trip, 16 KiB FIFO");
  }, o);
}

// Outside a group a send that fits the FIFO returns before its receiver calls: rank 0 sends, then
// waits at a barrier that rank 1 passes before it posts the receive. Were the send to wait for
// the receiver, both would sit at the barrier until it times out. `warm`: the pair has already
// exchanged a message in a group, so the link exists; otherwise this is their first contact.
void SendBeforeReceive(Team& t, bool warm) {
  if (warm) {
    const Plan hello = [](int r, int) {
      return std::vector<Call>{Send(1 - r, ringoInt32, 10, Seed(r, 1 - r, 701)), Recv(1 - r, ringoInt32, 10, Seed(1 - r, r, 701))};
    };
    if (!Exchange(t, hello, true, "a first message in a group")) return;
  }
  const size_t bytes = 64 * 1024 + 7;
  std::vector<unsigned char> buf(bytes);
  const uint64_t seed = Seed(0, 1, 700);
  if (t.ranks[0] == 0) {
    FillBytes(buf.data(), bytes, seed);
    ASSERT_EQ(ringoSend(buf.data(), bytes, ringoUint8, 1, t.comms[0], nullptr), ringoSuccess)
        << ringoGetLastError(t.comms[0]);
    memset(buf.data(), 0, bytes);  // the bytes are in the FIFO: the buffer is ours again
    EXPECT_TRUE(t.shared->Barrier(10)) << "ringoSend waited for the receiver";
  } else {
    EXPECT_TRUE(t.shared->Barrier(10)) << "rank 0's ringoSend did not return before rank 1 received";
    ASSERT_EQ(ringoRecv(buf.data(), bytes, ringoUint8, 0, t.comms[0], nullptr), ringoSuccess)
        << ringoGetLastError(t.comms[0]);
    EXPECT_EQ(CheckContent(buf.data(), bytes, seed), "");
  }
}

TEST(P2PBuffering, SendThatFitsTheFifoReturnsBeforeTheReceiverCalls) {
  ringo_test::RunForked(2, [](Team& t) { SendBeforeReceive(t, true); }, Bounded(30));
}

TEST(P2PBuffering, EvenOnTheFirstMessageBetweenThePair) {
  ringo_test::RunForked(2, [](Team& t) { SendBeforeReceive(t, false); }, Bounded(30));
}

// peer == self: copied inside a group holding the matching receive (also above the FIFO size, in
// order); refused with ringoInvalidUsage at once outside a group or without the matching call.
void SelfScenario(Team& t) {
  const Plan self = [](int r, int) {
    return std::vector<Call>{Send(r, ringoFloat64, 1001, Seed(r, r, 1)), Send(r, ringoUint8, 2 * kFifo + 3, Seed(r, r, 2)),
                             Send(r, ringoBfloat16, 5, Seed(r, r, 3)), Recv(r, ringoFloat64, 1001, Seed(r, r, 1)),
                             Recv(r, ringoUint8, 2 * kFifo + 3, Seed(r, r, 2)), Recv(r, ringoBfloat16, 5, Seed(r, r, 3))};
  };
  if (!Exchange(t, self, true, "self-sends with their receives in a group")) return;
  for (size_t k = 0; k < t.size(); k++) {
    const ringoComm_t comm = t.comms[k];
    const int me = t.ranks[k];
    std::vector<unsigned char> buf(64, 1);
    double t0 = Now();
    EXPECT_EQ(ringoSend(buf.data(), 16, ringoInt8, me, comm, nullptr), ringoInvalidUsage)
        << "self-send outside a group, rank " << me << ": " << ringoGetLastError(comm);
    EXPECT_EQ(ringoRecv(buf.data(), 16, ringoInt8, me, comm, nullptr), ringoInvalidUsage)
        << "self-receive outside a group, rank " << me << ": " << ringoGetLastError(comm);
    EXPECT_LT(Now() - t0, 2.0) << "refusing a self-send must not wait for RINGO_TIMEOUT";
    for (bool send : {true, false}) {
      t0 = Now();
      ringoResult_t res = ringoGroupStart();
      const ringoResult_t call = send ? ringoSend(buf.data(), 16, ringoInt8, me, comm, nullptr)
                                      : ringoRecv(buf.data(), 16, ringoInt8, me, comm, nullptr);
      const ringoResult_t end = ringoGroupEnd();
      res = res != ringoSuccess ? res : call != ringoSuccess ? call : end;
      EXPECT_EQ(res, ringoInvalidUsage) << (send ? "a self-send" : "a self-receive") << " without its match in a group"
                                        << ", rank " << me << ": call " << ResultName(call) << ", ringoGroupEnd "
                                        << ResultName(end) << ": " << ringoGetLastError(nullptr);
      EXPECT_LT(Now() - t0, 2.0) << "an unmatched self-" << (send ? "send" : "receive") << " in a group must not hang";
    }
    std::vector<unsigned char> out(64, 7);  // a count mismatch: refused before a byte is copied
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    EXPECT_EQ(ringoSend(buf.data(), 16, ringoInt8, me, comm, nullptr), ringoSuccess);
    EXPECT_EQ(ringoRecv(out.data(), 8, ringoInt8, me, comm, nullptr), ringoSuccess);
    EXPECT_EQ(ringoGroupEnd(), ringoInvalidUsage) << "rank " << me;
    EXPECT_NE(std::string(ringoGetLastError(comm)).find("sends 16 x int8 to itself but receives 8 x int8"),
              std::string::npos) << ringoGetLastError(comm);
    EXPECT_EQ(out, std::vector<unsigned char>(64, 7));
  }
  // Refusals of self-sends and receives alone left no peer waiting: the communicator is not failed.
  Exchange(t, self, true, "self-sends after the refusals, on the same communicators");
}

TEST(P2PSelf, CopiedInAGroupRefusedOtherwise) {
  ringo_test::RunForked(1, SelfScenario, Bounded(30));
  ringo_test::RunForked(2, SelfScenario, Bounded(30));
  ringo_test::RunGroup(2, SelfScenario, Bounded(30));
}

// count 0 moves nothing and succeeds, with NULL buffers too, in and out of a group, and does not
// disturb the messages after it.
void ZeroScenario(Team& t) {
  std::vector<ringoCommStats> before(t.size()), after(t.size());
  for (size_t k = 0; k < t.size(); k++) ASSERT_EQ(ringoCommGetStats(t.comms[k], &before[k]), ringoSuccess);
  const ringoResult_t res = TeamCall(t, [&](size_t k) {
    ringoResult_t first = ringoSuccess;
    for (int p = 0; p < t.nranks && first == ringoSuccess; p++) {
      if (p == t.ranks[k]) continue;
      first = ringoSend(nullptr, 0, ringoFloat32, p, t.comms[k], nullptr);
      if (first == ringoSuccess) first = ringoRecv(nullptr, 0, ringoFloat32, p, t.comms[k], nullptr);
    }
    return first;
  });
  ASSERT_EQ(res, ringoSuccess) << "count 0 with NULL buffers: " << ringoGetLastError(t.comms[0]) << " / "
                               << ringoGetLastError(nullptr);
  for (size_t k = 0; k < t.size(); k++) {
    ASSERT_EQ(ringoCommGetStats(t.comms[k], &after[k]), ringoSuccess);
    EXPECT_EQ(after[k].bytesSent, before[k].bytesSent) << "rank " << t.ranks[k];
    EXPECT_EQ(after[k].bytesReceived, before[k].bytesReceived) << "rank " << t.ranks[k];
  }
  const Plan zeros_around = [](int r, int n) {
    std::vector<Call> out;
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (int i = 0; i < 3; i++) out.push_back(Send(next, ringoInt64, i == 1 ? 9 : 0, Seed(r, next, 800 + i)));
    for (int i = 0; i < 3; i++) out.push_back(Recv(prev, ringoInt64, i == 1 ? 9 : 0, Seed(prev, r, 800 + i)));
    return out;
  };
  if (!Exchange(t, zeros_around, true, "zero, nine, zero int64 in a group")) return;
  Exchange(t, Shifts(100), false, "shifts after count-0 calls");
}

TEST(P2PZero, CountZeroMovesNothingAndSucceeds) {
  ringo_test::RunForked(2, ZeroScenario, Bounded(30));
  ringo_test::RunForked(3, ZeroScenario, Bounded(30));
  ringo_test::RunGroup(3, ZeroScenario, Bounded(30));
}

// Every bad argument is refused with ringoInvalidArgument and a message, before anything moves: the
// communicator stays usable for the exchanges after.
void InvalidArgumentsScenario(Team& t) {
  for (size_t k = 0; k < t.size(); k++) {
    const ringoComm_t comm = t.comms[k];
    const int n = t.nranks, me = t.ranks[k];
    std::vector<int32_t> buf(16, 7);
    auto refused = [&](const char* what, void* b, size_t count, ringoDataType_t type, int peer, ringoComm_t c,
                       ringoStream_t stream) {
      EXPECT_EQ(ringoSend(b, count, type, peer, c, stream), ringoInvalidArgument) << "ringoSend, " << what;
      EXPECT_GT(strlen(ringoGetLastError(c)), 0u) << "ringoSend, " << what << ": no message";
      EXPECT_EQ(ringoRecv(b, count, type, peer, c, stream), ringoInvalidArgument) << "ringoRecv, " << what;
      EXPECT_GT(strlen(ringoGetLastError(c)), 0u) << "ringoRecv, " << what << ": no message";
    };
    const int other = (me + 1) % n;
    refused("NULL comm", buf.data(), 4, ringoInt32, other, nullptr, nullptr);
    refused("peer -1", buf.data(), 4, ringoInt32, -1, comm, nullptr);
    refused("peer == nranks", buf.data(), 4, ringoInt32, n, comm, nullptr);
    refused("peer > nranks", buf.data(), 4, ringoInt32, n + 100, comm, nullptr);
    refused("datatype RINGO_NUM_TYPES", buf.data(), 4, static_cast<ringoDataType_t>(RINGO_NUM_TYPES), other, comm, nullptr);
    refused("datatype -1", buf.data(), 4, static_cast<ringoDataType_t>(-1), other, comm, nullptr);
    refused("NULL buffer with count 4", nullptr, 4, ringoInt32, other, comm, nullptr);
    refused("a stream on a host communicator", buf.data(), 4, ringoInt32, other, comm,
            reinterpret_cast<ringoStream_t>(static_cast<uintptr_t>(0x1000)));
    ringoResult_t async = ringoInternalError;
    EXPECT_EQ(ringoCommGetAsyncError(comm, &async), ringoSuccess);
    EXPECT_EQ(async, ringoSuccess) << "a refused argument put rank " << me << " in error";
  }
  if (!Exchange(t, Shifts(2000), false, "shifts after refused calls")) return;
  Exchange(t, AllToAll(3000), true, "all-to-all after refused calls");
}

TEST(P2PInvalid, BadArgumentsAreRefusedAndTheCommStaysUsable) {
  ringo_test::RunForked(3, InvalidArgumentsScenario, Bounded(30));
  ringo_test::RunGroup(2, InvalidArgumentsScenario, Bounded(30));
}

// ---------------------------------------------------------------------------------------------
// Mismatches: the receiver gets ringoInvalidUsage naming both sides (from the message header, not
// a timeout), neither side hangs, and the receiver's communicator refuses later work.

Options MismatchOptions() {
  Options o = Bounded(30);
  o.ringo_timeout_s = 10;
  return o;
}

void ExpectReceiverInError(ringoComm_t comm, int peer) {
  std::vector<int32_t> buf(4, 0);
  EXPECT_EQ(ringoRecv(buf.data(), 4, ringoInt32, peer, comm, nullptr), ringoInvalidUsage)
      << "a communicator in error must refuse p2p: " << ringoGetLastError(comm);
  EXPECT_EQ(ringoSend(nullptr, 0, ringoInt32, peer, comm, nullptr), ringoInvalidUsage)
      << "an empty message moves nothing, but the error must still be reported, as for a collective of count 0: "
      << ringoGetLastError(comm);
  EXPECT_EQ(ringoAllReduce(nullptr, nullptr, 0, ringoInt32, ringoSum, comm, nullptr), ringoInvalidUsage)
      << ringoGetLastError(comm);
  EXPECT_EQ(ringoAllReduce(buf.data(), buf.data(), 4, ringoInt32, ringoSum, comm, nullptr), ringoInvalidUsage)
      << "a communicator in error must refuse collectives: " << ringoGetLastError(comm);
  ringoResult_t async = ringoSuccess;
  EXPECT_EQ(ringoCommGetAsyncError(comm, &async), ringoSuccess);
  EXPECT_NE(async, ringoSuccess) << "the mismatch is not reported by ringoCommGetAsyncError";
}

TEST(P2PMismatch, CountMismatchFailsTheReceiver) {
  ringo_test::RunForked(2, [](Team& t) {
    std::vector<int32_t> buf(1000, 3);
    const double t0 = Now();
    if (t.ranks[0] == 0) {
      const ringoResult_t res = ringoSend(buf.data(), 1000, ringoInt32, 1, t.comms[0], nullptr);
      (void)res;  // the sender may see success (the bytes are in the FIFO) or the error
      EXPECT_LT(Now() - t0, 5.0) << "the sender of a mismatched message hung";
      return;
    }
    const ringoResult_t res = ringoRecv(buf.data(), 999, ringoInt32, 0, t.comms[0], nullptr);
    EXPECT_LT(Now() - t0, 5.0) << "found from the message header, not by the 10 s timeout";
    EXPECT_EQ(res, ringoInvalidUsage) << ResultName(res) << ": " << ringoGetLastError(t.comms[0]);
    const std::string msg = ringoGetLastError(t.comms[0]);
    EXPECT_TRUE((Contains(msg, "1000") && Contains(msg, "999")) || (Contains(msg, "4000") && Contains(msg, "3996")))
        << "the message must name both counts: " << msg;
    ExpectReceiverInError(t.comms[0], 0);
  }, MismatchOptions());
}

TEST(P2PMismatch, DatatypeMismatchFailsTheReceiverBetweenNonNeighbours) {
  // 4 ranks: 0 and 2 are not ring neighbours. Same count, same bytes, different dtype.
  ringo_test::RunForked(4, [](Team& t) {
    std::vector<float> buf(256, 1.5f);
    const double t0 = Now();
    if (t.ranks[0] == 2) {
      (void)ringoSend(buf.data(), 256, ringoFloat32, 0, t.comms[0], nullptr);
      EXPECT_LT(Now() - t0, 5.0) << "the sender of a mismatched message hung";
    } else if (t.ranks[0] == 0) {
      const ringoResult_t res = ringoRecv(buf.data(), 256, ringoInt32, 2, t.comms[0], nullptr);
      EXPECT_LT(Now() - t0, 5.0) << "found from the message header, not by the 10 s timeout";
      EXPECT_EQ(res, ringoInvalidUsage) << ResultName(res) << ": " << ringoGetLastError(t.comms[0]);
      const std::string msg = ringoGetLastError(t.comms[0]);
      EXPECT_TRUE(Contains(msg, "float32") && Contains(msg, "int32")) << "the message must name both dtypes: " << msg;
      ExpectReceiverInError(t.comms[0], 2);
    }
  }, MismatchOptions());
}

TEST(P2PMismatch, MismatchInsideAGroupFailsGroupEnd) {
  ringo_test::RunGroup(2, [](Team& t) {
    std::vector<int8_t> a(101, 1), b(101, 0);
    const double t0 = Now();
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    const ringoResult_t s = ringoSend(a.data(), 100, ringoInt8, 1, t.comms[0], nullptr);
    const ringoResult_t r = ringoRecv(b.data(), 101, ringoInt8, 0, t.comms[1], nullptr);
    const ringoResult_t end = ringoGroupEnd();
    EXPECT_LT(Now() - t0, 5.0) << "found from the message header, not by the 10 s timeout";
    EXPECT_EQ(s, ringoSuccess);
    EXPECT_EQ(r, ringoSuccess) << "queued calls are checked when they run";
    EXPECT_EQ(end, ringoInvalidUsage) << ResultName(end) << ": " << ringoGetLastError(nullptr);
    const std::string msg = ringoGetLastError(t.comms[1]);
    EXPECT_TRUE(Contains(msg, "100") && Contains(msg, "101")) << "the message must name both counts: " << msg;
    ExpectReceiverInError(t.comms[1], 0);
  }, MismatchOptions());
}

// ---------------------------------------------------------------------------------------------
// A peer that exits before its matching send: the receive ends in an error within RINGO_TIMEOUT
// (plus slack), never a hang.

Options DeadPeerOptions() {
  Options o;
  o.ringo_timeout_s = 3;
  o.grace_s = 10;
  o.deadline_s = 30;
  return o;
}

TEST(P2PDeadPeer, ReceiveFromAPeerThatExitedFails) {
  // N = 2: one message first, so the link is in use when rank 1 leaves.
  ringo_test::RunForked(2, [](Team& t) {
    if (!Exchange(t, Shifts(1000), false, "a first exchange")) return;
    if (t.ranks[0] == 1) _exit(0);  // gone before its second send
    std::vector<int32_t> buf(4096, 0);
    const double t0 = Now();
    const ringoResult_t res = ringoRecv(buf.data(), buf.size(), ringoInt32, 1, t.comms[0], nullptr);
    EXPECT_TRUE(res == ringoRemoteError || res == ringoTimeout) << ResultName(res) << ": " << ringoGetLastError(t.comms[0]);
    EXPECT_LT(Now() - t0, 3.0 + 2.0) << "RINGO_TIMEOUT is 3 s";
  }, DeadPeerOptions());
}

TEST(P2PDeadPeer, NonNeighbourExitsBeforeFirstContact) {
  // N = 4: rank 2 leaves at once. Rank 0 (not its neighbour, no link made yet) receives from it,
  // rank 3 sends it 2 MiB (more than the FIFO): both must fail in bounded time.
  ringo_test::RunForked(4, [](Team& t) {
    const int me = t.ranks[0];
    if (me == 2) _exit(0);
    if (me == 1) return;
    std::vector<unsigned char> buf(2 * 1024 * 1024, 9);
    const double t0 = Now();
    const ringoResult_t res = me == 0 ? ringoRecv(buf.data(), 1000, ringoUint8, 2, t.comms[0], nullptr)
                                      : ringoSend(buf.data(), buf.size(), ringoUint8, 2, t.comms[0], nullptr);
    EXPECT_TRUE(res == ringoRemoteError || res == ringoTimeout)
        << (me == 0 ? "ringoRecv" : "ringoSend") << " with rank 2 gone: " << ResultName(res) << ": "
        << ringoGetLastError(t.comms[0]);
    EXPECT_LT(Now() - t0, 3.0 + 2.0) << "RINGO_TIMEOUT is 3 s";
  }, DeadPeerOptions());
}

TEST(P2PDeadPeer, ErrorPassedOnAlongTheRingSaysWhereOnce) {
  // Rank 0's receive from rank 2 times out and poisons its links. Rank 1, later, receives from
  // rank 0, and rank 2, later still, from rank 1: each is told rank 0's error, passed on over the
  // link. A rank that added its own "[in ringoRecv ...]" to a message that already has one would
  // grow it by a bracket per rank it travels through.
  Options o = DeadPeerOptions();
  o.ringo_timeout_s = 1;
  ringo_test::RunForked(3, [](Team& t) {
    if (!Exchange(t, Shifts(1000), false, "a first exchange")) return;  // the links exist, as in a job
    const int me = t.ranks[0];
    std::vector<int32_t> buf(4096, 0);
    usleep(static_cast<useconds_t>(1500000 * me));  // rank 0 times out at 1 s, before ranks 1 and 2 call
    const ringoResult_t res = ringoRecv(buf.data(), buf.size(), ringoInt32, (me + 2) % 3, t.comms[0], nullptr);
    const std::string msg = ringoGetLastError(t.comms[0]);
    EXPECT_NE(res, ringoSuccess) << "nobody sends";
    EXPECT_TRUE(Contains(msg, "rank 0 timed out")) << "rank " << me << ": " << msg;
    const size_t first = msg.find("[in ringo");
    EXPECT_TRUE(first == std::string::npos || msg.find("[in ringo", first + 1) == std::string::npos)
        << "rank " << me << ": " << msg;
    t.shared->Barrier(10);  // alive while the others read it: a rank that exited is told apart
  }, o);
}

// ---------------------------------------------------------------------------------------------
// Deferred init: ringoCommInitRank inside a group returns a handle at once; ringoGroupEnd makes the
// communicators, concurrently, so one thread can create every rank.

Team TeamOf(std::vector<ringoComm_t>& comms, Shared& shared) {
  Team t;
  t.nranks = static_cast<int>(comms.size());
  for (int r = 0; r < t.nranks; r++) t.ranks.push_back(r);
  t.comms = comms;
  t.shared = &shared;
  return t;
}

// Queues n inits (each answering at once, with a handle that already knows its rank and size).
void QueueInits(std::vector<ringoComm_t>& comms, const ringoUniqueId& id) {
  const int n = static_cast<int>(comms.size());
  const double t0 = Now();
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(ringoCommInitRank(&comms[r], n, id, r), ringoSuccess) << "queued init of rank " << r << ": "
                                                                    << ringoGetLastError(nullptr);
    EXPECT_NE(comms[r], nullptr) << "queued init of rank " << r << " gave no handle";
    if (comms[r] == nullptr) continue;
    int v = -1;
    EXPECT_EQ(ringoCommCount(comms[r], &v), ringoSuccess);
    EXPECT_EQ(v, n);
    EXPECT_EQ(ringoCommUserRank(comms[r], &v), ringoSuccess);
    EXPECT_EQ(v, r);
  }
  EXPECT_LT(Now() - t0, 1.0) << "queued inits must return at once, not rendezvous";
}

Options DeferredOptions() {
  Options o;
  o.ringo_timeout_s = 5;
  o.deadline_s = 30;
  return o;
}

TEST(DeferredInit, OneThreadCreatesEveryRankInAGroup) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared& shared) {
    std::vector<ringoComm_t> comms(4, nullptr);
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    QueueInits(comms, id);
    const ringoResult_t end = ringoGroupEnd();
    ASSERT_EQ(end, ringoSuccess) << ResultName(end) << ": " << ringoGetLastError(nullptr);
    for (ringoComm_t c : comms) ASSERT_NE(c, nullptr);
    Team t = TeamOf(comms, shared);
    if (AllReduceCheck(t, 4)) Exchange(t, AllToAll(kFifo + 1), true, "all-to-all on comms made in a group");
    for (ringoComm_t c : comms) EXPECT_EQ(ringoCommDestroy(c), ringoSuccess) << ringoGetLastError(nullptr);
  }, DeferredOptions());
}

// ringo.h: GroupEnd runs the queued inits first, then the queued operations. (NCCL does not
// promise this; ringo does.)
TEST(DeferredInit, CollectiveQueuedAfterTheInitsRunsAfterThem) {
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared& shared) {
    const int n = 3;
    const size_t count = 777;
    std::vector<ringoComm_t> comms(n, nullptr);
    std::vector<std::vector<float>> data(n);
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    QueueInits(comms, id);
    for (int r = 0; r < n; r++) {
      data[r].assign(count, static_cast<float>(r + 1));
      EXPECT_EQ(ringoAllReduce(data[r].data(), data[r].data(), count, ringoFloat32, ringoSum, comms[r], nullptr),
                ringoSuccess) << "all-reduce queued on a pending communicator: " << ringoGetLastError(comms[r]);
    }
    const ringoResult_t end = ringoGroupEnd();
    ASSERT_EQ(end, ringoSuccess) << ResultName(end) << ": " << ringoGetLastError(nullptr);
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++)
        ASSERT_EQ(data[r][i], 6.0f) << "rank " << r << " element " << i;
    Team t = TeamOf(comms, shared);
    Exchange(t, Shifts(500), true, "p2p after init + all-reduce in one group");
    for (ringoComm_t c : comms) EXPECT_EQ(ringoCommDestroy(c), ringoSuccess) << ringoGetLastError(nullptr);
  }, DeferredOptions());
}

// A queued init the root refuses (wrong secret): ringoGroupEnd returns the error in bounded time,
// the communicator keeps it (ringoCommGetAsyncError, ringoGetLastError), refuses work, and is freed
// by ringoCommDestroy.
TEST(DeferredInit, RefusedQueuedInitFailsGroupEndAndIsReported) {
  ringo_test::ScopedEnv timeout("RINGO_TIMEOUT", "3");  // for the root process the parent forks
  Options o = DeferredOptions();
  o.ringo_timeout_s = 3;
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& id, Shared&) {
    ringoUniqueId forged = id;
    for (size_t b = 32; b < RINGO_UNIQUE_ID_BYTES; b++) forged.internal[b] = static_cast<char>(forged.internal[b] ^ 0x5a);
    ringoComm_t bad = nullptr;
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    const ringoResult_t queued = ringoCommInitRank(&bad, 2, forged, 0);
    const double t0 = Now();
    const ringoResult_t end = ringoGroupEnd();
    const double took = Now() - t0;
    ASSERT_EQ(queued, ringoSuccess) << "a queued init answers before the rendezvous: " << ringoGetLastError(nullptr);
    ASSERT_NE(bad, nullptr);
    EXPECT_NE(end, ringoSuccess) << "ringoGroupEnd hid a refused init";
    EXPECT_LT(took, 3.0 + 2.0) << "RINGO_TIMEOUT is 3 s";
    EXPECT_GT(strlen(ringoGetLastError(nullptr)), 0u);
    ringoResult_t async = ringoSuccess;
    EXPECT_EQ(ringoCommGetAsyncError(bad, &async), ringoSuccess);
    EXPECT_EQ(async, end) << "ringoCommGetAsyncError " << ResultName(async) << ", ringoGroupEnd " << ResultName(end);
    EXPECT_GT(strlen(ringoGetLastError(bad)), 0u);
    std::vector<int32_t> buf(8, 1);
    EXPECT_NE(ringoSend(buf.data(), 8, ringoInt32, 1, bad, nullptr), ringoSuccess) << "a failed comm took a send";
    EXPECT_NE(ringoAllReduce(buf.data(), buf.data(), 8, ringoInt32, ringoSum, bad, nullptr), ringoSuccess);
    EXPECT_EQ(ringoCommDestroy(bad), ringoSuccess) << ringoGetLastError(nullptr);
  }, o);
}

// An all-zero id is bad too: either refused by the call itself (ringoInvalidArgument, no handle
// needed) or queued and then reported by ringoGroupEnd and the handle as above; never a hang.
TEST(DeferredInit, ZeroIdInAGroupIsAnErrorNotAHang) {
  Options o = DeferredOptions();
  o.ringo_timeout_s = 3;
  o.make_id = false;
  ringo_test::RunProcesses(1, [](int, const ringoUniqueId& zero, Shared&) {
    ringoComm_t bad = nullptr;
    const double t0 = Now();
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    const ringoResult_t queued = ringoCommInitRank(&bad, 2, zero, 0);
    const ringoResult_t end = ringoGroupEnd();
    EXPECT_LT(Now() - t0, 3.0 + 2.0);
    if (queued != ringoSuccess) {
      EXPECT_EQ(queued, ringoInvalidArgument) << ringoGetLastError(nullptr);
      return;
    }
    ASSERT_NE(bad, nullptr);
    EXPECT_NE(end, ringoSuccess) << "ringoGroupEnd hid a failed init";
    ringoResult_t async = ringoSuccess;
    EXPECT_EQ(ringoCommGetAsyncError(bad, &async), ringoSuccess);
    EXPECT_EQ(async, end);
    EXPECT_EQ(ringoCommDestroy(bad), ringoSuccess) << ringoGetLastError(nullptr);
  }, o);
}

}  // namespace
