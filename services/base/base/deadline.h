// SteadyDeadline: a point on the monotonic clock some time from now, for the waits that a
// flag or a peer sizes. `steady_clock::now() + absl::ToChronoNanoseconds(d)` overflows for
// an infinite or huge `d` (ToChrono saturates to the type's maximum) and lands in the
// past, so a wait meant to be endless would end at once (with
// --upstream_write_timeout=inf every write would fail after a poll).
#pragma once

#include <algorithm>
#include <chrono>

#include "absl/time/time.h"

namespace codemode {

// The longest wait a deadline stands for: a year is "forever" for a daemon.
inline constexpr absl::Duration kLongestWait = absl::Hours(24 * 365);

// A point on the monotonic clock. SteadyTime::min() stands for "never" (a last time that
// has not happened), SteadyTime::max() for "no deadline".
using SteadyTime = std::chrono::steady_clock::time_point;

// `from` plus `d`, with `d` clamped to [0, kLongestWait] (`from` may be SteadyTime::min()).
inline SteadyTime SteadyAfter(SteadyTime from, absl::Duration d) {
  d = std::max(absl::ZeroDuration(), std::min(d, kLongestWait));
  return from + absl::ToChronoNanoseconds(d);
}

// Now plus `d`, with `d` clamped to [0, kLongestWait].
inline SteadyTime SteadyDeadline(absl::Duration d) {
  return SteadyAfter(std::chrono::steady_clock::now(), d);
}

}  // namespace codemode
