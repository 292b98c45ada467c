// Unit tests of WarmPool over a real SandboxFactory and ProcessRuntime (the runner runs as
// a host process): it fills to its target and refills, hands out only live sandboxes,
// probes while containers cannot start and fills again when they can, and removes what
// it holds when stopped.
#include "sandboxd/warm_pool.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "process_runtime.h"
#include "sandboxd/async.h"
#include "sandboxd/sandbox_factory.h"

#ifndef SANDBOXD_RUNNER_PATH
#error "SANDBOXD_RUNNER_PATH must be defined (absolute path of the runner)"
#endif

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;

constexpr absl::Duration kWait = absl::Seconds(15);

// Polls `done` until it holds or kWait passes.
bool WaitFor(const std::function<bool()>& done) {
  for (absl::Time end = absl::Now() + kWait; absl::Now() < end;) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}

class WarmPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbxwp-XXXXXX";  // short: unix socket paths are limited to 107 bytes
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    state_dir_ = tmpl;
    FactoryOptions o;
    o.state_dir = state_dir_;
    o.instance = "warm-pool-test";
    o.image = "host-python";
    o.runner_path = SANDBOXD_RUNNER_PATH;
    FactoryHooks hooks;
    // As SessionManager does: the pool learns of readiness changes.
    hooks.on_readiness_changed = [this] {
      if (pool_) pool_->SetServing(factory_->readiness().serving);
    };
    factory_ = std::make_unique<SandboxFactory>(o, &runtime_, &workers_, hooks);
  }
  void TearDown() override {
    if (pool_) pool_->Stop();
    std::error_code ec;
    fs::remove_all(state_dir_, ec);
  }
  WarmPool& StartPool(size_t target) {
    pool_ = std::make_unique<WarmPool>(factory_.get(), target, SandboxConfig{});
    pool_->Start();
    return *pool_;
  }

  std::string state_dir_;
  ProcessRuntime runtime_;
  WorkerPool workers_{2};
  std::unique_ptr<SandboxFactory> factory_;
  std::unique_ptr<WarmPool> pool_;
};

TEST_F(WarmPoolTest, FillsToItsTargetAndRefillsAfterATake) {
  WarmPool& pool = StartPool(2);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 2; }));
  std::optional<Sandbox> sb = pool.Take();
  ASSERT_TRUE(sb.has_value());
  EXPECT_TRUE(sb->conn->PingSync(absl::Seconds(5)).ok()) << "a taken sandbox is live";
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 2; }));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(runtime_.start_calls(), 3) << "no more than the target is kept";
  EXPECT_TRUE(factory_->readiness().serving);
  factory_->RemoveNow({sb->name});
}

TEST_F(WarmPoolTest, ADeadPooledSandboxIsNeverHandedOut) {
  WarmPool& pool = StartPool(1);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 1; }));
  const std::string dead = runtime_.Names().at(0);
  ASSERT_TRUE(runtime_.Kill(dead, SIGKILL).ok());
  std::optional<Sandbox> sb = pool.Take();
  if (sb) {  // the thread may have refilled already
    EXPECT_NE(sb->name, dead);
    EXPECT_TRUE(sb->conn->PingSync(absl::Seconds(5)).ok());
    factory_->RemoveNow({sb->name});
  }
  EXPECT_TRUE(WaitFor([&] {
    std::vector<std::string> names = runtime_.Names();
    return std::find(names.begin(), names.end(), dead) == names.end();
  })) << "the dead container is removed";
  EXPECT_TRUE(WaitFor([&] { return pool.ready() == 1; })) << "and replaced";
}

TEST_F(WarmPoolTest, KeepsTryingWhileContainersCannotStartAndFillsWhenTheyCan) {
  runtime_.SetStartFailure("podman: image not found");
  WarmPool& pool = StartPool(1);
  ASSERT_TRUE(WaitFor([&] { return runtime_.start_calls() >= 2; })) << "it retries by itself";
  EXPECT_EQ(pool.ready(), 0u);
  EXPECT_FALSE(factory_->readiness().serving);
  EXPECT_NE(factory_->readiness().reason.find("image not found"), std::string::npos);
  runtime_.SetStartFailure(std::nullopt);
  EXPECT_TRUE(WaitFor([&] { return pool.ready() == 1; }));
  EXPECT_TRUE(factory_->readiness().serving);
}

TEST_F(WarmPoolTest, AFullPoolProbesWhileTheFactoryIsNotServing) {
  WarmPool& pool = StartPool(1);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 1; }));
  const int starts = runtime_.start_calls();
  // A session's start fails (podman broke meanwhile): the factory stops serving.
  runtime_.SetStartFailure("podman: storage is full");
  EXPECT_FALSE(factory_->Start(SandboxConfig{}, "session").ok());
  EXPECT_FALSE(factory_->readiness().serving);
  ASSERT_TRUE(WaitFor([&] { return runtime_.start_calls() >= starts + 2; }))
      << "the full pool probes";
  runtime_.SetStartFailure(std::nullopt);
  EXPECT_TRUE(WaitFor([&] { return factory_->readiness().serving; }));
  EXPECT_TRUE(WaitFor([&] { return runtime_.Names().size() == 1; }))
      << "the probe container is removed; the pool keeps its one";
  EXPECT_EQ(pool.ready(), 1u);
}

TEST_F(WarmPoolTest, StopRemovesWhatItHoldsAndIsIdempotent) {
  WarmPool& pool = StartPool(2);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 2; }));
  pool.Stop();
  EXPECT_TRUE(runtime_.Names().empty()) << "removed at once, not on a worker";
  pool.Stop();
  EXPECT_FALSE(pool.Take().has_value());
  EXPECT_EQ(pool.ready(), 0u);
}

}  // namespace
}  // namespace sandboxd::testing
