// Resource limits of a session container: the daemon's defaults and maxima, and the
// merge of a client's per-session overrides with them.
//
//   absl::StatusOr<ResolvedLimits> l = ResolveLimits(request.limits(), defaults, maxima);
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "sandbox/v1/sandbox.pb.h"

namespace sandboxd {

struct ResolvedLimits {
  uint64_t memory_bytes = 512ull << 20;
  uint32_t cpu_millis = 1000;
  uint32_t pids = 128;
  uint32_t nofile = 1024;
  uint64_t tmp_bytes = 64ull << 20;
  uint64_t workspace_bytes = 256ull << 20;
  uint32_t default_timeout_ms = 30000;

  bool operator==(const ResolvedLimits& o) const {
    return memory_bytes == o.memory_bytes && cpu_millis == o.cpu_millis && pids == o.pids &&
           nofile == o.nofile && tmp_bytes == o.tmp_bytes &&
           workspace_bytes == o.workspace_bytes && default_timeout_ms == o.default_timeout_ms;
  }
  bool operator!=(const ResolvedLimits& o) const { return !(*this == o); }
};

// Fills zero fields of `requested` from `defaults`; INVALID_ARGUMENT naming the field
// when a value exceeds `maxima` (or is below a floor that would stop Python starting).
absl::StatusOr<ResolvedLimits> ResolveLimits(const sandbox::v1::Limits& requested,
                                             const ResolvedLimits& defaults,
                                             const ResolvedLimits& maxima);

// Field-by-field conversions (no defaults applied): for persisting and reporting limits.
sandbox::v1::Limits ToProto(const ResolvedLimits& limits);
ResolvedLimits FromProto(const sandbox::v1::Limits& limits);

}  // namespace sandboxd
