// A CreateSession refused for the daemon's room (--max_sessions, the session uid range), as
// against its owner's limit: another sandboxd may still have room for it. The status carries
// a payload that the gRPC layer sends as the trailing metadata `sandbox-refusal: daemon-full`
// (docs/api.md), so that a gateway placing sandboxes over several daemons tries the next.
#pragma once

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace sandboxd {

inline constexpr char kRefusalMetadata[] = "sandbox-refusal";
inline constexpr char kDaemonFull[] = "daemon-full";
inline constexpr char kRefusalPayload[] = "type.sandboxd/refusal";

// RESOURCE_EXHAUSTED with `why`, marked as the daemon's room when `daemon_full`.
inline absl::Status RefusedForRoom(std::string why, bool daemon_full) {
  absl::Status status = absl::ResourceExhaustedError(std::move(why));
  if (daemon_full) status.SetPayload(kRefusalPayload, absl::Cord(kDaemonFull));
  return status;
}

inline bool DaemonWasFull(const absl::Status& status) {
  return status.GetPayload(kRefusalPayload) == absl::Cord(kDaemonFull);
}

}  // namespace sandboxd
