// SelfCheck: proves that this machine can run sandboxes, end to end, with the daemon's own
// settings: it creates a session (a real container with every hardening flag sandboxd
// uses), runs `print(1)` in it, and deletes it. `sandboxd --self_check` and
// scripts/setup.sh use it, so a missing piece (podman's init binary, the image, the OCI
// runtime) fails the set-up in seconds with podman's own error.
//
//   absl::Status s = SelfCheck(manager);   // manager.Start() already called
//   if (!s.ok()) Fail(s.message());
#pragma once

#include "absl/status/status.h"
#include "sandboxd/session_manager.h"

namespace sandboxd {

absl::Status SelfCheck(SessionManager& manager);

}  // namespace sandboxd
