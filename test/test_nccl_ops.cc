// test_nccl_ops.cc — ringo's libnccl.so.2 on host memory, the rest of the 2.30 calls: PreMulSum for
// every float type and both scalar residences against a reference, in and out of groups;
// ncclGroupSimulateEnd; ncclMemAlloc and registration; abort during work; and the messages of
// every call ringo does not provide. Ranks are threads (test/nccl/nccl_ranks.h). Run:
// make tests && ./build/test/test_nccl_ops
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl/nccl_ranks.h"

namespace {

// ---- PreMulSum ----

// Element codecs of the test's own, so the reference does not share the shim's conversions.
uint16_t ToHalf(float f) {  // exact for the values used here (small multiples of 1/16)
  if (f == 0) return 0;
  const uint16_t sign = f < 0 ? 0x8000 : 0;
  f = std::fabs(f);
  int e = 0;
  while (f >= 2) f /= 2, e++;
  while (f < 1) f *= 2, e--;
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | static_cast<uint16_t>((f - 1) * 1024));
}
uint16_t ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);  // exact for the values used here
}

// The bytes of value v as datatype t (every value here is exact in every float type).
std::vector<uint8_t> Encode(ncclDataType_t t, const std::vector<float>& v) {
  std::vector<uint8_t> out;
  for (float f : v) {
    uint8_t b[8];
    size_t n = 0;
    if (t == ncclFloat16 || t == ncclBfloat16) {
      const uint16_t h = t == ncclFloat16 ? ToHalf(f) : ToBf16(f);
      std::memcpy(b, &h, n = 2);
    } else if (t == ncclFloat32) {
      std::memcpy(b, &f, n = 4);
    } else {
      const double d = f;
      std::memcpy(b, &d, n = 8);
    }
    out.insert(out.end(), b, b + n);
  }
  return out;
}

const ncclDataType_t kFloatTypes[] = {ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64};

// Rank r holds x[i] = i/4 - r and multiplies by s_r = (r+1)/2, so the result sum_r s_r x_r differs
// from any scaling after the sum (every value and partial sum is exact in every float type).
float Input(int r, size_t i) { return static_cast<float>(i) / 4.0f - static_cast<float>(r); }
float Scalar(int r) { return static_cast<float>(r + 1) / 2.0f; }
float Expected(int n, size_t i) {
  float sum = 0;
  for (int r = 0; r < n; r++) sum += Scalar(r) * Input(r, i);
  return sum;
}

// One collective with a PreMulSum op made for (t, residence); for ncclScalarDevice the scalar is
// written after the op was made, since NCCL reads that one when the collective runs.
void CheckPreMulSum(ncclComm_t comm, int r, int n, ncclDataType_t t, ncclScalarResidence_t residence, bool grouped) {
  constexpr size_t kCount = 12;
  std::vector<float> in(kCount), want(kCount);
  for (size_t i = 0; i < kCount; i++) in[i] = Input(r, i), want[i] = Expected(n, i);
  const std::vector<uint8_t> send = Encode(t, in), expected = Encode(t, want);
  std::vector<uint8_t> scalar = Encode(t, {residence == ncclScalarDevice ? 100.0f : Scalar(r)});
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, scalar.data(), t, residence, comm), ncclSuccess) << ncclGetLastError(comm);
  EXPECT_GE(static_cast<int>(op), static_cast<int>(ncclNumOps));
  // Overwritten in place: ncclScalarDevice kept this address. A host-immediate scalar was read
  // already, so writing 100 there must change nothing.
  const std::vector<uint8_t> now = Encode(t, {residence == ncclScalarDevice ? Scalar(r) : 100.0f});
  std::memcpy(scalar.data(), now.data(), now.size());
  std::vector<uint8_t> recv(send.size(), 0xee);
  if (grouped) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  }
  EXPECT_EQ(ncclAllReduce(send.data(), recv.data(), kCount, t, op, comm, nullptr), ncclSuccess)
      << ncclGetLastError(comm);
  if (grouped) {
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  }
  EXPECT_EQ(recv, expected) << "datatype " << t << " residence " << residence << (grouped ? " grouped" : "");
  EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(send.data(), recv.data(), kCount, t, op, comm, nullptr), ncclInvalidArgument)
      << "a destroyed op must be refused";
}

TEST_F(Calls, PreMulSumEveryFloatTypeAndResidence) {
  const ncclUniqueId id = NewId();
  constexpr int n = 3;
  OnRanks(n, [&](int r) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess);
    for (ncclDataType_t t : kFloatTypes)
      for (ncclScalarResidence_t where : {ncclScalarHostImmediate, ncclScalarDevice})
        for (bool grouped : {false, true}) CheckPreMulSum(comm, r, n, t, where, grouped);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

// nccl.h: "An operator may be destroyed as soon as the last NCCL function which is given that
// operator returns": a grouped call keeps its op (scalar included) when the op is destroyed, and a
// new op that takes the freed slot before ncclGroupEnd changes nothing in it.
TEST_F(Calls, PreMulSumOpDestroyedInsideTheGroupAfterTheCall) {
  const ncclUniqueId id = NewId();
  constexpr int n = 2;
  OnRanks(n, [&](int r) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess);
    float s = Scalar(r), ten = 10.0f;
    std::vector<float> in(6), out(6, -1);
    for (size_t i = 0; i < in.size(); i++) in[i] = Input(r, i);
    ncclRedOp_t op, other;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, op, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&other, &ten, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    for (size_t i = 0; i < out.size(); i++) EXPECT_EQ(out[i], Expected(n, i)) << "element " << i;
    EXPECT_EQ(ncclRedOpDestroy(other, comm), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

// A count whose bytes wrap size_t is refused before the shim sizes its scaled copy of the input
// (count * N elements for a reduce-scatter, and the blocks of an all-to-all).
TEST_F(Calls, PreMulSumCountThatOverflowsIsRefused) {
  ncclComm_t comm[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclCommInitAll(comm, 2, nullptr), ncclSuccess);
  float s = 2, x[2] = {1, 2};
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, comm[0]), ncclSuccess);
  for (bool grouped : {false, true}) {
    if (grouped) {
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    }
    EXPECT_EQ(ncclAllReduce(x, x, SIZE_MAX / 4 + 2, ncclFloat32, op, comm[0], nullptr), ncclInvalidArgument);
    EXPECT_NE(std::strstr(ncclGetLastError(comm[0]), "overflows"), nullptr) << ncclGetLastError(comm[0]);
    EXPECT_EQ(ncclReduceScatter(x, x, SIZE_MAX / 8 + 1, ncclFloat32, op, comm[0], nullptr), ncclInvalidArgument)
        << "count * 2 ranks * 4 bytes wraps";
    EXPECT_EQ(ncclAlltoAll(x, x, SIZE_MAX / 8 + 1, ncclFloat32, comm[0], nullptr), ncclInvalidArgument);
    if (grouped) {
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << "nothing was recorded";
    }
  }
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_EQ(ncclCommDestroy(comm[0]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm[1]), ncclSuccess);
}

// Reduce and ReduceScatter take the op too; so do integers (products in the type).
TEST_F(Calls, PreMulSumReduceReduceScatterAndIntegers) {
  const ncclUniqueId id = NewId();
  constexpr int n = 2;
  OnRanks(n, [&](int r) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess);
    float s = Scalar(r);
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
    std::vector<float> in(2 * 4), out(4, -1), full(8, -1);
    for (size_t i = 0; i < in.size(); i++) in[i] = Input(r, i);
    ASSERT_EQ(ncclReduceScatter(in.data(), out.data(), 4, ncclFloat32, op, comm, nullptr), ncclSuccess);
    for (size_t i = 0; i < 4; i++) EXPECT_EQ(out[i], Expected(n, r * 4 + i));
    ASSERT_EQ(ncclReduce(in.data(), full.data(), 8, ncclFloat32, op, 1, comm, nullptr), ncclSuccess);
    if (r == 1) {
      for (size_t i = 0; i < 8; i++) EXPECT_EQ(full[i], Expected(n, i));
    }
    EXPECT_EQ(ncclAllReduce(in.data(), out.data(), 4, ncclFloat64, op, comm, nullptr), ncclInvalidArgument)
        << "an op made for float32 must be refused for float64";
    EXPECT_NE(std::strstr(ncclGetLastError(comm), "datatype"), nullptr) << ncclGetLastError(comm);
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclInvalidArgument);
    EXPECT_EQ(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument);
    int32_t k = -3 * (r + 1), x[2] = {7, -5 + r}, y[2] = {0, 0};
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &k, ncclInt32, ncclScalarHostImmediate, comm), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(x, y, 2, ncclInt32, op, comm, nullptr), ncclSuccess);
    EXPECT_EQ(y[0], -3 * 7 + -6 * 7);
    EXPECT_EQ(y[1], -3 * -5 + -6 * -4);
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

// The products are rounded to the type before the sum, as the type's own multiply rounds them
// (to nearest, ties to even): 1.5 * (1 + 2^-10) in float16 and 1.5 * (1 + 2^-7) in bfloat16 both
// fall exactly halfway and go to the even neighbour, 1.5 + 2 ulp.
TEST_F(Calls, PreMulSumProductsRoundInTheType) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  const struct {
    ncclDataType_t t;
    uint16_t x, s, want;
  } cases[] = {{ncclFloat16, 0x3C01, 0x3E00, 0x3E02}, {ncclBfloat16, 0x3F81, 0x3FC0, 0x3FC2}};
  for (const auto& c : cases) {
    uint16_t s = c.s, y = 0;
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &s, c.t, ncclScalarHostImmediate, comm), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(&c.x, &y, 1, c.t, op, comm, nullptr), ncclSuccess);
    EXPECT_EQ(y, c.want) << "datatype " << c.t;
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
  }
  float f = 1;
  ncclRedOp_t op;
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &f, ncclFloat8e4m3, ncclScalarHostImmediate, comm), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat32, ncclScalarHostImmediate, comm), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &f, ncclFloat32, static_cast<ncclScalarResidence_t>(2), comm),
            ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// ---- groups ----

// A simulated group runs nothing and reports the model time: for a 2-rank all-reduce of 1 MiB,
// 2(N-1) steps of 5 us plus 2(N-1)/N * 1 MiB at 10 GB/s = 10 + 104.8576 us (nccl/README.md).
TEST_F(Calls, GroupSimulateEndRunsNothingAndReportsTheModelTime) {
  const ncclUniqueId id = NewId();
  OnRanks(2, [&](int r) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, 2, id, r), ncclSuccess);
    std::vector<float> in(1 << 18, 1.0f), out(1 << 18, -7.0f);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    ASSERT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_NEAR(sim.estimatedTime, 10.0 + 104.8576, 1e-3);
    EXPECT_EQ(out[0], -7.0f) << "a simulated group must not run";
    // Nothing was left queued: the next group runs on its own.
    ExpectWorks(comm, 1);
    // As NCCL: a simInfo not made with the initializer closes the group, drops its calls and is
    // refused; nothing stays queued to run with a later call.
    ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
    bad.magic = 0;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclGroupSimulateEnd(&bad), ncclInvalidArgument);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the bad simInfo closed the group";
    EXPECT_EQ(out[0], -7.0f) << "the dropped call ran";
    ExpectWorks(comm, 1);
    // A NULL simInfo is a plain ncclGroupEnd: the group runs.
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclGroupSimulateEnd(nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(out[0], 2.0f) << "a NULL simInfo's group must run";
    // At an inner level NCCL checks nothing: the bad simInfo only closes that level.
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclGroupSimulateEnd(&bad), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
    EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclInvalidUsage) << "no group open";
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

// Inside a group, argument errors still come back from the call itself.
TEST_F(Calls, GroupArgumentErrorsAtTheCall) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  int32_t x = 1;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(&x, &x, 1, ncclInt32, 3, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclInt32, static_cast<ncclRedOp_t>(ncclNumOps + 9), comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclSend(&x, 1, ncclInt32, 0, nullptr, nullptr), ncclInvalidArgument);
  // What ringo itself would refuse at the call, refused at the call inside a group too (queued, the
  // others' calls would wait for this rank until RINGO_TIMEOUT), each with its own message.
  EXPECT_EQ(ncclAllReduce(nullptr, &x, 1, ncclInt32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::strstr(ncclGetLastError(comm), "sendbuff is NULL"), nullptr) << ncclGetLastError(comm);
  EXPECT_EQ(ncclBroadcast(&x, nullptr, 1, ncclInt32, 0, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::strstr(ncclGetLastError(comm), "recvbuff is NULL"), nullptr) << ncclGetLastError(comm);
  const auto stream = reinterpret_cast<cudaStream_t>(0x1234);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, stream), ncclInvalidArgument);
  EXPECT_NE(std::strstr(ncclGetLastError(comm), "stream"), nullptr) << ncclGetLastError(comm);
  EXPECT_EQ(ncclAlltoAll(&x, &x, 1, ncclInt32, comm, stream), ncclInvalidArgument);
  EXPECT_NE(std::strstr(ncclGetLastError(comm), "ncclAlltoAll: a stream"), nullptr) << ncclGetLastError(comm);
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 0, ncclInt32, ncclSum, comm, nullptr), ncclSuccess) << "count 0";
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  // Outside a group the composed collectives name the real fault too, not a NULL buffer.
  EXPECT_EQ(ncclGather(&x, &x, 1, ncclInt32, 0, comm, stream), ncclInvalidArgument);
  EXPECT_NE(std::strstr(ncclGetLastError(comm), "ncclGather: a stream"), nullptr) << ncclGetLastError(comm);
  EXPECT_EQ(ncclScatter(nullptr, &x, 1, ncclInt32, 0, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::strstr(ncclGetLastError(comm), "sendbuff is NULL"), nullptr) << ncclGetLastError(comm);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// Destroy inside a group that holds the communicator's calls is refused (ncclGroupEnd runs them),
// abort drops them; neither frees what the group end then uses. Also for an init queued in the group.
TEST_F(Calls, DestroyAndAbortInsideAGroupThatHoldsTheCommsCalls) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  float x[4] = {1, 2, 3, 4};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("ncclGroupEnd"), std::string::npos) << ncclGetLastError(comm);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(x[3], 4.0f);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << "the aborted communicator's call is dropped, not run";
  // The aborted record stays for calls still on their way: they are told so, by name.
  EXPECT_EQ(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("ncclAllReduce: the communicator was aborted"), std::string::npos)
      << ncclGetLastError(comm);
  int count = 0;
  EXPECT_EQ(ncclCommCount(comm, &count), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("aborted"), std::string::npos) << ncclGetLastError(comm);

  const ncclUniqueId id = NewId();
  ncclComm_t queued = nullptr;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&queued, 1, id, 0), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(queued), ncclInvalidUsage) << "its init is still queued";
  EXPECT_NE(std::string(ncclGetLastError(queued)).find("group"), std::string::npos) << ncclGetLastError(queued);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  ExpectWorks(queued, 0);
  EXPECT_EQ(ncclCommDestroy(queued), ncclSuccess);
}

// ---- memory, registration, ids ----

// Without a GPU ncclMemAlloc must fail cleanly with a message; with one it allocates and frees.
TEST_F(Calls, MemAllocAndRegistration) {
  void* p = reinterpret_cast<void*>(1);
  const ncclResult_t res = ncclMemAlloc(&p, 1 << 20);
  if (res == ncclSuccess) {
    EXPECT_NE(p, nullptr);
    EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  } else {
    EXPECT_EQ(res, ncclUnhandledCudaError);
    EXPECT_EQ(p, nullptr);
    EXPECT_NE(std::strstr(ncclGetLastError(nullptr), "ncclMemAlloc"), nullptr) << ncclGetLastError(nullptr);
  }
  EXPECT_EQ(ncclMemAlloc(nullptr, 16), ncclInvalidArgument);
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);

  ncclComm_t comm[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclCommInitAll(comm, 2, nullptr), ncclSuccess);
  std::vector<char> buf(4096);
  void* handle = nullptr;
  ASSERT_EQ(ncclCommRegister(comm[0], buf.data(), buf.size(), &handle), ncclSuccess);
  EXPECT_NE(handle, nullptr);
  // Handles are looked up, never read (NCCL: ncclInvalidUsage, "could not find handle").
  EXPECT_EQ(ncclCommDeregister(comm[1], handle), ncclInvalidUsage) << "another communicator's handle";
  int not_a_handle = 0;
  EXPECT_EQ(ncclCommDeregister(comm[0], &not_a_handle), ncclInvalidUsage);
  EXPECT_EQ(ncclCommDeregister(comm[0], reinterpret_cast<void*>(0x10)), ncclInvalidUsage) << "a made-up pointer";
  EXPECT_EQ(ncclCommDeregister(comm[0], handle), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(comm[0], handle), ncclInvalidUsage) << "deregistered twice";
  EXPECT_EQ(ncclCommDeregister(comm[0], nullptr), ncclSuccess) << "NULL is nothing to deregister";
  void* kept = nullptr;  // left registered: freed with the communicator (valgrind's leak check sees it)
  ASSERT_EQ(ncclCommRegister(comm[1], buf.data(), buf.size(), &kept), ncclSuccess);
  ncclComm_t aborted = nullptr;  // an aborted communicator's record stays, its registrations go
  ASSERT_EQ(ncclCommInitAll(&aborted, 1, nullptr), ncclSuccess);
  void* dropped = nullptr;
  ASSERT_EQ(ncclCommRegister(aborted, buf.data(), buf.size(), &dropped), ncclSuccess);
  ASSERT_EQ(ncclCommAbort(aborted), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(aborted, dropped), ncclInvalidUsage);
  EXPECT_EQ(ncclCommRegister(comm[0], nullptr, 1, &handle), ncclInvalidArgument);
  ncclUniqueId id;
  EXPECT_EQ(ncclCommGetUniqueId(comm[0], &id), ncclSuccess);
  EXPECT_EQ(ncclCommGetUniqueId(nullptr, &id), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(comm[0]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm[1]), ncclSuccess);
}

// ---- abort during work ----

// Rank 0 blocks in an all-reduce rank 1 never joins; aborting rank 0 from another thread must
// end that call with an error well before RINGO_TIMEOUT.
TEST_F(Calls, AbortDuringWork) {
  const ncclUniqueId id = NewId();
  ncclComm_t comm[2] = {nullptr, nullptr};
  OnRanks(2, [&](int r) { ASSERT_EQ(ncclCommInitRank(&comm[r], 2, id, r), ncclSuccess); });
  ASSERT_TRUE(comm[0] && comm[1]);
  std::atomic<int> result{-1};
  const auto start = std::chrono::steady_clock::now();
  std::thread blocked([&] {
    std::vector<float> v(1 << 16, 1.0f);
    result = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm[0], nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(result.load(), -1) << "the all-reduce should still be waiting for rank 1";
  EXPECT_EQ(ncclCommAbort(comm[0]), ncclSuccess);
  blocked.join();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(result.load(), ncclSuccess);
  EXPECT_LT(waited, 10.0);
  EXPECT_EQ(ncclCommAbort(comm[1]), ncclSuccess);
}

// ---- what ringo does not provide ----

void ExpectUnsupported(ncclResult_t res, ncclComm_t comm, const char* function) {
  EXPECT_EQ(res, ncclInvalidUsage) << function;
  const std::string msg = ncclGetLastError(comm);
  EXPECT_NE(msg.find(function), std::string::npos) << msg;
  EXPECT_NE(msg.find("ringo does not provide"), std::string::npos) << msg;
}

TEST_F(Calls, UnsupportedEachNamesItselfInTheMessage) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  ncclComm_t child = reinterpret_cast<ncclComm_t>(&child);
  ncclWindow_t win = nullptr;
  void* ptr = nullptr;
  uint64_t value = 0;
  int rank = 0;
  ncclParamHandle_t h = nullptr;
  const char* str = nullptr;
  ExpectUnsupported(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), comm, "ncclCommRevoke");
  ExpectUnsupported(ncclCommShrink(comm, &rank, 1, &child, nullptr, NCCL_SHRINK_DEFAULT), comm, "ncclCommShrink");
  EXPECT_EQ(child, nullptr);
  ExpectUnsupported(ncclCommGrow(comm, 2, nullptr, -1, &child, nullptr), comm, "ncclCommGrow");
  ExpectUnsupported(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), comm, "ncclCommSuspend");
  ExpectUnsupported(ncclCommResume(comm), comm, "ncclCommResume");
  ExpectUnsupported(ncclCommMemStats(comm, ncclStatGpuMemTotal, &value), comm, "ncclCommMemStats");
  ExpectUnsupported(ncclCommWindowRegister(comm, &value, 8, &win, NCCL_WIN_DEFAULT), comm, "ncclCommWindowRegister");
  ExpectUnsupported(ncclCommWindowDeregister(comm, win), comm, "ncclCommWindowDeregister");
  ExpectUnsupported(ncclWinGetUserPtr(comm, win, &ptr), comm, "ncclWinGetUserPtr");
  ExpectUnsupported(ncclPutSignal(&value, 1, ncclUint64, 0, win, 0, 0, 0, 0, comm, nullptr), comm, "ncclPutSignal");
  ExpectUnsupported(ncclSignal(0, 0, 0, 0, comm, nullptr), comm, "ncclSignal");
  ncclWaitSignalDesc_t desc = {1, 0, 0, 0};
  ExpectUnsupported(ncclWaitSignal(1, &desc, comm, nullptr), comm, "ncclWaitSignal");
  ExpectUnsupported(ncclParamBind(&h, "NCCL_DEBUG"), nullptr, "ncclParamBind");
  ExpectUnsupported(ncclParamGetI32(h, &rank), nullptr, "ncclParamGetI32");
  ExpectUnsupported(ncclParamGetStr(h, &str), nullptr, "ncclParamGetStr");
  ExpectUnsupported(ncclParamGetParameter("NCCL_DEBUG", &str, &rank), nullptr, "ncclParamGetParameter");
  ExpectUnsupported(ncclParamGetAllParameterKeys(nullptr, &rank), nullptr, "ncclParamGetAllParameterKeys");
  ncclParamDumpAll();
  // The unsupported calls did not disturb the communicator.
  ExpectWorks(comm, 0);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// The device API torch imports (nccl_device.h) is exported too, and refused the same way.
extern "C" {
struct ncclDevCommRequirements;
struct ncclDevComm;
ncclResult_t ncclDevCommCreate(ncclComm_t, const ncclDevCommRequirements*, ncclDevComm*);
ncclResult_t ncclDevCommDestroy(ncclComm_t, const ncclDevComm*);
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void**);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void**);
}

TEST_F(Calls, UnsupportedDeviceApi) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  void* ptr = &ptr;
  ExpectUnsupported(ncclDevCommCreate(comm, nullptr, nullptr), comm, "ncclDevCommCreate");
  ExpectUnsupported(ncclDevCommDestroy(comm, nullptr), comm, "ncclDevCommDestroy");
  ExpectUnsupported(ncclGetLsaMultimemDevicePointer(nullptr, 0, &ptr), nullptr, "ncclGetLsaMultimemDevicePointer");
  EXPECT_EQ(ptr, nullptr);
  ExpectUnsupported(ncclGetPeerDevicePointer(nullptr, 0, 0, &ptr), nullptr, "ncclGetPeerDevicePointer");
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
