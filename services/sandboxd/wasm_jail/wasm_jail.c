// sandboxd-wasm-jail: the unprivileged layers of the wasm tier (docs/wasm-tier.md), applied
// to this process and kept across the execve of the session's program (Node):
//
//   sandboxd-wasm-jail [--seccomp [--no-chmod]] [--landlock] [--read PATH]... [--write PATH]...
//                      [--rlimit-data BYTES] [--rlimit-nofile N] [--rlimit-nproc N]
//                      [--rlimit-fsize BYTES] [--keep-fd N]... [--stderr-cap BYTES]
//                      [--env KEY=VALUE]...
//                      -- PROGRAM ARGS...
//   sandboxd-wasm-jail --probe     one JSON object on stdout: which layers this kernel applies
//
// Order: rlimits (core size always 0), PR_SET_NO_NEW_PRIVS, every fd > 2 closed but the
// --keep-fd ones, Landlock (jail_landlock.c), with --stderr-cap a fork that leaves this
// process as the reader of the program's stderr (jail_stderr.c), the seccomp allowlist
// (jail_seccomp.c), one line on stderr naming what is in force, then execve(PROGRAM) with
// an environment of exactly the --env entries (none: an empty one).
// --no-chmod (with --seccomp): no mode changes at all, and a umask of 0, so that a file is
// created with the mode its creator asks for instead of being chmodded to it afterwards.
// Exit 2: a bad command line (nothing applied, nothing run). Exit 126: a requested layer
// cannot be applied ("wasm-jail: cannot apply <layer>: <reason>"). Exit 127: the execve
// itself failed.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail.h"

enum { kMaxRead = 64, kMaxWrite = 16, kMaxKeep = 16, kMaxEnv = 8 };

struct options {
  int seccomp, no_chmod, landlock, probe;
  const char* read[kMaxRead];
  int nread;
  const char* write[kMaxWrite];
  int nwrite;
  int keep[kMaxKeep];
  int nkeep;
  char* env[kMaxEnv + 1];  // NULL-terminated
  int nenv;
  // 0: not given (the inherited limit stays).
  rlim_t data, fsize, nofile, nproc;
  rlim_t stderr_cap;  // 0: stderr stays the inherited fd 2
  char** program;
};

static void usage(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fputs("wasm-jail: ", stderr);
  vfprintf(stderr, format, args);
  va_end(args);
  fputs("\nusage: sandboxd-wasm-jail [--seccomp [--no-chmod]] [--landlock] [--read PATH]... [--write PATH]...\n"
        "         [--rlimit-data BYTES] [--rlimit-nofile N] [--rlimit-nproc N]\n"
        "         [--rlimit-fsize BYTES] [--keep-fd N]... [--stderr-cap BYTES]\n"
        "         [--env KEY=VALUE]... -- PROGRAM ARGS...\n"
        "       sandboxd-wasm-jail --probe\n",
        stderr);
  exit(2);
}

// A decimal number in [min, max]: digits only (no sign, no blank, no suffix).
static uint64_t parse_number(const char* flag, const char* text, uint64_t min, uint64_t max) {
  size_t n = strlen(text);
  if (n == 0 || n > 20 || strspn(text, "0123456789") != n)
    usage("%s %s: not a decimal number", flag, text);
  errno = 0;
  unsigned long long value = strtoull(text, NULL, 10);
  if (errno == ERANGE || value < min || value > max)
    usage("%s %s: out of range [%llu, %llu]", flag, text, (unsigned long long)min,
          (unsigned long long)max);
  return value;
}

// An absolute path that exists now (a rule for a missing path cannot be made).
static const char* check_path(const char* flag, const char* path) {
  struct stat st;
  if (path[0] != '/') usage("%s %s: not an absolute path", flag, path);
  if (stat(path, &st) != 0) usage("%s %s: %s", flag, path, strerror(errno));
  return path;
}

static void set_once(const char* flag, rlim_t* slot, const char* text, uint64_t max) {
  if (*slot != 0) usage("%s given twice", flag);
  *slot = parse_number(flag, text, 1, max);
}

static void add_keep_fd(struct options* o, const char* text) {
  if (o->nkeep == kMaxKeep) usage("too many --keep-fd (at most %d)", kMaxKeep);
  int fd = (int)parse_number("--keep-fd", text, 3, INT_MAX);
  if (fcntl(fd, F_GETFD) < 0) usage("--keep-fd %d: %s", fd, strerror(errno));
  o->keep[o->nkeep++] = fd;
}

static void add_env(struct options* o, char* entry) {
  if (o->nenv == kMaxEnv) usage("too many --env (at most %d)", kMaxEnv);
  const char* eq = strchr(entry, '=');
  if (eq == NULL || eq == entry) usage("--env %s: not KEY=VALUE", entry);
  o->env[o->nenv++] = entry;
}

// One option (with its value, if it takes one) at argv[i]; returns how many were used.
static int parse_option(struct options* o, int argc, char** argv, int i) {
  const char* a = argv[i];
  if (!strcmp(a, "--seccomp")) return o->seccomp = 1;
  if (!strcmp(a, "--no-chmod")) return o->no_chmod = 1;
  if (!strcmp(a, "--landlock")) return o->landlock = 1;
  if (!strcmp(a, "--probe")) return o->probe = 1;
  if (strncmp(a, "--", 2) != 0) usage("%s: not an option (PROGRAM comes after --)", a);
  if (i + 1 >= argc) usage("%s: unknown option or missing value", a);
  const char* v = argv[i + 1];
  if (!strcmp(a, "--read")) {
    if (o->nread == kMaxRead) usage("too many --read (at most %d)", kMaxRead);
    o->read[o->nread++] = check_path(a, v);
  } else if (!strcmp(a, "--write")) {
    if (o->nwrite == kMaxWrite) usage("too many --write (at most %d)", kMaxWrite);
    o->write[o->nwrite++] = check_path(a, v);
  } else if (!strcmp(a, "--rlimit-data")) {
    set_once(a, &o->data, v, RLIM_INFINITY - 1);
  } else if (!strcmp(a, "--rlimit-fsize")) {
    set_once(a, &o->fsize, v, RLIM_INFINITY - 1);
  } else if (!strcmp(a, "--rlimit-nofile")) {
    set_once(a, &o->nofile, v, 1U << 30);
  } else if (!strcmp(a, "--rlimit-nproc")) {
    set_once(a, &o->nproc, v, 1U << 22);
  } else if (!strcmp(a, "--stderr-cap")) {
    set_once(a, &o->stderr_cap, v, 1ULL << 40);
  } else if (!strcmp(a, "--keep-fd")) {
    add_keep_fd(o, v);
  } else if (!strcmp(a, "--env")) {
    add_env(o, argv[i + 1]);
  } else {
    usage("%s: unknown option", a);
  }
  return 2;
}

static void parse_args(struct options* o, int argc, char** argv) {
  int i = 1;
  while (i < argc && strcmp(argv[i], "--") != 0) i += parse_option(o, argc, argv, i);
  if (o->probe) {
    if (argc != 2) usage("--probe takes no other argument");
    return;
  }
  if (o->no_chmod && !o->seccomp) usage("--no-chmod needs --seccomp");
  if (i >= argc) usage("missing -- before PROGRAM");
  if (i + 1 >= argc) usage("missing PROGRAM after --");
  o->program = argv + i + 1;
  // No PATH search: the program gets only the --env entries, and this lookup none.
  if (strchr(o->program[0], '/') == NULL) usage("PROGRAM %s: not a path", o->program[0]);
  if (access(o->program[0], X_OK) != 0) usage("PROGRAM %s: %s", o->program[0], strerror(errno));
}

static void set_limit(int resource, const char* name, rlim_t value) {
  struct rlimit r = {value, value};
  if (setrlimit(resource, &r) != 0)
    jail_fail("rlimits", "%s %llu: %s", name, (unsigned long long)value, strerror(errno));
}

// Applies the limits given (and core size 0) and describes them: "data:N,...,core:0".
static void apply_rlimits(const struct options* o, char* report, size_t n) {
  static const struct {
    int resource;
    const char *name, *label;
    size_t offset;
  } kLimits[] = {
      {RLIMIT_DATA, "RLIMIT_DATA", "data", offsetof(struct options, data)},
      {RLIMIT_FSIZE, "RLIMIT_FSIZE", "fsize", offsetof(struct options, fsize)},
      {RLIMIT_NOFILE, "RLIMIT_NOFILE", "nofile", offsetof(struct options, nofile)},
      {RLIMIT_NPROC, "RLIMIT_NPROC", "nproc", offsetof(struct options, nproc)},
  };
  size_t used = 0;
  report[0] = '\0';
  for (size_t i = 0; i < sizeof(kLimits) / sizeof(kLimits[0]); i++) {
    rlim_t value = *(const rlim_t*)((const char*)o + kLimits[i].offset);
    if (value == 0) continue;
    set_limit(kLimits[i].resource, kLimits[i].name, value);
    used += snprintf(report + used, n - used, "%s:%llu,", kLimits[i].label,
                     (unsigned long long)value);
  }
  set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0);
  snprintf(report + used, n - used, "core:0");
}

static int is_kept(const struct options* o, int fd) {
  for (int i = 0; i < o->nkeep; i++)
    if (o->keep[i] == fd) return 1;
  return 0;
}

// Without close_range (Linux < 5.9): the fds /proc lists.
static void close_fds_by_proc(const struct options* o) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == NULL) jail_fail("fds", "close_range unsupported and /proc/self/fd: %s", strerror(errno));
  int fds[1024], n = 0;
  struct dirent* e;
  while ((e = readdir(dir)) != NULL && n < 1024) {
    int fd = atoi(e->d_name);
    if (fd > 2 && fd != dirfd(dir) && !is_kept(o, fd)) fds[n++] = fd;
  }
  closedir(dir);
  for (int i = 0; i < n; i++) close(fds[i]);
  if (n == 1024) close_fds_by_proc(o);  // more than one batch
}

// Closes every fd above 2 but the kept ones, which lose FD_CLOEXEC (kept means inherited).
static void close_fds(const struct options* o) {
  int keep[kMaxKeep], n = 0;
  for (int i = 0; i < o->nkeep; i++) {  // sorted, each once
    int fd = o->keep[i], j = n;
    if (fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) & ~FD_CLOEXEC) != 0)
      jail_fail("fds", "--keep-fd %d: %s", fd, strerror(errno));
    for (int k = 0; k < n; k++) j = keep[k] == fd ? -1 : j;
    if (j < 0) continue;
    while (j > 0 && keep[j - 1] > fd) keep[j] = keep[j - 1], j--;
    keep[j] = fd;
    n++;
  }
  unsigned first = 3;
  for (int i = 0; i <= n; i++) {
    unsigned last = i < n ? (unsigned)keep[i] - 1 : ~0U;
    if (last >= first && syscall(SYS_close_range, first, last, 0) != 0) {
      if (errno != ENOSYS) jail_fail("fds", "close_range: %s", strerror(errno));
      close_fds_by_proc(o);
      return;
    }
    if (i < n) first = (unsigned)keep[i] + 1;
  }
}

static void json_string(const char* s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

// Runs `trial` in a child (so this process stays unconfined): 0 when it succeeded, else -1
// and the reason it wrote to the pipe (its stderr).
static int run_trial(void (*trial)(int), char* reason, size_t n) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return snprintf(reason, n, "pipe: %s", strerror(errno)), -1;
  pid_t pid = fork();
  if (pid == 0) {
    trial(fds[1]);  // exits 126 through jail_fail when the layer cannot be applied
    _exit(0);
  }
  close(fds[1]);
  ssize_t got = pid < 0 ? 0 : read(fds[0], reason, n - 1);
  close(fds[0]);
  reason[got > 0 ? got : 0] = '\0';
  reason[strcspn(reason, "\n")] = '\0';
  const char* prefix = strstr(reason, ": cannot apply ");
  if (prefix != NULL && (prefix = strstr(prefix + 15, ": ")) != NULL)
    memmove(reason, prefix + 2, strlen(prefix + 2) + 1);
  if (pid < 0) return snprintf(reason, n, "fork: %s", strerror(errno)), -1;
  int status = 0;
  if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (reason[0] == '\0') snprintf(reason, n, "trial child failed (wait status %d)", status);
  return -1;
}

static int probe(void) {
  char seccomp_reason[512], landlock_reason[512], detail[640];
  int seccomp_ok = run_trial(jail_seccomp_trial, seccomp_reason, sizeof(seccomp_reason)) == 0;
  int abi = jail_landlock_abi();
  int landlock_ok = run_trial(jail_landlock_trial, landlock_reason, sizeof(landlock_reason)) == 0;
  printf("{\"seccomp\":{\"available\":%s,\"detail\":", seccomp_ok ? "true" : "false");
  if (seccomp_ok) jail_seccomp_describe(detail, sizeof(detail));
  else snprintf(detail, sizeof(detail), "unavailable: %s", seccomp_reason);
  json_string(detail);
  printf("},\"landlock\":{\"available\":%s,\"abi\":%d,\"detail\":", landlock_ok ? "true" : "false",
         landlock_ok ? abi : 0);
  if (landlock_ok) jail_landlock_describe(abi, ", ", " ", detail, sizeof(detail));
  else snprintf(detail, sizeof(detail), "unavailable: %s", landlock_reason);
  json_string(detail);
  printf("}}\n");
  return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  struct options o;
  memset(&o, 0, sizeof(o));
  parse_args(&o, argc, argv);
  if (o.probe) return probe();
  char limits[256], landlock[128] = "landlock=off";
  apply_rlimits(&o, limits, sizeof(limits));
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    jail_fail("no_new_privs", "prctl: %s", strerror(errno));
  close_fds(&o);
  if (o.landlock) {
    int abi = jail_apply_landlock(o.read, o.nread, o.write, o.nwrite);
    jail_landlock_describe(abi, ",", "", landlock + 9, sizeof(landlock) - 9);
  }
  if (o.stderr_cap != 0) jail_cap_stderr(o.stderr_cap);
  // The filter lets exactly this execve through: its path pointer is o.program[0].
  if (o.no_chmod) umask(0);
  if (o.seccomp) jail_apply_seccomp(o.program[0], !o.no_chmod);
  fprintf(stderr, "wasm-jail: layers: seccomp=%s %s rlimits=%s\n",
          o.seccomp ? (o.no_chmod ? "on,no-chmod" : "on") : "off", landlock, limits);
  execve(o.program[0], o.program, o.env);
  fprintf(stderr, "wasm-jail: cannot exec %s: %s\n", o.program[0], strerror(errno));
  return 127;
}
