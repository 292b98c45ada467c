// The egress flags (egress_*), read into the daemon's EgressHub (docs/egress.md, "The
// operator's default and maximum").
//
//   absl::StatusOr<std::unique_ptr<sandboxd::EgressHub>> hub = EgressHubFromFlags(&metrics);
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "sandboxd/egress_hub.h"

// INVALID_ARGUMENT naming the flag for a policy, host entry or bound that is not valid.
absl::StatusOr<std::unique_ptr<sandboxd::EgressHub>> EgressHubFromFlags(
    sandboxd::SandboxdMetrics* metrics);
