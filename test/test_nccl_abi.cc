// test_nccl_abi.cc — nccl/nccl.h and the built libnccl.so.2 against NCCL's published ABI: every
// enum value, the version arithmetic, the exported symbols (via dlopen), and argument errors.
// Depends on nccl/nccl.h and the shim (path from the Makefile). Run: make tests && ./build/test/test_nccl_abi
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>

#include <cstring>
#include <set>
#include <string>
#include <type_traits>

#include "nccl.h"

#ifndef RINGO_NCCL_COMPAT
#error "a real nccl.h was included instead of ringo's nccl/nccl.h"
#endif
#ifndef RINGO_NCCL_LIB
#error "the Makefile passes the built libnccl.so.2 as RINGO_NCCL_LIB"
#endif

// ---- compile time: a client built against this header sees NCCL's values ----

static_assert(NCCL_MAJOR == 2 && NCCL_MINOR == 10 && NCCL_PATCH == 3, "ringo claims NCCL 2.10.3");
static_assert(NCCL_VERSION_CODE == 21003, "NCCL 2.10.3's code");
static_assert(NCCL_VERSION(2, 10, 3) == NCCL_VERSION_CODE, "the code follows the arithmetic");
static_assert(NCCL_VERSION(2, 8, 4) == 2804, "before 2.9: X*1000+Y*100+Z");
static_assert(NCCL_VERSION(2, 9, 6) == 20906, "from 2.9: X*10000+Y*100+Z");
static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 7, 0), "clients gate ncclSend/ncclRecv on 2.7");
static_assert(NCCL_VERSION_CODE < NCCL_VERSION(2, 11, 0), "and must not see 2.11 features");
static_assert(sizeof(NCCL_SUFFIX) == 1, "NCCL_SUFFIX is the empty string");
static_assert(NCCL_UNIQUE_ID_BYTES == 128 && sizeof(ncclUniqueId) == 128, "128 plain bytes");
static_assert(std::is_trivially_copyable<ncclUniqueId>::value, "ids are sent as bytes");
static_assert(std::is_same<ncclComm_t, struct ncclComm*>::value, "opaque struct ncclComm*");
static_assert(std::is_same<cudaStream_t, struct CUstream_st*>::value, "cudaStream_t as CUDA has it");
static_assert(sizeof(ncclResult_t) == sizeof(int) && sizeof(ncclDataType_t) == sizeof(int) &&
                  sizeof(ncclRedOp_t) == sizeof(int), "enums are passed as ints");

namespace {

struct Value {
  const char* name;
  int value;
  int expected;
};

// NCCL's published values. Each is listed twice on purpose: the enumerator from nccl.h and the
// number from NCCL's header, so a drift in either shows up by name.
const Value kValues[] = {
    {"ncclSuccess", ncclSuccess, 0}, {"ncclUnhandledCudaError", ncclUnhandledCudaError, 1},
    {"ncclSystemError", ncclSystemError, 2}, {"ncclInternalError", ncclInternalError, 3},
    {"ncclInvalidArgument", ncclInvalidArgument, 4}, {"ncclInvalidUsage", ncclInvalidUsage, 5},
    {"ncclRemoteError", ncclRemoteError, 6}, {"ncclInProgress", ncclInProgress, 7},
    {"ncclNumResults", ncclNumResults, 8},
    {"ncclInt8", ncclInt8, 0}, {"ncclChar", ncclChar, 0}, {"ncclUint8", ncclUint8, 1},
    {"ncclInt32", ncclInt32, 2}, {"ncclInt", ncclInt, 2}, {"ncclUint32", ncclUint32, 3},
    {"ncclInt64", ncclInt64, 4}, {"ncclUint64", ncclUint64, 5}, {"ncclFloat16", ncclFloat16, 6},
    {"ncclHalf", ncclHalf, 6}, {"ncclFloat32", ncclFloat32, 7}, {"ncclFloat", ncclFloat, 7},
    {"ncclFloat64", ncclFloat64, 8}, {"ncclDouble", ncclDouble, 8}, {"ncclBfloat16", ncclBfloat16, 9},
    {"ncclNumTypes", ncclNumTypes, 10},
    {"ncclSum", ncclSum, 0}, {"ncclProd", ncclProd, 1}, {"ncclMax", ncclMax, 2}, {"ncclMin", ncclMin, 3},
    {"ncclAvg", ncclAvg, 4}, {"ncclNumOps", ncclNumOps, 5},
};

static_assert(ncclSuccess == 0 && ncclInvalidArgument == 4 && ncclRemoteError == 6 && ncclNumResults == 8, "");
static_assert(ncclChar == 0 && ncclInt == 2 && ncclHalf == 6 && ncclFloat == 7 && ncclDouble == 8 &&
                  ncclBfloat16 == 9 && ncclNumTypes == 10, "");
static_assert(ncclSum == 0 && ncclAvg == 4 && ncclNumOps == 5, "");

TEST(NcclHeader, EnumValuesAreNccls) {
  for (const Value& v : kValues) EXPECT_EQ(v.value, v.expected) << v.name;
}

// The macro is evaluated at run time here too, with values a compiler cannot fold away.
TEST(NcclHeader, VersionArithmetic) {
  volatile int two = 2, eight = 8, nine = 9, ten = 10;
  EXPECT_EQ(NCCL_VERSION(two, eight, 4), 2804);
  EXPECT_EQ(NCCL_VERSION(two, nine, 6), 20906);
  EXPECT_EQ(NCCL_VERSION(two, ten, 3), 21003);
  EXPECT_EQ(NCCL_VERSION(two, 7, 8), 2708);
  EXPECT_EQ(NCCL_VERSION(3, 0, 0), 30000);
  EXPECT_EQ(NCCL_VERSION_CODE, 21003);
  EXPECT_STREQ(NCCL_SUFFIX, "");
}

// ---- run time: the built library, loaded by path as a client's loader would ----

// The symbols issue #9 requires; each is also exported as p<name> (NCCL's profiling names).
const char* const kSymbols[] = {
    "ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitAll", "ncclCommDestroy",
    "ncclCommAbort", "ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank", "ncclCommGetAsyncError",
    "ncclGetErrorString", "ncclGetLastError", "ncclGroupStart", "ncclGroupEnd", "ncclAllReduce",
    "ncclBroadcast", "ncclBcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter", "ncclSend",
    "ncclRecv"};

class Shim : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    // RTLD_NOW: every symbol the shim needs from libringo must resolve, or the load fails here.
    lib_ = dlopen(RINGO_NCCL_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib_) error_ = dlerror();
  }
  void SetUp() override { ASSERT_NE(lib_, nullptr) << "dlopen(" RINGO_NCCL_LIB "): " << error_; }

  template <typename Fn>
  Fn* Get(const char* name) {
    return reinterpret_cast<Fn*>(dlsym(lib_, name));
  }
  static void* lib_;
  static std::string error_;
};
void* Shim::lib_ = nullptr;
std::string Shim::error_;

TEST_F(Shim, ExportsEveryRequiredSymbolFromItself) {
  char want[PATH_MAX];
  ASSERT_NE(realpath(RINGO_NCCL_LIB, want), nullptr);
  EXPECT_EQ(sizeof kSymbols / sizeof kSymbols[0], 22u);
  for (const char* name : kSymbols) {
    void* fn = dlsym(lib_, name);
    ASSERT_NE(fn, nullptr) << name << " is not exported: " << dlerror();
    Dl_info info{};
    ASSERT_NE(dladdr(fn, &info), 0) << name;
    char got[PATH_MAX];
    ASSERT_NE(realpath(info.dli_fname, got), nullptr) << info.dli_fname;
    EXPECT_STREQ(got, want) << name << " resolved outside ringo's libnccl.so.2";
    EXPECT_EQ(dlsym(lib_, ("p" + std::string(name)).c_str()), fn) << "p" << name << " is not an alias of " << name;
  }
}

TEST_F(Shim, VersionIsNccl2103) {
  auto get_version = Get<decltype(ncclGetVersion)>("ncclGetVersion");
  ASSERT_NE(get_version, nullptr);
  int version = 0;
  EXPECT_EQ(get_version(&version), ncclSuccess);
  EXPECT_EQ(version, 21003);
  EXPECT_EQ(get_version(nullptr), ncclInvalidArgument);
}

TEST_F(Shim, ErrorStringsAreDistinct) {
  auto error_string = Get<decltype(ncclGetErrorString)>("ncclGetErrorString");
  ASSERT_NE(error_string, nullptr);
  std::set<std::string> seen;
  for (int r = ncclSuccess; r <= ncclNumResults; r++) {
    const char* s = error_string(static_cast<ncclResult_t>(r));
    ASSERT_NE(s, nullptr) << "code " << r;
    EXPECT_NE(s[0], '\0') << "code " << r;
    EXPECT_TRUE(seen.insert(s).second) << "code " << r << " shares its string \"" << s << "\"";
  }
  EXPECT_NE(error_string(static_cast<ncclResult_t>(-1)), nullptr);
  EXPECT_STREQ(error_string(static_cast<ncclResult_t>(99)), error_string(ncclNumResults));
}

// Every NULL and out-of-range argument comes back as ncclInvalidArgument, never a crash, through
// the shim; NULL in ncclCommDestroy/Abort is a no-op success, as in NCCL.
TEST_F(Shim, InvalidArgumentsOnANullComm) {
  int32_t buf[4] = {1, 2, 3, 4};
  int value = 0;
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(Get<decltype(ncclAllReduce)>("ncclAllReduce")(buf, buf, 4, ncclInt32, ncclSum, nullptr, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclBcast)>("ncclBcast")(buf, 4, ncclInt32, 0, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclSend)>("ncclSend")(buf, 4, ncclInt32, 0, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclRecv)>("ncclRecv")(buf, 4, ncclInt32, 0, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclCommCount)>("ncclCommCount")(nullptr, &value), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclCommUserRank)>("ncclCommUserRank")(nullptr, &value), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclCommCuDevice)>("ncclCommCuDevice")(nullptr, &value), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclCommGetAsyncError)>("ncclCommGetAsyncError")(nullptr, &async), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclGetUniqueId)>("ncclGetUniqueId")(nullptr), ncclInvalidArgument);
  ncclUniqueId id{};
  EXPECT_EQ(Get<decltype(ncclCommInitRank)>("ncclCommInitRank")(nullptr, 2, id, 0), ncclInvalidArgument);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(Get<decltype(ncclCommInitRank)>("ncclCommInitRank")(&comm, 2, id, 5), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclCommInitAll)>("ncclCommInitAll")(nullptr, 1, nullptr), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclCommInitAll)>("ncclCommInitAll")(&comm, 0, nullptr), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclCommDestroy)>("ncclCommDestroy")(nullptr), ncclSuccess);
  EXPECT_EQ(Get<decltype(ncclCommAbort)>("ncclCommAbort")(nullptr), ncclSuccess);
  const char* msg = Get<decltype(ncclGetLastError)>("ncclGetLastError")(nullptr);
  ASSERT_NE(msg, nullptr);
}

// A one-rank clique made by ncclCommInitAll: queries, bad datatype and op rejected with a message,
// the communicator still usable afterwards, an unmatched ncclGroupEnd refused.
TEST_F(Shim, OneRankCommunicator) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(Get<decltype(ncclCommInitAll)>("ncclCommInitAll")(&comm, 1, nullptr), ncclSuccess);
  ASSERT_NE(comm, nullptr);
  int count = 0, rank = -1, device = 0;
  EXPECT_EQ(Get<decltype(ncclCommCount)>("ncclCommCount")(comm, &count), ncclSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(Get<decltype(ncclCommUserRank)>("ncclCommUserRank")(comm, &rank), ncclSuccess);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(Get<decltype(ncclCommCuDevice)>("ncclCommCuDevice")(comm, &device), ncclSuccess);
  EXPECT_EQ(device, -1);
  auto all_reduce = Get<decltype(ncclAllReduce)>("ncclAllReduce");
  auto last_error = Get<decltype(ncclGetLastError)>("ncclGetLastError");
  float in[3] = {1.5f, -2.0f, 4.0f}, out[3] = {0, 0, 0};
  EXPECT_EQ(all_reduce(in, out, 3, static_cast<ncclDataType_t>(ncclNumTypes), ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_NE(std::strstr(last_error(comm), "datatype"), nullptr) << last_error(comm);
  EXPECT_EQ(all_reduce(in, out, 3, static_cast<ncclDataType_t>(-1), ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(all_reduce(in, out, 3, ncclFloat, static_cast<ncclRedOp_t>(ncclNumOps), comm, nullptr),
            ncclInvalidArgument);
  EXPECT_NE(std::strstr(last_error(comm), "op"), nullptr) << last_error(comm);
  EXPECT_EQ(all_reduce(nullptr, out, 3, ncclFloat, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(Get<decltype(ncclBroadcast)>("ncclBroadcast")(in, out, 3, ncclFloat, 1, comm, nullptr),
            ncclInvalidArgument);
  // Rejected calls moved nothing: the communicator still works.
  EXPECT_EQ(all_reduce(in, out, 3, ncclFloat, ncclAvg, comm, nullptr), ncclSuccess) << last_error(comm);
  EXPECT_EQ(std::memcmp(in, out, sizeof in), 0);
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(Get<decltype(ncclCommGetAsyncError)>("ncclCommGetAsyncError")(comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  EXPECT_EQ(Get<decltype(ncclGroupEnd)>("ncclGroupEnd")(), ncclInvalidUsage);
  EXPECT_EQ(Get<decltype(ncclCommDestroy)>("ncclCommDestroy")(comm), ncclSuccess);
}

}  // namespace
