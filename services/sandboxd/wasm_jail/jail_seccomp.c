// The seccomp allowlist (libseccomp; needs no privilege after PR_SET_NO_NEW_PRIVS).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail.h"

// What Node 22-26 and Pyodide were seen to call (strace -f of tests/wasm-spike experiments
// 1 and 2), plus what a runner needs for its inherited socket, its workspace and its
// threads. Every other call answers EPERM: among them fork, vfork, execveat, socket,
// socketpair, connect, bind, ptrace, process_vm_*, unshare, setns, mount, bpf,
// perf_event_open, userfaultfd, keyctl. listen and accept serve only an inherited listening
// socket (socket() and bind() stay refused). The conditional ones (open, openat, chmod,
// fchmod, fchmodat, clone, kill, tgkill, ioctl, execve) are added by add_conditional_rules.
static const char* const kAllowed[] = {
    "read", "write", "readv", "writev", "pread64", "pwrite64", "lseek", "close", "statx", "newfstatat", "fstat", "lstat", "stat", "fstatfs", "statfs", "readlink",
    "readlinkat", "getcwd", "chdir", "fchdir", "getdents64", "access", "faccessat", "faccessat2", "fcntl", "dup",
    "dup2", "dup3", "pipe2", "mkdirat", "mkdir", "unlinkat", "unlink", "rmdir", "renameat",
    "renameat2", "rename", "ftruncate", "fsync", "fdatasync", "utimensat",
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
    "accept4", "accept", "listen", "memfd_create", "times", "getpriority",
};
enum { kAllowedCount = sizeof(kAllowed) / sizeof(kAllowed[0]) };

#define NS_FLAGS                                                                         \
  (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
   CLONE_NEWCGROUP | CLONE_NEWTIME)

static void rule(scmp_filter_ctx ctx, uint32_t action, const char* name, unsigned n,
                 const struct scmp_arg_cmp* cmp) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) return;  // not on this architecture
  int rc = seccomp_rule_add_array(ctx, action, nr, n, cmp);
  if (rc != 0) jail_fail("seccomp", "rule for %s: %s", name, strerror(-rc));
}

// No set-user-ID, set-group-ID or sticky bit on any file the program makes or changes: the
// workspace is a host directory, and a copy of Node made set-user-ID there would run as the
// session's uid for any local user who starts it. chmod, fchmod and fchmodat only without
// those bits, and files created with a mode without them (without O_CREAT or O_TMPFILE
// open ignores its mode). fchmodat2 stays refused (its flags could not be checked with it).
// With `allow_chmod` 0 no mode changes at all (the session shares sandboxd's uid and
// nothing but Landlock, which has no rule for modes, keeps it from that uid's files).
static void add_mode_rules(scmp_filter_ctx ctx, int allow_chmod) {
  const scmp_datum_t special = S_ISUID | S_ISGID | S_ISVTX;
  const scmp_datum_t creating = O_CREAT | __O_TMPFILE;
  if (allow_chmod) {
    const struct scmp_arg_cmp mode_1 = SCMP_A1(SCMP_CMP_MASKED_EQ, special, 0);
    const struct scmp_arg_cmp mode_2 = SCMP_A2(SCMP_CMP_MASKED_EQ, special, 0);
    rule(ctx, SCMP_ACT_ALLOW, "chmod", 1, &mode_1);
    rule(ctx, SCMP_ACT_ALLOW, "fchmod", 1, &mode_1);
    rule(ctx, SCMP_ACT_ALLOW, "fchmodat", 1, &mode_2);
  }
  const struct scmp_arg_cmp open_existing = SCMP_A1(SCMP_CMP_MASKED_EQ, creating, 0);
  const struct scmp_arg_cmp open_mode = SCMP_A2(SCMP_CMP_MASKED_EQ, special, 0);
  rule(ctx, SCMP_ACT_ALLOW, "open", 1, &open_existing);
  rule(ctx, SCMP_ACT_ALLOW, "open", 1, &open_mode);
  const struct scmp_arg_cmp openat_existing = SCMP_A2(SCMP_CMP_MASKED_EQ, creating, 0);
  const struct scmp_arg_cmp openat_mode = SCMP_A3(SCMP_CMP_MASKED_EQ, special, 0);
  rule(ctx, SCMP_ACT_ALLOW, "openat", 1, &openat_existing);
  rule(ctx, SCMP_ACT_ALLOW, "openat", 1, &openat_mode);
}

static void add_conditional_rules(scmp_filter_ctx ctx, const char* exec_path, int allow_chmod) {
  add_mode_rules(ctx, allow_chmod);
  // Threads only: clone with CLONE_THREAD and no namespace flag. clone3 hides its flags in
  // memory, so it answers ENOSYS and glibc falls back to clone.
  const struct scmp_arg_cmp thread =
      SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD | NS_FLAGS, CLONE_THREAD);
  rule(ctx, SCMP_ACT_ALLOW, "clone", 1, &thread);
  rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
  // io_uring's operations would bypass this filter; libuv falls back to its thread pool.
  rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "io_uring_setup", 0, NULL);
  // Signals to itself only (its threads share the pid; the pid is the one of the pid
  // namespace the jail runs in, which is also the one the program sees).
  const struct scmp_arg_cmp to_self = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid());
  rule(ctx, SCMP_ACT_ALLOW, "kill", 1, &to_self);
  rule(ctx, SCMP_ACT_ALLOW, "tgkill", 1, &to_self);
  // Priorities of itself only: PRIO_USER would renice every process of its uid, which
  // without bwrap is every session of the machine (and other services running as it).
  const struct scmp_arg_cmp own_priority[] = {SCMP_A0(SCMP_CMP_EQ, PRIO_PROCESS), SCMP_A1(SCMP_CMP_EQ, 0)};
  rule(ctx, SCMP_ACT_ALLOW, "setpriority", 2, own_priority);
  // ioctl: anything but TIOCSTI (typing into a terminal).
  const struct scmp_arg_cmp not_sti = SCMP_A1(SCMP_CMP_NE, TIOCSTI);
  rule(ctx, SCMP_ACT_ALLOW, "ioctl", 1, &not_sti);
  // execve: only with the address of the launcher's own PROGRAM string. A filter cannot
  // count, so this is what keeps the program from executing anything: its own execve
  // calls would have to pass this exact pointer value, an address in the launcher's
  // (ASLR-placed, then replaced) stack that the new image never learns.
  const struct scmp_arg_cmp ours = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)(uintptr_t)exec_path);
  rule(ctx, SCMP_ACT_ALLOW, "execve", 1, &ours);
}

static scmp_filter_ctx build_filter(const char* exec_path, int allow_chmod) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (ctx == NULL) jail_fail("seccomp", "seccomp_init failed");
  // System calls of another ABI (int 0x80, x32) end the process.
  int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc != 0) jail_fail("seccomp", "bad-arch action: %s", strerror(-rc));
  for (int i = 0; i < kAllowedCount; i++) rule(ctx, SCMP_ACT_ALLOW, kAllowed[i], 0, NULL);
  add_conditional_rules(ctx, exec_path, allow_chmod);
  return ctx;
}

void jail_apply_seccomp(const char* exec_path, int allow_chmod) {
  scmp_filter_ctx ctx = build_filter(exec_path, allow_chmod);
  int rc = seccomp_load(ctx);
  if (rc != 0) jail_fail("seccomp", "seccomp_load: %s", strerror(-rc));
  seccomp_release(ctx);
}

void jail_seccomp_describe(char* out, size_t n) {
  const struct scmp_version* v = seccomp_version();
  snprintf(out, n, "libseccomp %u.%u.%u (api %u), allowlist of %d system calls + clone "
           "(threads), kill/tgkill (own pid), ioctl (no TIOCSTI), open/openat/chmod/fchmod/fchmodat "
           "(no setuid/setgid/sticky modes), one execve",
           v->major, v->minor, v->micro, seccomp_api_get(), kAllowedCount);
}

void jail_seccomp_trial(int report_fd) {
  dup2(report_fd, STDERR_FILENO);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    jail_fail("seccomp", "no_new_privs: %s", strerror(errno));
  jail_apply_seccomp(NULL, 1);
}
