// Where the daemon keeps its state and serves: --socket and --state_dir, claimed under the
// daemon's locks (sandboxd/instance_lock.h), or --self_check's private state directory.
// Helpers of main.cc, kept apart so main.cc holds the wiring.
//
//   options.state_dir = StateDirFromFlags();  // checked before anything is made
//   absl::StatusOr<sandboxd::DaemonLocks> locks = ClaimState(&options, SocketPathFromFlags());
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sandboxd/instance_lock.h"
#include "sandboxd/session_manager.h"

// --socket, else its default.
std::string SocketPathFromFlags();
// INVALID_ARGUMENT when that path would not show as itself on a line of the log, or is
// too long for a unix socket (107 bytes).
absl::Status CheckSocketPath();

// --state_dir (else its default) as StateDirPath names it now, for the checks made before
// anything is created; ClaimState names it again once it exists.
std::string StateDirFromFlags();

// Claims the state directory and the socket (ClaimStateAndSocket) through the spelling
// given, which makes what is missing of it: only then does every part of it resolve, so
// the name the daemon uses and hashes (InstanceId), set in `options`, is the same at each
// start however the path was spelt. The daemon's own state directory, not --self_check's.
absl::StatusOr<sandboxd::DaemonLocks> ClaimState(sandboxd::ManagerOptions* options, const std::string& socket_path);

// `--self_check` runs in a private state directory, with no pool and no background
// threads: one container, then gone. Chosen before anything is written into the state
// directory (the seccomp profile): the configured one may be a running daemon's, and
// --self_check takes no lock. The state directory is <private dir>/state, in a
// /tmp/sandboxd-self-check-* directory that holds everything the check makes.
absl::StatusOr<sandboxd::DaemonLocks> PrepareSelfCheck(sandboxd::ManagerOptions* options);
