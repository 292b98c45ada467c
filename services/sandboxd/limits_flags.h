// The per-session limit flags (memory_mb, cpu_millis, pids, ... and their max_*), read
// into the defaults a session gets and the most a client may ask for.
//
//   sandboxd::ResolvedLimits defaults, maxima;
//   if (absl::Status s = LimitsFromFlags(&defaults, &maxima); !s.ok()) return s;
#pragma once

#include <cstdint>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "sandboxd/limits.h"

ABSL_DECLARE_FLAG(uint32_t, max_timeout_ms);

// INVALID_ARGUMENT when a default exceeds its maximum.
absl::Status LimitsFromFlags(sandboxd::ResolvedLimits* defaults, sandboxd::ResolvedLimits* maxima);
