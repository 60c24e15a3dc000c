// test_schedule.cc — replays src/schedule.c symbolically: every message carries the set of ranks
// whose data it sums, so the tests prove ownership after reduce-scatter and all-gather.
// Run: make test (or build/test/test_schedule).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

extern "C" {
#include "sched/schedule.h"
}

namespace {

using Mask = uint64_t;  // bit r set: rank r's contribution is in the value
const Mask kNone = 0;

struct Replay {
  int nranks;
  // out[p][c]: what position p finally holds for chunk c (kNone if nothing written).
  std::vector<std::vector<Mask>> out;
  std::vector<int> sends, recvs;
  // order[c]: the positions whose inputs went into chunk c, in the order the ring combined them.
  std::vector<std::vector<int>> order;
};

using Held = std::vector<std::vector<Mask>>;  // held[p][c]: what position p holds of chunk c

// Runs every position's steps in lock-step: the message position p sends at step t is what p+1
// receives at step t+1, and must be about the same chunk. schedule(p, steps) fills p's steps. A
// step that sends without receiving sends p's own input, or with `held`, what p holds of the chunk
// (the all-gather half starts from what the reduce-scatter left); `input` is p's own input.
Replay replay_steps(const std::function<int(int, ringo_step*)>& schedule, int nranks, bool chain, int root,
                    const Held* held = nullptr, const std::vector<Mask>* input = nullptr) {
  // What a position holds is already in its output (the all-gather half sends it from there).
  Replay r{nranks, held ? *held : Held(nranks, std::vector<Mask>(nranks, kNone)), std::vector<int>(nranks),
           std::vector<int>(nranks), std::vector<std::vector<int>>(nranks)};
  std::vector<std::vector<ringo_step>> steps(nranks, std::vector<ringo_step>(RINGO_MAX_STEPS(nranks) + 1));
  std::vector<int> n(nranks);
  int most = 0;
  for (int p = 0; p < nranks; p++) {
    n[p] = schedule(p, steps[p].data());
    most = std::max(most, n[p]);
  }
  // in flight from p to p+1: (chunk, mask), one slot deep per step is all the ring ever needs.
  std::vector<int> fly_chunk(nranks, -1);
  std::vector<Mask> fly_mask(nranks, kNone);
  for (int t = 0; t < (chain ? nranks : most); t++) {
    std::vector<int> next_chunk(nranks, -1);
    std::vector<Mask> next_mask(nranks, kNone);
    for (int p = 0; p < nranks; p++) {
      int idx = chain ? (ringo_mod(p - root, nranks) == t ? 0 : -1) : t;
      if (idx < 0 || idx >= n[p]) continue;
      const ringo_step st = steps[p][idx];
      const int prev = ringo_mod(p - 1, nranks);
      Mask in = input ? (*input)[p] : Mask(1) << p, recv = kNone, value = kNone;
      bool receives = st.prim != RINGO_PRIM_SEND && st.prim != RINGO_PRIM_COPY_SEND;
      if (receives) {
        EXPECT_EQ(fly_chunk[prev], st.chunk) << "position " << p << " step " << idx;
        recv = fly_mask[prev];
        EXPECT_NE(recv, kNone);
        r.recvs[p]++;
      }
      switch (st.prim) {
        case RINGO_PRIM_SEND: case RINGO_PRIM_COPY_SEND:
          value = held ? (*held)[p][st.chunk] : in;
          if (st.prim == RINGO_PRIM_SEND && !held) r.order[st.chunk].push_back(p);
          break;
        case RINGO_PRIM_RECV_REDUCE_SEND: case RINGO_PRIM_RECV_REDUCE_COPY_SEND:
        case RINGO_PRIM_RECV_REDUCE_COPY:
          EXPECT_EQ(recv & in, kNone) << "rank " << p << " counted twice";
          value = recv | in;
          r.order[st.chunk].push_back(p);
          break;
        case RINGO_PRIM_RECV_COPY_SEND: case RINGO_PRIM_RECV: value = recv; break;
      }
      bool writes = st.prim == RINGO_PRIM_RECV_REDUCE_COPY_SEND || st.prim == RINGO_PRIM_RECV_REDUCE_COPY ||
                    st.prim == RINGO_PRIM_COPY_SEND || st.prim == RINGO_PRIM_RECV_COPY_SEND ||
                    st.prim == RINGO_PRIM_RECV;
      if (writes) r.out[p][st.chunk] = value;
      bool sends = st.prim != RINGO_PRIM_RECV && st.prim != RINGO_PRIM_RECV_REDUCE_COPY;
      if (sends) {
        next_chunk[p] = st.chunk;
        next_mask[p] = value;
        r.sends[p]++;
      }
    }
    fly_chunk = next_chunk;
    fly_mask = next_mask;
  }
  return r;
}

Replay replay(enum ringo_coll coll, int nranks, int root) {
  const bool chain = coll == RINGO_COLL_BROADCAST || coll == RINGO_COLL_REDUCE;
  const int first = coll == RINGO_COLL_REDUCE ? root + 1 : root;  // where a chain starts
  return replay_steps([&](int p, ringo_step* st) { return ringo_schedule(coll, nranks, p, root, st); }, nranks, chain,
                      chain ? ringo_mod(first, nranks) : 0);
}

Mask all_ranks(int n) { return n == 64 ? ~Mask(0) : (Mask(1) << n) - 1; }

}  // namespace

TEST(Schedule, StepFormulasMatchTheSeed) {
  // N = 4, position 1: reduce-scatter step s sends (1 - s) and receives (1 - s - 1) mod 4.
  EXPECT_EQ(ringo_rs_send_chunk(4, 1, 0), 1);
  EXPECT_EQ(ringo_rs_recv_chunk(4, 1, 0), 0);
  EXPECT_EQ(ringo_rs_send_chunk(4, 1, 2), 3);
  EXPECT_EQ(ringo_rs_recv_chunk(4, 1, 2), 2);
  EXPECT_EQ(ringo_ag_send_chunk(4, 1, 0), 2);  // the chunk it owns after reduce-scatter
  EXPECT_EQ(ringo_ag_recv_chunk(4, 1, 0), 1);
  EXPECT_EQ(ringo_mod(-5, 4), 3);
}

TEST(Schedule, AllReduceOwnershipAndLaw) {
  for (int n = 1; n <= 64; n++) {
    Replay r = replay(RINGO_COLL_ALLREDUCE, n, 0);
    for (int p = 0; p < n; p++) {
      if (n == 1) {
        EXPECT_EQ(r.sends[p], 0);
        continue;
      }
      // 2(N-1) chunk sends and receives per rank: the 2(N-1)/N·D law in chunks of D/N.
      EXPECT_EQ(r.sends[p], 2 * (n - 1)) << "n=" << n;
      EXPECT_EQ(r.recvs[p], 2 * (n - 1)) << "n=" << n;
      for (int c = 0; c < n; c++) EXPECT_EQ(r.out[p][c], all_ranks(n)) << "n=" << n << " p=" << p << " c=" << c;
    }
  }
}

TEST(Schedule, ReduceScatterLeavesChunkPosPlusOne) {
  for (int n = 2; n <= 64; n++) {
    Replay r = replay(RINGO_COLL_REDUCESCATTER, n, 0);
    for (int p = 0; p < n; p++) {
      EXPECT_EQ(r.sends[p], n - 1);
      for (int c = 0; c < n; c++)
        EXPECT_EQ(r.out[p][c], c == (p + 1) % n ? all_ranks(n) : kNone) << "n=" << n << " p=" << p;
    }
  }
}

TEST(Schedule, AllGatherDeliversEveryOwnedChunk) {
  for (int n = 2; n <= 64; n++) {
    Replay r = replay(RINGO_COLL_ALLGATHER, n, 0);
    for (int p = 0; p < n; p++) {
      EXPECT_EQ(r.sends[p], n - 1);
      // Chunk c starts at its owner c - 1 (where reduce-scatter left it) and reaches everyone.
      for (int c = 0; c < n; c++) EXPECT_EQ(r.out[p][c], Mask(1) << ringo_mod(c - 1, n)) << "n=" << n;
    }
  }
}

TEST(Schedule, BroadcastAndReduceChains) {
  for (int n = 2; n <= 16; n++) {
    for (int root = 0; root < n; root++) {
      Replay b = replay(RINGO_COLL_BROADCAST, n, root);
      Replay d = replay(RINGO_COLL_REDUCE, n, root);
      for (int p = 0; p < n; p++) {
        EXPECT_EQ(b.out[p][0], Mask(1) << root) << "broadcast n=" << n << " root=" << root << " p=" << p;
        EXPECT_EQ(b.sends[p], p == ringo_mod(root - 1, n) ? 0 : 1);
        EXPECT_EQ(d.out[p][0], p == root ? all_ranks(n) : kNone) << "reduce n=" << n << " root=" << root;
        EXPECT_EQ(d.sends[p], p == root ? 0 : 1);
      }
    }
  }
}

// The one-shot path reduces in the order ringo_reduce_start gives; the ring must combine in it too,
// or the two would give different floating-point bits for the same call.
TEST(Schedule, ReduceStartIsTheRingsOrder) {
  for (int n = 2; n <= 9; n++) {
    for (enum ringo_coll coll : {RINGO_COLL_ALLREDUCE, RINGO_COLL_REDUCESCATTER, RINGO_COLL_REDUCE}) {
      for (int root = 0; root < (coll == RINGO_COLL_REDUCE ? n : 1); root++) {
        const Replay r = replay(coll, n, root);
        const int chunks = coll == RINGO_COLL_REDUCE ? 1 : n;
        for (int c = 0; c < chunks; c++) {
          ASSERT_EQ(r.order[c].size(), size_t(n)) << "coll " << coll << " n " << n << " chunk " << c;
          const int start = ringo_reduce_start(coll, n, root, c);
          for (int k = 0; k < n; k++)
            EXPECT_EQ(r.order[c][k], ringo_mod(start + k, n)) << "coll " << coll << " n " << n << " root " << root
                                                               << " chunk " << c << " input " << k;
        }
      }
    }
  }
}

// The halves alone: the reduce-scatter half leaves position p with chunk ringo_owned_chunk(n, p) of
// every input, combined in the all-reduce's order; the all-gather half, started from just that,
// gives every position every chunk. Each half sends and receives N-1 chunks.
TEST(Schedule, HalvesMakeAnAllReduce) {
  for (int n = 2; n <= 64; n++) {
    const Replay rs = replay_steps(
        [n](int p, ringo_step* st) { return ringo_schedule_half(RINGO_HALF_REDUCE_SCATTER, n, p, st); }, n, false, 0);
    const Replay whole = replay(RINGO_COLL_ALLREDUCE, n, 0);
    for (int p = 0; p < n; p++) {
      EXPECT_EQ(ringo_owned_chunk(n, p), (p + 1) % n);
      for (int c = 0; c < n; c++)
        EXPECT_EQ(rs.out[p][c], c == ringo_owned_chunk(n, p) ? all_ranks(n) : kNone) << "n=" << n << " p=" << p;
      EXPECT_EQ(rs.sends[p], n - 1);
      EXPECT_EQ(rs.recvs[p], n - 1);
    }
    EXPECT_EQ(rs.order, whole.order) << "n=" << n;
    const Replay ag = replay_steps(
        [n](int p, ringo_step* st) { return ringo_schedule_half(RINGO_HALF_ALL_GATHER, n, p, st); }, n, false, 0,
        &rs.out);
    for (int p = 0; p < n; p++) {
      for (int c = 0; c < n; c++) EXPECT_EQ(ag.out[p][c], all_ranks(n)) << "n=" << n << " p=" << p << " c=" << c;
      EXPECT_EQ(ag.sends[p], n - 1);
      EXPECT_EQ(ag.recvs[p], n - 1);
    }
  }
  ringo_step st[1];
  EXPECT_EQ(ringo_schedule_half(RINGO_HALF_ALL_GATHER, 1, 0, st), 0);
}

// The two-level ring (L ranks on each of H hosts): the reduce-scatter half around each host, an
// all-reduce across hosts of each owned chunk among the ranks at the same place, the all-gather half
// around each host. Every rank ends with every rank's input in every chunk, each counted once.
TEST(Schedule, TwoLevelRingIsAnAllReduce) {
  for (int hosts = 2; hosts <= 5; hosts++) {
    for (int per = 2; per <= 5; per++) {
      // Rank h * per + i: place i on host h. Each host's reduce-scatter, on masks of global ranks.
      std::vector<Held> after_rs(hosts);
      for (int h = 0; h < hosts; h++) {
        std::vector<Mask> input(per);
        for (int i = 0; i < per; i++) input[i] = Mask(1) << (h * per + i);
        after_rs[h] = replay_steps(
            [per](int i, ringo_step* st) { return ringo_schedule_half(RINGO_HALF_REDUCE_SCATTER, per, i, st); }, per,
            false, 0, nullptr, &input).out;
      }
      // Across hosts, place i all-reduces its owned chunk: every host's part of it, combined.
      std::vector<Held> held(hosts, Held(per, std::vector<Mask>(per, kNone)));
      for (int i = 0; i < per; i++) {
        const int c = ringo_owned_chunk(per, i);
        std::vector<Mask> input(hosts);
        for (int h = 0; h < hosts; h++) input[h] = after_rs[h][i][c];
        const Replay across = replay_steps(
            [hosts](int h, ringo_step* st) { return ringo_schedule(RINGO_COLL_ALLREDUCE, hosts, h, 0, st); }, hosts,
            false, 0, nullptr, &input);
        for (int h = 0; h < hosts; h++) {
          Mask whole = kNone;  // the sub-chunks of chunk c this place holds, all of them the same
          for (int s = 0; s < hosts; s++) {
            EXPECT_EQ(across.out[h][s], all_ranks(hosts * per)) << "hosts " << hosts << " per " << per;
            whole |= across.out[h][s];
          }
          held[h][i][c] = whole;
        }
      }
      for (int h = 0; h < hosts; h++) {
        const Replay ag = replay_steps(
            [per](int i, ringo_step* st) { return ringo_schedule_half(RINGO_HALF_ALL_GATHER, per, i, st); }, per,
            false, 0, &held[h]);
        for (int i = 0; i < per; i++)
          for (int c = 0; c < per; c++) EXPECT_EQ(ag.out[i][c], all_ranks(hosts * per)) << "host " << h << " place " << i;
      }
    }
  }
}

// Short chunks (count / N under RINGO_CHUNK_ALIGN_MIN elements): count / N each, the remainder one
// element each to the first chunks, as the seed's worked example cuts them.
TEST(Schedule, ShortChunkRangesSpreadRemainders) {
  const size_t counts[] = {0, 1, 2, 3, 7, 8, 9, 4099, 8191, 2 * 8192 - 1};
  for (int n = 1; n <= 9; n++) {
    for (size_t count : counts) {
      if (n > 1 && count / n >= RINGO_CHUNK_ALIGN_MIN) continue;  // long: the next test
      EXPECT_EQ(ringo_chunk_aligned(count, n), 0) << count << " over " << n;
      size_t expect_off = 0;
      for (int c = 0; c < n; c++) {
        size_t off, len;
        ringo_chunk_range(count, n, c, &off, &len);
        EXPECT_EQ(off, expect_off);
        EXPECT_EQ(len, count / n + (size_t(c) < count % n ? 1 : 0));
        expect_off += len;
      }
      EXPECT_EQ(expect_off, count);
    }
  }
}

// Long chunks: every boundary at a multiple of 16 elements (so at a multiple of 16 bytes for every
// dtype: the ring kernel's vectors), covering [0, count) in order, lengths within 32 elements of
// each other (a unit of 16 more in the first chunks, the last unit cut short), the first the longest. The counts are the ones that used to misalign: not
// multiples of 16 N, or multiples of N whose N-th is odd (4099 N).
TEST(Schedule, LongChunkRangesStartAtMultiplesOf16Elements) {
  for (int n = 2; n <= 9; n++) {
    const size_t nn = size_t(n), min = RINGO_CHUNK_ALIGN_MIN * nn;
    const size_t counts[] = {min, min + 1, min + 15, min + 16 * nn - 1, 4099 * 16 * nn + 3 * nn, 1000003, 4194304,
                             size_t(1) << 28, (size_t(1) << 40) + 7};
    for (size_t count : counts) {
      ASSERT_EQ(ringo_chunk_aligned(count, n), 1) << count << " over " << n;
      size_t expect_off = 0, first = 0, shortest = count;
      for (int c = 0; c < n; c++) {
        size_t off, len;
        ringo_chunk_range(count, n, c, &off, &len);
        EXPECT_EQ(off, expect_off) << count << " over " << n << ", chunk " << c;
        EXPECT_EQ(off % 16, 0u) << count << " over " << n << ", chunk " << c;
        if (c == 0) first = len;
        EXPECT_LE(len, first) << count << " over " << n << ": chunk " << c << " longer than the first";
        shortest = std::min(shortest, len);
        expect_off += len;
      }
      EXPECT_EQ(expect_off, count) << count << " over " << n;
      EXPECT_LT(first - shortest, 32u) << count << " over " << n;
    }
  }
}

// The cuts themselves, worked out by hand. 16 MiB of float32 over 3 ranks (4194304 elements,
// 262144 units of 16): units 87382, 87381, 87381, so chunks start at 0, 1398112 and 2796208
// elements (0, 5592448 and 11184832 bytes: the old cut put chunk 1 at 5592408, off 16 bytes).
// At the threshold, 3 x 8192 + 1 elements: 1537 units, 513 to chunk 0; the last chunk ends at count,
// 8192 - 15 elements. One element less per chunk (3 x 8191 + 2): short, spread as before.
TEST(Schedule, LongChunkRangesWorkedOut) {
  struct Want {
    size_t count;
    int n;
    size_t off[3], len[3];
  };
  const Want wants[] = {{4194304, 3, {0, 1398112, 2796208}, {1398112, 1398096, 1398096}},
                        {3 * 8192 + 1, 3, {0, 8208, 16400}, {8208, 8192, 8177}},
                        {3 * 8191 + 2, 3, {0, 8192, 16384}, {8192, 8192, 8191}},
                        {2 * 8192 + 17, 2, {0, 8208}, {8208, 8192 + 1}}};
  for (const Want& w : wants)
    for (int c = 0; c < w.n; c++) {
      size_t off, len;
      ringo_chunk_range(w.count, w.n, c, &off, &len);
      EXPECT_EQ(off, w.off[c]) << w.count << " over " << w.n << ", chunk " << c;
      EXPECT_EQ(len, w.len[c]) << w.count << " over " << w.n << ", chunk " << c;
    }
}

TEST(Schedule, SlicesCoverAChunk) {
  EXPECT_EQ(ringo_num_rounds(0, 4), 0u);
  EXPECT_EQ(ringo_num_rounds(9, 4), 3u);
  size_t off, len, total = 0;
  for (size_t j = 0; j < 3; j++) {
    ringo_slice_range(9, 4, j, &off, &len);
    EXPECT_EQ(off, j * 4);
    total += len;
  }
  EXPECT_EQ(total, 9u);
  ringo_slice_range(8, 4, 2, &off, &len);  // a shorter chunk has nothing in the last round
  EXPECT_EQ(len, 0u);
}

// A staged collective's phases (src/staged.c) cut the rounds into consecutive, non-empty runs
// that cover every round once, as even as can be.
TEST(Schedule, PhasesCoverTheRoundsInOrder) {
  for (size_t rounds : {1u, 2u, 7u, 8u, 100u, 1001u}) {
    for (int n = 1; n <= 9 && (size_t)n <= rounds; n++) {
      size_t next = 0, smallest = rounds, largest = 0;
      for (int p = 0; p < n; p++) {
        size_t first, end;
        ringo_phase_rounds(rounds, n, p, &first, &end);
        EXPECT_EQ(first, next) << rounds << " rounds, phase " << p << " of " << n;
        EXPECT_LT(first, end) << rounds << " rounds, phase " << p << " of " << n << " is empty";
        smallest = std::min(smallest, end - first);
        largest = std::max(largest, end - first);
        next = end;
      }
      EXPECT_EQ(next, rounds) << n << " phases";
      EXPECT_LE(largest - smallest, 1u) << rounds << " rounds in " << n << " phases";
    }
  }
}
