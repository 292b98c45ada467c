// Landlock through its raw system calls (no liblandlock): the best ABI the kernel has.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail.h"

// Debian 12's headers stop at ABI 3; the values are the kernel's uapi.
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif
#define FS_REFER (1ULL << 13)     // ABI 2
#define FS_TRUNCATE (1ULL << 14)  // ABI 3
#define FS_IOCTL_DEV (1ULL << 15) // ABI 5

// The ruleset attribute up to ABI 6 (older headers lack the later fields); the size passed
// to the kernel covers only the fields the running ABI knows.
struct ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

int jail_landlock_abi(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : (int)abi;
}

// Every filesystem right the ABI handles: ABI 1 has 13, then REFER, TRUNCATE, IOCTL_DEV.
static uint64_t fs_rights(int abi) {
  uint64_t r = (1ULL << 13) - 1;
  if (abi >= 2) r |= FS_REFER;
  if (abi >= 3) r |= FS_TRUNCATE;
  if (abi >= 5) r |= FS_IOCTL_DEV;
  return r;
}

// The rights a rule on a file (not a directory) may carry.
static const uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                    LANDLOCK_ACCESS_FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV;

static void add_path(int ruleset, const char* flag, const char* path, uint64_t access) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) jail_fail("landlock", "%s %s: %s", flag, path, strerror(errno));
  if (!S_ISDIR(st.st_mode)) access &= kFileRights;
  struct landlock_path_beneath_attr attr = {.allowed_access = access, .parent_fd = fd};
  if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) != 0)
    jail_fail("landlock", "rule for %s %s: %s", flag, path, strerror(errno));
  close(fd);
}

static int create_ruleset(int abi) {
  struct ruleset_attr attr = {.handled_access_fs = fs_rights(abi)};
  size_t size = sizeof(uint64_t);
  if (abi >= 4) {  // no rule allows any port: every TCP bind and connect is refused
    attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
    size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {  // signals and abstract unix sockets reach only this domain
    attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
    size = 3 * sizeof(uint64_t);
  }
  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (ruleset < 0) jail_fail("landlock", "landlock_create_ruleset (abi %d): %s", abi, strerror(errno));
  return ruleset;
}

static int restrict_self(const char* const* read, int nread, const char* const* write,
                         int nwrite) {
  long version = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (version < 1)
    jail_fail("landlock", "not available in this kernel (landlock_create_ruleset: %s)",
              version < 0 ? strerror(errno) : "ABI 0");
  int abi = (int)version;
  int ruleset = create_ruleset(abi);
  const uint64_t kRead = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                         LANDLOCK_ACCESS_FS_READ_DIR;
  for (int i = 0; i < nread; i++) add_path(ruleset, "--read", read[i], kRead);
  for (int i = 0; i < nwrite; i++) add_path(ruleset, "--write", write[i], fs_rights(abi));
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0)
    jail_fail("landlock", "landlock_restrict_self: %s", strerror(errno));
  close(ruleset);
  return abi;
}

int jail_apply_landlock(const char* const* read, int nread, const char* const* write,
                        int nwrite) {
  return restrict_self(read, nread, write, nwrite);
}

void jail_landlock_describe(int abi, const char* sep, const char* space, char* out, size_t n) {
  snprintf(out, n, "abi%d%s(fs%s%s%s%s%s%s)", abi, space, abi >= 4 ? sep : "",
           abi >= 4 ? "tcp" : "", abi >= 6 ? sep : "", abi >= 6 ? "signal" : "",
           abi >= 6 ? sep : "", abi >= 6 ? "abstract-unix" : "");
}

void jail_landlock_trial(int report_fd) {
  dup2(report_fd, STDERR_FILENO);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    jail_fail("landlock", "no_new_privs: %s", strerror(errno));
  restrict_self(NULL, 0, NULL, 0);
}
