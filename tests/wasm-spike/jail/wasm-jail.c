// wasm-jail: the unprivileged layers of the wasm tier, applied to this process and kept
// across the execve of the session's Node:
//
//   wasm-jail [--rlimit-as BYTES] [--rlimit-data BYTES] [--rlimit-nofile N] [--rlimit-nproc N]
//             [--landlock] [--ro PATH]... [--rw PATH]...
//             [--seccomp] [--seccomp-mode allow|deny] -- PROGRAM ARGS...
//
// Order: rlimits (core size always 0), PR_SET_NO_NEW_PRIVS, Landlock (filesystem rules,
// TCP bind/connect denied from ABI 4, signal and abstract-socket scoping from ABI 6), then
// the seccomp filter, then execve(PROGRAM) - the only execve the filter lets through
// (its path pointer is compared). One line on stderr says which layers are in force.
// Exit 126 when a layer that was asked for cannot be applied.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

// The ruleset attribute of ABI 6 (older headers lack the later fields).
struct ruleset_attr_v6 {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

static void die(const char* what) {
  fprintf(stderr, "wasm-jail: %s: %s\n", what, strerror(errno));
  exit(126);
}

static int landlock_abi(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : (int)abi;
}

// Filesystem rights per ABI: 1 the base 13, 2 REFER, 3 TRUNCATE, 5 IOCTL_DEV.
static uint64_t fs_rights(int abi) {
  uint64_t r = (1ULL << 13) - 1;
  if (abi >= 2) r |= 1ULL << 13;
  if (abi >= 3) r |= 1ULL << 14;
  if (abi >= 5) r |= 1ULL << 15;
  return r;
}

static void landlock_add(int ruleset, const char* path, uint64_t access) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) die(path);
  struct landlock_path_beneath_attr attr = {.allowed_access = access, .parent_fd = fd};
  if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) != 0) {
    // A file (not a directory) takes only the file rights.
    attr.allowed_access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                           LANDLOCK_ACCESS_FS_WRITE_FILE | (1ULL << 14) | (1ULL << 15);
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) != 0)
      die(path);
  }
  close(fd);
}

static int apply_landlock(char** ro, int nro, char** rw, int nrw, char* report, size_t n) {
  int abi = landlock_abi();
  if (abi < 1) {
    errno = EOPNOTSUPP;
    die("landlock");
  }
  struct ruleset_attr_v6 attr = {.handled_access_fs = fs_rights(abi)};
  size_t size = sizeof(uint64_t);
  if (abi >= 4) {
    attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
    size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
    size = 3 * sizeof(uint64_t);
  }
  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (ruleset < 0) die("landlock_create_ruleset");
  uint64_t read = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                  LANDLOCK_ACCESS_FS_READ_DIR;
  for (int i = 0; i < nro; i++) landlock_add(ruleset, ro[i], read);
  for (int i = 0; i < nrw; i++) landlock_add(ruleset, rw[i], fs_rights(abi));
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) die("landlock_restrict_self");
  close(ruleset);
  snprintf(report, n, "landlock=abi%d(fs%s%s)", abi, abi >= 4 ? ",tcp" : "",
           abi >= 6 ? ",signal,abstract-unix" : "");
  return abi;
}

// What Node 22-26 and Pyodide were seen to call (strace -f of experiments 1 and 2),
// plus what a runner needs for its inherited socket, its workspace and its threads.
// Conditional ones (clone, kill, tgkill, ioctl, execve) are added below. listen and accept
// serve only an inherited listening socket: socket() and bind() stay refused.
static const char* kAllowed[] = {
    "read", "write", "readv", "writev", "pread64", "pwrite64", "lseek", "close", "openat",
    "open", "statx", "newfstatat", "fstat", "lstat", "stat", "fstatfs", "statfs", "readlink",
    "readlinkat", "getcwd", "getdents64", "access", "faccessat", "faccessat2", "fcntl", "dup",
    "dup2", "dup3", "pipe2", "mkdirat", "mkdir", "unlinkat", "unlink", "rmdir", "renameat",
    "renameat2", "rename", "ftruncate", "fsync", "fdatasync", "fchmod", "fchmodat", "utimensat",
    "futimesat", "mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "msync", "mincore",
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq", "set_tid_address",
    "exit", "exit_group", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend",
    "rt_sigtimedwait", "sigaltstack", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
    "epoll_pwait2", "eventfd2", "poll", "ppoll", "select", "pselect6", "timerfd_create",
    "timerfd_settime", "timerfd_gettime", "clock_gettime", "clock_getres", "clock_nanosleep",
    "nanosleep", "gettimeofday", "sched_yield", "sched_getaffinity", "sched_getscheduler",
    "sched_getparam", "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid",
    "getgroups", "getresuid", "getresgid", "capget", "getrlimit", "prlimit64", "getrusage",
    "sysinfo", "uname", "getrandom", "arch_prctl", "prctl", "membarrier", "sendmsg", "recvmsg",
    "sendto", "recvfrom", "shutdown", "getsockopt", "setsockopt", "getsockname", "getpeername",
    "accept4", "accept", "listen", "memfd_create", "times", "getpriority", "setpriority",
};

static void rule(scmp_filter_ctx ctx, uint32_t action, const char* name, unsigned n,
                 struct scmp_arg_cmp* cmp) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) return;  // not on this architecture
  int rc = seccomp_rule_add_array(ctx, action, nr, n, cmp);
  if (rc != 0) {
    errno = -rc;
    fprintf(stderr, "wasm-jail: seccomp rule %s: %s\n", name, strerror(errno));
    exit(126);
  }
}

#define NS_FLAGS                                                                         \
  (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
   CLONE_NEWCGROUP | CLONE_NEWTIME)

// allow mode: default EPERM, kAllowed plus the conditional rules. deny mode: default allow,
// the refusals only (for measuring what the allow list costs).
static void apply_seccomp(int allow_mode, const char* exec_path) {
  scmp_filter_ctx ctx = seccomp_init(allow_mode ? SCMP_ACT_ERRNO(EPERM) : SCMP_ACT_ALLOW);
  if (ctx == NULL) die("seccomp_init");
  if (allow_mode)
    for (size_t i = 0; i < sizeof(kAllowed) / sizeof(kAllowed[0]); i++)
      rule(ctx, SCMP_ACT_ALLOW, kAllowed[i], 0, NULL);
  const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
  pid_t self = getpid();
  // Threads only: clone with CLONE_THREAD and no namespace flag. clone3 hides its flags in
  // memory, so it answers ENOSYS and glibc falls back to clone.
  struct scmp_arg_cmp thread = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD | NS_FLAGS, CLONE_THREAD);
  rule(ctx, SCMP_ACT_ALLOW, "clone", 1, &thread);
  if (!allow_mode) {
    struct scmp_arg_cmp process = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0);
    rule(ctx, deny, "clone", 1, &process);
    struct scmp_arg_cmp ns = SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS | CLONE_THREAD,
                                     CLONE_THREAD | CLONE_NEWUSER);
    rule(ctx, deny, "clone", 1, &ns);
    static const char* kDenied[] = {"fork", "vfork", "execveat", "socket", "socketpair",
        "connect", "bind", "ptrace", "process_vm_readv", "process_vm_writev",
        "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "bpf",
        "perf_event_open", "userfaultfd", "io_uring_enter", "io_uring_register", "keyctl",
        "add_key", "request_key", "kexec_load", "init_module", "finit_module",
        "delete_module", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "kcmp",
        "open_by_handle_at", "name_to_handle_at", "personality", "mknodat", "mknod",
        "fanotify_init", "inotify_init1", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "syslog",
        "setuid", "setgid", "setreuid", "setresuid"};
    for (size_t i = 0; i < sizeof(kDenied) / sizeof(kDenied[0]); i++)
      rule(ctx, deny, kDenied[i], 0, NULL);
  }
  rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
  rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "io_uring_setup", 0, NULL);  // its ops bypass seccomp
  // Signals to itself only (its threads share the pid).
  struct scmp_arg_cmp to_self = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)self);
  rule(ctx, SCMP_ACT_ALLOW, "kill", 1, &to_self);
  rule(ctx, SCMP_ACT_ALLOW, "tgkill", 1, &to_self);
  if (!allow_mode) {
    struct scmp_arg_cmp other = SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self);
    rule(ctx, deny, "kill", 1, &other);
    rule(ctx, deny, "tgkill", 1, &other);
    rule(ctx, deny, "tkill", 0, NULL);
  }
  // ioctl: no TIOCSTI (typing into a terminal).
  struct scmp_arg_cmp not_sti = SCMP_A1(SCMP_CMP_NE, TIOCSTI);
  rule(ctx, SCMP_ACT_ALLOW, "ioctl", 1, &not_sti);
  if (!allow_mode) {
    struct scmp_arg_cmp sti = SCMP_A1(SCMP_CMP_EQ, TIOCSTI);
    rule(ctx, deny, "ioctl", 1, &sti);
  }
  // execve: the one of this launcher (the pointer to its path), nothing after.
  struct scmp_arg_cmp ours = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)(uintptr_t)exec_path);
  rule(ctx, SCMP_ACT_ALLOW, "execve", 1, &ours);
  if (!allow_mode) {
    struct scmp_arg_cmp other = SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)(uintptr_t)exec_path);
    rule(ctx, deny, "execve", 1, &other);
  }
  int rc = seccomp_load(ctx);
  if (rc != 0) {
    errno = -rc;
    die("seccomp_load");
  }
  seccomp_release(ctx);
}

static void set_limit(int resource, rlim_t value, const char* name) {
  struct rlimit r = {value, value};
  if (setrlimit(resource, &r) != 0) die(name);
}

int main(int argc, char** argv) {
  char* ro[64];
  char* rw[16];
  int nro = 0, nrw = 0, landlock = 0, seccomp = 0, allow_mode = 1, i = 1;
  char report[512] = "";
  char layers[256] = "";
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--landlock")) landlock = 1;
    else if (!strcmp(a, "--seccomp")) seccomp = 1;
    else if (v && !strcmp(a, "--seccomp-mode")) allow_mode = strcmp(argv[++i], "deny") != 0;
    else if (v && !strcmp(a, "--ro") && nro < 64) ro[nro++] = argv[++i];
    else if (v && !strcmp(a, "--rw") && nrw < 16) rw[nrw++] = argv[++i];
    else if (v && !strcmp(a, "--rlimit-as")) set_limit(RLIMIT_AS, strtoull(argv[++i], 0, 10), a);
    else if (v && !strcmp(a, "--rlimit-data")) set_limit(RLIMIT_DATA, strtoull(argv[++i], 0, 10), a);
    else if (v && !strcmp(a, "--rlimit-nofile")) set_limit(RLIMIT_NOFILE, strtoull(argv[++i], 0, 10), a);
    else if (v && !strcmp(a, "--rlimit-nproc")) set_limit(RLIMIT_NPROC, strtoull(argv[++i], 0, 10), a);
    else {
      fprintf(stderr, "wasm-jail: unknown argument %s\n", a);
      return 2;
    }
  }
  if (i + 1 >= argc) {
    fprintf(stderr, "usage: wasm-jail [options] -- PROGRAM ARGS...\n");
    return 2;
  }
  char** program = argv + i + 1;
  set_limit(RLIMIT_CORE, 0, "--rlimit-core");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");
  if (landlock) apply_landlock(ro, nro, rw, nrw, report, sizeof(report));
  if (seccomp) apply_seccomp(allow_mode, program[0]);
  snprintf(layers, sizeof(layers), "%s%s%s", seccomp ? (allow_mode ? "seccomp=allowlist " :
           "seccomp=denylist ") : "", report, (!seccomp && !landlock) ? "none" : "");
  fprintf(stderr, "wasm-jail: layers %s\n", layers);
  execv(program[0], program);
  die(program[0]);
}
