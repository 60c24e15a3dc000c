// gpu_probe.h — NoGpuReason(): why the GPU tests must skip ("" when a CUDA device answers), asked in
// a forked child so the test process never initialises CUDA before the harness forks its ranks.
// Header-only; used by test/test_device.cc, test/test_ddp_device.cc and test/test_ddp_scale.cc.
#ifndef RINGO_TEST_GPU_PROBE_H_
#define RINGO_TEST_GPU_PROBE_H_

#include <sys/wait.h>
#include <unistd.h>

#include <string>

#ifdef RINGO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ringo_test {

// Asked in a child process, so this process never initialises CUDA before the harness forks (CUDA
// does not survive fork). The answer is cached: the device count does not change under a test run.
inline std::string NoGpuReason() {
#ifndef RINGO_HAVE_CUDA
  return "this build has no CUDA part (nvcc not found, or CUDA=0)";
#else
  static std::string cached = "?";
  if (cached != "?") return cached;
  int fds[2];
  if (pipe(fds) != 0) return cached = "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    const std::string why = e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(e)
                            : n == 0         ? "no CUDA device: cudaGetDeviceCount reports 0"
                                             : "";
    if (write(fds[1], why.data(), why.size()) < 0) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  char buf[256];
  const ssize_t got = read(fds[0], buf, sizeof buf);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  cached = got > 0 ? std::string(buf, static_cast<size_t>(got)) : "";
  return cached;
#endif
}

}  // namespace ringo_test

#endif  // RINGO_TEST_GPU_PROBE_H_
