// SessionManager: room for a new session (CreateSessionRequest.reclaim_idle and
// max_owner_sessions): an owner at a limit gets room by ending its least recently used idle
// session, never a busy one, and a creator may ask for a tighter limit; a full daemon
// makes room for an owner holding fewer by ending an idle session of the owner holding
// the most.
#include <future>

#include "room_helpers.h"
#include "sandboxd/refusal.h"

namespace sandboxd::testing {
namespace {

// ---- reclaim_idle: an owner at a limit gets room by ending its LRU idle session ------

constexpr sandbox::v1::Session::State kReady = sandbox::v1::Session::READY,
                                       kLost = sandbox::v1::Session::LOST;

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
// than the daemon's flag, never a looser one (so sandboxes made without an MCP session keep
// to the gateway's --max_sandboxes_per_credential).
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

// ---- a full daemon: an owner holding fewer gets the idle session of one holding more --

// One owner's idle sessions must not leave another owner's first run with "too many
// sessions".
TEST_F(SessionManagerTest, AFullDaemonEndsTheIdleSessionOfTheOwnerHoldingTheMostForANewOwner) {
  ManagerOptions o = Options();
  o.max_sessions = 6;
  SessionManager* m = StartManager(o);
  std::vector<sandbox::v1::Session> bob, alice;
  for (int i = 0; i < 2; ++i) bob.push_back(Create(m, OwnedBy("bob", false)));  // idle the longest
  clock_.Advance(absl::Seconds(1));
  for (int i = 0; i < 4; ++i) {
    alice.push_back(Create(m, OwnedBy("alice", false)));
    clock_.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(Eval(m, alice[0].id(), "x = 7\nx"), "7");  // used since: alice[1] is her LRU
  absl::StatusOr<sandbox::v1::Session> carol = m->CreateSession(OwnedBy("carol", false));
  ASSERT_TRUE(carol.ok()) << carol.status();
  absl::StatusOr<sandbox::v1::Session> gone = m->GetSession(alice[1].id());
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(gone->state(), kLost);
  // The fake clock's time when carol asked.
  EXPECT_EQ(gone->lost_reason(),
            "reclaimed: for another owner at 2023-11-14T22:13:25Z: the daemon was full (6 "
            "sessions of 2 owners) and this session's owner held more than the new one's");
  absl::Status st = m->ResetSession(alice[1].id()).status();  // its owner's next answer
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("session lost: reclaimed: for another owner at "));
  for (const auto& s : bob) EXPECT_EQ(m->GetSession(s.id())->state(), kReady);
  EXPECT_EQ(Eval(m, alice[0].id(), "x"), "7");
  EXPECT_EQ(m->GetInfo().sessions(), 6u);
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 1u);
}

TEST_F(SessionManagerTest, AFullDaemonReclaimsOnlyFromAnOwnerThatWouldStillHoldMore) {
  ManagerOptions o = Options();
  o.max_sessions = 5;
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 3; ++i) Create(m, OwnedBy("alice", false));
  for (int i = 0; i < 2; ++i) Create(m, OwnedBy("bob", false));
  // bob with 3 would hold more than alice with 2: the two would take turns.
  absl::Status bob = m->CreateSession(OwnedBy("bob", false)).status();
  EXPECT_EQ(bob.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(bob.message()),
              HasSubstr("the daemon is full (5 sessions of 2 owners; this owner holds 2)"));
  EXPECT_EQ(m->CreateSession(OwnedBy("alice", false)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 0u);
  EXPECT_TRUE(m->CreateSession(OwnedBy("carol", false)).ok()) << "carol holds none";
  size_t alice_lost = 0;
  const std::vector<sandbox::v1::Session> alices = *m->ListSessions("alice");
  for (const auto& s : alices) alice_lost += s.state() == kLost;
  EXPECT_EQ(alice_lost, 1u);
}

TEST_F(SessionManagerTest, AFullDaemonWithNothingIdleSaysHowFullItIs) {
  ManagerOptions o = Options();
  o.max_sessions = 2;
  SessionManager* m = StartManager(o);
  std::vector<Started> busy;
  for (int i = 0; i < 2; ++i) {
    sandbox::v1::Session s = Create(m, OwnedBy("alice", false));
    busy.push_back(Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)"));
    ASSERT_TRUE(busy.back().collector->WaitStarted());
  }
  int starts = runtime_->start_calls();
  absl::Status refused = m->CreateSession(OwnedBy("bob", false)).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "too many sessions (the limit is 2): the daemon is full (2 sessions of 1 owner; "
            "this owner holds 0) and none that could make room is idle");
  EXPECT_EQ(runtime_->start_calls(), starts) << "refused before a container was started";
  busy[1].execution->Cancel();
  ASSERT_TRUE(busy[1].collector->WaitFinished());
  EXPECT_TRUE(m->CreateSession(OwnedBy("bob", false)).ok()) << "idle now";
  EXPECT_EQ(busy[0].collector->finished_count(), 0) << "the busy one is left alone";
  busy[0].execution->Cancel();
  ASSERT_TRUE(busy[0].collector->WaitFinished());
}

// ---- concurrent creations: refused before they take a warm container --------------

// Runs `n` CreateSessions of `request` at once; returns how many succeeded (the others must
// be refused for room).
int CreateAtOnce(SessionManager* m, int n, const sandbox::v1::CreateSessionRequest& request) {
  std::vector<absl::StatusOr<sandbox::v1::Session>> got(n, absl::UnknownError("not run"));
  std::vector<std::thread> creators;
  for (int i = 0; i < n; ++i) creators.emplace_back([&, i] { got[i] = m->CreateSession(request); });
  for (std::thread& t : creators) t.join();
  int created = 0;
  for (const auto& g : got) {
    if (g.ok()) {
      ++created;
    } else {
      EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted) << g.status();
    }
  }
  return created;
}

ManagerOptions WithGrowingPool(ManagerOptions o) {
  o.pool_size = 4;
  o.pool_max = 16;
  return o;
}

// What a burst took from the pool since `before`: only what it created, and no miss.
void ExpectOnlyCreatedTaken(SessionManager* m, ProcessRuntime* runtime, const PoolMark& before,
                            int created) {
  const sandbox::v1::PoolInfo python = m->GetInfo().pools(0);
  EXPECT_EQ(python.taken_total(), before.taken + created) << "refused creations took warm containers";
  EXPECT_EQ(python.target(), before.target) << "refused creations counted as misses";
  ASSERT_TRUE(WaitFor([&] { return m->GetInfo().pool_ready() == before.target; }));
  EXPECT_EQ(runtime->start_calls(), before.starts + created) << "only those taken were refilled";
}

// Runs the CreateSessions `colds` (of a config no pool holds) at once with every start held
// until each is started or refused, so all are under way before any registers; returns how
// many started a container, and sets `created`.
int StartedAtOnce(SessionManager* m, ProcessRuntime* runtime,
                  const std::vector<sandbox::v1::CreateSessionRequest>& colds, int* created) {
  runtime->SetStartHeld(true);
  const int n = static_cast<int>(colds.size());
  std::vector<std::future<absl::StatusOr<sandbox::v1::Session>>> creating;
  for (const sandbox::v1::CreateSessionRequest& cold : colds) {
    creating.push_back(std::async(std::launch::async, [m, &cold] { return m->CreateSession(cold); }));
  }
  const bool settled = WaitFor([&] {
    int refused = 0;
    for (auto& f : creating) refused += f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    return runtime->starts_held() + refused == n;
  });
  const int started = runtime->starts_held();
  runtime->SetStartHeld(false);
  EXPECT_TRUE(settled);
  *created = 0;
  for (auto& f : creating) *created += f.get().ok();
  return started;
}

// Creations over a limit are refused before they take a warm container or start one: the
// room of each admitted creation is held until it registers, so a refused one neither
// empties the pool nor counts as a miss that grows it.
TEST_F(SessionManagerTest, ConcurrentCreationsOverALimitLeaveThePoolAlone) {
  SessionManager* m = StartManager(WithGrowingPool(PerOwner(Options(), 2)));
  const PoolMark before = MarkFullPool(m, runtime_.get());
  EXPECT_EQ(CreateAtOnce(m, 8, OwnedBy("alice", false)), 2);
  ExpectOnlyCreatedTaken(m, runtime_.get(), before, 2);
}

// At a full daemon a new owner's creations claim idle sessions of others only while it
// would still hold fewer with them: one of eight, when every other owner holds two.
TEST_F(SessionManagerTest, ConcurrentCreationsAtAFullDaemonClaimOnlyTheirFairShare) {
  ManagerOptions o = WithGrowingPool(Options());
  o.max_sessions = 6;
  SessionManager* m = StartManager(o);
  for (const char* owner : {"bob", "carol", "dave"}) {
    for (int i = 0; i < 2; ++i) ASSERT_FALSE(Create(m, OwnedBy(owner, false)).id().empty());
  }
  const PoolMark before = MarkFullPool(m, runtime_.get());
  EXPECT_EQ(CreateAtOnce(m, 8, OwnedBy("erin", false)), 1);
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 1u);
  ExpectOnlyCreatedTaken(m, runtime_.get(), before, 1);
}

// An owner at its limit with one idle session: one of four reclaim_idle creations claims
// it; the others are refused before they start a container.
TEST_F(SessionManagerTest, ConcurrentReclaimsClaimNoMoreThanTheIdleSessions) {
  SessionManager* m = StartManager(PerOwner(Options(), 2));
  Create(m, OwnedBy("alice", false));
  sandbox::v1::Session busy = Create(m, OwnedBy("alice", false));
  Started loop = Exec(m, busy.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(loop.collector->WaitStarted());
  MarkFullPool(m, runtime_.get());
  sandbox::v1::CreateSessionRequest cold = OwnedBy("alice", true);
  cold.mutable_limits()->set_pids(200);  // never pooled: each start waits until let through
  int created = 0;
  EXPECT_EQ(StartedAtOnce(m, runtime_.get(), std::vector(4, cold), &created), 1);
  EXPECT_EQ(created, 1);
  loop.execution->Cancel();
  ASSERT_TRUE(loop.collector->WaitFinished());
}

// A claim counts only against the sessions it may take: another owner's reclaim under way
// leaves an owner's own idle session to its own reclaim.
TEST_F(SessionManagerTest, AClaimOnAnotherOwnersSessionsLeavesAnOwnersOwnReclaimAlone) {
  ManagerOptions o = PerOwner(Options(), 2);
  o.pool_size = 1;
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 2; ++i) Create(m, OwnedBy("carol", false));
  Create(m, OwnedBy("alice", false));
  sandbox::v1::Session busy = Create(m, OwnedBy("alice", false));
  Started loop = Exec(m, busy.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(loop.collector->WaitStarted());
  MarkFullPool(m, runtime_.get());
  runtime_->SetStartHeld(true);
  sandbox::v1::CreateSessionRequest cold = OwnedBy("carol", true);
  cold.mutable_limits()->set_pids(200);  // never pooled: its start waits
  auto carol = std::async(std::launch::async, [&] { return m->CreateSession(cold); });
  const bool under_way = WaitFor([&] { return runtime_->starts_held() >= 1; });
  absl::StatusOr<sandbox::v1::Session> alice = m->CreateSession(OwnedBy("alice", true));
  runtime_->SetStartHeld(false);
  ASSERT_TRUE(under_way);
  EXPECT_TRUE(alice.ok()) << alice.status();
  EXPECT_TRUE(carol.get().ok());
  loop.execution->Cancel();
  ASSERT_TRUE(loop.collector->WaitFinished());
}

// A new owner's creations at a full daemon, all under way at once, claim no more than they
// would one after another: each claim counts as a session the asker holds and one its
// victim has lost. Bob holds four of six and dave two: erin takes two of bob's (two against
// two), and a third creation is refused before it starts a container it could not keep.
TEST_F(SessionManagerTest, ClaimsUnderWayCountAsTakenFromTheirVictim) {
  ManagerOptions o = Options();
  o.max_sessions = 6;
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 4; ++i) ASSERT_FALSE(Create(m, OwnedBy("bob", false)).id().empty());
  for (int i = 0; i < 2; ++i) ASSERT_FALSE(Create(m, OwnedBy("dave", false)).id().empty());
  MarkFullPool(m, runtime_.get());
  sandbox::v1::CreateSessionRequest cold = OwnedBy("erin", false);
  cold.mutable_limits()->set_pids(200);  // never pooled: each start waits until let through
  int created = 0;
  EXPECT_EQ(StartedAtOnce(m, runtime_.get(), std::vector(3, cold), &created), 2)
      << "a third claim started a container it could not keep";
  EXPECT_EQ(created, 2);
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 2u);
}

// Claims of several owners on one victim count against it together: bob holds three of
// four and alice one; carol and dave each take one of bob's (bob keeps one, as many as each
// of them), and erin and frank are refused before they start a container Register would
// refuse.
TEST_F(SessionManagerTest, ClaimsOfSeveralOwnersOnOneVictimCountTogether) {
  ManagerOptions o = Options();
  o.max_sessions = 4;
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(Create(m, OwnedBy("bob", false)).id().empty());
  ASSERT_FALSE(Create(m, OwnedBy("alice", false)).id().empty());
  MarkFullPool(m, runtime_.get());
  std::vector<sandbox::v1::CreateSessionRequest> colds;
  for (const char* owner : {"carol", "dave", "erin", "frank"}) {
    colds.push_back(OwnedBy(owner, false));
    colds.back().mutable_limits()->set_pids(200);  // never pooled: each start waits
  }
  int created = 0;
  EXPECT_EQ(StartedAtOnce(m, runtime_.get(), colds, &created), 2)
      << "a creation started a container its registration would refuse";
  EXPECT_EQ(created, 2);
  EXPECT_EQ(m->GetInfo().sessions_reclaimed_total(), 2u);
}

// A claim lands where a reclaim would: on an idle session, so the fair share counts it
// against the owner holding the most of those with one idle. Bob's two sessions are busy and
// carol's two idle: alice's claim takes one of carol's, after which a fourth owner could
// take from nobody (carol would hold one, as many as it), so of alice and dave one starts a
// container.
TEST_F(SessionManagerTest, AClaimCountsAgainstAnOwnerWithAnIdleSession) {
  ManagerOptions o = Options();
  o.max_sessions = 4;
  SessionManager* m = StartManager(o);
  std::vector<Started> loops;
  for (int i = 0; i < 2; ++i) {
    sandbox::v1::Session busy = Create(m, OwnedBy("bob", false));
    loops.push_back(Exec(m, busy.id(), "import time\nwhile True:\n    time.sleep(0.01)"));
    ASSERT_TRUE(loops.back().collector->WaitStarted());
  }
  for (int i = 0; i < 2; ++i) ASSERT_FALSE(Create(m, OwnedBy("carol", false)).id().empty());
  std::vector<sandbox::v1::CreateSessionRequest> colds = {OwnedBy("alice", false), OwnedBy("dave", false)};
  for (auto& r : colds) r.mutable_limits()->set_pids(200);  // never pooled: each start waits
  int created = 0;
  EXPECT_EQ(StartedAtOnce(m, runtime_.get(), colds, &created), 1)
      << "a creation started a container its registration would refuse";
  EXPECT_EQ(created, 1);
  for (Started& loop : loops) {
    loop.execution->Cancel();
    ASSERT_TRUE(loop.collector->WaitFinished());
  }
}

// An owner's claims under way count against the limit it asks for: two creations asking
// for at most one session at a full daemon start one container, and the second does not
// end the first's new session for its room (reclaim_idle).
TEST_F(SessionManagerTest, ClaimsUnderWayCountAgainstTheLimitTheirOwnerAskedFor) {
  ManagerOptions o = Options();
  o.max_sessions = 4;
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 4; ++i) ASSERT_FALSE(Create(m, OwnedBy("bob", false)).id().empty());
  sandbox::v1::CreateSessionRequest alice = OwnedBy("alice", true);
  alice.set_max_owner_sessions(1);
  alice.mutable_limits()->set_pids(200);  // never pooled: each start waits
  int created = 0;
  EXPECT_EQ(StartedAtOnce(m, runtime_.get(), std::vector(2, alice), &created), 1);
  EXPECT_EQ(created, 1);
  const std::vector<sandbox::v1::Session> alices = *m->ListSessions("alice");
  ASSERT_EQ(alices.size(), 1u) << "an id handed out was reclaimed for the other creation";
  EXPECT_EQ(alices[0].state(), sandbox::v1::Session::READY);
}

// Creations under way count against the limits, and a refusal says so.
TEST_F(SessionManagerTest, ARefusalCountsTheCreationsUnderWay) {
  ManagerOptions o = Options();
  o.max_sessions = 2;
  SessionManager* m = StartManager(o);
  runtime_->SetStartHeld(true);
  std::vector<std::future<absl::StatusOr<sandbox::v1::Session>>> starting;
  for (int i = 0; i < 2; ++i) {
    starting.push_back(std::async(std::launch::async, [&] { return m->CreateSession(OwnedBy("alice", false)); }));
  }
  const bool held = WaitFor([&] { return runtime_->starts_held() == 2; });
  absl::Status refused = m->CreateSession(OwnedBy("bob", false)).status();
  runtime_->SetStartHeld(false);
  ASSERT_TRUE(held);
  EXPECT_EQ(refused.message(),
            "too many sessions (the limit is 2): the daemon is full (0 sessions and 2 being "
            "created of 1 owner; this owner holds 0) and none that could make room is idle");
  for (auto& f : starting) EXPECT_TRUE(f.get().ok());
}


// ---- daemon-full (refusal.h): said only to an owner under its limit ------------------

// Creations under way that reach the owner's limit refuse the next for the owner, not for
// the daemon: passed to another sandboxd, it would be over its limit there.
TEST_F(SessionManagerTest, ClaimsUnderWayAtTheOwnersLimitAreNotTheDaemonBeingFull) {
  ManagerOptions o = Options();
  o.max_sessions = 4;
  SessionManager* m = StartManager(o);
  for (int i = 0; i < 4; ++i) ASSERT_FALSE(Create(m, OwnedBy("bob", false)).id().empty());
  sandbox::v1::CreateSessionRequest alice = OwnedBy("alice", false);
  alice.set_max_owner_sessions(2);
  runtime_->SetStartHeld(true);
  std::vector<std::future<absl::StatusOr<sandbox::v1::Session>>> claims;
  for (int i = 0; i < 2; ++i) {
    claims.push_back(std::async(std::launch::async, [&] { return m->CreateSession(alice); }));
  }
  const bool held = WaitFor([&] { return runtime_->starts_held() == 2; });
  absl::Status third = m->CreateSession(alice).status();
  runtime_->SetStartHeld(false);
  ASSERT_TRUE(held);
  for (auto& f : claims) EXPECT_TRUE(f.get().ok());
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted) << third;
  EXPECT_THAT(std::string(third.message()), HasSubstr("already reach its limit"));
  EXPECT_FALSE(DaemonWasFull(third)) << third;
}

// At a full daemon of 4: bob's three sessions (one idle, two busy) and alice's one; alice
// (max_owner_sessions 2) has a claim on bob's idle session under way, its container's
// start held.
class ClaimUnderWayTest : public SessionManagerTest {
 protected:
  void SetUp() override {
    SessionManagerTest::SetUp();
    ManagerOptions o = Options();
    o.max_sessions = 4;
    m_ = StartManager(o);
    for (int i = 0; i < 3; ++i) {
      sandbox::v1::Session s = Create(m_, OwnedBy("bob", false));
      if (i == 0) continue;  // one of bob's stays idle: the one alice's claim takes
      busy_.push_back(Exec(m_, s.id(), "import time\nwhile True:\n    time.sleep(0.01)"));
      busy_ids_.push_back(s.id());
      ASSERT_TRUE(busy_.back().collector->WaitStarted());
    }
    alice_ = OwnedBy("alice", false);
    alice_.set_max_owner_sessions(2);
    ASSERT_FALSE(Create(m_, alice_).id().empty());
    runtime_->SetStartHeld(true);
    claim_ = std::async(std::launch::async, [this] { return m_->CreateSession(alice_); });
    held_ = WaitFor([&] { return runtime_->starts_held() == 1; });
  }
  void TearDown() override {
    runtime_->SetStartHeld(false);
    for (Started& b : busy_) b.execution->Cancel();
    if (claim_.valid()) claim_.wait();
    SessionManagerTest::TearDown();
  }

  SessionManager* m_ = nullptr;
  std::vector<Started> busy_;
  std::vector<std::string> busy_ids_;
  sandbox::v1::CreateSessionRequest alice_;
  std::future<absl::StatusOr<sandbox::v1::Session>> claim_;
  bool held_ = false;
};

// A claim of alice's under way brings her to the limit she asked for: her next creation,
// refused because every idle session that could make room is claimed, is hers to wait for,
// not the daemon being full (another sandboxd would give her one more than she asked for).
TEST_F(ClaimUnderWayTest, AClaimUnderWayToTheOwnersLimitIsNotTheDaemonBeingFull) {
  absl::Status next = m_->CreateSession(alice_).status();
  runtime_->SetStartHeld(false);
  ASSERT_TRUE(held_);
  EXPECT_TRUE(claim_.get().ok());
  EXPECT_EQ(next.code(), absl::StatusCode::kResourceExhausted) << next;
  EXPECT_THAT(std::string(next.message()), HasSubstr("being reclaimed for another creation"));
  EXPECT_FALSE(DaemonWasFull(next)) << next;
  EXPECT_EQ(m_->ListSessions("alice")->size(), 2u);
}

// A slot that frees while an owner's claim is under way does not admit that owner past its
// limit: the claim counts as one of its sessions already, so its next creation is refused at
// once, before a container starts for it only to be thrown away when it registers.
TEST_F(ClaimUnderWayTest, AClaimUnderWayCountsAgainstTheOwnersLimitWhenASlotFrees) {
  ASSERT_OK(m_->DeleteSession(busy_ids_[0]));  // a slot frees: the daemon is not full now
  auto next = std::async(std::launch::async, [&] { return m_->CreateSession(alice_).status(); });
  const bool answered = next.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  runtime_->SetStartHeld(false);
  ASSERT_TRUE(held_);
  EXPECT_TRUE(claim_.get().ok());
  ASSERT_TRUE(answered) << "a container started for a creation past the owner's limit";
  absl::Status refused = next.get();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("too many sessions of this owner"));
  EXPECT_FALSE(DaemonWasFull(refused)) << refused;
  EXPECT_EQ(m_->ListSessions("alice")->size(), 2u);
}

// The session user ids run out for an owner that reclaims its own session at its limit:
// the owner's refusal (no other sandboxd should take it), and one under its limit is told
// the daemon is full.
TEST_F(SessionManagerTest, UidsRunningOutAtTheOwnersLimitAreNotTheDaemonBeingFull) {
  runtime_->SetCgroupLimits(false);  // rlimit mode: a uid per container
  ManagerOptions o = PerOwner(Options(), 2);
  o.session_uid_count = 3;
  SessionManager* m = StartManager(o);
  // The start's probe container gives its uid back when the pool's thread drops it, just
  // after its name is gone (what StartManager waits for): a creation may be early for it.
  for (const char* owner : {"bob", "alice", "alice"}) {
    ASSERT_TRUE(WaitFor([&] { return m->CreateSession(OwnedBy(owner, false)).ok(); })) << owner;
  }
  absl::Status own = m->CreateSession(OwnedBy("alice", true)).status();
  EXPECT_EQ(own.code(), absl::StatusCode::kResourceExhausted) << own;
  EXPECT_THAT(std::string(own.message()), HasSubstr("per-session user ids are in use"));
  EXPECT_FALSE(DaemonWasFull(own)) << own;
  absl::Status under = m->CreateSession(OwnedBy("bob", false)).status();
  EXPECT_EQ(under.code(), absl::StatusCode::kResourceExhausted) << under;
  EXPECT_TRUE(DaemonWasFull(under)) << under;
  EXPECT_EQ(m->ListSessions("alice")->size(), 2u);
}

}  // namespace
}  // namespace sandboxd::testing
