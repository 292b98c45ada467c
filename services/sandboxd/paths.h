// Where sandboxd's files are by default: helpers of main.cc (the sandboxd binary), kept
// apart so main.cc holds the flags and their wiring. (The socket's preparation is
// sandboxd/instance_lock.h's, under the daemon's locks.)
//
//   std::string socket = flag.empty() ? DefaultSocket() : flag;
#pragma once

#include <string>

#include "absl/status/status.h"

namespace sandboxd {

// $XDG_RUNTIME_DIR/sandboxd/sandboxd.sock, else /run/sandboxd/sandboxd.sock for root, else
// /tmp/sandboxd-$UID/sandboxd.sock.
std::string DefaultSocket();
// /var/lib/sandboxd for root, else codemode::DefaultStateDir("sandboxd"):
// $XDG_STATE_HOME/sandboxd (~/.local/state/sandboxd), as mcp-gateway's.
std::string DefaultStateDir();
// The runner `file` next to the binary, else in ../share/sandboxd/, else `built` (the
// build tree's, for a binary copied elsewhere).
std::string DefaultRunner(const std::string& file, const std::string& built);
// OK when podman can be given `path` (the state directory, a runner) as it is: valid UTF-8
// (podman passes it on in JSON, where each invalid byte becomes U+FFFD: another path,
// which another user could make in /tmp), no comma (`--mount` would
// read the rest as options) and no control character. INVALID_ARGUMENT naming `flag`.
absl::Status CheckPodmanPath(const std::string& path, const std::string& flag);
// OK when `value` (a path or an address given to `flag`) is a plain line
// (codemode::IsPlainLine): messages and log lines show it as itself. INVALID_ARGUMENT
// naming `flag` and the value escaped.
absl::Status CheckPlainFlag(const std::string& flag, const std::string& value);

}  // namespace sandboxd
