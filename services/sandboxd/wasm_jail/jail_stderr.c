// --stderr-cap (wasm_jail.c): the program's stderr is a pipe, and this process stays
// behind as its reader, copying it to the inherited fd 2 (sandboxd's log file of the
// session) so that the file never holds more than the cap: past it, the file is cut to a
// line saying how much was dropped and the last kTail bytes. The program runs as the child,
// killed when this process dies (PR_SET_PDEATHSIG), and this process exits as it did
// (its exit code, or 128 + its signal), once its stderr is drained.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail.h"

enum { kChunk = 4096, kTail = 16384, kMarker = 96 };

static void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a full disk loses the log, not the session
    p += w;
    n -= (size_t)w;
  }
}

// The relay allows itself only what it calls: reading the pipe, writing and cutting the
// log, waiting for the program.
static void confine_relay(void) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (ctx == NULL) jail_fail("stderr", "seccomp_init failed");
  static const int kCalls[] = {SCMP_SYS(read),  SCMP_SYS(write),      SCMP_SYS(ftruncate),
                               SCMP_SYS(lseek), SCMP_SYS(wait4),      SCMP_SYS(exit_group),
                               SCMP_SYS(exit),  SCMP_SYS(rt_sigreturn), SCMP_SYS(restart_syscall)};
  for (size_t i = 0; i < sizeof(kCalls) / sizeof(kCalls[0]); i++) {
    if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, kCalls[i], 0) != 0)
      jail_fail("stderr", "seccomp rule %zu", i);
  }
  if (seccomp_load(ctx) != 0) jail_fail("stderr", "seccomp_load failed");
  seccomp_release(ctx);
}

// Copies fd 0 to fd 2 within `cap` bytes of fd 2 (which holds `size` already) until end of file.
static void relay(uint64_t cap, uint64_t size) {
  char buf[kChunk], tail[kTail], marker[kMarker];
  size_t tail_len = 0;
  uint64_t total = 0;
  for (;;) {
    ssize_t n = read(0, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    // A descriptor that cannot be cut (a pipe, a terminal) holds nothing on disk: copied as is.
    if (size + (uint64_t)n > cap && ftruncate(2, 0) == 0) {
      int m = snprintf(marker, sizeof(marker),
                       "[wasm-jail: stderr over %llu bytes, %llu earlier bytes dropped]\n",
                       (unsigned long long)cap, (unsigned long long)(total - tail_len));
      lseek(2, 0, SEEK_SET);
      write_all(2, marker, (size_t)m);
      write_all(2, tail, tail_len);
      size = (uint64_t)m + tail_len;
    }
    write_all(2, buf, (size_t)n);
    size += (uint64_t)n;
    total += (uint64_t)n;
    size_t keep = tail_len < kTail - (size_t)n ? tail_len : kTail - (size_t)n;
    memmove(tail, tail + tail_len - keep, keep);
    memcpy(tail + keep, buf, (size_t)n);
    tail_len = keep + (size_t)n;
  }
}

void jail_cap_stderr(uint64_t cap) {
  if (cap < kTail + kChunk + kMarker)
    jail_fail("stderr", "a cap of %llu bytes is below %d", (unsigned long long)cap,
              kTail + kChunk + kMarker);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) jail_fail("stderr", "pipe: %s", strerror(errno));
  const pid_t parent = getpid();
  const off_t size = lseek(2, 0, SEEK_END);
  const pid_t child = fork();
  if (child < 0) jail_fail("stderr", "fork: %s", strerror(errno));
  if (child == 0) {
    if (dup2(fds[1], 2) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(126);
    close(fds[0]);
    close(fds[1]);
    return;  // the program's side: on to the other layers and the execve
  }
  if (dup2(fds[0], 0) < 0) jail_fail("stderr", "dup2: %s", strerror(errno));
  syscall(SYS_close_range, 3, ~0U, 0);  // the runner's socket and environment are the child's
  signal(SIGPIPE, SIG_IGN);  // a reader of fd 2 that went away must not end the program
  confine_relay();
  relay(cap, size < 0 ? 0 : (uint64_t)size);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}
