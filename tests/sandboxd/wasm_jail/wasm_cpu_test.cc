// The token bucket that holds a wasm session to its cpu_millis (wasm_cpu.h), stepped by hand:
// the rate it lets through, the burst an idle session may use, the most a session waits.
#include "sandboxd/wasm_cpu.h"

#include "gtest/gtest.h"

namespace sandboxd {
namespace {

// A loop on one thread, stepped tick by tick as the limiter does: it uses the whole tick
// while running, nothing while stopped. The share of ticks it ran.
double RunningShare(uint32_t millis, int ticks) {
  WasmCpuBucket bucket;
  bool stopped = false;
  int ran = 0;
  for (int i = 0; i < ticks; ++i) {
    const uint64_t used = stopped ? 0 : absl::ToInt64Nanoseconds(kWasmCpuTick);
    ran += stopped ? 0 : 1;
    stopped = StepWasmCpuBucket(bucket, millis, kWasmCpuTick, used);
  }
  return static_cast<double>(ran) / ticks;
}

TEST(WasmCpuBucket, ALoopGetsItsRate) {
  EXPECT_NEAR(RunningShare(250, 4000), 0.25, 0.01);
  EXPECT_NEAR(RunningShare(500, 4000), 0.5, 0.01);
  EXPECT_NEAR(RunningShare(100, 4000), 0.1, 0.01);
  EXPECT_EQ(RunningShare(1000, 4000), 1.0);
}

TEST(WasmCpuBucket, AnIdleSessionSavesOnlyItsBurst) {
  WasmCpuBucket bucket;
  EXPECT_FALSE(StepWasmCpuBucket(bucket, 250, absl::Hours(1), 0));
  EXPECT_EQ(bucket.credit_ns, absl::ToInt64Nanoseconds(kWasmCpuBurst) / 4);
  // Two threads for a tick: 100 ms of CPU against 25 ms saved and 12.5 ms earned.
  EXPECT_TRUE(StepWasmCpuBucket(bucket, 250, kWasmCpuTick, 100000000));
}

TEST(WasmCpuBucket, ASessionWaitsAtMostASecondsEarnings) {
  WasmCpuBucket bucket;
  EXPECT_TRUE(StepWasmCpuBucket(bucket, 250, kWasmCpuTick, 60ull * 1000000000));
  EXPECT_EQ(bucket.credit_ns, -250000000);
  int stopped_ticks = 0;
  while (StepWasmCpuBucket(bucket, 250, kWasmCpuTick, 0)) ++stopped_ticks;
  EXPECT_EQ(stopped_ticks, 19) << "1 s at 50 ms ticks, the last of which continues it";
}

}  // namespace
}  // namespace sandboxd
