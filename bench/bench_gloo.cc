// bench_gloo.cc — ringo-bench's --compare gloo side: Gloo's collectives (libgloo, TCP transport, as
// PyTorch's "gloo" backend runs them on CPUs) on the bench's buffers, behind the C API of bench_gloo.h.
// Needs libgloo-dev. Tested by test/test_bench.cc (BenchGloo.*, Bench.CompareGloo*); run: ringo-bench -N 4 --compare gloo.
#include "bench_gloo.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include "ringo.h"

struct gloo_side {
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  std::string where;
  uint32_t tag = 0;  // one per call, as PyTorch's backend does: no two calls' messages can match
  std::vector<char> scratch;  // in-place sendrecv sends from a copy; kept so no call allocates it
};

namespace {

// Gloo's rendezvous asks a key-value store for each rank's addresses. The bench has no store, but it
// has an exchange among its ranks, and in Gloo's full-mesh connect every rank makes the same set()
// calls in the same order, each before it reads what the others set (Debian's 0.0~git20220518
// snapshot, Gloo 0.5.0: "rank_<r>" with the host name, then "<r>" with the addresses): so set() is
// the collective step. Each rank's key and value travel in one exchange; get() and wait() then read
// what arrived, and a key no rank set is an error naming it. The keys of one exchange must agree but
// for the rank in them; where they do not (a Gloo whose ranks call set() differently), set() throws
// rather than pair one rank's key with another's.
class ExchangeStore : public gloo::rendezvous::Store {
 public:
  ExchangeStore(int nranks, gloo_exchange_fn exchange, void* ctx) : nranks_(nranks), exchange_(exchange), ctx_(ctx) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    std::vector<char> mine(key.begin(), key.end());
    mine.push_back('\0');
    mine.insert(mine.end(), data.begin(), data.end());
    std::vector<uint64_t> sizes(nranks_);
    uint64_t my_size = mine.size();
    swap(&my_size, sizes.data(), sizeof my_size);
    uint64_t widest = 0;
    for (uint64_t s : sizes) widest = s > widest ? s : widest;
    mine.resize(widest, '\0');
    std::vector<char> all(widest * nranks_);
    swap(mine.data(), all.data(), widest);
    for (int r = 0; r < nranks_; r++) {
      const char* blob = all.data() + r * widest;
      const size_t key_len = strnlen(blob, sizes[r]);
      if (key_len == sizes[r]) throw std::runtime_error("rendezvous: rank " + std::to_string(r) + " sent no key");
      const std::string their_key(blob, key_len);
      if (without_digits(their_key) != without_digits(key))
        throw std::runtime_error("rendezvous: ranks set different keys at once ('" + key + "', rank " +
                                 std::to_string(r) + "'s '" + their_key + "')");
      values_[their_key] = std::vector<char>(blob + key_len + 1, blob + sizes[r]);
    }
  }

  std::vector<char> get(const std::string& key) override {
    auto it = values_.find(key);
    if (it == values_.end()) throw std::runtime_error("rendezvous: Gloo asked for key '" + key + "', which no rank set");
    return it->second;
  }

  void wait(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) get(k);
  }

  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override { wait(keys); }

 private:
  static std::string without_digits(const std::string& key) {
    std::string kept;
    for (char c : key)
      if (c < '0' || c > '9') kept += c;
    return kept;
  }

  void swap(const void* mine, void* all, size_t bytes) {
    if (exchange_(ctx_, mine, all, bytes) != 0) throw std::runtime_error("rendezvous: the bench's exchange failed");
  }

  const int nranks_;
  const gloo_exchange_fn exchange_;
  void* const ctx_;
  std::map<std::string, std::vector<char>> values_;
};

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Sums and products of signed integers use the unsigned type's function: the same bits in two's
// complement, wrapping as ringo's arithmetic does, where Gloo's signed ones would overflow (undefined
// behaviour) once the timed in-place iterations feed each result back in as the next input.
template <typename T>
using Wrapping = typename std::conditional<std::is_integral<T>::value, std::make_unsigned<T>, std::common_type<T>>::type::type;

template <typename T>
ReduceFn reduce_fn(int op) {
  switch (op) {
    case ringoSum: return &gloo::sum<Wrapping<T>>;
    case ringoProd: return &gloo::product<Wrapping<T>>;
    case ringoMax: return &gloo::max<T>;
    case ringoMin: return &gloo::min<T>;
    default: throw std::runtime_error("Gloo has no such reduction op");  // avg: the bench skips it
  }
}

// Each of Gloo's collectives on the bench's buffers. Out of place the input is s; in place there is
// only the output, which holds the input as ringo's in-place call expects.
template <typename T>
void run_typed(gloo_side* g, const gloo_call* c) {
  const auto& ctx = g->ctx;
  T* s = static_cast<T*>(c->s);
  T* r = static_cast<T*>(c->r);
  const uint32_t tag = g->tag++;
  // Nothing to move (the bench's all_gather of fewer elements than ranks has none): Gloo's allgather
  // would divide by the zero size. ringo returns at once too.
  if (c->count == 0) return;
  switch (c->coll) {
    case GLOO_ALL_REDUCE: {
      gloo::AllreduceOptions o(ctx);
      if (!c->inplace) o.setInput(s, c->count);
      o.setOutput(r, c->count);
      o.setReduceFunction(reduce_fn<T>(c->op));
      o.setTag(tag);
      gloo::allreduce(o);
      return;
    }
    case GLOO_ALL_GATHER: {
      gloo::AllgatherOptions o(ctx);
      if (!c->inplace) o.setInput(s, c->count / ctx->size);
      o.setOutput(r, c->count);
      o.setTag(tag);
      gloo::allgather(o);
      return;
    }
    case GLOO_BROADCAST: {
      gloo::BroadcastOptions o(ctx);
      if (!c->inplace && ctx->rank == c->root) o.setInput(s, c->count);
      o.setOutput(r, c->count);
      o.setRoot(c->root);
      o.setTag(tag);
      gloo::broadcast(o);
      return;
    }
    case GLOO_REDUCE: {
      gloo::ReduceOptions o(ctx);
      if (!c->inplace) o.setInput(s, c->count);
      o.setOutput(r, c->count);
      o.setRoot(c->root);
      o.setReduceFunction(reduce_fn<T>(c->op));
      o.setTag(tag);
      gloo::reduce(o);
      return;
    }
    default: {  // sendrecv: to the next rank, from the previous one
      const size_t bytes = c->count * sizeof(T);
      const int next = (ctx->rank + 1) % ctx->size, prev = (ctx->rank + ctx->size - 1) % ctx->size;
      if (ctx->size == 1) {  // to itself: Gloo has no pair with its own rank
        if (!c->inplace) memcpy(c->r, c->s, bytes);
        return;
      }
      // In place, one buffer cannot be sent from and received into at once: send a copy, as
      // MPI_Sendrecv_replace does inside MPI.
      if (c->inplace && g->scratch.size() < bytes) g->scratch.resize(bytes);
      if (c->inplace) memcpy(g->scratch.data(), r, bytes);
      auto out = ctx->createUnboundBuffer(c->inplace ? g->scratch.data() : static_cast<void*>(s), bytes);
      auto in = ctx->createUnboundBuffer(r, bytes);
      const uint64_t slot = gloo::Slot::build(0x7f, tag);
      in->recv(prev, slot);
      out->send(next, slot);
      in->waitRecv(ctx->getTimeout());
      out->waitSend(ctx->getTimeout());
      return;
    }
  }
}

void run_call(gloo_side* g, const gloo_call* c) {
  switch (c->type) {
    case ringoInt8: return run_typed<int8_t>(g, c);
    case ringoUint8: return run_typed<uint8_t>(g, c);
    case ringoInt32: return run_typed<int32_t>(g, c);
    case ringoUint32: return run_typed<uint32_t>(g, c);
    case ringoInt64: return run_typed<int64_t>(g, c);
    case ringoUint64: return run_typed<uint64_t>(g, c);
    case ringoFloat16: return run_typed<gloo::float16>(g, c);
    case ringoFloat32: return run_typed<float>(g, c);
    case ringoFloat64: return run_typed<double>(g, c);
    default: throw std::runtime_error("Gloo has no bfloat16");  // the bench skips it
  }
}

// Runs f, turning any exception (Gloo reports every error by throwing) into -1 and its message.
template <typename F>
int guarded(char* err, size_t errlen, F f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    snprintf(err, errlen, "%s", e.what());
  } catch (...) {
    snprintf(err, errlen, "unknown exception from Gloo");
  }
  return -1;
}

constexpr int kWarmBarriers = 100;

void barrier(gloo_side* g) {
  gloo::BarrierOptions o(g->ctx);
  o.setTag(g->tag++);
  gloo::barrier(o);
}

gloo::transport::tcp::attr listen_attr(int one_host, std::string* where) {
  gloo::transport::tcp::attr a;
  const char* iface = getenv("GLOO_SOCKET_IFNAME");  // PyTorch's variable for the same choice
  if (iface && *iface) {
    a.iface = iface;
    *where = std::string("interface ") + iface;
  } else if (one_host) {
    a.hostname = "127.0.0.1";
    *where = "loopback";
  } else {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    a.hostname = host;
    *where = std::string("host name ") + host;
  }
  return a;
}

}  // namespace

extern "C" struct gloo_side* gloo_side_open(int rank, int nranks, int one_host, double timeout_s,
                                            gloo_exchange_fn exchange, void* ctx, char* err, size_t errlen) {
  auto g = std::make_unique<gloo_side>();
  int rc = guarded(err, errlen, [&] {
    auto dev = gloo::transport::tcp::CreateDevice(listen_attr(one_host, &g->where));
    g->ctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    g->ctx->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3)));
    ExchangeStore store(nranks, exchange, ctx);
    g->ctx->connectFullMesh(store, dev);
    // Fresh connections are slow for Gloo's first few dozen calls (measured: docs/performance.md).
    // Untimed barriers bring them to their steady state, so the bench's few warm-up iterations time
    // Gloo as a long training run would see it.
    for (int i = 0; i < kWarmBarriers; i++) barrier(g.get());
  });
  return rc == 0 ? g.release() : nullptr;
}

extern "C" int gloo_side_run(struct gloo_side* g, const struct gloo_call* c, char* err, size_t errlen) {
  return guarded(err, errlen, [&] { run_call(g, c); });
}

extern "C" int gloo_side_barrier(struct gloo_side* g, char* err, size_t errlen) {
  return guarded(err, errlen, [&] { barrier(g); });
}

extern "C" const char* gloo_side_where(const struct gloo_side* g) { return g->where.c_str(); }

#define RINGO_STR_(x) #x
#define RINGO_STR(x) RINGO_STR_(x)
extern "C" const char* gloo_side_version(void) {
  return RINGO_STR(GLOO_VERSION_MAJOR) "." RINGO_STR(GLOO_VERSION_MINOR) "." RINGO_STR(GLOO_VERSION_PATCH);
}

extern "C" void gloo_side_close(struct gloo_side* g) { delete g; }
