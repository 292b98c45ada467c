// LoadWatch: placement reads recent answers without asking, counts what it placed since,
// asks again on the path once an answer is older than max_age, and refreshes on its own
// thread only while creates come.
#include "bridge/load_watch.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

// Answers with `sessions` for every endpoint but `silent`, counting the asks.
struct FakeEndpoints {
  codemode::Mutex mu;
  uint32_t sessions ABSL_GUARDED_BY(mu) = 5;
  std::atomic<int> asked{0};
  size_t silent = 99;
  LoadWatch::Ask ask() {
    return [this](const std::vector<size_t>& endpoints) {
      ++asked;
      codemode::MutexLock lock(&mu);
      std::vector<std::optional<sandbox::v1::Info>> infos;
      for (size_t e : endpoints) {
        if (e == silent) {
          infos.emplace_back();
          continue;
        }
        sandbox::v1::Info info;
        info.set_sessions(sessions);
        info.set_max_sessions(64);
        info.set_pool_ready(2);
        sandbox::v1::PoolInfo* pool = info.add_pools();
        pool->set_runtime("python");
        pool->set_ready(2);
        infos.push_back(info);
      }
      return infos;
    };
  }
  void Set(uint32_t s) {
    codemode::MutexLock lock(&mu);
    sessions = s;
  }
};

LoadWatch::Options Quiet() {  // no refresh within a test
  LoadWatch::Options o;
  o.refresh = absl::Hours(1);
  o.max_age = absl::Hours(1);
  return o;
}

TEST(LoadWatchTest, ARecentAnswerIsReadWithWhatWasPlacedSince) {
  FakeEndpoints fake;
  fake.silent = 2;
  LoadWatch watch(fake.ask(), [] { return std::vector<size_t>{}; }, Quiet());
  std::vector<std::optional<sandbox::v1::Info>> first = watch.Infos({0, 1, 2});
  EXPECT_EQ(fake.asked.load(), 1);
  ASSERT_TRUE(first[0] && first[1]);
  EXPECT_FALSE(first[2]) << "the silent one did not answer";
  fake.Set(30);  // not seen until the next answer
  for (int i = 0; i < 3; ++i) {
    watch.PlaceDone(1, watch.Placing(1), LoadWatch::Ended::kCreated);
  }
  std::vector<std::optional<sandbox::v1::Info>> second = watch.Infos({0, 1, 2});
  EXPECT_EQ(fake.asked.load(), 1) << "asked again on the create path";
  ASSERT_TRUE(second[0] && second[1]);
  EXPECT_EQ(second[0]->sessions(), 5u);
  EXPECT_EQ(second[1]->sessions(), 8u);
  EXPECT_EQ(second[1]->pool_ready(), 0u) << "two warm, three placed";
  EXPECT_EQ(second[1]->pools(0).ready(), 0u);
  EXPECT_FALSE(second[2]) << "still not answered";
  // An endpoint first seen now is asked, alone.
  std::vector<std::optional<sandbox::v1::Info>> third = watch.Infos({0, 3});
  EXPECT_EQ(fake.asked.load(), 2);
  ASSERT_TRUE(third[1]);
  EXPECT_EQ(third[1]->sessions(), 30u);
}

TEST(LoadWatchTest, AnAnswerOlderThanMaxAgeIsAskedAgainOnThePath) {
  FakeEndpoints fake;
  LoadWatch::Options o = Quiet();
  o.max_age = absl::Milliseconds(20);
  LoadWatch watch(fake.ask(), [] { return std::vector<size_t>{}; }, o);
  watch.Infos({0});
  watch.PlaceDone(0, watch.Placing(0), LoadWatch::Ended::kCreated);
  fake.Set(9);
  absl::SleepFor(absl::Milliseconds(30));
  std::vector<std::optional<sandbox::v1::Info>> infos = watch.Infos({0});
  EXPECT_EQ(fake.asked.load(), 2);
  ASSERT_TRUE(infos[0]);
  EXPECT_EQ(infos[0]->sessions(), 9u) << "the new answer, without the placement it already counts";
}

TEST(LoadWatchTest, TheThreadAsksWhileCreatesComeAndStopsAfter) {
  FakeEndpoints fake;
  LoadWatch::Options o;
  o.refresh = absl::Milliseconds(5);
  o.max_age = absl::Hours(1);
  o.active = absl::Milliseconds(200);
  LoadWatch watch(fake.ask(), [] { return std::vector<size_t>{0, 1}; }, o);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(fake.asked.load(), 0) << "no create yet: nothing to watch";
  watch.Infos({0, 1});
  fake.Set(12);
  for (int i = 0; i < 3000 && fake.asked.load() < 3; ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_GE(fake.asked.load(), 3);
  std::vector<std::optional<sandbox::v1::Info>> infos = watch.Infos({0, 1});
  ASSERT_TRUE(infos[0]);
  EXPECT_EQ(infos[0]->sessions(), 12u) << "the thread's answer";
  // Quiet for longer than `active`: the thread stops asking.
  absl::SleepFor(absl::Milliseconds(400));
  const int asked = fake.asked.load();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(fake.asked.load(), asked);
}

// An answer is kept between creates: only its load, bounded, whatever the endpoint sends.
TEST(LoadWatchTest, OnlyTheLoadOfAnAnswerIsKept) {
  sandbox::v1::Info info;
  info.set_serving(true);
  info.set_sessions(3);
  info.set_max_sessions(64);
  info.set_pool_ready(1);
  for (int i = 0; i < 100; ++i) info.add_notes(std::string(1000, 'n'));
  for (int i = 0; i < 20; ++i) {
    sandbox::v1::PoolInfo* pool = info.add_pools();
    pool->set_runtime("python");
    pool->set_ready(2);
    pool->set_unavailable(std::string(5000, 'u'));
  }
  const sandbox::v1::Info load = LoadOf(info);
  EXPECT_TRUE(load.serving());
  EXPECT_EQ(load.sessions(), 3u);
  EXPECT_EQ(load.max_sessions(), 64u);
  EXPECT_EQ(load.pool_ready(), 1u);
  EXPECT_EQ(load.notes_size(), 0);
  ASSERT_EQ(load.pools_size(), LoadWatch::kMaxPools);
  EXPECT_EQ(load.pools(0).ready(), 2u);
  EXPECT_EQ(load.pools(0).unavailable().size(), LoadWatch::kMaxReasonBytes);
}

// Creates out count in their endpoint's load (overlapping creates, or creates that hang
// there, spread instead of piling onto the endpoint that looked best); one that failed
// counts no more.
TEST(LoadWatchTest, CreatesOutCountUntilTheyEnd) {
  FakeEndpoints fake;
  LoadWatch watch(fake.ask(), [] { return std::vector<size_t>{}; }, Quiet());
  watch.Infos({0});
  const absl::Time first = watch.Placing(0);
  const absl::Time second = watch.Placing(0);
  EXPECT_EQ(watch.Infos({0})[0]->sessions(), 7u);
  watch.PlaceDone(0, first, LoadWatch::Ended::kRefused);
  EXPECT_EQ(watch.Infos({0})[0]->sessions(), 6u);
  watch.PlaceDone(0, second, LoadWatch::Ended::kCreated);
  EXPECT_EQ(watch.Infos({0})[0]->sessions(), 6u);
  // An endpoint asked on the path counts its creates out too.
  watch.Placing(4);
  EXPECT_EQ(watch.Infos({4})[0]->sessions(), 6u);
}

// An answer asked for before a sandbox there was made may not count it (sandboxd answered
// GetInfo before the create finished): that sandbox stays counted until an answer asked
// after it, or two replicas' creates a moment apart read an endpoint as emptier than it is.
TEST(LoadWatchTest, ASandboxMadeWhileAnAskWasOutStaysCounted) {
  FakeEndpoints fake;  // answers 5 sessions whatever is placed: what sandboxd counted at the ask
  absl::Notification in_ask, release;
  LoadWatch::Ask answer = fake.ask();
  LoadWatch::Ask gated = [&](const std::vector<size_t>& endpoints) {
    std::vector<std::optional<sandbox::v1::Info>> infos = answer(endpoints);
    if (!in_ask.HasBeenNotified()) {
      in_ask.Notify();
      release.WaitForNotification();
    }
    return infos;
  };
  LoadWatch watch(gated, [] { return std::vector<size_t>{}; }, Quiet());
  std::optional<sandbox::v1::Info> on_path;
  std::thread asking([&] { on_path = watch.Infos({0})[0]; });
  in_ask.WaitForNotification();
  watch.PlaceDone(0, watch.Placing(0), LoadWatch::Ended::kCreated);  // made while the ask is out
  release.Notify();
  asking.join();
  ASSERT_TRUE(on_path);
  EXPECT_EQ(on_path->sessions(), 6u) << "the answer on the path missed the sandbox made while it was out";
  EXPECT_EQ(watch.Infos({0})[0]->sessions(), 6u) << "the recorded answer dropped the sandbox made after its ask";
  watch.PlaceDone(0, watch.Placing(0), LoadWatch::Ended::kCreated);
  EXPECT_EQ(watch.Infos({0})[0]->sessions(), 7u);
}

// An endpoint whose creates go unanswered (podman stuck while GetInfo answers) is stuck
// once one has been out past stuck_after with no create there answered since it was sent.
TEST(LoadWatchTest, AnEndpointWhoseCreatesGoUnansweredIsStuck) {
  FakeEndpoints fake;
  LoadWatch::Options o = Quiet();
  o.stuck_after = absl::Milliseconds(20);
  LoadWatch watch(fake.ask(), [] { return std::vector<size_t>{}; }, o);
  const absl::Time hanging = watch.Placing(0);
  EXPECT_FALSE(watch.Stuck(0)) << "out for less than stuck_after";
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_TRUE(watch.Stuck(0));
  EXPECT_FALSE(watch.Stuck(1)) << "nothing out there";
  watch.PlaceDone(0, hanging, LoadWatch::Ended::kNoAnswer);
  EXPECT_FALSE(watch.Stuck(0)) << "nothing out there any more";
  watch.PlaceDone(0, watch.Placing(0), LoadWatch::Ended::kRefused);  // an answer, then ...
  const absl::Time later = watch.Placing(0);                         // ... one that hangs
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_TRUE(watch.Stuck(0)) << "the answer came before the create out was sent";
  watch.PlaceDone(0, later, LoadWatch::Ended::kNoAnswer);
}

// Creates slower than stuck_after that are answered (every endpoint's, when podman is slow
// under load) do not make their endpoint stuck once one is answered: placement must not
// rank every endpoint as stuck and prefer one that answers nothing.
TEST(LoadWatchTest, SlowCreatesThatAreAnsweredDoNotMakeAnEndpointStuck) {
  FakeEndpoints fake;
  LoadWatch::Options o = Quiet();
  o.stuck_after = absl::Milliseconds(20);
  LoadWatch watch(fake.ask(), [] { return std::vector<size_t>{}; }, o);
  const absl::Time first = watch.Placing(0);
  absl::SleepFor(absl::Milliseconds(5));
  const absl::Time second = watch.Placing(0);
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_TRUE(watch.Stuck(0)) << "none answered yet";
  watch.PlaceDone(0, first, LoadWatch::Ended::kCreated);
  EXPECT_FALSE(watch.Stuck(0)) << "the endpoint answered after the create still out was sent";
  watch.PlaceDone(0, second, LoadWatch::Ended::kCreated);
}

// A host just added is asked by the thread first; a create meanwhile waits for that answer
// instead of reading the host as "not answered", which would place behind every other.
TEST(LoadWatchTest, AnEndpointsFirstAskOutIsWaitedFor) {
  FakeEndpoints fake;
  fake.Set(0);
  absl::Notification in_ask, release;
  LoadWatch::Ask answer = fake.ask();
  LoadWatch::Ask gated = [&](const std::vector<size_t>& endpoints) {
    if (std::find(endpoints.begin(), endpoints.end(), 1) != endpoints.end()) {
      if (!in_ask.HasBeenNotified()) in_ask.Notify();
      release.WaitForNotification();
    }
    return answer(endpoints);
  };
  LoadWatch::Options o = Quiet();
  o.refresh = absl::Milliseconds(5);
  LoadWatch watch(gated, [] { return std::vector<size_t>{0, 1}; }, o);
  watch.Infos({0});  // a create: the thread starts asking the members, 1 among them
  in_ask.WaitForNotification();
  std::thread answers([&] {
    absl::SleepFor(absl::Milliseconds(50));  // Infos below is in by then, or returned without 1
    release.Notify();
  });
  std::vector<std::optional<sandbox::v1::Info>> infos = watch.Infos({0, 1});
  answers.join();
  ASSERT_TRUE(infos[1]) << "the added endpoint read as not answered while its first ask was out";
  EXPECT_EQ(infos[1]->sessions(), 0u);
}

}  // namespace
}  // namespace gateway
