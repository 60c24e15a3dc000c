// ddp_fake_device.h — a fake device for the DDP layer's device buckets (src/ddp_device.h's table of
// operations): streams are staged_fake.h's FakeStream, calls and task runs are logged in order.
// Header-only, for test/test_ddp_device.cc. Run: make test (test_ddp_device).
#ifndef RINGO_TEST_DDP_FAKE_DEVICE_H_
#define RINGO_TEST_DDP_FAKE_DEVICE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "ddp/ddp_device.h"
#include "ringo.h"
#include "staged_fake.h"

namespace ringo_ddp_test {

using ringo_staged_test::FakeStream;

// ---------------------------------------------------------------------------------------------
// A fake device: a stream is a FakeStream, a worker thread running enqueued tasks in order; a closed
// gate holds them, so a test sees what the host did not wait for. Every wait is bounded.

constexpr auto kBound = std::chrono::seconds(30);

// Waits until the task with this ticket (FakeStream::enqueued() just after it was enqueued) has run.
inline void WaitFor(FakeStream* s, size_t ticket) {
  if (!s->WaitFor(ticket, kBound))
    ADD_FAILURE() << "a fake stream waited 30 s for task " << ticket << " (done " << s->done() << ")";
}
inline void Drain(FakeStream& s) { WaitFor(&s, s.enqueued()); }

struct Entry {
  std::string what;  // ready, ready-run, wait, scale, allreduce, broadcast, copy, join, join-run, after; the
  int bucket;        // test's write-enq (enqueued) and write (ran on compute) of gradient or param `index`
  int index = -1;
};

// Host memory stands in for device memory; the side stream is a FakeStream; the compute stream is the
// FakeStream the test passes to ringoDdpSetStream. Calls and task runs are logged in order. HoldSide
// closes the side stream's gate, which each collective opens while it drains the stream (ringo's host
// path runs it after the stream's work), so only what follows the last collective stays held.
struct FakeDevice {
  FakeStream side;
  std::mutex mu, gate_mu;
  std::condition_variable logged;  // with mu: notified on each Log
  std::vector<Entry> log;
  bool side_held = false;          // under gate_mu
  std::atomic<int> sync_sides{0};  // host waits for the side stream
  std::vector<FakeStream*> ready_stream;
  std::vector<size_t> ready_ticket;
  int current = -1;  // the bucket the communication thread is enqueueing (set by side_wait)
  int allocs = 0, frees = 0, scale_calls = 0;
  int fail_scale_at = -1, fail_record = 0;  // error injection
  const void* bad_ptr = nullptr;             // check_ptr refuses it
  ringo_ddp_device_ops ops{this,    Prepare, CheckPtr, RecordReady, SideWait, SideAfter, Scale,     Copy,
                           SideStream, Join, SyncSide, Alloc,       Free,     ErrorString, nullptr, nullptr, nullptr};

  ~FakeDevice() {  // its tasks log into members destroyed before `side`
    HoldSide(false);
    Drain(side);
  }
  void Log(const char* what, int b, int index = -1) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back({what, b, index});
    logged.notify_all();
  }
  void HoldSide(bool hold) {
    std::lock_guard<std::mutex> lock(gate_mu);
    side_held = hold;
    side.SetGate(!hold);
  }
  std::vector<Entry> TakeLog() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<Entry> out;
    out.swap(log);
    return out;
  }

  static FakeDevice* F(void* c) { return static_cast<FakeDevice*>(c); }
  static FakeStream* S(ringoStream_t s) { return reinterpret_cast<FakeStream*>(s); }
  static int Prepare(void* c, int n) {
    std::lock_guard<std::mutex> lock(F(c)->mu);
    F(c)->ready_stream.assign(static_cast<size_t>(n), nullptr);
    F(c)->ready_ticket.assign(static_cast<size_t>(n), 0);
    return 0;
  }
  static int CheckPtr(void* c, const void* p, size_t) { return p == F(c)->bad_ptr ? 7 : 0; }
  static int RecordReady(void* c, int b, ringoStream_t s) {
    FakeDevice* f = F(c);
    if (f->fail_record) return 9;
    f->Log("ready", b);
    S(s)->Enqueue([f, b] { f->Log("ready-run", b); });
    const size_t t = S(s)->enqueued();  // its ticket: only this test's thread enqueues on a compute stream
    std::lock_guard<std::mutex> lock(f->mu);
    f->ready_stream.at(static_cast<size_t>(b)) = S(s);
    f->ready_ticket.at(static_cast<size_t>(b)) = t;
    return 0;
  }
  static int SideWait(void* c, int b) {
    FakeDevice* f = F(c);
    std::lock_guard<std::mutex> lock(f->mu);
    f->current = b;
    FakeStream* cs = f->ready_stream.at(static_cast<size_t>(b));
    const size_t t = f->ready_ticket.at(static_cast<size_t>(b));
    f->side.Enqueue([f, cs, t, b] {
      if (cs) WaitFor(cs, t);
      f->Log("wait", b);
    });
    return 0;
  }
  static int SideAfter(void* c, ringoStream_t s) {
    FakeDevice* f = F(c);
    const size_t t = S(s)->enqueued();
    f->side.Enqueue([f, s, t] {
      f->Log("after", -1);
      WaitFor(S(s), t);
    });
    return 0;
  }
  static int Scale(void* c, void* dst, const void* src, size_t n, ringoDataType_t t, double w) {
    FakeDevice* f = F(c);
    if (f->scale_calls++ == f->fail_scale_at) return 11;
    const int b = f->current;
    f->side.Enqueue([=] {
      ringo_ddp_scale_emulate(dst, src, n, t, w);
      f->Log("scale", b);
    });
    return 0;
  }
  static int Copy(void* c, void* dst, const void* src, size_t bytes) {
    FakeDevice* f = F(c);
    const int b = f->current;
    f->side.Enqueue([=] {
      memcpy(dst, src, bytes);
      f->Log("copy", b);
    });
    return 0;
  }
  static ringoStream_t SideStream(void* c) {  // ringo's host path then runs the collective, in order
    FakeDevice* f = F(c);
    {
      std::lock_guard<std::mutex> lock(f->gate_mu);
      f->side.SetGate(true);
      Drain(f->side);
      f->side.SetGate(!f->side_held);
    }
    f->Log(f->current < 0 ? "broadcast" : "allreduce", f->current);  // no bucket yet: BroadcastParams
    return nullptr;
  }
  static int Join(void* c, ringoStream_t s) {
    FakeDevice* f = F(c);
    const size_t t = f->side.enqueued();
    f->Log("join", -1);
    S(s)->Enqueue([f, t] {
      WaitFor(&f->side, t);
      f->Log("join-run", -1);
    });
    return 0;
  }
  static int SyncSide(void* c) {
    FakeDevice* f = F(c);
    f->sync_sides++;
    bool held;
    {
      std::lock_guard<std::mutex> lock(f->gate_mu);
      held = f->side_held;
    }
    if (held) ADD_FAILURE() << "the host waited for a held side stream (it would hang)";
    else Drain(f->side);
    return 0;
  }
  static int Alloc(void* c, void** p, size_t bytes) {
    F(c)->allocs++;
    *p = malloc(bytes);
    return *p ? 0 : 2;
  }
  static void Free(void* c, void* p) {
    Drain(F(c)->side);
    F(c)->frees++;
    free(p);
  }
  static const char* ErrorString(int code) { return code == 7 ? "fake: not device memory" : "fake CUDA error"; }
};

}  // namespace ringo_ddp_test

#endif  // RINGO_TEST_DDP_FAKE_DEVICE_H_
