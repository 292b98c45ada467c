// The program the wasm jail tests run inside sandboxd-wasm-jail: one action per run, one
// line on stdout, "ok" or "errno <NAME>" (the action's failure). Linked statically, so
// under Landlock it needs only its own file among the --read paths.
//
//   jail_probe socket-inet | socket-unix | fork | read PATH | write PATH | chmod PATH [MODE]
//              | fchmodat PATH MODE | fchmod PATH MODE | create PATH MODE | create-open PATH MODE
//              | connect PORT (MODE in octal; chmod's default 600)
//              | kill PID | renice-user UID | renice-self | accept FD | exec PATH ARGS... | print TEXT | file PATH | fds | env
//              | flood BYTES (that many 'x' on stderr, then a line "LAST"; exits 3)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

static int result(int ok) {
  if (ok) printf("ok\n");
  else printf("errno %s\n", strerrorname_np(errno));
  return 0;
}

static int do_fork(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  if (pid > 0) waitpid(pid, NULL, 0);
  return result(pid > 0);
}

static int do_write(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int ok = fd >= 0 && write(fd, "x", 1) == 1;
  if (fd >= 0) close(fd);
  return result(ok);
}

// fchmod of PATH opened read-only, to MODE.
static int do_fchmod(const char* path, const char* mode) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return result(0);
  int ok = fchmod(fd, (mode_t)strtoul(mode, NULL, 8)) == 0;
  close(fd);
  return result(ok);
}

// A new file PATH made with MODE, through openat(2) or open(2).
static int do_create(const char* path, const char* mode, long call) {
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  const mode_t m = (mode_t)strtoul(mode, NULL, 8);
  long fd = call == SYS_open ? syscall(SYS_open, path, flags, m)
                             : syscall(SYS_openat, AT_FDCWD, path, flags, m);
  if (fd >= 0) close((int)fd);
  return result(fd >= 0);
}

static int do_connect(const char* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return result(0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return result(connect(fd, (struct sockaddr*)&addr, sizeof(addr)) == 0);
}

// One connection accepted on an inherited listening socket, answered "hello\n".
static int do_accept(int fd) {
  int conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
  int ok = conn >= 0 && write(conn, "hello\n", 6) == 6;
  if (conn >= 0) close(conn);
  return result(ok);
}

static int do_flood(unsigned long long bytes) {
  char buf[4096];
  memset(buf, 'x', sizeof(buf));
  while (bytes > 0) {
    ssize_t n = write(2, buf, bytes < sizeof(buf) ? (size_t)bytes : sizeof(buf));
    if (n <= 0) return 1;
    bytes -= (unsigned long long)n;
  }
  fputs("\nLAST\n", stderr);
  return 3;
}

// The whole file on stdout (for /proc/self/limits).
static int do_file(const char* path) {
  FILE* f = fopen(path, "re");
  if (f == NULL) return result(0);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) fwrite(buf, 1, n, stdout);
  fclose(f);
  return 0;
}

// The open fds, ascending, space-separated ("0 1 2 3").
static int do_fds(void) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == NULL) return result(0);
  int seen[1024] = {0};
  struct dirent* e;
  while ((e = readdir(dir)) != NULL) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] != '.' && fd != dirfd(dir) && fd < 1024) seen[fd] = 1;
  }
  closedir(dir);
  const char* sep = "";
  for (int fd = 0; fd < 1024; fd++)
    if (seen[fd]) printf("%s%d", sep, fd), sep = " ";
  printf("\n");
  return 0;
}

static int do_env(void) {
  int n = 0;
  for (char** e = environ; *e != NULL; e++, n++) printf("%s\n", *e);
  printf("%d variables\n", n);
  return 0;
}

int main(int argc, char** argv) {
  const char* a = argc > 1 ? argv[1] : "";
  const char* v = argc > 2 ? argv[2] : NULL;
  if (!strcmp(a, "socket-inet")) return result(socket(AF_INET, SOCK_STREAM, 0) >= 0);
  if (!strcmp(a, "socket-unix")) return result(socket(AF_UNIX, SOCK_STREAM, 0) >= 0);
  if (!strcmp(a, "fork")) return do_fork();
  if (!strcmp(a, "fds")) return do_fds();
  if (!strcmp(a, "env")) return do_env();
  if (!strcmp(a, "renice-self")) return result(setpriority(PRIO_PROCESS, 0, 1) == 0);
  if (v == NULL) {
    fprintf(stderr, "jail_probe: unknown action or missing argument: %s\n", a);
    return 2;
  }
  if (!strcmp(a, "read")) return result(open(v, O_RDONLY | O_CLOEXEC) >= 0);
  if (!strcmp(a, "write")) return do_write(v);
  if (!strcmp(a, "chmod"))
    return result(syscall(SYS_chmod, v, argc > 3 ? (mode_t)strtoul(argv[3], NULL, 8) : 0600) == 0);
  if (argc > 3 && !strcmp(a, "fchmodat"))
    return result(syscall(SYS_fchmodat, AT_FDCWD, v, (mode_t)strtoul(argv[3], NULL, 8)) == 0);
  if (!strcmp(a, "connect")) return do_connect(v);
  if (argc > 3 && !strcmp(a, "fchmod")) return do_fchmod(v, argv[3]);
  if (argc > 3 && !strcmp(a, "create")) return do_create(v, argv[3], SYS_openat);
  if (argc > 3 && !strcmp(a, "create-open")) return do_create(v, argv[3], SYS_open);
  if (!strcmp(a, "kill")) return result(kill(atoi(v), 0) == 0);
  if (!strcmp(a, "renice-user")) return result(setpriority(PRIO_USER, (id_t)atoi(v), 1) == 0);
  if (!strcmp(a, "accept")) return do_accept(atoi(v));
  if (!strcmp(a, "file")) return do_file(v);
  if (!strcmp(a, "print")) return printf("%s\n", v) < 0;
  if (!strcmp(a, "flood")) return do_flood(strtoull(v, NULL, 10));
  if (!strcmp(a, "exec")) {
    fflush(stdout);
    execv(v, argv + 2);
    return result(0);
  }
  fprintf(stderr, "jail_probe: unknown action %s\n", a);
  return 2;
}
