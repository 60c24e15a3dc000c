/* segment.c — named shared-memory segments of this user: made under an unguessable name, checked
 * (ours, 0600, the expected size) and mapped by the other ranks of the host. The utility beside the
 * transports that the shm links, the mailbox and the board all use. Tested by test/test_shm.cc. */
#include "transport/segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "core/wait.h"

/* The inode of this process's pid namespace (0 if /proc cannot say): a name's pid means a process
 * only to those who share it. */
static uint64_t pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* A SIGKILL between a segment's creation and the moment its peers have mapped and unlinked it leaves
 * the name behind; no process of the job can still use it once its creator is gone. Any ringo
 * process of this user removes such names: made in its own pid namespace by a pid that has exited
 * (a zombie counts as exited). Names of other namespaces, users or formats are never touched. */
void ringo_segment_sweep_stale(void) {
  const uint64_t ns = pid_namespace();
  if (ns == 0) return;
  DIR* dir = opendir("/dev/shm");
  if (!dir) return;
  const char* prefix = &RINGO_SEGMENT_PREFIX[1]; /* the directory entry has no leading '/' */
  struct dirent* e;
  while ((e = readdir(dir)) != NULL) {
    int pid;
    unsigned long long their_ns;
    char rnd[17];
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
        sscanf(e->d_name + strlen(prefix), "%d-%llu-%16[0-9a-f]", &pid, &their_ns, rnd) != 3)
      continue;
    struct stat st;
    if (their_ns != ns || pid <= 0 || pid == (int)getpid() || !ringo_wait_pid_gone(pid) ||
        fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid())
      continue;
    char name[RINGO_SEGMENT_NAME_BYTES + 1];
    if (snprintf(name, sizeof name, "/%s", e->d_name) >= (int)sizeof name) continue;
    if (shm_unlink(name) == 0) RINGO_INFO(RINGO_LOG_INIT, "removed %s, left by pid %d that has exited", name, pid);
  }
  closedir(dir);
}

/* Creates a fresh 0600 object of total bytes under an unguessable name (written to name);
 * retries the rare name collision. */
ringoResult_t ringo_segment_create_named(char name[RINGO_SEGMENT_NAME_BYTES], size_t total, int* fd_out) {
  for (int attempt = 0; attempt < 8; attempt++) {
    uint64_t rnd;
    if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
      return ringo_fail(ringoSystemError, "getrandom failed: %s", strerror(errno));
    snprintf(name, RINGO_SEGMENT_NAME_BYTES, RINGO_SEGMENT_PREFIX "%d-%llu-%016llx", (int)getpid(),
             (unsigned long long)pid_namespace(), (unsigned long long)rnd);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return ringo_fail(ringoSystemError, "shm_open(%s) failed: %s", name, strerror(errno));
    /* Reserving the pages now turns a full /dev/shm into an error here rather than a SIGBUS
     * on the first touch of a slot. */
    int err = posix_fallocate(fd, 0, (off_t)total);
    if (err != 0) {
      close(fd);
      shm_unlink(name);
      return ringo_fail(ringoSystemError, "reserving %zu bytes of shared memory for %s failed: %s", total, name,
                        strerror(err));
    }
    *fd_out = fd;
    return ringoSuccess;
  }
  return ringo_fail(ringoSystemError, "shm_open: could not find an unused segment name");
}

ringoResult_t ringo_segment_create(size_t total, char name[RINGO_SEGMENT_NAME_BYTES], void** base) {
  int fd = -1;
  RINGO_CHECK(ringo_segment_create_named(name, total, &fd));
  *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (*base != MAP_FAILED) return ringoSuccess;
  *base = NULL;
  shm_unlink(name);
  return ringo_fail(ringoSystemError, "mmap of shm segment %s (%zu bytes) failed: %s", name, total, strerror(errno));
}

/* The name must be one this transport could have made: no path tricks, bounded length. */
int ringo_segment_valid_name(const char* name) {
  const char* end = memchr(name, '\0', RINGO_SEGMENT_NAME_BYTES);
  size_t prefix = strlen(RINGO_SEGMENT_PREFIX);
  if (end == NULL || (size_t)(end - name) <= prefix || strncmp(name, RINGO_SEGMENT_PREFIX, prefix) != 0) return 0;
  for (const char* c = name + prefix; c < end; c++)
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') || *c == '-')) return 0;
  return 1;
}

/* The object behind a name must be ours, private and exactly the size the sizes imply. */
ringoResult_t ringo_segment_check_object(const char* name, int fd, size_t total) {
  struct stat st;
  SYS_CHECK(fstat(fd, &st), "fstat of shm segment");
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0 || (size_t)st.st_size != total)
    return ringo_fail(ringoRemoteError, "shm segment %s has owner %d, mode %o, size %lld; expected a file of "
                      "ours, 0600, %zu bytes", name, (int)st.st_uid, (unsigned)(st.st_mode & 0777),
                      (long long)st.st_size, total);
  return ringoSuccess;
}

ringoResult_t ringo_segment_attach(const char* name, size_t total, void** base) {
  *base = NULL;
  if (!ringo_segment_valid_name(name)) return ringo_fail(ringoRemoteError, "shm segment name is malformed");
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0 && errno == ENOENT)
    return ringo_fail(ringoRemoteError, "shm segment %s is gone: the process that made it exited or failed", name);
  if (fd < 0) return ringo_fail(ringoSystemError, "shm_open(%s) failed: %s", name, strerror(errno));
  ringoResult_t res = ringo_segment_check_object(name, fd, total);
  if (res == ringoSuccess) {
    void* p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) res = ringo_fail(ringoSystemError, "mmap of shm segment %s failed: %s", name, strerror(errno));
    else *base = p;
  }
  close(fd);
  return res;
}

