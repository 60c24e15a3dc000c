// staged_fake.h — a stand-in for ringo's CUDA stream so staged device collectives (src/staged.c)
// run without a GPU: a worker thread runs the enqueued copies (memcpy), host functions and flag waits in order.
// Header-only; used by test/test_staged.cc (threads), test/mpi/test_mpi_staged.cc (MPI links) and
// test/test_p2p_device.cc (device point-to-point's proxy); FakeStream also by test/ddp_fake_device.h.
#ifndef RINGO_TEST_STAGED_FAKE_H_
#define RINGO_TEST_STAGED_FAKE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringo.h"
#include "device/staged.h"  // has its own extern "C" and maps atomic_int to std::atomic_int

extern "C" {
#include "core/core.h"
}

namespace ringo_staged_test {

// A stream: tasks run one at a time, in the order they were enqueued, on one thread. While the
// gate is closed nothing runs, so a test can see that launching did not wait for the work.
class FakeStream {
 public:
  FakeStream() : worker_([this] { Loop(); }) {}
  ~FakeStream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      gate_open_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  void Enqueue(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
      enqueued_++;
    }
    cv_.notify_all();
  }
  void Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_ == enqueued_; });
  }
  // A stream that failed (a sticky CUDA error): what is queued never runs, and Drain returns.
  void Fail() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ += tasks_.size();
      tasks_.clear();
    }
    cv_.notify_all();
  }
  void SetGate(bool open) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      gate_open_ = open;
    }
    cv_.notify_all();
  }
  size_t done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  // Tickets (test/test_ddp_device.cc orders its streams by them): the k-th task enqueued, counted
  // from 1, has run once done() >= k. enqueued() is the ticket of the latest task.
  size_t enqueued() {
    std::lock_guard<std::mutex> lock(mu_);
    return enqueued_;
  }
  // Waits until the task with this ticket has run, at most `bound`; false when the bound passed.
  bool WaitFor(size_t ticket, std::chrono::seconds bound) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, bound, [&] { return done_ >= ticket; });
  }
  // The stream as ringo's API carries it; a fake's callbacks cast it back.
  ringoStream_t handle() { return reinterpret_cast<ringoStream_t>(this); }
  int allocs = 0, drains = 0;

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || (gate_open_ && !tasks_.empty()); });
      if (tasks_.empty()) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
      done_++;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  size_t enqueued_ = 0, done_ = 0;
  bool stop_ = false, gate_open_ = true;
  std::thread worker_;
};

// Both directions: "device" memory is host memory here.
inline ringoResult_t FakeCopy(void* ctx, void* dst, const void* src, size_t bytes) {
  static_cast<FakeStream*>(ctx)->Enqueue([=] { memcpy(dst, src, bytes); });
  return ringoSuccess;
}
inline ringoResult_t FakeHostFn(void* ctx, void (*fn)(void*), void* arg) {
  static_cast<FakeStream*>(ctx)->Enqueue([=] { fn(arg); });
  return ringoSuccess;
}
inline ringoResult_t FakeAlloc(void* ctx, void** p, size_t bytes) {
  static_cast<FakeStream*>(ctx)->allocs++;
  *p = malloc(bytes);
  return *p ? ringoSuccess : ringoSystemError;
}
inline void FakeFree(void*, void* p) { free(p); }
inline ringoResult_t FakeDrain(void* ctx) {
  auto* s = static_cast<FakeStream*>(ctx);
  s->drains++;
  s->Drain();
  return ringoSuccess;
}

// The stream waits until another thread moves *flag to value (the proxy, src/proxy.c).
// Bounded so a proxy that never moves it fails the test instead of hanging the suite.
inline ringoResult_t FakeWaitFlag(void* ctx, const uint64_t* flag, uint64_t value) {
  static_cast<FakeStream*>(ctx)->Enqueue([=] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < value) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "the stream waited 60 s for flag value " << value;
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  return ringoSuccess;
}

struct Stager {
  FakeStream stream;
  ringo_stage stage{};
  ringo_stage_ops ops{&stream, FakeCopy, FakeCopy, FakeHostFn, FakeAlloc, FakeFree, FakeDrain, FakeWaitFlag};
  ~Stager() { ringo_staged_free(&stage, &ops); }
  // The proxy counts a work done just after it lets the stream go on, so a drained stream may see
  // it pending a moment longer (device.c's stream_idle waits for both): waits, at most 5 s, until
  // nothing is pending, and returns what still is.
  int PendingSettled() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (ringo_staged_pending(&stage) > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return ringo_staged_pending(&stage);
  }
};

// What the door (api/group.c) does for a device op whose ring leaves the host, on the fake stream.
inline ringoResult_t Launch(Stager& s, ringoComm_t comm, ringo_coll coll, const void* in, void* out, size_t count,
                     ringoDataType_t type, ringoRedOp_t redop, int root) {
  return ringo_staged_launch_call(comm, coll, in, out, count, type, redop, root, &s.stage, &s.ops);
}

inline ringoResult_t AsyncError(ringoComm_t comm) {
  ringoResult_t async = ringoInternalError;
  EXPECT_EQ(ringoSuccess, ringoCommGetAsyncError(comm, &async));
  return async;
}

// The same collective on the host path, through the public API: the staged result must equal it.
inline ringoResult_t HostCall(ringoComm_t comm, ringo_coll coll, const void* in, void* out, size_t count,
                       ringoDataType_t type, ringoRedOp_t redop, int root) {
  switch (coll) {
    case RINGO_COLL_ALLREDUCE: return ringoAllReduce(in, out, count, type, redop, comm, nullptr);
    case RINGO_COLL_REDUCESCATTER: return ringoReduceScatter(in, out, count, type, redop, comm, nullptr);
    case RINGO_COLL_ALLGATHER: return ringoAllGather(in, out, count, type, comm, nullptr);
    case RINGO_COLL_BROADCAST: return ringoBroadcast(in, out, count, type, root, comm, nullptr);
    default: return ringoReduce(in, out, count, type, redop, root, comm, nullptr);
  }
}

inline const char* CollName(ringo_coll c) {
  static const char* names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"};
  return names[c];
}

// Input bytes that stay exact under every op (small integers as the type's bytes).
inline std::vector<uint8_t> Input(size_t bytes, int rank, ringoDataType_t type) {
  std::vector<uint8_t> v(bytes);
  const size_t es = ringo_type_size(type);
  for (size_t i = 0; i < bytes / es; i++) {
    const int x = (int)((i * 7 + (size_t)rank * 3) % 5) + 1;
    switch (type) {
      case ringoFloat32: { float f = (float)x; memcpy(&v[i * es], &f, es); break; }
      case ringoFloat64: { double d = x; memcpy(&v[i * es], &d, es); break; }
      case ringoInt32: { int32_t k = x; memcpy(&v[i * es], &k, es); break; }
      default: v[i * es] = (uint8_t)x; for (size_t b = 1; b < es; b++) v[i * es + b] = 0; break;
    }
  }
  return v;
}

// One rank: every collective, in and out of place, staged and on the host, results compared.
inline void EveryCollective(ringoComm_t comm, int n, int rank, Stager& s, size_t count, ringoDataType_t type,
                            ringoRedOp_t redop) {
  const int root = n - 1;
  const size_t es = ringo_type_size(type);
  for (int c = RINGO_COLL_ALLREDUCE; c <= RINGO_COLL_REDUCE; c++) {
    const auto coll = (ringo_coll)c;
    for (bool in_place : {false, true}) {
      const size_t in_elems = coll == RINGO_COLL_REDUCESCATTER ? count * n : count;
      const size_t out_elems = coll == RINGO_COLL_ALLGATHER ? count * n : count;
      std::vector<uint8_t> in = Input(in_elems * es, rank, type), staged(out_elems * es, 0xAB), host(staged);
      std::vector<uint8_t> buf;  // in-place: one buffer holding input and output, NCCL's way
      const void* sin = in.data();
      void* sout = staged.data();
      if (in_place) {
        buf.assign(std::max(in_elems, out_elems) * es, 0xAB);
        if (coll == RINGO_COLL_ALLGATHER) {
          memcpy(buf.data() + (size_t)rank * count * es, in.data(), in.size());
          sin = buf.data() + (size_t)rank * count * es;
        } else {
          memcpy(buf.data(), in.data(), in.size());
          sin = buf.data();
        }
        sout = coll == RINGO_COLL_REDUCESCATTER ? buf.data() + (size_t)rank * count * es : buf.data();
      }
      const std::string what = std::string(CollName(coll)) + (in_place ? " in place" : " out of place") + " " +
                               ringo_type_name(type) + " " + ringo_op_name(redop) + " count " + std::to_string(count);
      ASSERT_EQ(ringoSuccess, Launch(s, comm, coll, sin, sout, count, type, redop, root))
          << what << ": " << ringo_thread_last_error();
      s.stream.Drain();
      ASSERT_EQ(ringoSuccess, AsyncError(comm)) << what << ": " << ringoGetLastError(comm);
      ASSERT_EQ(ringoSuccess, HostCall(comm, coll, in.data(), host.data(), count, type, redop, root))
          << what << ": " << ringoGetLastError(comm);
      const bool writes = coll != RINGO_COLL_REDUCE || rank == root;
      if (!writes) {
        if (!in_place) {
          EXPECT_EQ(std::vector<uint8_t>(staged.size(), 0xAB), staged) << what << ": a non-root got output";
        }
        continue;
      }
      const uint8_t* got = static_cast<const uint8_t*>(sout);
      EXPECT_EQ(0, memcmp(got, host.data(), out_elems * es)) << what << ": staged result differs from the host path";
    }
  }
}

}  // namespace ringo_staged_test

#endif  // RINGO_TEST_STAGED_FAKE_H_
