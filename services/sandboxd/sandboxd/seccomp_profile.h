// The seccomp profile sandbox containers run under: podman's default profile (the one
// installed with podman, /usr/share/containers/seccomp.json) with the creation of
// namespaces denied. Podman's default lets any process call unshare(CLONE_NEWUSER): code
// in the sandbox could become root with every capability in a user namespace of its own,
// mount file systems and reach kernel interfaces (nf_tables, ...) that are the way in of
// most kernel privilege escalations. Docker's default profile denies
// it; this does the same to podman's:
//
//   clone, unshare  allowed only without namespace flags (CLONE_NEWNS, NEWCGROUP, NEWUTS,
//                   NEWIPC, NEWUSER, NEWPID, NEWNET); with one, the profile's default
//                   error
//   clone3          ENOSYS: its flags are in memory seccomp cannot read; the C library
//                   then falls back to clone, which the rule above checks
//   setns           denied (nothing to join without CAP_SYS_ADMIN anyway)
//
// Everything else is podman's profile unchanged, so a podman upgrade's changes carry over.
// sandboxd derives the profile at start (--seccomp_base) into its state directory and
// passes it to every container (--security-opt seccomp=PATH). gVisor's runsc does not
// apply OCI seccomp profiles: its own kernel answers the code's system calls.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sandboxd {

// Namespace flags of clone(2)/unshare(2): CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC |
// NEWUSER | NEWPID | NEWNET.
inline constexpr uint64_t kCloneNamespaceFlags = 0x7E020000;

// `base` with namespace creation denied. INVALID_ARGUMENT when `base` is not a seccomp
// profile this can tighten: no `syscalls` list, or a default action that allows (denying
// by leaving a call out of the allow lists needs a default that does not).
absl::StatusOr<nlohmann::json> DeriveSeccompProfile(const nlohmann::json& base);

// Reads the profile at `base_path`, derives, and writes the result to `out_path`
// (replacing it atomically, mode 0644). The error names the path and what is wrong.
absl::Status WriteSeccompProfile(const std::string& base_path, const std::string& out_path);

}  // namespace sandboxd
