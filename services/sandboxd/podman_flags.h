// podman's flags (podman, podman_args, oci_runtime, podman_api, seccomp_base, and gVisor's
// runsc and gvisor_platform), read into PodmanOptions when a container isolation is in use.
//
//   absl::StatusOr<sandboxd::PodmanOptions> podman = PodmanFromFlags(options);
//   absl::StatusOr<std::string> base = SeccompBaseFromFlags(*podman);   // both before the claim
//   ...
//   if (absl::Status s = WriteSeccompProfile(options, *podman, *base); !s.ok()) return s;
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sandboxd/podman_runtime.h"
#include "sandboxd/session_manager.h"

// podman and runsc are found and checked (ResolveOthersCannotChange) here.
absl::StatusOr<sandboxd::PodmanOptions> PodmanFromFlags(const sandboxd::ManagerOptions& options);

// --seccomp_base, found and checked (ResolveOthersCannotChange) when `podman` runs its
// containers under a profile of ours; "" when they run under podman's.
absl::StatusOr<std::string> SeccompBaseFromFlags(const sandboxd::PodmanOptions& podman);

// The seccomp profile every container runs under, derived from `base` into
// podman.seccomp_profile (in the state directory); nothing when that is empty.
absl::Status WriteSeccompProfile(const sandboxd::ManagerOptions& options, const sandboxd::PodmanOptions& podman,
                                 const std::string& base);
