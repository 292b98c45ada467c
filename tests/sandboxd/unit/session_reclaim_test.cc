// SessionManager: room for a new session (CreateSessionRequest.reclaim_idle and
// max_owner_sessions): an owner at a limit gets room by ending its least recently used idle
// session, never another owner's or a busy one, and a creator may ask for a tighter limit.
#include "session_manager_fixture.h"

namespace sandboxd::testing {
namespace {

// ---- reclaim_idle: an owner at a limit gets room by ending its LRU idle session ------

constexpr sandbox::v1::Session::State kReady = sandbox::v1::Session::READY,
                                       kLost = sandbox::v1::Session::LOST;

sandbox::v1::CreateSessionRequest OwnedBy(const std::string& owner, bool reclaim_idle) {
  sandbox::v1::CreateSessionRequest r;
  r.set_owner(owner);
  r.set_reclaim_idle(reclaim_idle);
  return r;
}

ManagerOptions PerOwner(ManagerOptions o, uint32_t max_sessions_per_owner) {
  o.max_sessions_per_owner = max_sessions_per_owner;
  return o;
}

TEST_F(SessionManagerTest, ReclaimIdleEndsTheOwnersLeastRecentlyUsedIdleSession) {
  SessionManager* m = StartManager(PerOwner(Options(), 2));
  sandbox::v1::Session other = Create(m, OwnedBy("bob", false));  // idle the longest
  clock_.Advance(absl::Seconds(1));
  sandbox::v1::Session older = Create(m, OwnedBy("alice", false));
  clock_.Advance(absl::Seconds(1));
  sandbox::v1::Session lru = Create(m, OwnedBy("alice", false));
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Eval(m, older.id(), "x = 7\nx"), "7");  // used since: no longer the LRU
  ASSERT_FALSE(Create(m, OwnedBy("alice", true)).id().empty());
  absl::StatusOr<sandbox::v1::Session> gone = m->GetSession(lru.id());
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(gone->state(), kLost);
  EXPECT_EQ(gone->lost_reason(), "reclaimed: its owner reached --max_sessions_per_owner (2) "
                                 "and this was its least recently used idle session");
  absl::Status st = m->ResetSession(lru.id()).status();  // any call on it
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("session lost: reclaimed: its owner"));
  EXPECT_EQ(Eval(m, older.id(), "x"), "7");
  EXPECT_EQ(m->GetSession(other.id())->state(), kReady);
  EXPECT_EQ(m->GetInfo().sessions(), 3u);
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 1u);
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(lru.container_id()); }));
  EXPECT_TRUE(WaitFor([&] { return !fs::exists(SessionRecordPath(lru.id())); }));
}

TEST_F(SessionManagerTest, WithoutReclaimIdleAFullOwnerIsRefused) {
  SessionManager* m = StartManager(PerOwner(Options(), 1));
  sandbox::v1::Session s = Create(m, OwnedBy("alice", false));
  EXPECT_EQ(m->CreateSession(OwnedBy("alice", false)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m->GetSession(s.id())->state(), kReady);
  EXPECT_TRUE(m->CreateSession(OwnedBy("alice", true)).ok()) << "the same, with reclaim_idle";
  EXPECT_EQ(m->GetSession(s.id())->state(), kLost);
}

// max_owner_sessions: a creator (mcp-gateway, per credential) may ask for a tighter cap
// than the daemon's flag, never a looser one (attack round 14, F3: sandboxes made without
// an MCP session escaped the gateway's --max_sandboxes_per_credential).
TEST_F(SessionManagerTest, ACreatorMayAskForATighterOwnerLimitNeverALooserOne) {
  SessionManager* m = StartManager(PerOwner(Options(), 3));
  auto limited = [](bool reclaim, uint32_t limit) {
    sandbox::v1::CreateSessionRequest r = OwnedBy("alice", reclaim);
    r.set_max_owner_sessions(limit);
    return r;
  };
  sandbox::v1::Session first = Create(m, limited(false, 2));
  clock_.Advance(absl::Seconds(1));
  Create(m, limited(false, 2));
  absl::Status refused = m->CreateSession(limited(false, 2)).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("the limit is 2 per owner"));
  // With reclaim_idle, the owner's least recently used idle one makes room.
  ASSERT_TRUE(m->CreateSession(limited(true, 2)).ok());
  EXPECT_EQ(m->GetSession(first.id())->state(), kLost);
  EXPECT_THAT(m->GetSession(first.id())->lost_reason(), HasSubstr("max_owner_sessions"));
  // More than the flag is the flag.
  Create(m, limited(false, 100));
  EXPECT_EQ(m->CreateSession(limited(false, 100)).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(SessionManagerTest, ReclaimIdleNeverEndsABusySession) {
  SessionManager* m = StartManager(PerOwner(Options(), 1));
  sandbox::v1::Session s = Create(m, OwnedBy("alice", false));
  Started busy = Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(busy.collector->WaitStarted());
  int starts = runtime_->start_calls();
  EXPECT_EQ(m->CreateSession(OwnedBy("alice", true)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(runtime_->start_calls(), starts) << "refused before a container was started";
  EXPECT_EQ(busy.collector->finished_count(), 0);
  busy.execution->Cancel();
  ASSERT_TRUE(busy.collector->WaitFinished());
  EXPECT_TRUE(m->CreateSession(OwnedBy("alice", true)).ok()) << "idle now";
  EXPECT_EQ(m->GetSession(s.id())->state(), kLost);
}

TEST_F(SessionManagerTest, ReclaimIdleAtMaxSessionsEndsOnlyTheAskingOwnersSession) {
  ManagerOptions o = Options();
  o.max_sessions = 2;
  SessionManager* m = StartManager(o);
  sandbox::v1::Session bob = Create(m, OwnedBy("bob", false));  // idle the longest
  clock_.Advance(absl::Seconds(1));
  sandbox::v1::Session alice = Create(m, OwnedBy("alice", false));
  EXPECT_EQ(m->CreateSession(OwnedBy("carol", true)).status().code(),
            absl::StatusCode::kResourceExhausted) << "carol holds no session to reclaim";
  ASSERT_FALSE(Create(m, OwnedBy("alice", true)).id().empty());
  EXPECT_EQ(m->GetSession(alice.id())->lost_reason(),
            "reclaimed: the daemon reached --max_sessions (2) and this was its owner's least "
            "recently used idle session");
  EXPECT_EQ(m->GetSession(bob.id())->state(), kReady);
}

TEST_F(SessionManagerTest, ReclaimIdleNeedsAnOwner) {
  SessionManager* m = StartManager(PerOwner(Options(), 1));
  sandbox::v1::Session anonymous = Create(m, OwnedBy("", true));
  EXPECT_EQ(m->CreateSession(OwnedBy("", true)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m->GetSession(anonymous.id())->state(), kReady);
  sandbox::v1::Session named = Create(m, OwnedBy("alice", true));
  EXPECT_TRUE(m->CreateSession(OwnedBy("alice", true)).ok()) << "an owner gets the reclaim";
  EXPECT_EQ(m->GetSession(named.id())->state(), kLost);
}

// Two creations of one owner at its cap: each ends a different session; the cap holds.
TEST_F(SessionManagerTest, ConcurrentReclaimsEndDifferentSessions) {
  SessionManager* m = StartManager(PerOwner(Options(), 2));
  sandbox::v1::Session a = Create(m, OwnedBy("alice", false));
  clock_.Advance(absl::Seconds(1));
  sandbox::v1::Session b = Create(m, OwnedBy("alice", false));
  clock_.Advance(absl::Seconds(1));
  std::vector<absl::StatusOr<sandbox::v1::Session>> got(2, absl::UnknownError("not run"));
  std::thread t1([&] { got[0] = m->CreateSession(OwnedBy("alice", true)); });
  std::thread t2([&] { got[1] = m->CreateSession(OwnedBy("alice", true)); });
  for (std::thread* t : {&t1, &t2}) t->join();
  ASSERT_TRUE(got[0].ok() && got[1].ok()) << got[0].status() << " " << got[1].status();
  EXPECT_NE(got[0]->id(), got[1]->id());
  EXPECT_EQ(m->GetSession(a.id())->state(), kLost);
  EXPECT_EQ(m->GetSession(b.id())->state(), kLost);
  EXPECT_EQ(m->GetInfo().sessions(), 2u);
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 2u);
}

}  // namespace
}  // namespace sandboxd::testing
