// tool_run.h — runs one of the tools built beside the tests (build/bin/NAME, or the sanitizer build's)
// and keeps its exit code and output, for the tests that check a tool end to end; and reads the
// hand-off arrows out of a `ringo-trace --timeline --svg` drawing.
// Header-only; used by test/test_bench.cc, test/test_model.cc, test/test_trace.cc and test/mpi/test_mpi_two_level.cc.
#ifndef RINGO_TEST_TOOL_RUN_H_
#define RINGO_TEST_TOOL_RUN_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ringo_test {

// BUILD/bin/NAME for a test binary anywhere under BUILD/test (the Makefile builds the tool first).
inline std::string ToolPath(const std::string& name) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return name;
  std::string dir(self, static_cast<size_t>(n));
  for (dir = dir.substr(0, dir.rfind('/')); !dir.empty(); dir = dir.substr(0, dir.rfind('/')))
    if (access((dir + "/bin/" + name).c_str(), X_OK) == 0) return dir + "/bin/" + name;
  return name;
}

struct ToolRun {
  int status = -1;  // exit code, or -1 if it did not exit normally
  std::string out;  // stdout and stderr
};

// limit_s > 0: the tool is killed after that many seconds (status 124, or 137 if it ignored the TERM),
// so a tool that would run forever fails its test instead of hanging the suite.
inline ToolRun RunTool(const std::string& name, const std::string& args, int limit_s = 0) {
  ToolRun r;
  const std::string limit = limit_s > 0 ? "timeout -k 2 " + std::to_string(limit_s) + " " : "";
  const std::string cmd = limit + ToolPath(name) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t got; (got = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, got);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// How many times needle occurs in hay (lines of a tool's output, elements of a drawing).
inline size_t CountOf(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + needle.size())) n++;
  return n;
}

// A whole file ("" if it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A trace file's text with every `,"key":NUMBER` taken out: how files written before that arg read.
inline std::string WithoutNumberArg(const std::string& json, const std::string& key) {
  const std::string field = ",\"" + key + "\":";
  std::string out;
  size_t from = 0;
  for (size_t at = json.find(field); at != std::string::npos; at = json.find(field, from)) {
    out.append(json, from, at - from);
    from = json.find_first_not_of("-0123456789", at + field.size());
    if (from == std::string::npos) from = json.size();
  }
  return out + json.substr(from);
}

// The arrows of a timeline drawing that go from one rank's track to another's, one per slice handed
// on, in drawing order (the legend's arrow is level, so it is not among them): from where the
// sender's box ends (x1, y1) to where the receiver's box takes the slice (x2, y2).
struct Arrow {
  double x1, y1, x2, y2;
};
inline std::vector<Arrow> TimelineArrows(const std::string& svg) {
  std::vector<Arrow> arrows;
  for (size_t at = svg.find("<line "); at != std::string::npos; at = svg.find("<line ", at + 1)) {
    const std::string line = svg.substr(at, svg.find("/>", at) - at);
    Arrow a;
    if (line.find("marker-end") != std::string::npos &&
        sscanf(line.c_str(), "<line x1=\"%lf\" y1=\"%lf\" x2=\"%lf\" y2=\"%lf\"", &a.x1, &a.y1, &a.x2, &a.y2) == 4 &&
        a.y1 != a.y2)
      arrows.push_back(a);
  }
  return arrows;
}

inline size_t TimelineHandoffs(const std::string& svg) { return TimelineArrows(svg).size(); }

}  // namespace ringo_test

#endif  // RINGO_TEST_TOOL_RUN_H_
