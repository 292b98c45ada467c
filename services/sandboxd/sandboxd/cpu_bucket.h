// CpuBucket: a token bucket of CPU time, for holding something to a share of a core.
//
//   CpuBucket b;  b.credit_ns = ...;                 // what it may use at once to begin with
//   if (b.Step(250, absl::Seconds(1), wall_since_last, cpu_used_since_last_ns)) {
//     absl::SleepFor(b.Debt(250));                   // over its quarter of a core: wait
//   }
//
// It earns `millis`/1000 of a CPU-second for each second of wall time, up to `burst` of
// wall time's worth, and spends the CPU time used. Not thread-safe: one owner steps it.
#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace sandboxd {

struct CpuBucket {
  int64_t credit_ns = 0;  // below 0: over the rate

  // Adds what `elapsed` earns at `millis` (capped at `burst` of it) and takes `used_ns`;
  // true when the bucket is empty. However far over one step went, the debt is at most a
  // second's earnings.
  bool Step(uint32_t millis, absl::Duration burst, absl::Duration elapsed, uint64_t used_ns);
  // How long, earning at `millis`, until the bucket is back at 0 (0 when it is not below).
  absl::Duration Debt(uint32_t millis) const;
  // A full bucket: `burst` of wall time's worth at `millis`.
  static CpuBucket Full(uint32_t millis, absl::Duration burst);
};

}  // namespace sandboxd
