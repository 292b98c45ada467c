// Unit tests of SandboxFactory's removals: Kill and Discard queue containers, and one
// removal at a time takes all of them (a runtime that records each Remove call and can
// hold one).
#include "sandboxd/sandbox_factory.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/time/clock.h"
#include "base/mutex.h"
#include "gtest/gtest.h"
#include "sandboxd/async.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;

// Records the names of every Remove call; while held, a Remove waits until let go.
// "sbx-bad" is never removed (podman cannot remove that one).
class RecordingRuntime : public ContainerRuntime {
 public:
  absl::StatusOr<RuntimeInfo> Probe() override {
    return absl::UnavailableError("this runtime only removes");
  }
  absl::StatusOr<std::string> Start(const ContainerSpec&) override {
    return absl::UnavailableError("this runtime only removes");
  }
  RemovalFailures Remove(const std::vector<std::string>& names) override {
    codemode::MutexLock lock(&mu_);
    calls_.push_back(names);
    mu_.Await(absl::Condition(+[](bool* held) { return !*held; }, &held_));
    RemovalFailures failures;
    for (const std::string& name : names) {
      if (name == "sbx-bad") {
        failures.emplace(name, absl::UnavailableError("podman rm failed (exit 125)"));
      } else if (failures_left_[name] > 0) {
        --failures_left_[name];
        failures.emplace(name, absl::UnavailableError("podman rm timed out"));
      }
    }
    return failures;
  }
  // The next `n` Remove calls naming `name` fail.
  void FailTimes(const std::string& name, int n) {
    codemode::MutexLock lock(&mu_);
    failures_left_[name] = n;
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
  codemode::Mutex mu_;
  std::vector<std::vector<std::string>> calls_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, int> failures_left_ ABSL_GUARDED_BY(mu_);
};

class SandboxFactoryRemovalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbxfac-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    state_dir_ = tmpl;
    FactoryOptions o;
    o.state_dir = state_dir_;
    o.instance = "factory-test";
    o.removal_retry = absl::Milliseconds(10);
    factory_ = std::make_unique<SandboxFactory>(o, &runtime_, &workers_, FactoryHooks{});
  }
  // Calls RetryRemovals until the runtime saw `n` Remove calls (or 15 s passed).
  std::vector<std::vector<std::string>> RetryUntilCalls(size_t n) {
    for (absl::Time end = absl::Now() + absl::Seconds(15);
         runtime_.CallsOnce(0).size() < n && absl::Now() < end;) {
      factory_->RetryRemovals();
      absl::SleepFor(absl::Milliseconds(5));
    }
    return runtime_.CallsOnce(n);
  }
  void TearDown() override {
    runtime_.SetHeld(false);
    workers_.Stop();
    std::error_code ec;
    fs::remove_all(state_dir_, ec);
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

// A container given up twice before it is removed (a session whose kill timer ended it,
// then the end of its connection) is removed once and counted once.
TEST_F(SandboxFactoryRemovalTest, AContainerKilledTwiceIsRemovedAndCountedOnce) {
  runtime_.SetHeld(true);
  factory_->Kill("sbx-a");
  ASSERT_EQ(runtime_.CallsOnce(1).size(), 1u) << "the first removal did not start";
  factory_->Kill("sbx-b");
  factory_->Kill("sbx-b");
  factory_->Kill("sbx-a");  // being removed
  EXPECT_EQ(factory_->removals_awaiting(), 2u);
  runtime_.SetHeld(false);
  std::vector<std::vector<std::string>> calls = runtime_.CallsOnce(2);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1], std::vector<std::string>({"sbx-b"}));
  for (absl::Time end = absl::Now() + absl::Seconds(15);
       factory_->removals_awaiting() > 0 && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(factory_->removals_awaiting(), 0u);
  EXPECT_EQ(runtime_.CallsOnce(2).size(), 2u) << "nothing removed again";
}

// Of a removal of many, only the container that the runtime could not remove stays and is
// tried again, alone: not every one queued beside it.
TEST_F(SandboxFactoryRemovalTest, OfAFailedRemovalOfManyOnlyWhatFailedIsTriedAgain) {
  runtime_.SetHeld(true);
  factory_->Kill("sbx-a");
  ASSERT_EQ(runtime_.CallsOnce(1).size(), 1u) << "the first removal did not start";
  for (const char* name : {"sbx-b", "sbx-bad", "sbx-d"}) factory_->Kill(name);
  runtime_.SetHeld(false);
  ASSERT_EQ(runtime_.CallsOnce(2).size(), 2u);
  for (absl::Time end = absl::Now() + absl::Seconds(15);
       factory_->removals_awaiting() > 1 && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(factory_->removals_awaiting(), 1u);
  EXPECT_EQ(factory_->removals_failing(), 1u);
  std::vector<std::vector<std::string>> calls = RetryUntilCalls(3);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1], std::vector<std::string>({"sbx-b", "sbx-bad", "sbx-d"}));
  EXPECT_EQ(calls[2], std::vector<std::string>({"sbx-bad"}));
}

// A container whose removal failed is removed again, after a wait that grows, until it
// goes; what is queued beside it is not held up, and a removal that worked is not repeated.
TEST_F(SandboxFactoryRemovalTest, AFailedRemovalIsTriedAgainUntilItWorks) {
  runtime_.FailTimes("sbx-slow", 2);
  factory_->Kill("sbx-slow");
  ASSERT_EQ(runtime_.CallsOnce(1).size(), 1u);
  std::vector<std::vector<std::string>> calls = RetryUntilCalls(3);
  ASSERT_EQ(calls.size(), 3u) << "the failed removal was not tried again";
  for (const auto& call : calls) EXPECT_EQ(call, std::vector<std::string>({"sbx-slow"}));
  for (absl::Time end = absl::Now() + absl::Seconds(15);
       factory_->removals_failing() > 0 && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(factory_->removals_failing(), 0u);
  factory_->Kill("sbx-next");
  calls = RetryUntilCalls(4);
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[3], std::vector<std::string>({"sbx-next"})) << "sbx-slow was removed once";
}

// The wait after a failure is kept: a retry asked for before it is over removes nothing.
TEST_F(SandboxFactoryRemovalTest, ARetryWaitsUntilItsTimeHasCome) {
  FactoryOptions o;
  o.state_dir = state_dir_;
  o.instance = "factory-test";
  o.removal_retry = absl::Hours(1);
  SandboxFactory patient(o, &runtime_, &workers_, FactoryHooks{});
  runtime_.FailTimes("sbx-slow", 1);
  patient.Kill("sbx-slow");
  ASSERT_EQ(runtime_.CallsOnce(1).size(), 1u);
  for (absl::Time end = absl::Now() + absl::Seconds(15);
       patient.removals_failing() == 0 && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(patient.removals_failing(), 1u);
  patient.RetryRemovals();
  workers_.Stop();  // runs whatever the retry posted
  EXPECT_EQ(runtime_.CallsOnce(1).size(), 1u);
  EXPECT_EQ(patient.removals_failing(), 1u);
}

// One state directory is one daemon (one InstanceId, so one set of containers its restart
// removes), however --state_dir spells it.
TEST(StateDirPathTest, OneDirectoryHowEverItIsSpelt) {
  EXPECT_EQ(StateDirPath("/var/lib/sandboxd"), "/var/lib/sandboxd");
  for (const char* spelt : {"/var/lib/sandboxd/", "/var/lib/sandboxd//", "/var/lib/./sandboxd/",
                            "/var/lib/x/../sandboxd"}) {
    EXPECT_EQ(StateDirPath(spelt), "/var/lib/sandboxd") << spelt;
    EXPECT_EQ(InstanceId(StateDirPath(spelt)), InstanceId("/var/lib/sandboxd")) << spelt;
  }
  EXPECT_EQ(StateDirPath("/"), "/");
  EXPECT_EQ(StateDirPath("//"), "/");
  EXPECT_EQ(StateDirPath(""), "");
  EXPECT_EQ(StateDirPath("state/"), (std::filesystem::current_path() / "state").string());
  // Through a symbolic link, to the directory or above it, existing yet or not.
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("state-path-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "real" / "state");
  std::filesystem::create_directory_symlink("real", dir / "link");
  const std::string real = StateDirPath((dir / "real" / "state").string());
  EXPECT_EQ(StateDirPath((dir / "link" / "state").string()), real);
  EXPECT_EQ(StateDirPath((dir / "link" / "state" / "").string()), real);
  EXPECT_EQ(StateDirPath((dir / "link" / "new").string()), StateDirPath((dir / "real" / "new").string()));
  std::filesystem::create_directory_symlink(dir / "real" / "state", dir / "state-link");
  EXPECT_EQ(StateDirPath((dir / "state-link").string()), real);
  std::filesystem::remove_all(dir);
  EXPECT_NE(InstanceId("/var/lib/sandboxd"), InstanceId("/var/lib/sandboxd2"));
  EXPECT_EQ(InstanceId("/var/lib/sandboxd").size(), 12u);
}

}  // namespace
}  // namespace sandboxd::testing
