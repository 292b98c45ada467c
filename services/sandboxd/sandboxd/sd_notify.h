// Minimal sd_notify(3): tells systemd (Type=notify) that the daemon is ready or stopping,
// without linking libsystemd. A no-op when NOTIFY_SOCKET is unset.
//
//   NotifySystemd("READY=1\nSTATUS=serving");
#pragma once

#include <string>

#include "absl/status/status.h"

namespace sandboxd {

// Sends `state` to $NOTIFY_SOCKET (path or abstract "@name"). OK when unset.
absl::Status NotifySystemd(const std::string& state);

}  // namespace sandboxd
