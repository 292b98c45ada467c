#include "state_flags.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "paths.h"
#include "sandboxd/instance_id.h"

ABSL_FLAG(std::string, socket, "",
          "Unix socket to serve on. Default: $XDG_RUNTIME_DIR/sandboxd/sandboxd.sock, else "
          "/run/sandboxd/sandboxd.sock for root, else /tmp/sandboxd-$UID/sandboxd.sock. "
          "The directory is created 0700 and the socket made 0600.");
ABSL_FLAG(std::string, state_dir, "",
          "Session records and runner sockets. Default: /var/lib/sandboxd for root, else "
          "$XDG_STATE_HOME/sandboxd (~/.local/state/sandboxd).");

namespace {

// --state_dir as given, or the default: claimed by this spelling (ClaimStateAndSocket
// checks every link and directory on its way), then named as it resolves (StateDirPath).
std::string StateDirGiven() {
  const std::string flag = absl::GetFlag(FLAGS_state_dir);
  return flag.empty() ? sandboxd::DefaultStateDir() : flag;
}

}  // namespace

std::string SocketPathFromFlags() {
  const std::string flag = absl::GetFlag(FLAGS_socket);
  return flag.empty() ? sandboxd::DefaultSocket() : flag;
}

absl::Status CheckSocketPath() {
  const std::string path = SocketPathFromFlags();
  // A longer one could not be bound, which would be found only once all else had started.
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("--socket is ", path.size(), " bytes long: a unix socket's path holds at most ",
                                                   sizeof(sockaddr_un::sun_path) - 1));
  }
  // Said on the log's lines (the state directory's name: CheckPodmanPath).
  return sandboxd::CheckPlainFlag("--socket", path);
}

std::string StateDirFromFlags() { return sandboxd::StateDirPath(StateDirGiven()); }

absl::StatusOr<sandboxd::DaemonLocks> ClaimState(sandboxd::ManagerOptions* options, const std::string& socket_path) {
  absl::StatusOr<sandboxd::DaemonLocks> locks = sandboxd::ClaimStateAndSocket(StateDirGiven(), socket_path);
  if (!locks.ok()) return locks.status();
  options->state_dir = StateDirFromFlags();
  if (absl::Status s = sandboxd::CheckPodmanPath(options->state_dir, "--state_dir"); !s.ok()) return s;
  return locks;
}

absl::StatusOr<sandboxd::DaemonLocks> PrepareSelfCheck(sandboxd::ManagerOptions* options) {
  // The state directory (0700) inside a directory of its own that others may cross but
  // not write: what sits beside the state directory (a root daemon's wasm directory,
  // which sessions' uids reach) is made there too, where nobody could have made it first,
  // and goes with it.
  char tmpl[] = "/tmp/sandboxd-self-check-XXXXXX";
  if (!mkdtemp(tmpl)) {
    return absl::FailedPreconditionError(
        absl::StrCat("self-check: cannot create a temporary directory: ", strerror(errno)));
  }
  options->state_dir = absl::StrCat(tmpl, "/state");
  if (chmod(tmpl, 0711) != 0 || mkdir(options->state_dir.c_str(), 0700) != 0) {
    const int err = errno;
    rmdir(tmpl);
    return absl::FailedPreconditionError(
        absl::StrCat("self-check: cannot prepare ", tmpl, ": ", strerror(err)));
  }
  options->pool_size = 0;
  options->js_pool_size = 0;
  options->pool_max = 0;
  options->js_pool_max = 0;
  options->background = false;
  return sandboxd::DaemonLocks{};
}

