// Runs a program to completion with an argv vector (never a shell string) and captures
// its output. Used for the podman CLI.
//
//   SubprocessOptions opts;
//   opts.timeout = absl::Seconds(30);
//   absl::StatusOr<SubprocessResult> r = RunSubprocess({"podman", "version"}, opts);
//   if (r.ok() && r->exit_code == 0) Use(r->stdout_text);
//
// The child gets only the environment in `opts.env` (the caller's environment when
// unset), stdin from /dev/null unless `stdin_text` is given, and no inherited file
// descriptors other than 0-2 (every descriptor this process opens is O_CLOEXEC). It leads
// a process group of its own, and a kill (timeout, cutoff) ends the group: podman's
// children that stay in it (the OCI runtime of an `rm`, say) go with it, and do not hold
// podman's locks on after it. A child that moves to a session of its own (conmon) stays.
// Safe for concurrent use.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sandboxd {

// When a stopping daemon stops waiting for the commands it runs. Until Cut, nothing; after
// Cut(at), a command under way ends by `at`, and one started later (the stopping daemon's
// own clean-up) by `at` + `after_cut`: however many run one after another, none outlasts
// that. After Close(at), a daemon that has nothing to clean up, one started later is not
// started at all. Safe for concurrent use.
class Cutoff {
 public:
  explicit Cutoff(absl::Duration after_cut = absl::Seconds(5)) : after_cut_(after_cut) {}

  // The earliest of the times given wins.
  void Cut(absl::Time at);
  // Cut(at), and no time after it for commands started later.
  void Close(absl::Time at);
  // When a command started at `began` ends: InfiniteFuture before Cut. A command whose end
  // is not after its start is not started (RunSubprocess).
  absl::Time For(absl::Time began) const;
  // Whether Cut or Close was called.
  bool cut() const { return at_unix_nanos_.load() != std::numeric_limits<int64_t>::max(); }

 private:
  const absl::Duration after_cut_;
  std::atomic<int64_t> at_unix_nanos_{std::numeric_limits<int64_t>::max()};
  std::atomic<bool> closed_{false};
};

struct SubprocessOptions {
  // Kill the child's process group (SIGKILL) when the child runs longer than this.
  absl::Duration timeout = absl::Seconds(60);
  // Full environment as KEY=VALUE; nullopt inherits ours.
  std::optional<std::vector<std::string>> env;
  std::string stdin_text;
  // Cap on captured bytes per stream; output past it is read and discarded (`truncated`).
  size_t max_output_bytes = 4 << 20;
  // Ends the command sooner once cut (SIGKILL too); null: only `timeout` does.
  const Cutoff* cutoff = nullptr;
  // How long past the cut a command already running may still take to end by itself
  // (one that a kill would leave half done).
  absl::Duration cut_grace = absl::ZeroDuration();
};

struct SubprocessResult {
  // Exit status, or 128+signal when the child died of a signal.
  int exit_code = 0;
  bool timed_out = false;
  // Killed by the cutoff rather than by its own timeout (timed_out is set too), or not
  // started because the cutoff had passed (exit_code -1 then).
  bool cut_off = false;
  std::string stdout_text;
  std::string stderr_text;
  bool truncated = false;  // a stream wrote more than max_output_bytes
};

// Returns NOT_FOUND when the program is not in PATH, INTERNAL when it cannot be
// started; a program that runs and fails is an OK result with exit_code != 0.
absl::StatusOr<SubprocessResult> RunSubprocess(const std::vector<std::string>& argv,
                                               const SubprocessOptions& opts = {});

// Finds `name` in $PATH (or returns it when it contains '/'); empty when absent.
std::string FindInPath(const std::string& name);

}  // namespace sandboxd
