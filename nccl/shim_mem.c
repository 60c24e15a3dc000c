/* shim_mem.c — libnccl.so.2 on ringo: memory. ncclMemAlloc/ncclMemFree, buffer registration (a
 * token: ringo needs none), and the few CUDA runtime calls the shim makes, looked up in the
 * runtime the process has loaded (none in a host-only process), so the shim links no CUDA.
 * Public ringo.h only. Tested by test/test_nccl_calls.cc (make test). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* ---- the CUDA runtime, found by name ---- */

/* CUDA's cudaPointerAttributes begins {type, device, devicePointer, hostPointer}; the tail is
 * room for fields a later runtime may add. cudaMemoryTypeDevice is 2; cudaMemcpyDefault is 4. */
struct cuda_pointer_attributes {
  int type;
  int device;
  void* device_pointer;
  void* host_pointer;
  char reserved[64];
};

struct cuda_runtime {
  int (*malloc_)(void**, size_t);
  int (*free_)(void*);
  int (*pointer_attributes)(struct cuda_pointer_attributes*, const void*);
  int (*get_device)(int*);
  int (*set_device)(int);
  int (*memcpy_)(void*, const void*, size_t, int);
};

static const char* const kRuntimes[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"};

/* The runtime's functions, bound once (rt_found set) from the first runtime found. */
static struct cuda_runtime cuda_rt;
static _Atomic int rt_found;
static pthread_mutex_t rt_lock = PTHREAD_MUTEX_INITIALIZER;

static int runtime_bind(void* lib) {
  struct cuda_runtime r;
  *(void**)&r.malloc_ = dlsym(lib, "cudaMalloc");
  *(void**)&r.free_ = dlsym(lib, "cudaFree");
  *(void**)&r.pointer_attributes = dlsym(lib, "cudaPointerGetAttributes");
  *(void**)&r.get_device = dlsym(lib, "cudaGetDevice");
  *(void**)&r.set_device = dlsym(lib, "cudaSetDevice");
  *(void**)&r.memcpy_ = dlsym(lib, "cudaMemcpy");
  if (!r.malloc_ || !r.free_ || !r.pointer_attributes || !r.get_device || !r.set_device || !r.memcpy_) return 0;
  cuda_rt = r;
  atomic_store(&rt_found, 1);
  return 1;
}

/* The runtime already in the process (load 0), or loaded now (load 1); NULL when there is none.
 * Looked up again on each call while none is found, since a program may load one later (a
 * dlopen with RTLD_NOLOAD per name: a few microseconds). */
static const struct cuda_runtime* runtime(int load) {
  if (atomic_load(&rt_found)) return &cuda_rt;
  pthread_mutex_lock(&rt_lock);
  void* lib = NULL;
  for (size_t i = 0; !atomic_load(&rt_found) && !lib && i < sizeof kRuntimes / sizeof kRuntimes[0]; i++)
    lib = dlopen(kRuntimes[i], RTLD_LAZY | RTLD_LOCAL | (load ? 0 : RTLD_NOLOAD));
  const int ok = atomic_load(&rt_found) || (lib && runtime_bind(lib));
  pthread_mutex_unlock(&rt_lock);
  return ok ? &cuda_rt : NULL;
}

/* The pointer's cudaMemoryType: 0 unregistered host memory (also without a runtime), 1 host, 2
 * device, 3 managed. */
static int memory_type(const void* p) {
  const struct cuda_runtime* rt = p ? runtime(0) : NULL;
  struct cuda_pointer_attributes a;
  memset(&a, 0, sizeof a);
  return rt && rt->pointer_attributes(&a, p) == 0 ? a.type : 0;
}

int shim_is_device_ptr(const void* p) { return memory_type(p) == 2; }

int shim_ringo_device_ptr(const void* p) {
  const int type = memory_type(p);
  return type == 2 || type == 3;
}

int shim_current_device(void) {
  const struct cuda_runtime* rt = runtime(0);
  int dev = -1;
  return rt && rt->get_device(&dev) == 0 ? dev : -1;
}

void shim_set_device(int device) {
  const struct cuda_runtime* rt = runtime(0);
  if (rt) rt->set_device(device);
}

int shim_read_memory(void* dst, const void* src, size_t bytes) {
  if (!shim_is_device_ptr(src)) {
    memcpy(dst, src, bytes);
    return 0;
  }
  return runtime(0)->memcpy_(dst, src, bytes, 4) == 0 ? 0 : -1;
}

/* ---- ncclMemAlloc / ncclMemFree ---- */

NCCL_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (!ptr || size == 0) return shim_fail(NULL, ncclInvalidArgument, "ncclMemAlloc: %s", ptr ? "size is 0" : "ptr is NULL");
  *ptr = NULL;
  const struct cuda_runtime* rt = runtime(1);
  if (!rt) return shim_fail(NULL, ncclUnhandledCudaError, "ncclMemAlloc: no CUDA runtime (libcudart) to allocate with");
  const int err = rt->malloc_(ptr, size);
  if (err != 0) {
    *ptr = NULL;
    return shim_fail(NULL, ncclUnhandledCudaError, "ncclMemAlloc: cudaMalloc of %zu bytes failed (CUDA error %d)", size,
                     err);
  }
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclMemAlloc);

NCCL_EXPORT ncclResult_t ncclMemFree(void* ptr) {
  if (!ptr) return ncclSuccess;
  const struct cuda_runtime* rt = runtime(0);
  if (!rt)
    return shim_fail(NULL, ncclUnhandledCudaError, "ncclMemFree: no CUDA runtime (libcudart) is loaded, so %p is "
                     "not memory of ncclMemAlloc", ptr);
  const int err = rt->free_(ptr);
  return err == 0 ? ncclSuccess
                  : shim_fail(NULL, ncclUnhandledCudaError, "ncclMemFree: cudaFree failed (CUDA error %d)", err);
}
NCCL_PROFILING_ALIAS(ncclMemFree);

/* ---- registration: a hint ringo does not need, answered with a token ---- */

/* A handle is a token on its communicator's list: a handle is looked up there, never read, so a
 * stale or made-up one is refused (NCCL looks it up in its registration cache the same way). */
struct shim_token {
  struct shim_token* next;
  void* buff;
  size_t size;
};

void shim_tokens_free(struct ncclComm* comm) {
  while (comm->tokens) {
    struct shim_token* t = comm->tokens;
    comm->tokens = t->next;
    free(t);
  }
}

NCCL_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  const char* bad = !comm ? "comm is NULL" : !buff ? "buff is NULL" : !handle ? "handle is NULL" : NULL;
  if (bad) return shim_fail(comm, ncclInvalidArgument, "ncclCommRegister: %s", bad);
  struct shim_token* t = malloc(sizeof *t);
  if (!t) return shim_fail(comm, ncclSystemError, "ncclCommRegister: out of memory");
  t->buff = buff;
  t->size = size;
  pthread_mutex_lock(&comm->lock);
  t->next = comm->tokens;
  comm->tokens = t;
  pthread_mutex_unlock(&comm->lock);
  *handle = t;
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommRegister);

/* A NULL handle is nothing to deregister, as in NCCL. */
NCCL_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  if (!comm) return shim_fail(NULL, ncclInvalidArgument, "ncclCommDeregister: comm is NULL");
  if (!handle) return ncclSuccess;
  pthread_mutex_lock(&comm->lock);
  struct shim_token** at = &comm->tokens;
  while (*at && *at != handle) at = &(*at)->next;
  struct shim_token* found = *at;
  if (found) *at = found->next;
  pthread_mutex_unlock(&comm->lock);
  if (!found)
    return shim_fail(comm, ncclInvalidUsage, "ncclCommDeregister: handle %p is not a live registration of this "
                     "communicator (deregistered already, or from ncclCommRegister on another one)", handle);
  free(found);
  return ncclSuccess;
}
NCCL_PROFILING_ALIAS(ncclCommDeregister);
