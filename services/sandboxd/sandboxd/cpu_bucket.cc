#include "sandboxd/cpu_bucket.h"

#include <algorithm>
#include <cstdint>

namespace sandboxd {

bool CpuBucket::Step(uint32_t millis, absl::Duration burst, absl::Duration elapsed,
                     uint64_t used_ns) {
  const int64_t cap = absl::ToInt64Nanoseconds(burst) / 1000 * millis;
  const int64_t earned = absl::ToInt64Nanoseconds(elapsed) / 1000 * millis;
  credit_ns = std::min(cap, credit_ns + earned) -
              static_cast<int64_t>(std::min<uint64_t>(used_ns, INT64_MAX / 2));
  credit_ns = std::max(credit_ns, -1000000 * int64_t{millis});
  return credit_ns < 0;
}

absl::Duration CpuBucket::Debt(uint32_t millis) const {
  if (credit_ns >= 0 || millis == 0) return absl::ZeroDuration();
  return absl::Nanoseconds(-credit_ns * 1000 / millis);
}

CpuBucket CpuBucket::Full(uint32_t millis, absl::Duration burst) {
  return CpuBucket{absl::ToInt64Nanoseconds(burst) / 1000 * millis};
}

}  // namespace sandboxd
