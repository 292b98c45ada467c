// The processes of the wasm tier (wasm_runtime.h): starting one jailed and detached with
// its listening socket as fd 3, and ending it without hitting a reused pid.
//
//   SpawnRequest r;  r.argv = {...};  r.socket_dir = dir;
//   absl::StatusOr<SpawnedProcess> p = SpawnJailed(r);
//   KillChecked(p->pid, start_time);
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sandboxd/host_processes.h"  // KillChecked, SignalChecked

namespace sandboxd {

struct SpawnRequest {
  std::vector<std::string> argv;  // [bwrap ... --] wasm-jail ... -- node ...
  // Where runner.sock is bound and listening before the start (mode 0600, sandboxd's),
  // inherited as fd 3, and egress.sock the same way, inherited as fd 6: sandboxd's egress
  // proxy dials in there to the runner's relay (docs/egress.md), for every session, so that
  // a pooled one can get egress later.
  std::string socket_dir;
  // The process's stderr (the jail's layers line, Node's fatal errors), 0600.
  std::string log_path;
  // Run as this uid and the group of the same number, without supplementary groups
  // (sandboxd as root: a uid of the session's own).
  std::optional<uid_t> uid;
  // argv starts with bwrap: read the pid namespace's init from its --info-fd 4.
  bool bwrap = false;
  // The session's environment (KEY=VALUE each), on fd 5 as NUL-terminated entries up to
  // end of file: never in an argv, which every local user can read in /proc.
  std::vector<std::string> env;
};

struct SpawnedProcess {
  pid_t pid = 0;       // what sandboxd started; its own session and process group
  pid_t init_pid = 0;  // under bwrap: the sandbox's init, as the host sees it
};

// Starts the process detached: a new session, no parent-death signal, nothing of
// sandboxd's open but fds 0-2 (/dev/null, /dev/null, the log), 3 (the socket), 5 (the
// environment; 4 is bwrap's info) and 6 (egress.sock). Under
// bwrap, waits (at most 10 s) for its info to name the init's pid.
absl::StatusOr<SpawnedProcess> SpawnJailed(const SpawnRequest& request);

// Whether `pid` is the process that started at `start_time` and has not ended. A process
// that ended but is not reaped yet (a zombie: after a restart of sandboxd its parent is
// init, which reaps when it will) has ended.
bool ProcessRunning(pid_t pid, uint64_t start_time);

// Waits until `pid` (with that start time) has ended or is reaped, up to `limit`.
void WaitGone(pid_t pid, uint64_t start_time, absl::Duration limit);

}  // namespace sandboxd
