// test_trace.cc — RINGO_TRACE on real multi-rank runs (forked ranks, test/harness.h): the file parses as
// JSON once closed, has one track per rank, (2N-1) x slices events per rank per all-reduce, ring peers,
// sends matched by receives, no overlap within a rank; and `ringo-trace --timeline` reads such a file
// (counts, the law, one box per event, one arrow per hand-off), and refuses what it cannot draw or would
// cut (times past its axis, numbers such as -n 2.5). Run: make test (or build/test/test_trace).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "harness.h"
#include "tool_run.h"

extern "C" {
#include "sched/schedule.h"
}

namespace {

// ---- a strict JSON reader: no trailing commas, nothing after the value ----

struct Json {
  enum Kind { kNull, kBool, kNum, kStr, kArr, kObj } kind = kNull;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;
  const Json& operator[](const std::string& key) const {
    static const Json null;
    auto it = obj.find(key);
    return it == obj.end() ? null : it->second;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}
  // The whole text as one value; false with a position in error() otherwise.
  bool Parse(Json* out) {
    *out = Value(0);
    Ws();
    if (ok_ && i_ != s_.size()) Fail("text after the value");
    return ok_;
  }
  std::string error() const { return err_; }

 private:
  void Fail(const char* what) {
    if (ok_) err_ = std::string(what) + " at byte " + std::to_string(i_);
    ok_ = false;
  }
  void Ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) i_++;
  }
  bool Eat(char c) {
    Ws();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  std::string String() {
    std::string out;
    if (!Eat('"')) return Fail("expected a string"), out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in a string"), out;
      if (c == '\\') {
        if (i_ >= s_.size() || !strchr("\"\\/bfnrtu", s_[i_])) return Fail("bad escape"), out;
        c = s_[i_++];
        if (c == 'u') i_ += 4;
      }
      out += c;
    }
    if (i_ >= s_.size()) return Fail("unterminated string"), out;
    i_++;
    return out;
  }
  Json Value(int depth) {
    Json v;
    Ws();
    if (depth > 32 || i_ >= s_.size()) return Fail("expected a value"), v;
    const char c = s_[i_];
    if (c == '{' || c == '[') {
      i_++;
      v.kind = c == '{' ? Json::kObj : Json::kArr;
      const char close = c == '{' ? '}' : ']';
      if (Eat(close)) return v;
      do {
        if (c == '{') {
          const std::string key = String();
          if (!Eat(':')) return Fail("expected ':'"), v;
          v.obj[key] = Value(depth + 1);
        } else {
          v.arr.push_back(Value(depth + 1));
        }
      } while (ok_ && Eat(','));
      if (!Eat(close)) Fail("expected ',' or a closing bracket");
    } else if (c == '"') {
      v.kind = Json::kStr;
      v.str = String();
    } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 5, "false") == 0) {
      v.kind = Json::kBool;
      i_ += s_[i_] == 't' ? 4 : 5;
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else {
      const char* start = s_.c_str() + i_;
      char* end = nullptr;
      v.kind = Json::kNum;
      v.num = strtod(start, &end);
      if (end == start || !(c == '-' || std::isdigit(static_cast<unsigned char>(c)))) return Fail("bad number"), v;
      i_ += static_cast<size_t>(end - start);
    }
    return v;
  }
  const std::string& s_;
  size_t i_ = 0;
  bool ok_ = true;
  std::string err_;
};

TEST(TraceJson, ReaderIsStrict) {
  Json v;
  EXPECT_TRUE(JsonParser("[{\"a\":1,\"b\":[true,null,\"x\\\"y\"]}]").Parse(&v));
  EXPECT_EQ(v.arr.at(0)["b"].arr.at(2).str, "x\"y");
  EXPECT_FALSE(JsonParser("[{\"a\":1},]").Parse(&v));  // trailing comma
  EXPECT_FALSE(JsonParser("[{\"a\":1}").Parse(&v));    // unclosed
  EXPECT_FALSE(JsonParser("[1] 2").Parse(&v));
}

// ---- the events of a trace file ----

struct Event {
  int pid, step, chunk, from, to;
  long seq, slice;
  double ts, dur, bytes;
  std::string name, cat, prim;
};

// The file as written (array left open, each line ending in ","), closed the way a Chrome-trace
// reader closes it: drop the last comma, add the bracket. Then it must be strict JSON.
Json ReadClosed(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  EXPECT_FALSE(text.empty()) << path << " is missing or empty";
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (!text.empty() && text.back() == ',') text.pop_back();
  text += "\n]";
  Json root;
  JsonParser parser(text);
  EXPECT_TRUE(parser.Parse(&root)) << parser.error();
  EXPECT_EQ(root.kind, Json::kArr);
  return root;
}

// "reduce-scatter step s" is fused step s; "all-gather step s" is fused step s + N-1.
int FusedStep(const std::string& name, int nranks) {
  int s = -1;
  if (sscanf(name.c_str(), "reduce-scatter step %d", &s) == 1) return s;
  if (sscanf(name.c_str(), "all-gather step %d", &s) == 1) return s + nranks - 1;
  return -1;
}

const char* PrimName(ringo_prim p) {
  static const char* const names[] = {"send", "recv-reduce-send", "recv-reduce-copy-send", "recv-reduce-copy",
                                      "copy-send", "recv-copy-send", "recv"};
  return names[p];
}

std::vector<Event> StepEvents(const Json& root, int nranks, std::vector<int>* tracks) {
  std::vector<Event> out;
  for (const Json& e : root.arr) {
    if (e["ph"].str == "M") {
      EXPECT_EQ(e["name"].str, "process_name");
      const int pid = static_cast<int>(e["pid"].num);
      EXPECT_EQ(e["args"]["name"].str, "rank " + std::to_string(pid));
      tracks->push_back(pid);
      continue;
    }
    EXPECT_EQ(e["ph"].str, "X");
    const Json& a = e["args"];
    Event ev{static_cast<int>(e["pid"].num), FusedStep(e["name"].str, nranks), static_cast<int>(a["chunk"].num),
             static_cast<int>(a["from"].num), static_cast<int>(a["to"].num), static_cast<long>(a["seq"].num),
             static_cast<long>(a["slice"].num), e["ts"].num, e["dur"].num, a["bytes"].num, e["name"].str,
             e["cat"].str, a["prim"].str};
    EXPECT_GE(ev.step, 0) << "unexpected name " << ev.name;
    EXPECT_EQ(a["step"].num, ev.step) << ev.name;  // the step of the schedule, as ringo-trace --timeline reads it
    EXPECT_EQ(ev.cat, "all_reduce");
    EXPECT_EQ(e["tid"].num, 0);
    EXPECT_GE(ev.dur, 0);
    out.push_back(ev);
  }
  return out;
}

// ---- the scenario ----

// RINGO_SLICE_BYTES is the size of a FIFO slot; the payload of a slice is at most that (the
// library may keep a header in the slot), so the test reads the payload size off the trace and
// checks that every chunk of 800 bytes was cut into the same several slices.
constexpr size_t kSliceBytes = 256;
constexpr size_t kChunkFloats = 200;
constexpr double kChunkBytes = kChunkFloats * 4.0;
constexpr int kCollectives = 2;  // seq 0 and 1

std::string FreshPath(int nranks) {
  std::string path = ::testing::TempDir() + "ringo_trace_" + std::to_string(getpid()) + "_" +
                     std::to_string(nranks) + ".json";
  unlink(path.c_str());  // the trace appends
  return path;
}

void TwoAllReduces(ringo_test::Team& team) {
  const size_t count = kChunkFloats * static_cast<size_t>(team.nranks);
  const int r = team.ranks[0];
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; i++) in[i] = static_cast<float>(r + 1);
  for (int k = 0; k < kCollectives; k++) {
    ASSERT_EQ(ringoAllReduce(in.data(), out.data(), count, ringoFloat32, ringoSum, team.comms[0], nullptr),
              ringoSuccess);
    const float want = static_cast<float>(team.nranks * (team.nranks + 1) / 2);
    ASSERT_EQ(out.front(), want);
    ASSERT_EQ(out.back(), want);
  }
}

class TraceFile : public ::testing::TestWithParam<int> {};

TEST_P(TraceFile, RealRunRecordsEveryRingStep) {
  const int n = GetParam();
  const std::string path = FreshPath(n);
  ringo_test::Options opts;
  opts.deadline_s = 30;
  // Every step of the ring, at every size (RINGO_ALGO=auto would run small ones one-shot).
  opts.env = {{"RINGO_TRACE", path}, {"RINGO_SLICE_BYTES", std::to_string(kSliceBytes)}, {"RINGO_ALGO", "ring"}};
  ringo_test::RunForked(n, TwoAllReduces, opts);
  if (HasFailure()) return;

  const Json root = ReadClosed(path);
  std::vector<int> tracks;
  std::vector<Event> ev = StepEvents(root, n, &tracks);
  unlink(path.c_str());

  // One track per rank, named after it.
  std::sort(tracks.begin(), tracks.end());
  std::vector<int> want_tracks(static_cast<size_t>(n));
  for (int r = 0; r < n; r++) want_tracks[static_cast<size_t>(r)] = r;
  EXPECT_EQ(tracks, want_tracks);

  // The payload of a full slice: the largest event. Chunks of 800 bytes must need several.
  double payload = 0;
  for (const Event& e : ev) payload = std::max(payload, e.bytes);
  ASSERT_GT(payload, 0);
  ASSERT_LE(payload, static_cast<double>(kSliceBytes));
  const long slices = static_cast<long>(std::ceil(kChunkBytes / payload));
  ASSERT_GE(slices, 2) << "the test means to exercise slicing";

  // Per rank and collective: every fused step of the schedule, each slice once, right chunk,
  // right primitive, ring peers, and 2(N-1)/N of the vector sent.
  std::map<std::tuple<int, long, int, long>, const Event*> by_key;  // (rank, seq, step, slice)
  for (int r = 0; r < n; r++) {
    ringo_step steps[RINGO_MAX_STEPS(16)];
    const int nsteps = ringo_schedule(RINGO_COLL_ALLREDUCE, n, r, 0, steps);
    ASSERT_EQ(nsteps, 2 * n - 1);
    for (long seq = 0; seq < kCollectives; seq++) {
      size_t events = 0;
      double sent = 0;
      for (const Event& e : ev) {
        if (e.pid != r || e.seq != seq) continue;
        events++;
        ASSERT_GE(e.step, 0);
        ASSERT_LT(e.step, nsteps);
        const ringo_step st = steps[e.step];
        EXPECT_EQ(e.chunk, st.chunk) << e.name << " on rank " << r;
        EXPECT_EQ(e.prim, PrimName(st.prim)) << e.name << " on rank " << r;
        const bool receives = st.prim != RINGO_PRIM_SEND, sends = st.prim != RINGO_PRIM_RECV;
        EXPECT_EQ(e.from, receives ? ringo_mod(r - 1, n) : -1) << e.name << " on rank " << r;
        EXPECT_EQ(e.to, sends ? ringo_mod(r + 1, n) : -1) << e.name << " on rank " << r;
        ASSERT_LT(e.slice, slices);
        EXPECT_EQ(e.bytes, e.slice + 1 < slices ? payload : kChunkBytes - payload * static_cast<double>(slices - 1));
        if (sends) sent += e.bytes;
        EXPECT_TRUE(by_key.emplace(std::make_tuple(r, seq, e.step, e.slice), &e).second)
            << "rank " << r << " step " << e.step << " slice " << e.slice << " recorded twice";
      }
      EXPECT_EQ(events, static_cast<size_t>(2 * n - 1) * static_cast<size_t>(slices))
          << "rank " << r << ", collective " << seq;
      EXPECT_EQ(sent, 2.0 * (n - 1) / n * (kChunkBytes * n)) << "rank " << r;  // the 2(N-1)/N law
    }
  }

  // Every slice sent is received by the next rank at the next step, and cannot have been
  // finished there before the sender started on it.
  for (const auto& kv : by_key) {
    const Event& s = *kv.second;
    if (s.to < 0) continue;
    auto it = by_key.find(std::make_tuple(s.to, s.seq, s.step + 1, s.slice));
    ASSERT_NE(it, by_key.end()) << "rank " << s.pid << " " << s.name << " slice " << s.slice << ": nobody received it";
    const Event& d = *it->second;
    EXPECT_EQ(d.from, s.pid);
    EXPECT_EQ(d.chunk, s.chunk);
    EXPECT_GE(d.ts + d.dur + 0.002, s.ts) << "received before it was sent: rank " << s.pid << " " << s.name;
  }

  // One rank runs its steps one after another: its boxes never overlap.
  for (int r = 0; r < n; r++) {
    std::vector<const Event*> mine;
    for (const Event& e : ev)
      if (e.pid == r) mine.push_back(&e);
    std::sort(mine.begin(), mine.end(), [](const Event* a, const Event* b) { return a->ts < b->ts; });
    for (size_t i = 1; i < mine.size(); i++)
      EXPECT_GE(mine[i]->ts + 0.002, mine[i - 1]->ts + mine[i - 1]->dur)
          << "rank " << r << ": " << mine[i - 1]->name << " overlaps " << mine[i]->name;
  }
}

INSTANTIATE_TEST_SUITE_P(N, TraceFile, ::testing::Values(2, 3, 4));

// A one-shot collective (small, ranks of one host) is one event per rank: named "one-shot", its
// collective's number, the bytes it read from the N - 1 others; no ring step is recorded.
class TraceFileOneShot : public ::testing::TestWithParam<int> {};
TEST_P(TraceFileOneShot, EachCollectiveIsOneEventPerRank) {
  const int n = GetParam();
  const std::string path = FreshPath(n);
  ringo_test::Options opts;
  opts.env = {{"RINGO_TRACE", path}, {"RINGO_ONESHOT_BYTES", "1M"}};
  ringo_test::RunForked(n, TwoAllReduces, opts);
  if (HasFailure()) return;
  const Json root = ReadClosed(path);
  unlink(path.c_str());
  std::map<std::pair<int, long>, int> seen;  // (rank, seq) -> events
  for (const Json& e : root.arr) {
    if (e["ph"].str == "M") continue;
    EXPECT_EQ(e["name"].str, "one-shot");
    EXPECT_EQ(e["cat"].str, "all_reduce");
    const Json& a = e["args"];
    EXPECT_EQ(a["prim"].str, "one-shot");
    EXPECT_EQ(a["bytes"].num, (n - 1) * kChunkBytes * n);
    EXPECT_GE(e["dur"].num, 0);
    seen[{static_cast<int>(e["pid"].num), static_cast<long>(a["seq"].num)}]++;
  }
  for (int r = 0; r < n; r++)
    for (long seq = 0; seq < kCollectives; seq++) EXPECT_EQ(1, (seen[{r, seq}])) << "rank " << r << " seq " << seq;
  EXPECT_EQ(seen.size(), static_cast<size_t>(n * kCollectives));
}
INSTANTIATE_TEST_SUITE_P(N, TraceFileOneShot, ::testing::Values(2, 3));  // N = 2: the one-shot path is taken

// ---- ringo-trace --timeline on such a file ----

// 4 ranks, two all-reduces of one slice per chunk: the summary counts 7 steps per rank and
// collective and the law's bytes, in the schedule's order; the SVG has one box per event and one
// arrow per slice sent (each is received one step later on the next rank).
TEST(TraceTimeline, DrawsEveryStepAndHandOffOfARealRun) {
  const int n = 4;
  const std::string path = FreshPath(100 + n), svg = path + ".svg";
  ringo_test::Options opts;
  opts.deadline_s = 30;
  opts.env = {{"RINGO_TRACE", path}, {"RINGO_ALGO", "ring"}};  // 800-byte chunks: one slice each
  ringo_test::RunForked(n, TwoAllReduces, opts);
  if (HasFailure()) return;

  const ringo_test::ToolRun all = ringo_test::RunTool("ringo-trace", "--timeline " + path + " --svg " + svg);
  ASSERT_EQ(all.status, 0) << all.out;
  EXPECT_NE(all.out.find("4 ranks, 56 step events of collectives 0..1"), std::string::npos) << all.out;
  // Per rank: 14 events; sent and received 2 x 2(N-1)/N x 3200 bytes = 9600.
  for (int r = 0; r < n; r++) {
    char row[64];
    snprintf(row, sizeof row, "     %d      14        9600        9600", r);
    EXPECT_NE(all.out.find(row), std::string::npos) << "rank " << r << ":\n" << all.out;
  }
  EXPECT_NE(all.out.find("rs0 c0, rs1 c3, rs2 c2, ag0 c1, ag1 c0, ag2 c3, ag3 c2"), std::string::npos) << all.out;
  const std::string drawn = ringo_test::ReadFile(svg);
  EXPECT_EQ(ringo_test::CountOf(drawn, "<title>rank "), 56u);
  // One arrow per slice sent: 6 sends per rank and collective.
  EXPECT_EQ(ringo_test::TimelineHandoffs(drawn), static_cast<size_t>(n * kCollectives * 6));
  // A file written before events carried args.step: the steps come from the names, the same arrows.
  const std::string old_path = path + ".old";
  std::ofstream(old_path) << ringo_test::WithoutNumberArg(ringo_test::ReadFile(path), "step");
  ASSERT_EQ(ringo_test::CountOf(ringo_test::ReadFile(old_path), "\"step\""), 0u);
  const ringo_test::ToolRun old = ringo_test::RunTool("ringo-trace", "--timeline " + old_path + " --svg " + svg);
  EXPECT_EQ(old.status, 0) << old.out;
  EXPECT_EQ(ringo_test::TimelineHandoffs(ringo_test::ReadFile(svg)), static_cast<size_t>(n * kCollectives * 6));
  unlink(old_path.c_str());

  const ringo_test::ToolRun one = ringo_test::RunTool("ringo-trace", "--timeline " + path + " --seq 1");
  EXPECT_EQ(one.status, 0) << one.out;
  EXPECT_NE(one.out.find("4 ranks, 28 step events of collective 1,"), std::string::npos) << one.out;
  const ringo_test::ToolRun none = ringo_test::RunTool("ringo-trace", "--timeline " + path + " --seq 7");
  EXPECT_EQ(none.status, 1) << none.out;
  EXPECT_NE(none.out.find("no step events"), std::string::npos) << none.out;
  unlink(path.c_str());
  unlink(svg.c_str());
}

// One hand-written step event of a trace file, as the library writes them (src/trace.c).
std::string StepEvent(int pid, const std::string& name, const std::string& cat, double ts, long seq,
                      const std::string& prim, int step, int from, int to, int part) {
  char buf[512];
  snprintf(buf, sizeof buf,
           "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":10.000,"
           "\"args\":{\"seq\":%ld,\"prim\":\"%s\",\"step\":%d,\"chunk\":1,\"slice\":0,\"bytes\":64,"
           "\"from\":%d,\"to\":%d,\"part\":%d}}",
           name.c_str(), cat.c_str(), pid, ts, seq, prim.c_str(), step, from, to, part);
  return buf;
}

// A two-level reduce-scatter walks the host ring once per host (args.part): the same steps, chunks
// and slices twice. Each slice goes to the receiving box of its own walk — here the second walk's
// receive starts long after the first walk's, so an arrow to the wrong walk would end where its
// sender's box ends (vertical). And the one ring's reduce-scatter and all-gather, named after the
// collective, get the halves' colours and labels (they were grey "s0 c1" boxes).
TEST(TraceTimeline, HandsEachHostWalkToItsOwnReceiverAndColoursTheOneRingsHalves) {
  const std::string path = FreshPath(300), svg = path + ".svg";
  const std::string rs = "host reduce-scatter step ";
  std::ofstream(path) << "[\n"
                      << StepEvent(0, rs + "0", "reduce_scatter", 0, 0, "send", 0, -1, 1, 0) << ",\n"
                      << StepEvent(0, rs + "0", "reduce_scatter", 100, 0, "send", 0, -1, 1, 1) << ",\n"
                      << StepEvent(1, rs + "1", "reduce_scatter", 20, 0, "recv-reduce-copy", 1, 0, -1, 0) << ",\n"
                      << StepEvent(1, rs + "1", "reduce_scatter", 200, 0, "recv-reduce-copy", 1, 0, -1, 1) << ",\n"
                      << StepEvent(0, "reduce_scatter step 0", "reduce_scatter", 300, 1, "send", 0, -1, 1, 0) << ",\n"
                      << StepEvent(1, "reduce_scatter step 1", "reduce_scatter", 320, 1, "recv-reduce-copy", 1, 0, -1, 0)
                      << ",\n"
                      << StepEvent(0, "all_gather step 0", "all_gather", 400, 2, "copy-send", 0, -1, 1, 0) << ",\n"
                      << StepEvent(1, "all_gather step 1", "all_gather", 420, 2, "recv", 1, 0, -1, 0) << "\n]\n";

  const ringo_test::ToolRun walks = ringo_test::RunTool("ringo-trace", "--timeline " + path + " --seq 0 --svg " + svg);
  ASSERT_EQ(walks.status, 0) << walks.out;
  const std::vector<ringo_test::Arrow> arrows = ringo_test::TimelineArrows(ringo_test::ReadFile(svg));
  ASSERT_EQ(arrows.size(), 2u) << walks.out;
  for (const ringo_test::Arrow& a : arrows) EXPECT_GT(a.x2, a.x1 + 5) << "an arrow to the other walk's receive";

  const ringo_test::ToolRun halves = ringo_test::RunTool("ringo-trace", "--timeline " + path + " --seq 1-2 --svg " + svg);
  ASSERT_EQ(halves.status, 0) << halves.out;
  EXPECT_NE(halves.out.find("rs0 c1, ag0 c1"), std::string::npos) << halves.out;
  EXPECT_NE(halves.out.find("rs1 c1, ag1 c1"), std::string::npos) << halves.out;
  const std::string drawn = ringo_test::ReadFile(svg);
  EXPECT_EQ(ringo_test::CountOf(drawn, "fill=\"#4e79a7\" stroke=\"#ffffff\" stroke-width=\"0.6\""), 2u) << drawn;
  EXPECT_EQ(ringo_test::CountOf(drawn, "fill=\"#f28e2b\" stroke=\"#ffffff\" stroke-width=\"0.6\""), 2u) << drawn;
  EXPECT_EQ(ringo_test::CountOf(drawn, "#9c9c9c"), 0u);
  EXPECT_EQ(ringo_test::TimelineHandoffs(drawn), 2u);
  unlink(path.c_str());
  unlink(svg.c_str());
}

// What is not a trace file is refused with the reason, never drawn.
TEST(TraceTimeline, RefusesWhatIsNotATrace) {
  const std::string path = FreshPath(200);
  std::ofstream(path) << "[{\"name\":\"x\",\"ph\":\"X\",";
  const ringo_test::ToolRun cut = ringo_test::RunTool("ringo-trace", "--timeline " + path);
  EXPECT_EQ(cut.status, 1) << cut.out;
  EXPECT_NE(cut.out.find("is not a RINGO_TRACE file"), std::string::npos) << cut.out;
  unlink(path.c_str());
  const ringo_test::ToolRun missing = ringo_test::RunTool("ringo-trace", "--timeline " + path);
  EXPECT_EQ(missing.status, 1) << missing.out;
  EXPECT_NE(missing.out.find("cannot open"), std::string::npos) << missing.out;
}

// Times the axis cannot draw are refused, naming the event: a ts past 2^53 us (ts + 1 rounds back to ts,
// a span of 0), an infinite, NaN or negative dur. Those were drawn forever, the SVG growing by
// ~150 MB/s, so each run has a time limit. A ts near the largest allowed still draws, its ticks few.
TEST(TraceTimeline, RefusesTimesItCannotDrawAndNeverDrawsForever) {
  const std::string path = FreshPath(400), svg = path + ".svg";
  const auto write = [&](const std::string& times) {
    std::ofstream(path) << "[{\"ph\":\"X\",\"pid\":0," << times
                        << ",\"name\":\"reduce-scatter step 0\",\"args\":{\"seq\":0}}]";
  };
  for (const char* times : {"\"ts\":1e17,\"dur\":1", "\"ts\":0,\"dur\":1e400", "\"ts\":0,\"dur\":-nan",
                            "\"ts\":0,\"dur\":-5", "\"ts\":-1e300,\"dur\":1"}) {
    write(times);
    // Drawn to /dev/null: a tool that loops again fills no disk before its time limit.
    const ringo_test::ToolRun r = ringo_test::RunTool("ringo-trace", "--timeline " + path + " --svg /dev/null -q", 10);
    EXPECT_EQ(r.status, 1) << times << ":\n" << r.out;
    EXPECT_NE(r.out.find("event 1 (\"reduce-scatter step 0\" of rank 0, collective 0)"), std::string::npos)
        << times << ":\n" << r.out;
    EXPECT_NE(r.out.find("times must be finite"), std::string::npos) << times << ":\n" << r.out;
  }
  write("\"ts\":3e15,\"dur\":1");
  const ringo_test::ToolRun far =
      ringo_test::RunTool("ringo-trace", "--timeline " + path + " --svg " + svg + " -q", 20);
  EXPECT_EQ(far.status, 0) << far.out;
  const std::string drawn = ringo_test::ReadFile(svg);
  EXPECT_EQ(ringo_test::CountOf(drawn, "<title>rank "), 1u);
  EXPECT_LT(drawn.size(), 100000u) << "a tick loop that ran away";
  unlink(path.c_str());
  unlink(svg.c_str());
}

// Numbers on the command line are read whole or refused with the usage code, never cut or ignored:
// atoi took -n 2.5 as 2 and 4abc as 4, atoll -c 1e3 as 1, atof --zoom nan, and sscanf dropped --seq garbage.
TEST(TraceTool, RefusesNumbersItWouldCutOrIgnore) {
  for (const char* args : {"-n 2.5", "-n 4abc", "-n 1", "-n 33", "-n 4 -c 2.5", "-n 4 -c 1e3", "-n 4 -c 4Q",
                           "-n 4 -c 99999999999999999999999", "-n 4 -c -1", "-n 4 --zoom 2x", "-n 4 --zoom nan",
                           "-n 4 --zoom 0", "-n 4 --seq garbage", "-n 4 --seq 3-1", "-n 4 --seq 1-",
                           "-n 4 --seq 1-2-3"}) {
    const ringo_test::ToolRun r = ringo_test::RunTool("ringo-trace", std::string(args) + " -q", 20);
    EXPECT_EQ(r.status, 2) << args << ":\n" << r.out;
    EXPECT_NE(r.out.find("ringo-trace: bad "), std::string::npos) << args << ":\n" << r.out;
  }
  const ringo_test::ToolRun ok = ringo_test::RunTool("ringo-trace", "-n 5 -c 12 --zoom 1.5", 20);
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("count = 12 elements"), std::string::npos) << ok.out;
}

}  // namespace
