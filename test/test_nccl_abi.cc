// test_nccl_abi.cc — nccl/nccl.h and the built libnccl.so.2 against NCCL 2.30.7's ABI: every enum
// value, struct size and offset, the version arithmetic, the exported symbols (via dlopen, and the
// lists of what PyTorch 2.15, CuPy 14 and nccl-tests import, nccl/abi/*.txt), and argument errors.
// Depends on nccl/nccl.h and the shim (paths from the Makefile). Run: make tests && ./build/test/test_nccl_abi
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "nccl.h"

#ifndef RINGO_NCCL_COMPAT
#error "a real nccl.h was included instead of ringo's nccl/nccl.h"
#endif
#ifndef RINGO_NCCL_LIB
#error "the Makefile passes the built libnccl.so.2 as RINGO_NCCL_LIB"
#endif
#ifndef RINGO_NCCL_ABI_DIR
#error "the Makefile passes nccl/abi as RINGO_NCCL_ABI_DIR"
#endif

// ---- compile time: a client built against this header sees NCCL's values ----

static_assert(NCCL_MAJOR == 2 && NCCL_MINOR == 30 && NCCL_PATCH == 7, "ringo claims NCCL 2.30.7");
static_assert(NCCL_VERSION_CODE == 23007, "NCCL 2.30.7's code");
static_assert(NCCL_VERSION(2, 30, 7) == NCCL_VERSION_CODE, "the code follows the arithmetic");
static_assert(NCCL_VERSION(2, 8, 4) == 2804, "before 2.9: X*1000+Y*100+Z");
static_assert(NCCL_VERSION(2, 9, 6) == 20906, "from 2.9: X*10000+Y*100+Z");
static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 19, 0), "clients gate ncclMemAlloc and registration on 2.19");
static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0), "and ncclGather/ncclScatter/ncclAlltoAll on 2.28");
static_assert(NCCL_VERSION_CODE < NCCL_VERSION(2, 31, 0), "and must not see 2.31 features");
static_assert(sizeof(NCCL_SUFFIX) == 1, "NCCL_SUFFIX is the empty string");
static_assert(NCCL_UNIQUE_ID_BYTES == 128 && sizeof(ncclUniqueId) == 128, "128 plain bytes");
static_assert(std::is_trivially_copyable<ncclUniqueId>::value, "ids are sent as bytes");
static_assert(std::is_same<ncclComm_t, struct ncclComm*>::value, "opaque struct ncclComm*");
static_assert(std::is_same<ncclWindow_t, struct ncclWindow_vidmem*>::value, "opaque struct ncclWindow_vidmem*");
static_assert(std::is_same<ncclParamHandle_t, struct ncclParamHandle*>::value, "opaque struct ncclParamHandle*");
static_assert(std::is_same<cudaStream_t, struct CUstream_st*>::value, "cudaStream_t as CUDA has it");
static_assert(sizeof(ncclResult_t) == sizeof(int) && sizeof(ncclDataType_t) == sizeof(int) &&
                  sizeof(ncclRedOp_t) == sizeof(int) && sizeof(ncclScalarResidence_t) == sizeof(int) &&
                  sizeof(ncclCommMemStat_t) == sizeof(int), "enums are passed as ints");

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
    {"ncclTimeout", ncclTimeout, 8}, {"ncclNumResults", ncclNumResults, 9},
    {"ncclInt8", ncclInt8, 0}, {"ncclChar", ncclChar, 0}, {"ncclUint8", ncclUint8, 1},
    {"ncclInt32", ncclInt32, 2}, {"ncclInt", ncclInt, 2}, {"ncclUint32", ncclUint32, 3},
    {"ncclInt64", ncclInt64, 4}, {"ncclUint64", ncclUint64, 5}, {"ncclFloat16", ncclFloat16, 6},
    {"ncclHalf", ncclHalf, 6}, {"ncclFloat32", ncclFloat32, 7}, {"ncclFloat", ncclFloat, 7},
    {"ncclFloat64", ncclFloat64, 8}, {"ncclDouble", ncclDouble, 8}, {"ncclBfloat16", ncclBfloat16, 9},
    {"ncclFloat8e4m3", ncclFloat8e4m3, 10}, {"ncclFloat8e5m2", ncclFloat8e5m2, 11},
    {"ncclNumTypes", ncclNumTypes, 12},
    {"ncclSum", ncclSum, 0}, {"ncclProd", ncclProd, 1}, {"ncclMax", ncclMax, 2}, {"ncclMin", ncclMin, 3},
    {"ncclAvg", ncclAvg, 4}, {"ncclNumOps", ncclNumOps, 5}, {"ncclMaxRedOp", ncclMaxRedOp, 0x7fffffff},
    {"ncclScalarDevice", ncclScalarDevice, 0}, {"ncclScalarHostImmediate", ncclScalarHostImmediate, 1},
    {"ncclStatGpuMemSuspend", ncclStatGpuMemSuspend, 0}, {"ncclStatGpuMemSuspended", ncclStatGpuMemSuspended, 1},
    {"ncclStatGpuMemPersist", ncclStatGpuMemPersist, 2}, {"ncclStatGpuMemTotal", ncclStatGpuMemTotal, 3},
    {"NCCL_SPLIT_NOCOLOR", NCCL_SPLIT_NOCOLOR, -1}, {"NCCL_CONFIG_UNDEF_INT", NCCL_CONFIG_UNDEF_INT, INT_MIN},
    {"NCCL_API_MAGIC", static_cast<int>(NCCL_API_MAGIC), static_cast<int>(0xcafebeefu)},
    {"NCCL_SIM_INFO magic", static_cast<int>(RINGO_NCCL_SIM_INFO_MAGIC), 0x74685283},
    {"NCCL_WIN_DEFAULT", NCCL_WIN_DEFAULT, 0}, {"NCCL_WIN_COLL_SYMMETRIC", NCCL_WIN_COLL_SYMMETRIC, 1},
    {"NCCL_WIN_STRICT_ORDERING", NCCL_WIN_STRICT_ORDERING, 2},
    {"NCCL_WIN_REQUIRED_ALIGNMENT", NCCL_WIN_REQUIRED_ALIGNMENT, 4096},
    {"NCCL_CTA_POLICY_DEFAULT", NCCL_CTA_POLICY_DEFAULT, 0}, {"NCCL_CTA_POLICY_EFFICIENCY", NCCL_CTA_POLICY_EFFICIENCY, 1},
    {"NCCL_CTA_POLICY_ZERO", NCCL_CTA_POLICY_ZERO, 2}, {"NCCL_SHRINK_DEFAULT", NCCL_SHRINK_DEFAULT, 0},
    {"NCCL_SHRINK_ABORT", NCCL_SHRINK_ABORT, 1}, {"NCCL_REVOKE_DEFAULT", NCCL_REVOKE_DEFAULT, 0},
    {"NCCL_SUSPEND_MEM", NCCL_SUSPEND_MEM, 1},
};

static_assert(ncclSuccess == 0 && ncclInvalidArgument == 4 && ncclTimeout == 8 && ncclNumResults == 9, "");
static_assert(ncclChar == 0 && ncclInt == 2 && ncclHalf == 6 && ncclFloat == 7 && ncclDouble == 8 &&
                  ncclBfloat16 == 9 && ncclFloat8e5m2 == 11 && ncclNumTypes == 12, "");
static_assert(ncclSum == 0 && ncclAvg == 4 && ncclNumOps == 5 && ncclMaxRedOp == 0x7fffffff, "");

// Sizes and offsets of the structs that cross the ABI, as NVIDIA's 2.30.7 nccl.h lays them out
// on x86-64 (read off that header compiled with gcc: offsetof and sizeof).
struct Layout {
  const char* name;
  size_t got, want;
};
#define AT(T, f, n) {#T "." #f, offsetof(T, f), n}
const Layout kLayout[] = {
    {"sizeof(ncclConfig_t)", sizeof(ncclConfig_t), 96}, AT(ncclConfig_t, size, 0), AT(ncclConfig_t, magic, 8),
    AT(ncclConfig_t, version, 12), AT(ncclConfig_t, blocking, 16), AT(ncclConfig_t, cgaClusterSize, 20),
    AT(ncclConfig_t, minCTAs, 24), AT(ncclConfig_t, maxCTAs, 28), AT(ncclConfig_t, netName, 32),
    AT(ncclConfig_t, splitShare, 40), AT(ncclConfig_t, trafficClass, 44), AT(ncclConfig_t, commName, 48),
    AT(ncclConfig_t, collnetEnable, 56), AT(ncclConfig_t, CTAPolicy, 60), AT(ncclConfig_t, shrinkShare, 64),
    AT(ncclConfig_t, nvlsCTAs, 68), AT(ncclConfig_t, nChannelsPerNetPeer, 72),
    AT(ncclConfig_t, nvlinkCentricSched, 76), AT(ncclConfig_t, graphUsageMode, 80), AT(ncclConfig_t, numRmaCtx, 84),
    AT(ncclConfig_t, maxP2pPeers, 88), AT(ncclConfig_t, graphStreamOrdering, 92),
    {"sizeof(ncclSimInfo_t)", sizeof(ncclSimInfo_t), 24}, AT(ncclSimInfo_t, size, 0), AT(ncclSimInfo_t, magic, 8),
    AT(ncclSimInfo_t, version, 12), AT(ncclSimInfo_t, estimatedTime, 16),
    {"sizeof(ncclWaitSignalDesc_t)", sizeof(ncclWaitSignalDesc_t), 16}, AT(ncclWaitSignalDesc_t, opCnt, 0),
    AT(ncclWaitSignalDesc_t, peer, 4), AT(ncclWaitSignalDesc_t, sigIdx, 8), AT(ncclWaitSignalDesc_t, ctx, 12),
    {"sizeof(ncclUniqueId)", sizeof(ncclUniqueId), 128},
};
#undef AT

TEST(NcclHeader, StructLayoutIsNccls) {
  for (const Layout& l : kLayout) EXPECT_EQ(l.got, l.want) << l.name;
}

// The initializers fill what NCCL's do: the struct's own size, the magic, the version, and every
// user field undefined.
TEST(NcclHeader, Initializers) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(config.size, sizeof(ncclConfig_t));
  EXPECT_EQ(config.magic, 0xcafebeefu);
  EXPECT_EQ(config.version, 23007u);
  const int ints[] = {config.blocking, config.cgaClusterSize, config.minCTAs, config.maxCTAs, config.splitShare,
                      config.trafficClass, config.collnetEnable, config.CTAPolicy, config.shrinkShare,
                      config.nvlsCTAs, config.nChannelsPerNetPeer, config.nvlinkCentricSched,
                      config.graphUsageMode, config.numRmaCtx, config.maxP2pPeers, config.graphStreamOrdering};
  for (int v : ints) EXPECT_EQ(v, INT_MIN);
  EXPECT_EQ(config.netName, nullptr);
  EXPECT_EQ(config.commName, nullptr);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(sim.size, sizeof(ncclSimInfo_t));
  EXPECT_EQ(sim.magic, 0x74685283u);
  EXPECT_EQ(sim.version, 23007u);
  EXPECT_EQ(sim.estimatedTime, -1.0f);
}

TEST(NcclHeader, EnumValuesAreNccls) {
  for (const Value& v : kValues) EXPECT_EQ(v.value, v.expected) << v.name;
}

// The macro is evaluated at run time here too, with values a compiler cannot fold away.
TEST(NcclHeader, VersionArithmetic) {
  volatile int two = 2, eight = 8, nine = 9, ten = 10;
  EXPECT_EQ(NCCL_VERSION(two, eight, 4), 2804);
  EXPECT_EQ(NCCL_VERSION(two, nine, 6), 20906);
  EXPECT_EQ(NCCL_VERSION(two, ten, 3), 21003);
  EXPECT_EQ(NCCL_VERSION(two, 30, 7), 23007);
  EXPECT_EQ(NCCL_VERSION(two, 7, 8), 2708);
  EXPECT_EQ(NCCL_VERSION(3, 0, 0), 30000);
  EXPECT_EQ(NCCL_VERSION_CODE, 23007);
  EXPECT_STREQ(NCCL_SUFFIX, "");
}

// ---- run time: the built library, loaded by path as a client's loader would ----

// Every function nccl.h declares; each is also exported as p<name> (NCCL's profiling names).
const char* const kSymbols[] = {
    "ncclGetVersion", "ncclGetUniqueId", "ncclMemAlloc", "ncclMemFree", "ncclCommInitRank",
    "ncclCommInitRankConfig", "ncclCommInitRankScalable", "ncclCommInitAll", "ncclCommFinalize",
    "ncclCommDestroy", "ncclCommAbort", "ncclCommRevoke", "ncclCommSplit", "ncclCommShrink",
    "ncclCommGetUniqueId", "ncclCommGrow", "ncclGetErrorString", "ncclGetLastError", "ncclCommGetAsyncError",
    "ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank", "ncclCommRegister", "ncclCommDeregister",
    "ncclCommSuspend", "ncclCommResume", "ncclCommMemStats", "ncclCommWindowRegister",
    "ncclCommWindowDeregister", "ncclWinGetUserPtr", "ncclRedOpCreatePreMulSum", "ncclRedOpDestroy",
    "ncclReduce", "ncclBcast", "ncclBroadcast", "ncclAllReduce", "ncclReduceScatter", "ncclAllGather",
    "ncclAlltoAll", "ncclGather", "ncclScatter", "ncclSend", "ncclRecv", "ncclPutSignal", "ncclSignal",
    "ncclWaitSignal", "ncclGroupStart", "ncclGroupEnd", "ncclGroupSimulateEnd", "ncclParamBind",
    "ncclParamGetI8", "ncclParamGetI16", "ncclParamGetI32", "ncclParamGetI64", "ncclParamGetU8",
    "ncclParamGetU16", "ncclParamGetU32", "ncclParamGetU64", "ncclParamGetStr", "ncclParamGet",
    "ncclParamGetParameter", "ncclParamGetAllParameterKeys", "ncclParamDumpAll"};

// The names listed in one of nccl/abi/*.txt (one per line, # starts a comment).
std::vector<std::string> ImportList(const std::string& file) {
  std::ifstream in(std::string(RINGO_NCCL_ABI_DIR) + "/" + file);
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') names.push_back(line);
  return names;
}

class Shim : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    // RTLD_NOW: every symbol the shim needs from libringo must resolve, or the load fails here.
    lib_ = dlopen(RINGO_NCCL_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib_) error_ = dlerror();
  }
  void SetUp() override { ASSERT_NE(lib_, nullptr) << "dlopen(" RINGO_NCCL_LIB "): " << error_; }

  // The real path of the file that defines fn.
  static std::string Owner(void* fn) {
    Dl_info info{};
    char got[PATH_MAX];
    if (!dladdr(fn, &info) || !realpath(info.dli_fname, got)) return "(unknown)";
    return got;
  }
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
  EXPECT_EQ(sizeof kSymbols / sizeof kSymbols[0], 63u);
  for (const char* name : kSymbols) {
    void* fn = dlsym(lib_, name);
    ASSERT_NE(fn, nullptr) << name << " is not exported: " << dlerror();
    EXPECT_EQ(Owner(fn), want) << name << " resolved outside ringo's libnccl.so.2";
    EXPECT_EQ(dlsym(lib_, ("p" + std::string(name)).c_str()), fn) << "p" << name << " is not an alias of " << name;
  }
}

// What the prebuilt clients import (PyTorch, CuPy, nccl-tests built against NVIDIA's 2.28 header):
// each must come from this library, or their import fails (Python loads extensions with
// immediate binding) or they do not link.
TEST_F(Shim, ExportsEverySymbolPrebuiltClientsImport) {
  char want[PATH_MAX];
  ASSERT_NE(realpath(RINGO_NCCL_LIB, want), nullptr);
  for (const char* file : {"torch-2.15-imports.txt", "cupy-14-imports.txt", "nccl-tests-2.28-imports.txt"}) {
    const std::vector<std::string> names = ImportList(file);
    EXPECT_GE(names.size(), 20u) << file << " is missing or short";
    for (const std::string& name : names) {
      void* fn = dlsym(lib_, name.c_str());
      EXPECT_NE(fn, nullptr) << name << " (" << file << ") is not exported";
      if (fn) {
        EXPECT_EQ(Owner(fn), want) << name << " resolved outside ringo's libnccl.so.2";
      }
    }
  }
  EXPECT_EQ(ImportList("torch-2.15-imports.txt").size(), 51u);
  EXPECT_EQ(ImportList("cupy-14-imports.txt").size(), 22u);
  EXPECT_EQ(ImportList("nccl-tests-2.28-imports.txt").size(), 31u);
}

TEST_F(Shim, VersionIsNccl23007) {
  auto get_version = Get<decltype(ncclGetVersion)>("ncclGetVersion");
  ASSERT_NE(get_version, nullptr);
  int version = 0;
  EXPECT_EQ(get_version(&version), ncclSuccess);
  EXPECT_EQ(version, 23007);
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
