// Unit tests of SandboxFactory's removals: Kill and Discard queue containers, and one
// removal at a time takes all of them (a runtime that records each Remove call and can
// hold one).
#include "sandboxd/sandbox_factory.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "gtest/gtest.h"
#include "sandboxd/async.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;

// Records the names of every Remove call; while held, a Remove waits until let go. A call
// naming "sbx-bad" fails (podman could not remove that one). Starts are counted and fail.
class RecordingRuntime : public ContainerRuntime {
 public:
  absl::StatusOr<RuntimeInfo> Probe() override { return RuntimeInfo{}; }
  absl::StatusOr<std::string> Start(const ContainerSpec&) override {
    starts_.fetch_add(1);
    return absl::UnavailableError("this runtime only removes");
  }
  int starts() const { return starts_.load(); }
  absl::Status Remove(const std::vector<std::string>& names) override {
    codemode::MutexLock lock(&mu_);
    calls_.push_back(names);
    mu_.Await(absl::Condition(+[](bool* held) { return !*held; }, &held_));
    if (std::count(names.begin(), names.end(), "sbx-bad") > 0) {
      return absl::UnavailableError("podman rm failed (exit 125)");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<ContainerStatus> Inspect(const std::string&) override { return ContainerStatus{}; }
  absl::StatusOr<std::vector<std::string>> ImageOffers(const std::string&) override {
    return std::vector<std::string>{};
  }
  absl::StatusOr<std::vector<ContainerSummary>> List(const std::string&,
                                                     const std::string&) override {
    return std::vector<ContainerSummary>{};
  }

  void SetHeld(bool held) {
    codemode::MutexLock lock(&mu_);
    held_ = held;
  }
  // The calls so far, once there are `n` of them (or after 15 s, however many there are).
  std::vector<std::vector<std::string>> CallsOnce(size_t n) {
    codemode::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(15));
    return calls_;
  }

 private:
  std::atomic<int> starts_{0};
  codemode::Mutex mu_;
  std::vector<std::vector<std::string>> calls_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = false;
};

class SandboxFactoryRemovalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbxfac-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    state_dir_ = tmpl;
    factory_ = MakeFactory(absl::Seconds(15));
  }
  // A factory that starts while fewer than 2 containers are being removed.
  std::unique_ptr<SandboxFactory> MakeFactory(absl::Duration runner_start_timeout) {
    FactoryOptions o;
    o.state_dir = state_dir_;
    o.instance = "factory-test";
    o.runner_start_timeout = runner_start_timeout;
    o.max_removing = 2;
    return std::make_unique<SandboxFactory>(o, &runtime_, &workers_, FactoryHooks{});
  }
  void TearDown() override {
    runtime_.SetHeld(false);
    workers_.Stop();
    std::error_code ec;
    fs::remove_all(state_dir_, ec);
  }
  // Two containers (max_removing) being removed: sbx-a's removal held, sbx-b queued.
  void HoldTwoRemovals(SandboxFactory& factory) {
    runtime_.SetHeld(true);
    factory.Kill("sbx-a");
    ASSERT_EQ(runtime_.CallsOnce(1).size(), 1u) << "the first removal did not start";
    factory.Kill("sbx-b");
  }
  std::string MakeSocketDir(const std::string& name) {
    std::string dir = factory_->SocketDir(name);
    fs::create_directories(dir);
    return dir;
  }

  std::string state_dir_;
  RecordingRuntime runtime_;
  WorkerPool workers_{2};  // as the daemon's: a removal per worker would run two at once
  std::unique_ptr<SandboxFactory> factory_;
};

TEST_F(SandboxFactoryRemovalTest, ContainersQueuedDuringARemovalGoInTheNextOneTogether) {
  const std::string kept_dir = MakeSocketDir("sbx-b");
  const std::string discarded_dir = MakeSocketDir("sbx-c");
  runtime_.SetHeld(true);
  factory_->Kill("sbx-a");
  ASSERT_EQ(runtime_.CallsOnce(1).size(), 1u) << "the first removal did not start";
  factory_->Kill("sbx-b");
  factory_->Discard("sbx-c");
  factory_->Kill("sbx-d");
  runtime_.SetHeld(false);
  std::vector<std::vector<std::string>> calls = runtime_.CallsOnce(2);
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[0], std::vector<std::string>({"sbx-a"}));
  EXPECT_EQ(calls[1], std::vector<std::string>({"sbx-b", "sbx-c", "sbx-d"}));
  // Discard removes the socket directory too (after the container); Kill leaves it to its
  // session.
  for (absl::Time end = absl::Now() + absl::Seconds(15);
       fs::exists(discarded_dir) && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(fs::exists(discarded_dir));
  EXPECT_TRUE(fs::exists(kept_dir));
  EXPECT_EQ(runtime_.CallsOnce(2).size(), 2u);
  // Once idle, the next container is removed on its own again.
  factory_->Kill("sbx-e");
  calls = runtime_.CallsOnce(3);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2], std::vector<std::string>({"sbx-e"}));
}

// A removal of many that fails is retried one by one: only the container that cannot be
// removed stays, not every one queued beside it.
TEST_F(SandboxFactoryRemovalTest, AFailedRemovalOfManyIsRetriedOneByOne) {
  runtime_.SetHeld(true);
  factory_->Kill("sbx-a");
  ASSERT_EQ(runtime_.CallsOnce(1).size(), 1u) << "the first removal did not start";
  for (const char* name : {"sbx-b", "sbx-bad", "sbx-d"}) factory_->Kill(name);
  runtime_.SetHeld(false);
  std::vector<std::vector<std::string>> calls = runtime_.CallsOnce(5);
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(calls[1], std::vector<std::string>({"sbx-b", "sbx-bad", "sbx-d"}));
  EXPECT_EQ(calls[2], std::vector<std::string>({"sbx-b"}));
  EXPECT_EQ(calls[3], std::vector<std::string>({"sbx-bad"}));
  EXPECT_EQ(calls[4], std::vector<std::string>({"sbx-d"}));
}

// A container of an ended session runs until it is removed: while as many as max_removing
// wait for a slow runtime to remove them, a start waits too, and goes on once a removal
// brings them under it. Otherwise sessions created and deleted faster than podman removes
// containers leave ever more of them running.
TEST_F(SandboxFactoryRemovalTest, AStartWaitsWhileTooManyContainersAreBeingRemoved) {
  HoldTwoRemovals(*factory_);
  auto starting = std::async(std::launch::async, [&] { return factory_->Start({}, "session").status(); });
  EXPECT_EQ(starting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "a container started beside 2 still being removed";
  EXPECT_EQ(runtime_.starts(), 0);
  runtime_.SetHeld(false);
  absl::Status started = starting.get();
  EXPECT_EQ(runtime_.starts(), 1) << started;
  EXPECT_TRUE(absl::StrContains(started.message(), "only removes")) << started;
}

// A start that waited runner_start_timeout for removals gives up, saying why.
TEST_F(SandboxFactoryRemovalTest, AStartThatWaitedTooLongForRemovalsSaysWhy) {
  std::unique_ptr<SandboxFactory> factory = MakeFactory(absl::Milliseconds(100));
  HoldTwoRemovals(*factory);
  absl::Status started = factory->Start({}, "session").status();
  EXPECT_TRUE(absl::IsUnavailable(started)) << started;
  EXPECT_TRUE(absl::StrContains(started.message(),
                                "2 containers of ended sessions are still being removed"))
      << started;
  EXPECT_EQ(runtime_.starts(), 0);
}

// At shutdown a start waiting for removals ends at once: the daemon's pool threads, which
// its shutdown joins, may be waiting there.
TEST_F(SandboxFactoryRemovalTest, AStartWaitingForRemovalsEndsAtShutdown) {
  HoldTwoRemovals(*factory_);
  auto starting = std::async(std::launch::async, [&] { return factory_->Start({}, "pool").status(); });
  EXPECT_EQ(starting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  factory_->StopStarts();
  EXPECT_EQ(starting.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the start waits on at shutdown";
  absl::Status started = starting.get();
  EXPECT_TRUE(absl::IsUnavailable(started)) << started;
  EXPECT_TRUE(absl::StrContains(started.message(), "shutting down")) << started;
  EXPECT_EQ(runtime_.starts(), 0);
}

}  // namespace
}  // namespace sandboxd::testing
