// SessionManager: creations whose callers gave up (CreateSession's `wanted`) end nothing
// for their room, hold no room or claim anyone else could use, and their containers, still
// starting, stay bounded by --max_sessions and hold back one waiting creation each.
#include <atomic>
#include <future>

#include "room_helpers.h"

namespace sandboxd::testing {
namespace {

// Runs a CreateSession of `cold` (a config no pool holds) whose caller gives up once its
// start is under way, and `meanwhile` while that start is held; returns how it ended.
absl::Status GaveUpWhileStarting(SessionManager* m, ProcessRuntime* runtime,
                                 const sandbox::v1::CreateSessionRequest& cold,
                                 const std::function<void()>& meanwhile) {
  runtime->SetStartHeld(true);
  std::atomic<bool> wanted{true};
  auto creating = std::async(std::launch::async, [&] {
    return m->CreateSession(cold, [&] { return wanted.load(); }).status();
  });
  const bool under_way = WaitFor([&] { return runtime->starts_held() == 1; });
  wanted = false;
  meanwhile();
  runtime->SetStartHeld(false);
  EXPECT_TRUE(under_way);
  return creating.get();
}

// GaveUpWhileStarting at a daemon `m` whose pool is full: alice's creation (never pooled)
// is the one whose caller gives up.
absl::Status AliceGaveUpAtAFullPool(SessionManager* m, ProcessRuntime* runtime,
                                    const std::function<void()>& meanwhile) {
  MarkFullPool(m, runtime);
  sandbox::v1::CreateSessionRequest alice = OwnedBy("alice", false);
  alice.mutable_limits()->set_pids(200);  // never pooled
  return GaveUpWhileStarting(m, runtime, alice, meanwhile);
}

// The container of a creation whose caller gave up is no session anyone wants: at a daemon
// full with it, another creation ends no idle session for room but waits until that
// container has started (and is thrown away), and then has the room. Until then it starts
// nothing: callers that give up cannot have more containers starting than --max_sessions.
TEST_F(SessionManagerTest, ACreationBesideOneWhoseCallerGaveUpWaitsAndEndsNothing) {
  ManagerOptions o = Options();
  o.max_sessions = 3;
  o.pool_size = 1;  // carol's container: alice's start is held
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 2; ++i) ASSERT_FALSE(Create(m, OwnedBy("bob", false)).id().empty());
  const PoolMark before = MarkFullPool(m, runtime_.get());
  sandbox::v1::CreateSessionRequest alice = OwnedBy("alice", false);
  alice.mutable_limits()->set_pids(200);  // never pooled
  std::future<absl::StatusOr<sandbox::v1::Session>> carol;
  absl::Status gave_up = GaveUpWhileStarting(m, runtime_.get(), alice, [&] {
    carol = std::async(std::launch::async, [m] { return m->CreateSession(OwnedBy("carol", false)); });
    EXPECT_EQ(carol.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
        << "carol did not wait for alice's container";
    EXPECT_EQ(m->GetInfo().pools(0).taken_total(), before.taken) << "carol took a container meanwhile";
  });
  EXPECT_TRUE(absl::IsCancelled(gave_up)) << gave_up;
  absl::StatusOr<sandbox::v1::Session> carols = carol.get();
  EXPECT_TRUE(carols.ok()) << carols.status();
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 0u) << "an idle session ended for room nobody wanted";
  EXPECT_EQ(m->GetInfo().sessions(), 3u);
}

// The same for a claim: at a full daemon, a creation whose caller gave up while its
// container starts has claimed an idle session nobody will end for it, and that container
// still counts. The next creation waits for it instead of claiming the other idle session
// and starting another; its owner's next is refused at once. Otherwise callers that give up
// while claiming could have any number of containers starting past --max_sessions.
TEST_F(SessionManagerTest, AClaimWhoseCallerGaveUpStillCountsAsAContainerStarting) {
  ManagerOptions o = Options();
  o.max_sessions = 2;
  o.pool_size = 1;  // carol's container: alice's start is held
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 2; ++i) ASSERT_FALSE(Create(m, OwnedBy("bob", false)).id().empty());
  const PoolMark before = MarkFullPool(m, runtime_.get());
  sandbox::v1::CreateSessionRequest alice = OwnedBy("alice", false);  // claims one of bob's
  alice.mutable_limits()->set_pids(200);  // never pooled
  std::future<absl::StatusOr<sandbox::v1::Session>> carol;
  absl::Status gave_up = GaveUpWhileStarting(m, runtime_.get(), alice, [&] {
    carol = std::async(std::launch::async, [m] { return m->CreateSession(OwnedBy("carol", false)); });
    EXPECT_EQ(carol.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
        << "carol claimed bob's other session beside alice's container";
    EXPECT_EQ(m->GetInfo().pools(0).taken_total(), before.taken) << "carol took a container meanwhile";
    absl::StatusOr<sandbox::v1::Session> again = m->CreateSession(OwnedBy("carol", false));
    EXPECT_TRUE(absl::IsResourceExhausted(again.status())) << again.status();
    EXPECT_THAT(std::string(again.status().message()),
                ::testing::HasSubstr("1 container still starting for callers that gave up"));
    EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 0u);
  });
  EXPECT_TRUE(absl::IsCancelled(gave_up)) << gave_up;
  absl::StatusOr<sandbox::v1::Session> carols = carol.get();
  EXPECT_TRUE(carols.ok()) << carols.status();
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 1u) << "carol's fair share, once";
  EXPECT_EQ(m->GetInfo().sessions(), 2u);
}

// Each container starting for nobody makes room for one creation: one more of an owner
// waits for it, that owner's next is refused at once instead of holding an RPC thread, and
// a draining daemon ends those waiting. The places to wait are each owner's: the owner
// whose caller gave up, waiting with its next creation, leaves another owner's place.
TEST_F(SessionManagerTest, OneCreationOfEachOwnerWaitsPerContainerStartingForNobody) {
  ManagerOptions o = Options();
  o.max_sessions = 3;
  o.pool_size = 1;
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 2; ++i) ASSERT_FALSE(Create(m, OwnedBy("bob", false)).id().empty());
  absl::Status gave_up = AliceGaveUpAtAFullPool(m, runtime_.get(), [&] {
    auto alices = std::async(std::launch::async, [m] { return m->CreateSession(OwnedBy("alice", false)); });
    EXPECT_EQ(alices.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
    auto again = std::async(std::launch::async, [m] { return m->CreateSession(OwnedBy("alice", false)); });
    ASSERT_EQ(again.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "alice waits twice";
    EXPECT_TRUE(absl::IsResourceExhausted(again.get().status()));
    auto carol = std::async(std::launch::async, [m] { return m->CreateSession(OwnedBy("carol", false)); });
    EXPECT_EQ(carol.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
        << "carol was refused: alice's waiting creation took her place";
    m->Drain();
    for (auto* waiting : {&alices, &carol}) {
      ASSERT_EQ(waiting->wait_for(std::chrono::seconds(5)), std::future_status::ready)
          << "the drain left a creation waiting";
      EXPECT_TRUE(absl::IsUnavailable(waiting->get().status()));
    }
    EXPECT_TRUE(absl::IsUnavailable(m->CreateSession(OwnedBy("erin", false)).status()));
  });
  EXPECT_TRUE(absl::IsCancelled(gave_up)) << gave_up;
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 0u);
}

// The places of all owners together are bounded too (max_waiting_creations, a quarter of
// --max_rpc_threads): past them a creation is refused at once, so waiters never take the
// threads other calls need.
TEST_F(SessionManagerTest, CreationsOfAllOwnersWaitWithinTheirOwnBound) {
  ManagerOptions o = Options();
  o.max_sessions = 3;
  o.pool_size = 1;
  o.max_waiting_creations = 1;
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 2; ++i) ASSERT_FALSE(Create(m, OwnedBy("bob", false)).id().empty());
  absl::Status gave_up = AliceGaveUpAtAFullPool(m, runtime_.get(), [&] {
    auto carol = std::async(std::launch::async, [m] { return m->CreateSession(OwnedBy("carol", false)); });
    EXPECT_EQ(carol.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
    auto dave = std::async(std::launch::async, [m] { return m->CreateSession(OwnedBy("dave", false)); });
    ASSERT_EQ(dave.wait_for(std::chrono::seconds(5)), std::future_status::ready)
        << "dave waits past the bound of all owners' places";
    absl::Status refused = dave.get().status();
    EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
    EXPECT_THAT(std::string(refused.message()),
                ::testing::HasSubstr("1 container still starting for callers that gave up"));
    m->Drain();
    ASSERT_EQ(carol.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    EXPECT_TRUE(absl::IsUnavailable(carol.get().status()));
  });
  EXPECT_TRUE(absl::IsCancelled(gave_up)) << gave_up;
}

// ... and its claim on an idle session is another creation's at once: an owner at its limit
// with one idle session reclaims it although a creation that gave up claimed it first.
TEST_F(SessionManagerTest, TheClaimOfACreationWhoseCallerGaveUpIsFreeAtOnce) {
  ManagerOptions o = PerOwner(Options(), 2);
  o.pool_size = 1;  // the second creation's container: the first's start is held
  SessionManager* m = StartManager(o);
  Create(m, OwnedBy("alice", false));
  sandbox::v1::Session busy = Create(m, OwnedBy("alice", false));
  Started loop = Exec(m, busy.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(loop.collector->WaitStarted());
  MarkFullPool(m, runtime_.get());
  sandbox::v1::CreateSessionRequest first = OwnedBy("alice", true);
  first.mutable_limits()->set_pids(200);  // never pooled
  absl::StatusOr<sandbox::v1::Session> second = absl::UnknownError("not run");
  absl::Status gave_up = GaveUpWhileStarting(m, runtime_.get(), first, [&] {
    second = m->CreateSession(OwnedBy("alice", true));
  });
  EXPECT_TRUE(absl::IsCancelled(gave_up)) << gave_up;
  EXPECT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 1u);
  loop.execution->Cancel();
  ASSERT_TRUE(loop.collector->WaitFinished());
}

// A creation refused at registration lets go of everything it started: its container and
// its socket directory go at once, not at the next daemon start.
TEST_F(SessionManagerTest, ACreationRefusedAtRegistrationLeavesNoSocketDirectory) {
  ManagerOptions o = Options();
  o.max_sessions = 3;
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(Create(m, OwnedBy("bob", false)).id().empty());
  const size_t dirs = SocketDirs();
  int asked = 0;  // wanted once its container is there, given up before it registers
  absl::StatusOr<sandbox::v1::Session> gave_up =
      m->CreateSession(OwnedBy("alice", false), [&] { return asked++ < 1; });
  EXPECT_TRUE(absl::IsCancelled(gave_up.status())) << gave_up.status();
  EXPECT_EQ(dirs, 3u);
  EXPECT_TRUE(WaitFor([&] { return SocketDirs() == dirs; })) << SocketDirs() << " socket directories";
  EXPECT_TRUE(WaitFor([&] { return runtime_->Names().size() == 3; }));
}

// A creation whose caller gave up ends nothing for its room: asked once its container is
// there, and again before it would end another owner's idle session at a full daemon.
TEST_F(SessionManagerTest, ACreationWhoseCallerGaveUpReclaimsNothing) {
  ManagerOptions o = Options();
  o.max_sessions = 3;
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(Create(m, OwnedBy("bob", false)).id().empty());
  for (int wanted_for : {0, 1}) {  // answers "still wanted" this many times, then gives up
    int asked = 0;
    absl::StatusOr<sandbox::v1::Session> gave_up =
        m->CreateSession(OwnedBy("alice", false), [&] { return asked++ < wanted_for; });
    EXPECT_TRUE(absl::IsCancelled(gave_up.status())) << gave_up.status();
    EXPECT_EQ(asked, wanted_for + 1);
    EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 0u);
    EXPECT_EQ(m->GetInfo().sessions(), 3u);
  }
  // What it held is given back: a creation still wanted takes its fair share.
  EXPECT_TRUE(m->CreateSession(OwnedBy("alice", false), [] { return true; }).ok());
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 1u);
}

}  // namespace
}  // namespace sandboxd::testing
