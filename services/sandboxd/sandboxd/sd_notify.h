// Minimal sd_notify(3): tells systemd (Type=notify) that the daemon is ready or stopping,
// without linking libsystemd. A no-op when NOTIFY_SOCKET is unset.
//
//   SystemdNotifier notifier;   // at start-up, before any child process is spawned
//   notifier.Notify("READY=1\nSTATUS=serving");
//
// The constructor removes NOTIFY_SOCKET from our environment: podman and conmon would
// otherwise inherit it and report the container's pid as our MAINPID.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace sandboxd {

class SystemdNotifier {
 public:
  SystemdNotifier();
  // Sends `state` to the socket (path or abstract "@name"). OK when there is none.
  absl::Status Notify(const std::string& state) const;

 private:
  std::string socket_;
};

}  // namespace sandboxd
