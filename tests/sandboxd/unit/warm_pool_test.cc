// Unit tests of WarmPool over a real SandboxFactory and ProcessRuntime (the runner runs as
// a host process): it fills to its target and refills, hands out only live sandboxes,
// probes while containers cannot start and fills again when they can, and removes what
// it holds when stopped. And of WarmPools, the daemon's pool per runtime (Node.js runs the
// JavaScript bundle the same way): which pool a config is taken from, that no pool hands
// out another runtime's containers, and that a JavaScript pool that cannot run holds and
// wants nothing.
#include "sandboxd/warm_pool.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "process_runtime.h"
#include "sandboxd/async.h"
#include "sandboxd/sandbox_factory.h"

#ifndef SANDBOXD_RUNNER_PATH
#error "SANDBOXD_RUNNER_PATH must be defined (absolute path of the runner)"
#endif
#ifndef SANDBOXD_JS_RUNNER_PATH
#error "SANDBOXD_JS_RUNNER_PATH must be defined (absolute path of the JavaScript runner)"
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

SandboxConfig Defaults() {
  SandboxConfig c;
  c.limits.memory_bytes = 256u << 20;
  return c;
}

SandboxConfig Of(Language language) {
  SandboxConfig c = Defaults();
  c.language = language;
  return c;
}

TEST(WarmPoolsSelectionTest, OnlyTheDefaultConfigOfARuntimeIsPooled) {
  const SandboxConfig d = Defaults();
  EXPECT_EQ(WarmPools::PoolOf(Of(Language::kPython), d), Language::kPython);
  EXPECT_EQ(WarmPools::PoolOf(Of(Language::kJavaScript), d), Language::kJavaScript);
  // The defaults' own language does not matter: each runtime has its pool.
  SandboxConfig js_defaults = Of(Language::kJavaScript);
  EXPECT_EQ(WarmPools::PoolOf(Of(Language::kPython), js_defaults), Language::kPython);
  for (Language language : {Language::kPython, Language::kJavaScript}) {
    SandboxConfig limits = Of(language);
    limits.limits.memory_bytes = 300u << 20;
    EXPECT_EQ(WarmPools::PoolOf(limits, d), std::nullopt);
    SandboxConfig isolation = Of(language);
    isolation.isolation = Isolation::kGvisor;
    EXPECT_EQ(WarmPools::PoolOf(isolation, d), std::nullopt);
    SandboxConfig image = Of(language);
    image.image = "localhost/sandboxd-python-data:bookworm";
    EXPECT_EQ(WarmPools::PoolOf(image, d), std::nullopt);
  }
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
    o.js_runner_path = SANDBOXD_JS_RUNNER_PATH;
    FactoryHooks hooks;
    // As SessionManager does: the pools learn of readiness changes.
    hooks.on_readiness_changed = [this] {
      if (pool_) pool_->SetServing(factory_->readiness().serving);
      if (pools_) pools_->SetServing(factory_->readiness().serving);
    };
    factory_ = std::make_unique<SandboxFactory>(o, &runtime_, &workers_, hooks);
  }
  void TearDown() override {
    if (pool_) pool_->Stop();
    if (pools_) pools_->Stop();
    std::error_code ec;
    fs::remove_all(state_dir_, ec);
  }
  WarmPool& StartPool(size_t target, PoolOptions options = {}) {
    pool_ = std::make_unique<WarmPool>(factory_.get(), target, SandboxConfig{}, std::move(options));
    pool_->Start();
    return *pool_;
  }

  WarmPools& StartPools(PoolTargets targets, std::function<absl::Status()> js_available = [] {
    return absl::OkStatus();
  }) {
    pools_ = std::make_unique<WarmPools>(factory_.get(), Defaults(), targets,
                                         std::move(js_available));
    pools_->Start();
    return *pools_;
  }
  // Names of the containers of `language` the runtime runs.
  std::vector<std::string> Containers(Language language) {
    std::vector<std::string> names;
    auto listed = runtime_.List(kLanguageLabel, std::string(LanguageName(language)));
    if (listed.ok()) {
      for (const ContainerSummary& c : *listed) names.push_back(c.name);
    }
    return names;
  }
  // Starts pool_ at 2, growing to 8; once full, empties it with two takes while starts
  // are held, and returns the two taken.
  std::vector<Sandbox> EmptyAPoolOfTwo() {
    PoolOptions options;
    options.max = 8;
    StartPool(2, options);
    EXPECT_TRUE(WaitFor([&] { return pool_->ready() == 2; }));
    runtime_.SetStartHeld(true);
    std::vector<Sandbox> taken;
    for (int i = 0; i < 2; ++i) {
      if (std::optional<Sandbox> sb = pool_->Take()) taken.push_back(std::move(*sb));
    }
    EXPECT_EQ(taken.size(), 2u);
    return taken;
  }
  bool Runs(Language language, const std::string& name) {
    std::vector<std::string> names = Containers(language);
    return std::find(names.begin(), names.end(), name) != names.end();
  }

  std::string state_dir_;
  ProcessRuntime runtime_;
  WorkerPool workers_{2};
  std::unique_ptr<SandboxFactory> factory_;
  std::unique_ptr<WarmPool> pool_;
  std::unique_ptr<WarmPools> pools_;
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

// While the factory serves, a pool short of several refills them with `refills` starts
// under way at once, and no more than it lacks.
TEST_F(WarmPoolTest, RefillsWithSeveralStartsAtOnceWhileServing) {
  PoolOptions options;
  options.refills = 2;
  WarmPool& pool = StartPool(3, options);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 3; }));
  ASSERT_TRUE(factory_->readiness().serving);
  runtime_.SetStartHeld(true);
  std::vector<Sandbox> taken;
  for (int i = 0; i < 3; ++i) taken.push_back(*pool.Take());
  EXPECT_TRUE(WaitFor([&] { return runtime_.starts_held() == 2; })) << "two starts at once";
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(runtime_.starts_held(), 2) << "no more than `refills`";
  runtime_.SetStartHeld(false);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 3; }));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(runtime_.start_calls(), 6) << "no more than the target is kept";
  std::vector<std::string> names;
  for (const Sandbox& sb : taken) names.push_back(sb.name);
  factory_->RemoveNow(names);
}

// Each Take() that finds the pool empty raises its target by one, up to PoolOptions::max, and
// the pool fills to it; once shrink_after passes without a miss it keeps its configured
// target again and removes what is over it. Without a max it never grows (the test above).
TEST_F(WarmPoolTest, MissesRaiseTheTargetUntilAQuietSpellLowersIt) {
  PoolOptions options;
  options.refills = 2;
  options.max = 3;
  options.shrink_after = absl::Seconds(5);
  WarmPool& pool = StartPool(1, options);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 1; }));
  runtime_.SetStartHeld(true);
  std::optional<Sandbox> taken = pool.Take();
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(pool.target(), 1u) << "a take that finds one is no miss";
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(pool.Take().has_value());
  EXPECT_EQ(pool.target(), 3u) << "two misses raise it to the max, a third no further";
  runtime_.SetStartHeld(false);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 3; }));
  EXPECT_EQ(Containers(Language::kPython).size(), 4u);
  // Quiet from here: back to 1 ready, the two over it removed (the taken one stays).
  ASSERT_TRUE(WaitFor([&] { return pool.target() == 1 && pool.ready() == 1; }));
  EXPECT_TRUE(WaitFor([&] { return Containers(Language::kPython).size() == 2; }));
  EXPECT_TRUE(Runs(Language::kPython, taken->name));
  factory_->RemoveNow({taken->name});
}

// A miss raises the target to the takes since the pool was last full, those a refill
// served during the burst included: the next burst of that size finds it all ready.
TEST_F(WarmPoolTest, AMissRaisesTheTargetToTheBurstSinceThePoolWasFull) {
  std::vector<Sandbox> taken = EmptyAPoolOfTwo();
  ASSERT_EQ(taken.size(), 2u);
  WarmPool& pool = *pool_;
  EXPECT_FALSE(pool.Take().has_value());
  EXPECT_EQ(pool.target(), 3u) << "the third take of the burst";
  runtime_.LetHeldStartsThrough(1);  // one refill, then starts wait again
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 1; }));
  std::optional<Sandbox> refilled = pool.Take();
  ASSERT_TRUE(refilled.has_value());
  taken.push_back(std::move(*refilled));
  EXPECT_EQ(pool.target(), 4u) << "a take a refill served after the miss is the burst's too";
  EXPECT_FALSE(pool.Take().has_value());
  EXPECT_EQ(pool.target(), 5u) << "five takes since the pool was full";
  runtime_.SetStartHeld(false);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 5; }));
  for (int i = 0; i < 5; ++i) taken.push_back(*pool.Take());
  EXPECT_EQ(pool.target(), 5u) << "a burst the pool held is no miss";
  std::vector<std::string> names;
  for (const Sandbox& sb : taken) names.push_back(sb.name);
  factory_->RemoveNow(names);
}

// A dead container the pool discards is no take: the miss after it raises the target to
// the takes since the pool was full, three here, not four.
TEST_F(WarmPoolTest, ADiscardedDeadSandboxIsNoDemand) {
  std::vector<Sandbox> taken = EmptyAPoolOfTwo();
  ASSERT_EQ(taken.size(), 2u);
  WarmPool& pool = *pool_;
  runtime_.LetHeldStartsThrough(1);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 1; }));
  for (const std::string& name : runtime_.Names()) {
    if (name != taken[0].name && name != taken[1].name) {
      ASSERT_TRUE(runtime_.Kill(name, SIGKILL).ok());
    }
  }
  EXPECT_FALSE(pool.Take().has_value());
  EXPECT_EQ(pool.target(), 3u);
  runtime_.SetStartHeld(false);
  factory_->RemoveNow({taken[0].name, taken[1].name});
}

// Until a container has started (the factory is not serving) only one start is under way.
TEST_F(WarmPoolTest, RetriesWithOneStartWhileNotServing) {
  runtime_.SetStartHeld(true);
  PoolOptions options;
  options.refills = 2;
  WarmPool& pool = StartPool(2, options);
  ASSERT_TRUE(WaitFor([&] { return runtime_.starts_held() == 1; }));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(runtime_.starts_held(), 1);
  runtime_.SetStartHeld(false);
  EXPECT_TRUE(WaitFor([&] { return pool.ready() == 2; }));
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

// Of two pools on one factory only one probes: the other, once full, starts nothing while
// the factory is not serving (the JavaScript pool leaves probing to the Python one).
TEST_F(WarmPoolTest, APoolThatDoesNotProbeWaitsWhileFull) {
  PoolOptions quiet;
  quiet.probes = false;
  WarmPool& pool = StartPool(1, quiet);
  ASSERT_TRUE(WaitFor([&] { return pool.ready() == 1; }));
  const int starts = runtime_.start_calls();
  runtime_.SetStartFailure("podman: storage is full");
  EXPECT_FALSE(factory_->Start(SandboxConfig{}, "session").ok());
  EXPECT_FALSE(factory_->readiness().serving);
  absl::SleepFor(absl::Milliseconds(2500));  // a probing pool starts two probes by then
  EXPECT_EQ(runtime_.start_calls(), starts + 1) << "only the session's start";
  EXPECT_EQ(pool.ready(), 1u);
  // Not full, it still refills (backing off) and finds out by itself that starts work.
  runtime_.SetStartFailure(std::nullopt);
  std::optional<Sandbox> sb = pool.Take();
  ASSERT_TRUE(sb.has_value());
  EXPECT_TRUE(WaitFor([&] { return pool.ready() == 1; }));
  EXPECT_TRUE(factory_->readiness().serving);
  factory_->RemoveNow({sb->name});
}

// A pool whose precondition says no starts nothing, keeps the reason, asks again every
// `recheck`, and fills once it says yes.
TEST_F(WarmPoolTest, AnUnavailablePoolStartsNothingAndAsksAgain) {
  std::atomic<int> asked{0};
  std::atomic<bool> available{false};
  PoolOptions options;
  options.probes = false;
  options.recheck = absl::Milliseconds(100);
  options.available = [&]() -> absl::Status {
    ++asked;
    return available ? absl::OkStatus() : absl::FailedPreconditionError("no runner");
  };
  WarmPool& pool = StartPool(1, options);
  ASSERT_TRUE(WaitFor([&] { return asked >= 3; })) << "it asks again";
  EXPECT_EQ(pool.unavailable(), "no runner");
  EXPECT_EQ(runtime_.start_calls(), 0);
  EXPECT_EQ(pool.ready(), 0u);
  available = true;
  EXPECT_TRUE(WaitFor([&] { return pool.ready() == 1; }));
  EXPECT_EQ(pool.unavailable(), "");
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

TEST_F(WarmPoolTest, EachRuntimeTakesFromItsOwnPool) {
  WarmPools& pools = StartPools({1, 1});
  ASSERT_TRUE(WaitFor([&] {
    return pools.pool(Language::kPython).ready() == 1 &&
           pools.pool(Language::kJavaScript).ready() == 1;
  }));
  std::optional<Sandbox> js = pools.Take(Of(Language::kJavaScript));
  ASSERT_TRUE(js.has_value());
  EXPECT_TRUE(Runs(Language::kJavaScript, js->name)) << "a JavaScript session got " << js->name;
  EXPECT_TRUE(js->conn->PingSync(absl::Seconds(5)).ok());
  EXPECT_EQ(pools.pool(Language::kPython).ready(), 1u) << "the Python pool gave nothing";
  std::optional<Sandbox> py = pools.Take(Of(Language::kPython));
  ASSERT_TRUE(py.has_value());
  EXPECT_TRUE(Runs(Language::kPython, py->name)) << "a Python session got " << py->name;
  EXPECT_EQ(pools.pool(Language::kJavaScript).taken_total(), 1u);
  EXPECT_EQ(pools.pool(Language::kPython).taken_total(), 1u);
  // Both refill; a config outside the defaults takes nothing.
  ASSERT_TRUE(WaitFor([&] { return pools.pool(Language::kJavaScript).ready() == 1; }));
  ASSERT_TRUE(WaitFor([&] { return pools.pool(Language::kPython).ready() == 1; }));
  SandboxConfig custom = Of(Language::kJavaScript);
  custom.limits.pids = 7;
  EXPECT_FALSE(pools.Take(custom).has_value());
  EXPECT_EQ(pools.pool(Language::kJavaScript).ready(), 1u);
  factory_->RemoveNow({js->name, py->name});
  // Stop removes both pools' containers.
  pools.Stop();
  EXPECT_TRUE(runtime_.Names().empty());
}

TEST_F(WarmPoolTest, ARuntimeWithoutAPoolNeverTakesTheOthers) {
  WarmPools& js_only = StartPools({0, 1});
  ASSERT_TRUE(WaitFor([&] { return js_only.pool(Language::kJavaScript).ready() == 1; }));
  EXPECT_FALSE(js_only.Take(Of(Language::kPython)).has_value());
  EXPECT_EQ(js_only.pool(Language::kJavaScript).ready(), 1u);
  js_only.Stop();

  WarmPools& python_only = StartPools({1, 0});
  ASSERT_TRUE(WaitFor([&] { return python_only.pool(Language::kPython).ready() == 1; }));
  EXPECT_FALSE(python_only.Take(Of(Language::kJavaScript)).has_value());
  EXPECT_EQ(python_only.pool(Language::kPython).ready(), 1u);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(Containers(Language::kJavaScript).empty()) << "a JavaScript pool of 0 starts none";
}

// A JavaScript pool that cannot run (no runner, an image without nodejs) starts nothing,
// says why in unavailable(), wants nothing (so no alert fires on it), and asks again: when
// JavaScript can run, it fills.
TEST_F(WarmPoolTest, AJavaScriptPoolThatCannotRunHoldsAndWantsNothingUntilItCan) {
  std::atomic<int> asked{0};
  WarmPools& pools = StartPools({1, 1}, [&]() -> absl::Status {
    ++asked;
    return absl::FailedPreconditionError("image 'default' does not offer nodejs");
  });
  ASSERT_TRUE(WaitFor([&] { return pools.pool(Language::kPython).ready() == 1; }));
  ASSERT_TRUE(WaitFor([&] { return !pools.pool(Language::kJavaScript).unavailable().empty(); }));
  EXPECT_EQ(pools.pool(Language::kJavaScript).unavailable(), "image 'default' does not offer nodejs");
  EXPECT_EQ(pools.target(Language::kJavaScript), 0u);
  EXPECT_EQ(pools.target(Language::kPython), 1u);
  EXPECT_FALSE(pools.Take(Of(Language::kJavaScript)).has_value());
  EXPECT_TRUE(Containers(Language::kJavaScript).empty());
  EXPECT_EQ(asked.load(), 1) << "asked once per recheck (30 s), not in a loop";
  pools.Stop();
  // A daemon whose image offers nodejs fills its JavaScript pool.
  WarmPools& later = StartPools({0, 1});
  EXPECT_TRUE(WaitFor([&] { return later.pool(Language::kJavaScript).ready() == 1; }));
  EXPECT_TRUE(later.pool(Language::kJavaScript).unavailable().empty());
  EXPECT_EQ(later.target(Language::kJavaScript), 1u);
}

}  // namespace
}  // namespace sandboxd::testing
