#include "sandboxd/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/deadline.h"
#include "base/process.h"

extern char** environ;

namespace sandboxd {

using codemode::UniqueFd;

std::string FindInPath(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    return access(name.c_str(), X_OK) == 0 ? name : "";
  }
  const char* path = std::getenv("PATH");
  return codemode::FindInPath(name, path ? path : "");
}

void Cutoff::Cut(absl::Time at) {
  const int64_t nanos = absl::ToUnixNanos(at);
  int64_t now = at_unix_nanos_.load();
  while (nanos < now && !at_unix_nanos_.compare_exchange_weak(now, nanos)) {
  }
}

void Cutoff::Close(absl::Time at) {
  closed_.store(true);
  Cut(at);
}

absl::Time Cutoff::For(absl::Time began) const {
  const int64_t nanos = at_unix_nanos_.load();
  if (nanos == std::numeric_limits<int64_t>::max()) return absl::InfiniteFuture();
  const absl::Time at = absl::FromUnixNanos(nanos);
  if (began < at) return at;
  return closed_.load() ? at : at + after_cut_;
}

namespace {

// Writes all of `text` (small payloads only: podman import streams are not used here),
// then closes the pipe.
void FeedStdin(UniqueFd in, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = write(in.get(), text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
}

// Reads the child's stdout and stderr (each up to max_output_bytes) until the child exits
// and both close (or, once it exited, nothing more is readable), or the deadline or the
// cutoff passes (then kills it). Sets
// result.timed_out and cut_off; returns whether the child was reaped (its wait status in
// *status).
bool Collect(pid_t pid, const UniqueFd& out, const UniqueFd& err, const SubprocessOptions& opts,
             SubprocessResult& result, int* status) {
  // The command's own timeout runs on the monotonic clock (a step of the wall clock does
  // not end a podman call under way); the cutoff is a time of day, as the daemon's stop
  // sets it.
  const absl::Time began = absl::Now();
  const auto deadline = codemode::SteadyDeadline(opts.timeout);
  bool out_open = true, err_open = true;
  // A daemonising grandchild (conmon) may keep our pipes open: once the child is reaped,
  // what is readable is read (it may have written and exited after the last poll) and
  // EOF is not waited for.
  bool reaped = false;
  char buf[65536];
  // A child that closed both streams is still waited for with the deadline (poll() of no
  // descriptors sleeps).
  while (out_open || err_open || !reaped) {
    pollfd fds[2];
    int nfds = 0;
    if (out_open) fds[nfds++] = {out.get(), POLLIN, 0};
    if (err_open) fds[nfds++] = {err.get(), POLLIN, 0};
    const absl::Time cut = opts.cutoff ? opts.cutoff->For(began) + opts.cut_grace : absl::InfiniteFuture();
    const absl::Duration to_cut = cut - absl::Now();
    const absl::Duration left = std::min(absl::FromChrono(deadline - std::chrono::steady_clock::now()), to_cut);
    if (left <= absl::ZeroDuration()) {
      if (reaped) return true;  // a grandchild still writing: the child's pid is not ours to kill
      // Its group, and itself: a child that moved to another group is not in its own.
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      result.timed_out = true;
      result.cut_off = to_cut <= left;
      return false;
    }
    int timeout_ms = reaped ? 0 : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 50));
    int n = poll(fds, nfds, timeout_ms);
    if (n < 0 && errno != EINTR) return reaped;
    for (int i = 0; i < nfds && n > 0; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      bool is_out = fds[i].fd == out.get();
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        (is_out ? out_open : err_open) = false;
        continue;
      }
      std::string& dst = is_out ? result.stdout_text : result.stderr_text;
      const size_t room = opts.max_output_bytes - std::min(dst.size(), opts.max_output_bytes);
      if (static_cast<size_t>(got) > room) result.truncated = true;
      dst.append(buf, std::min<size_t>(static_cast<size_t>(got), room));
    }
    if (n != 0) continue;
    if (reaped) return true;
    reaped = codemode::WaitPid(pid, status, WNOHANG) == pid;
  }
  return reaped;
}

}  // namespace

absl::StatusOr<SubprocessResult> RunSubprocess(const std::vector<std::string>& argv,
                                               const SubprocessOptions& opts) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  std::string program = FindInPath(argv[0]);
  if (program.empty()) {
    return absl::NotFoundError(absl::StrCat("'", absl::CEscape(argv[0]), "' ",
                                            argv[0].find('/') == std::string::npos
                                                ? "not found in PATH"
                                                : "does not exist or is not executable"));
  }
  if (opts.cutoff) {
    const absl::Time now = absl::Now();
    if (opts.cutoff->For(now) <= now) {
      SubprocessResult result;
      result.exit_code = -1;
      result.timed_out = result.cut_off = true;
      return result;
    }
  }
  codemode::SpawnOptions spawn;
  spawn.argv = argv;
  spawn.argv[0] = program;
  if (opts.env) {
    spawn.env = *opts.env;
  } else {
    for (char** e = environ; *e != nullptr; ++e) spawn.env.push_back(*e);
  }
  spawn.stdin_mode = codemode::SpawnOptions::Stdio::kPipe;
  spawn.new_process_group = true;
  absl::StatusOr<codemode::Child> child = codemode::Spawn(spawn);
  if (!child.ok()) {
    return absl::InternalError(absl::StrCat("cannot start ", absl::CEscape(program), ": ", child.status().message()));
  }
  FeedStdin(std::move(child->stdin_fd), opts.stdin_text);
  SubprocessResult result;
  int status = 0;
  if (!Collect(child->pid, child->stdout_fd, child->stderr_fd, opts, result, &status)) {
    codemode::WaitPid(child->pid, &status);
  }
  result.exit_code = codemode::DecodeWaitStatus(status);
  return result;
}

}  // namespace sandboxd
