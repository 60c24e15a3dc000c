/* shim_unsupported.c — libnccl.so.2 on ringo: the NCCL functions ringo has no capability for
 * (revoke, shrink, grow, suspend/resume, memory statistics, windows, one-sided signals, device
 * communicators and their pointers, the parameter API). Each is exported so prebuilt clients load,
 * and returns ncclInvalidUsage with a message naming it. Tested by test/test_nccl_calls.cc. */
#include "shim.h"

#define NO(comm, what) return shim_unsupported((comm), __func__, (what))

NCCL_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  (void)revokeFlags;
  NO(comm, "revoking a communicator");
}
NCCL_PROFILING_ALIAS(ncclCommRevoke);

NCCL_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  (void)excludeRanksList, (void)excludeRanksCount, (void)config, (void)shrinkFlags;
  if (newcomm) *newcomm = NULL;
  NO(comm, "shrinking a communicator (split it instead)");
}
NCCL_PROFILING_ALIAS(ncclCommShrink);

NCCL_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                      ncclComm_t* newcomm, ncclConfig_t* config) {
  (void)nRanks, (void)uniqueId, (void)rank, (void)config;
  if (newcomm) *newcomm = NULL;
  NO(comm, "growing a communicator");
}
NCCL_PROFILING_ALIAS(ncclCommGrow);

NCCL_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  (void)flags;
  NO(comm, "suspending a communicator");
}
NCCL_PROFILING_ALIAS(ncclCommSuspend);

NCCL_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm) { NO(comm, "resuming a communicator"); }
NCCL_PROFILING_ALIAS(ncclCommResume);

NCCL_EXPORT ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  (void)stat, (void)value;
  NO(comm, "memory statistics");
}
NCCL_PROFILING_ALIAS(ncclCommMemStats);

NCCL_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                int winFlags) {
  (void)buff, (void)size, (void)winFlags;
  if (win) *win = NULL;
  NO(comm, "memory windows");
}
NCCL_PROFILING_ALIAS(ncclCommWindowRegister);

NCCL_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  (void)win;
  NO(comm, "memory windows");
}
NCCL_PROFILING_ALIAS(ncclCommWindowDeregister);

NCCL_EXPORT ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  (void)win;
  if (outUserPtr) *outUserPtr = NULL;
  NO(comm, "memory windows");
}
NCCL_PROFILING_ALIAS(ncclWinGetUserPtr);

NCCL_EXPORT ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                                       ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                                       unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  (void)localbuff, (void)count, (void)datatype, (void)peer, (void)peerWin, (void)peerWinOffset, (void)sigIdx,
      (void)ctx, (void)flags, (void)stream;
  NO(comm, "one-sided puts (memory windows)");
}
NCCL_PROFILING_ALIAS(ncclPutSignal);

NCCL_EXPORT ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                    cudaStream_t stream) {
  (void)peer, (void)sigIdx, (void)ctx, (void)flags, (void)stream;
  NO(comm, "signals");
}
NCCL_PROFILING_ALIAS(ncclSignal);

NCCL_EXPORT ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                                        cudaStream_t stream) {
  (void)nDesc, (void)signalDescs, (void)stream;
  NO(comm, "signals");
}
NCCL_PROFILING_ALIAS(ncclWaitSignal);

/* ---- NCCL's device API (nccl_device.h, not nccl.h): its types stay opaque here, since ringo
 * only has to refuse them; the pointer arguments have the same ABI whatever they point to. ---- */

struct ncclDevCommRequirements;
struct ncclDevComm;
NCCL_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                                           struct ncclDevComm* outDevComm);
NCCL_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);
NCCL_EXPORT ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
NCCL_EXPORT ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* outDevComm) {
  (void)reqs, (void)outDevComm;
  NO(comm, "device communicators");
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm) {
  (void)devComm;
  NO(comm, "device communicators");
}

ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr) {
  (void)window, (void)offset;
  if (outPtr) *outPtr = NULL;
  NO(NULL, "multimem pointers (memory windows)");
}

ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  (void)window, (void)offset, (void)peer;
  if (outPtr) *outPtr = NULL;
  NO(NULL, "peer device pointers (memory windows)");
}

/* ---- the parameter API: ringo reads its own RINGO_* variables (README), not NCCL_* ones ---- */

#define NO_PARAM(name, T)                                                         \
  NCCL_EXPORT ncclResult_t name(ncclParamHandle_t h, T* out) {                    \
    (void)h, (void)out;                                                           \
    NO(NULL, "NCCL's parameter API (it reads RINGO_* variables)");                \
  }                                                                               \
  NCCL_PROFILING_ALIAS(name)

NO_PARAM(ncclParamGetI8, int8_t);
NO_PARAM(ncclParamGetI16, int16_t);
NO_PARAM(ncclParamGetI32, int32_t);
NO_PARAM(ncclParamGetI64, int64_t);
NO_PARAM(ncclParamGetU8, uint8_t);
NO_PARAM(ncclParamGetU16, uint16_t);
NO_PARAM(ncclParamGetU32, uint32_t);
NO_PARAM(ncclParamGetU64, uint64_t);
NO_PARAM(ncclParamGetStr, const char*);

NCCL_EXPORT ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  (void)key;
  if (out) *out = NULL;
  NO(NULL, "NCCL's parameter API (it reads RINGO_* variables)");
}
NCCL_PROFILING_ALIAS(ncclParamBind);

NCCL_EXPORT ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  (void)h, (void)out, (void)maxLen, (void)len;
  NO(NULL, "NCCL's parameter API (it reads RINGO_* variables)");
}
NCCL_PROFILING_ALIAS(ncclParamGet);

NCCL_EXPORT ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  (void)key, (void)value, (void)valueLen;
  NO(NULL, "NCCL's parameter API (it reads RINGO_* variables)");
}
NCCL_PROFILING_ALIAS(ncclParamGetParameter);

NCCL_EXPORT ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  (void)table, (void)tableLen;
  NO(NULL, "NCCL's parameter API (it reads RINGO_* variables)");
}
NCCL_PROFILING_ALIAS(ncclParamGetAllParameterKeys);

/* Dumping parameters to the log: ringo has no NCCL parameters, so there is nothing to dump. */
NCCL_EXPORT void ncclParamDumpAll(void) {}
NCCL_PROFILING_ALIAS(ncclParamDumpAll);
