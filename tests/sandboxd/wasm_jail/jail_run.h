// Runs a program (the built sandboxd-wasm-jail, bwrap) for the wasm jail tests: argv as given
// (argv[0] looked up in PATH),
// stdin from /dev/null, stdout and stderr captured, and chosen fds placed at chosen numbers
// (without FD_CLOEXEC) so the jail's handling of inherited fds can be seen.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace wasm_jail_test {

// A directory of its own under /tmp, removed with what is in it.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/wasm-jail-test.XXXXXX";
    path_ = mkdtemp(name);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct JailRun {
  int exit_code = -1;  // 128+signal when killed
  std::string out, err;
};

inline std::string ReadAll(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  return text;
}

// `fds` maps a target fd number (>= 3) to an open fd of this process.
inline JailRun RunProgram(const std::vector<std::string>& argv,
                          const std::map<int, int>& fds = {}) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    // Each source first moved above every target, so no dup2 overwrites a later source.
    std::map<int, int> moved;
    for (const auto& [target, source] : fds) moved[target] = fcntl(source, F_DUPFD_CLOEXEC, 100);
    for (const auto& [target, source] : moved) dup2(source, target);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(125);
  }
  close(out[1]);
  close(err[1]);
  JailRun run;
  // Both pipes are small here; stderr is read after stdout (outputs stay under 64 KiB).
  run.out = ReadAll(out[0]);
  run.err = ReadAll(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

}  // namespace wasm_jail_test
