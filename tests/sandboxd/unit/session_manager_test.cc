// SessionManager: session lifecycle, reset, idle expiry, deletion with work in flight,
// restart and re-attachment, and the warm pool.
#include <future>

#include "fake_record_store.h"
#include "session_manager_fixture.h"
#include "sandboxd/refusal.h"

namespace sandboxd::testing {
namespace {

// ---- lifecycle ----------------------------------------------------------------------

TEST_F(SessionManagerTest, CreateGetListDelete) {
  SessionManager* m = StartManager();
  sandbox::v1::CreateSessionRequest r;
  r.set_label("first");
  r.set_owner("alice");
  *r.mutable_catalog() = EchoCatalogProto();
  sandbox::v1::Session a = Create(m, r);
  ASSERT_FALSE(a.id().empty());
  EXPECT_EQ(a.label(), "first");
  EXPECT_EQ(a.owner(), "alice");
  EXPECT_EQ(a.state(), sandbox::v1::Session::READY);
  EXPECT_EQ(a.created_at_ms(), clock_.NowMs());
  EXPECT_EQ(a.tool_count(), 1u);
  EXPECT_EQ(a.limits().default_timeout_ms(), 10000u);
  EXPECT_EQ(a.limits().memory_bytes(), Options().default_limits.memory_bytes);
  EXPECT_FALSE(a.container_id().empty());
  EXPECT_TRUE(ContainerExists(a.container_id()));
  EXPECT_TRUE(fs::exists(SessionRecordPath(a.id())));

  r.set_label("second");
  r.set_owner("bob");
  sandbox::v1::Session b = Create(m, r);
  ASSERT_FALSE(b.id().empty());
  EXPECT_NE(a.id(), b.id());
  EXPECT_NE(a.container_id(), b.container_id());

  absl::StatusOr<sandbox::v1::Session> got = m->GetSession(a.id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->id(), a.id());
  EXPECT_EQ(got->label(), "first");

  EXPECT_EQ(m->ListSessions("")->size(), 2u);
  std::vector<sandbox::v1::Session> alice = *m->ListSessions("alice");
  ASSERT_EQ(alice.size(), 1u);
  EXPECT_EQ(alice[0].id(), a.id());
  EXPECT_EQ(m->ListSessions("nobody")->size(), 0u);
  EXPECT_EQ(m->GetInfo().sessions(), 2u);

  ASSERT_OK(m->DeleteSession(a.id()));
  EXPECT_EQ(m->GetSession(a.id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->DeleteSession(a.id()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->ListSessions("")->size(), 1u);
  EXPECT_FALSE(fs::exists(SessionRecordPath(a.id())));
  // The container goes away (removed by a worker).
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(a.container_id()); }));
  // The other session is unaffected.
  EXPECT_EQ(Eval(m, b.id(), "1 + 1"), "2");
}

// The owner is the client's text: in the daemon's lines its quotes are escaped, so it cannot
// close the quotes it is printed in and add fields of its own.
TEST_F(SessionManagerTest, AnOwnersQuotesCannotForgeFieldsInTheLog) {
  LogCapture log;  // before the manager's threads, removed after they are gone
  SessionManager* m = StartManager(Options());
  sandbox::v1::CreateSessionRequest r;
  r.set_owner("x', container 'forged");
  sandbox::v1::Session s = Create(m, r);
  ASSERT_FALSE(s.id().empty());
  EXPECT_EQ(log.Count("owner 'x\\', container \\'forged')"), 1);
  EXPECT_EQ(log.Count("container 'forged'"), 0);
  StopManager(m);
}

TEST_F(SessionManagerTest, CreateRejectsBadRequests) {
  SessionManager* m = StartManager();
  sandbox::v1::CreateSessionRequest r;
  r.mutable_limits()->set_pids(100000);
  absl::StatusOr<sandbox::v1::Session> s = m->CreateSession(r);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("pids"));

  sandbox::v1::CreateSessionRequest bad_catalog;
  bad_catalog.mutable_catalog()->add_servers();  // empty name
  s = m->CreateSession(bad_catalog);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);

  sandbox::v1::CreateSessionRequest long_owner;
  long_owner.set_owner(std::string(2000, 'o'));
  s = m->CreateSession(long_owner);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime_->start_calls(), 0);  // nothing was started for invalid requests
}

// runtime "javascript" needs the JavaScript runner and an image that offers nodejs (this
// fixture's images offer python3 only); an unknown runtime is invalid. Nothing starts.
TEST_F(SessionManagerTest, RuntimesTheDaemonCannotRunAreRefusedClearly) {
  ManagerOptions o = Options();
  SessionManager* m = StartManager(o);
  sandbox::v1::CreateSessionRequest r;
  r.set_runtime("ruby");
  absl::StatusOr<sandbox::v1::Session> s = m->CreateSession(r);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("\"javascript\""));
  r.set_runtime("javascript");
  s = m->CreateSession(r);  // no JavaScript runner installed
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("--js_runner"));
  o.js_runner_path = "/usr/lib/sandboxd/sandbox_runner.js";
  m = StartManager(o);
  s = m->CreateSession(r);  // the image offers python3 only
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("does not offer nodejs"));
  EXPECT_EQ(runtime_->start_calls(), 0);
}

// One owner cannot take every slot: past --max_sessions_per_owner its creations are
// refused (RESOURCE_EXHAUSTED, naming the flag) while another owner still gets a session.
TEST_F(SessionManagerTest, EachOwnerHasAtMostItsShareOfSessions) {
  ManagerOptions o = Options();
  o.max_sessions = 4;
  o.max_sessions_per_owner = 2;
  o.pool_size = 0;
  SessionManager* m = StartManager(o);
  sandbox::v1::CreateSessionRequest greedy;
  greedy.set_owner("mcp:token 0");
  Create(m, greedy);
  sandbox::v1::Session second = Create(m, greedy);
  absl::StatusOr<sandbox::v1::Session> third = m->CreateSession(greedy);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("--max_sessions_per_owner"));
  EXPECT_FALSE(DaemonWasFull(third.status())) << "an owner's limit is not the daemon's room";
  sandbox::v1::CreateSessionRequest other;
  other.set_owner("mcp:token 1");
  EXPECT_FALSE(Create(m, other).id().empty()) << "another owner still gets a slot";
  EXPECT_EQ(m->ListSessions("mcp:token 0")->size(), 2u);
  ASSERT_OK(m->DeleteSession(second.id()));
  EXPECT_TRUE(m->CreateSession(greedy).ok()) << "a deleted session frees its owner's slot";
}

// A full daemon refuses an owner under its limit as full (RefusedForRoom): another daemon
// may have room. An owner at its own limit is refused as such, full daemon or not.
TEST_F(SessionManagerTest, AFullDaemonSaysItIsFullToAnOwnerUnderItsLimit) {
  ManagerOptions o = Options();
  o.max_sessions = 2;
  o.max_sessions_per_owner = 2;
  SessionManager* m = StartManager(o);
  sandbox::v1::CreateSessionRequest a, b, c;
  a.set_owner("mcp:token a");
  b.set_owner("mcp:token b");
  c.set_owner("mcp:token c");
  ASSERT_FALSE(Create(m, a).id().empty());
  ASSERT_FALSE(Create(m, b).id().empty());
  for (const auto* req : {&a, &c}) {
    absl::StatusOr<sandbox::v1::Session> refused = m->CreateSession(*req);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << req->owner();
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("the daemon is full"));
    EXPECT_TRUE(DaemonWasFull(refused.status())) << req->owner() << ": " << refused.status();
  }
  sandbox::v1::CreateSessionRequest tight = a;
  tight.set_max_owner_sessions(1);
  absl::StatusOr<sandbox::v1::Session> at_limit = m->CreateSession(tight);
  EXPECT_EQ(at_limit.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(DaemonWasFull(at_limit.status())) << "at its own limit on a full daemon: " << at_limit.status();
}

TEST_F(SessionManagerTest, UnknownSessionIsNotFound) {
  SessionManager* m = StartManager();
  EXPECT_EQ(m->GetSession("s-nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->DeleteSession("s-nope").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->ResetSession("s-nope").status().code(), absl::StatusCode::kNotFound);
  ExecutionRequest r;
  r.code = "1";
  EXPECT_EQ(m->Execute("s-nope", std::move(r), std::make_shared<Collector>()).status().code(),
            absl::StatusCode::kNotFound);
}

// An id is the caller's bytes: echoed escaped (no control byte, valid UTF-8, its quotes
// unclosable) and clipped, in the answer for an unknown id as in the one during a recovery.
TEST_F(SessionManagerTest, AnUnknownIdIsEchoedEscaped) {
  SessionManager* m = StartManager();
  const std::string id = "s-x'\n\x01\xff" + std::string(300, 'a');
  const std::string message(m->GetSession(id).status().message());
  EXPECT_THAT(message, HasSubstr("no session 's-x\\'\\n\\x01\\xff"));
  EXPECT_THAT(message, HasSubstr("(307 bytes)"));
  for (char c : message) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << message;
  EXPECT_EQ(m->GetSession(id).status(), UnknownSessionError(id));
}

// An empty id is a malformed request, the same from every call that takes one.
TEST_F(SessionManagerTest, AnEmptyIdIsAnInvalidArgumentEverywhere) {
  SessionManager* m = StartManager();
  for (const absl::Status& st : {m->GetSession("").status(), m->DeleteSession(""),
                                 m->ResetSession("").status(), m->GetSessionStats("", "").status()}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("session_id is empty"));
  }
}

TEST_F(SessionManagerTest, ExecuteValidatesCode) {
  ManagerOptions o = Options();
  o.max_code_bytes = 64;
  SessionManager* m = StartManager(o);
  sandbox::v1::Session s = Create(m);
  ASSERT_FALSE(s.id().empty());

  ExecutionRequest empty;
  auto e = m->Execute(s.id(), empty, std::make_shared<Collector>());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("empty"));

  ExecutionRequest big;
  big.code = "x = '" + std::string(60, 'a') + "'";  // 66 bytes
  ASSERT_GT(big.code.size(), 64u);
  e = m->Execute(s.id(), big, std::make_shared<Collector>());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("64"));

  std::string exact = "x = '" + std::string(58, 'a') + "'";
  ASSERT_EQ(exact.size(), 64u);
  std::optional<Finished> f = Run(m, s.id(), exact);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK);
}

TEST_F(SessionManagerTest, TimeoutAboveMaximumRejected) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  ExecutionRequest r;
  r.code = "1";
  r.timeout_ms = Options().max_timeout_ms + 1;
  auto e = m->Execute(s.id(), r, std::make_shared<Collector>());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("timeout"));
}

// ---- reset --------------------------------------------------------------------------

TEST_F(SessionManagerTest, ResetClearsVariables) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  EXPECT_EQ(Eval(m, s.id(), "x = 1"), "");
  absl::StatusOr<sandbox::v1::Session> after = m->ResetSession(s.id());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->state(), sandbox::v1::Session::READY);
  EXPECT_EQ(Eval(m, s.id(), "'x' in globals()"), "False");
  // The catalog survives a reset.
  EXPECT_EQ(Eval(m, s.id(), "'mcp_srv' in globals()"), "True");
}

TEST_F(SessionManagerTest, ResetWaitsBehindQueuedWork) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(), "import time\ntime.sleep(0.3)\nx = 1\nx");
  ASSERT_TRUE(st.execution);
  absl::StatusOr<sandbox::v1::Session> after = m->ResetSession(s.id());
  ASSERT_TRUE(after.ok()) << after.status();
  // The execution queued before the reset completed first, with its variable.
  ASSERT_EQ(st.collector->finished_count(), 1);
  EXPECT_EQ(st.collector->WaitFinished()->result_repr(), "1");
  EXPECT_EQ(Eval(m, s.id(), "'x' in globals()"), "False");
}

// ---- expiry -------------------------------------------------------------------------

TEST_F(SessionManagerTest, IdleSessionsExpire) {
  SessionManager* m = StartManager();
  sandbox::v1::Session idle = Create(m);
  sandbox::v1::Session busy = Create(m);
  Started st = Exec(m, busy.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(st.collector->WaitStarted());
  // Not yet: the reaper runs but nothing is past the TTL.
  absl::SleepFor(absl::Milliseconds(1200));
  EXPECT_TRUE(m->GetSession(idle.id()).ok());

  clock_.Advance(Options().idle_ttl + absl::Minutes(1));
  EXPECT_TRUE(WaitFor([&] { return !m->GetSession(idle.id()).ok(); }, absl::Seconds(3.5)));
  EXPECT_EQ(m->GetSession(idle.id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(idle.container_id()); }));
  // The record goes after the container (DeleteSession: terminate, then the record), so
  // it may still be there for a moment (it was, under ASan).
  EXPECT_TRUE(WaitFor([&] { return !fs::exists(SessionRecordPath(idle.id())); }));
  // A session with a running execution is not idle.
  EXPECT_TRUE(m->GetSession(busy.id()).ok());
  st.execution->Cancel();
  ASSERT_TRUE(st.collector->WaitFinished());
  // Just used: it does not expire on the next sweeps.
  absl::SleepFor(absl::Milliseconds(1200));
  EXPECT_TRUE(m->GetSession(busy.id()).ok());
}

// ---- deletion with work in flight ---------------------------------------------------

// sandbox.proto: DeleteSession "Running and queued executions finish with status
// CANCELLED."
TEST_F(SessionManagerTest, DeleteFinishesRunningAndQueuedWorkAsCancelled) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  Started running = Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  Started queued = Exec(m, s.id(), "1");
  ASSERT_TRUE(running.collector->WaitStarted());
  ASSERT_OK(m->DeleteSession(s.id()));
  std::optional<Finished> f1 = running.collector->WaitFinished();
  std::optional<Finished> f2 = queued.collector->WaitFinished();
  ASSERT_TRUE(f1 && f2);
  EXPECT_EQ(f1->status(), Finished::CANCELLED) << f1->DebugString();
  EXPECT_EQ(f2->status(), Finished::CANCELLED) << f2->DebugString();
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(s.container_id()); }));
}

// ---- restart ------------------------------------------------------------------------

TEST_F(SessionManagerTest, ShutdownAndReattach) {
  std::optional<LogCapture> log(std::in_place);
  SessionManager* m1 = StartManager();
  sandbox::v1::CreateSessionRequest r;
  r.set_label("survivor");
  r.set_owner("alice");
  *r.mutable_catalog() = EchoCatalogProto();
  sandbox::v1::Session s = Create(m1, r);
  ASSERT_FALSE(s.id().empty());
  sandbox::v1::Session idle = Create(m1);
  EXPECT_EQ(Eval(m1, s.id(), "x = 41"), "");
  Started running = Exec(m1, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(running.collector->WaitStarted());
  std::string instance = m1->instance();

  StopManager(m1);
  // Work in flight ends, but the container stays.
  std::optional<Finished> f = running.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST);
  EXPECT_THAT(f->error().message(), HasSubstr("session detached: the daemon is shutting down"));
  EXPECT_THAT(f->error().message(), HasSubstr("re-attaches"));
  // The log says what happened: both detached, the busy one's work ended; neither "lost"
  // (issue 49: a clean restart logged "session ... lost" for sessions it re-attached).
  EXPECT_EQ(log->Count(" lost"), 0);
  EXPECT_EQ(log->Count("session " + s.id() + " detached with work under way"), 1);
  EXPECT_EQ(log->Count("detached 2 session(s)"), 1);
  log.reset();
  EXPECT_TRUE(ContainerExists(s.container_id()));
  absl::StatusOr<ContainerStatus> st = runtime_->Inspect(s.container_id());
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->running);

  SessionManager* m2 = StartManager();
  EXPECT_EQ(m2->instance(), instance);
  absl::StatusOr<sandbox::v1::Session> got = m2->GetSession(s.id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->state(), sandbox::v1::Session::READY);
  EXPECT_EQ(got->label(), "survivor");
  EXPECT_EQ(got->owner(), "alice");
  EXPECT_EQ(got->container_id(), s.container_id());
  EXPECT_EQ(got->tool_count(), 1u);
  EXPECT_EQ(got->created_at_ms(), s.created_at_ms());
  EXPECT_EQ(Eval(m2, s.id(), "x + 1"), "42");
  EXPECT_EQ(Eval(m2, s.id(), "'mcp_srv' in globals()"), "True");
  EXPECT_EQ(m2->ListSessions("alice")->size(), 1u);
  EXPECT_TRUE(m2->GetSession(idle.id()).ok());
}

TEST_F(SessionManagerTest, RecoverDropsDeadSessionsAndStrayContainers) {
  SessionManager* m1 = StartManager();
  sandbox::v1::Session dead = Create(m1);
  sandbox::v1::Session alive = Create(m1);
  std::string instance = m1->instance();
  StopManager(m1);
  ASSERT_TRUE(runtime_->Remove({dead.container_id()}).empty());

  const std::string stray = StartStray(instance);
  const std::string stray_dir = state_dir_ + "/c/" + stray;
  // A container of another instance is none of our business.
  ContainerSpec foreign;
  foreign.name = "sbx-foreign";
  foreign.socket_dir = state_dir_ + "/foreign";
  fs::create_directories(foreign.socket_dir);
  foreign.runner_path = SANDBOXD_RUNNER_PATH;
  foreign.labels = {{"io.sandboxd.instance", "someone-else"}};
  ASSERT_TRUE(runtime_->Start(foreign).ok());

  SessionManager* m2 = StartManager();
  EXPECT_EQ(m2->GetSession(dead.id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(SessionRecordPath(dead.id())));
  EXPECT_TRUE(m2->GetSession(alive.id()).ok());
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(stray) && !fs::exists(stray_dir); }))
      << "removed in the background, after the restart";
  EXPECT_TRUE(ContainerExists("sbx-foreign"));
  EXPECT_EQ(Eval(m2, alive.id(), "'ok'"), "'ok'");
}

TEST_F(SessionManagerTest, CreateAfterShutdownIsUnavailable) {
  SessionManager* m = StartManager();
  m->Shutdown();
  EXPECT_EQ(m->CreateSession({}).status().code(), absl::StatusCode::kUnavailable);
  m->Shutdown();  // idempotent
}

// ---- session records that fail (FakeRecordStore) ----------------------------------

// A session whose record cannot be written would not survive a daemon restart: it is not
// handed out, its container goes, and the next CreateSession works once the disk does.
TEST_F(SessionManagerTest, ARecordThatCannotBeWrittenFailsCreateAndLeavesNothing) {
  FakeRecordStore store;
  SessionManager* m = StartManager(Options(), &store);
  store.FailPuts(absl::ResourceExhaustedError("No space left on device"));
  absl::StatusOr<sandbox::v1::Session> s = m->CreateSession({});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("No space left on device"));
  EXPECT_TRUE(m->ListSessions("")->empty());
  EXPECT_TRUE(WaitFor([&] { return runtime_->Names().empty(); }));
  EXPECT_TRUE(WaitFor([&] { return SocketDirs() == 0; })) << SocketDirs() << " socket directories";
  EXPECT_EQ(store.size(), 0u);

  store.FailPuts(absl::OkStatus());
  sandbox::v1::Session ok = Create(m);
  EXPECT_EQ(Eval(m, ok.id(), "1 + 1"), "2");
  EXPECT_TRUE(store.Get(ok.id()));
}

// A catalog change that cannot be recorded is logged; the session keeps working.
TEST_F(SessionManagerTest, ACatalogChangeThatCannotBeRecordedKeepsTheSessionWorking) {
  FakeRecordStore store;
  SessionManager* m = StartManager(Options(), &store);
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  int puts = store.puts();
  store.FailPuts(absl::ResourceExhaustedError("No space left on device"));
  std::optional<Finished> f =
      ExecWithCatalog(m, s.id(), "'mcp_other_server' in globals()",
                      EchoCatalogProto("other-server", "ping")).collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->result_repr(), "True");
  EXPECT_TRUE(WaitFor([&] { return store.puts() > puts; }));
  EXPECT_THAT(*store.Get(s.id()), Not(HasSubstr("other-server")));
  EXPECT_EQ(Eval(m, s.id(), "2 * 21"), "42");
}

// A damaged record loses only its own session (and that session's container).
TEST_F(SessionManagerTest, RestartDropsADamagedRecordAndKeepsTheOthers) {
  FakeRecordStore store;
  SessionManager* m1 = StartManager(Options(), &store);
  sandbox::v1::Session good = Create(m1);
  sandbox::v1::Session damaged = Create(m1);
  EXPECT_EQ(Eval(m1, good.id(), "x = 7"), "");
  StopManager(m1);
  store.Corrupt(damaged.id(), "{\"session\":\"{\\\"id");

  SessionManager* m2 = StartManager(Options(), &store);
  EXPECT_EQ(Eval(m2, good.id(), "x"), "7");
  EXPECT_EQ(m2->GetSession(damaged.id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(store.Get(damaged.id()));
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(damaged.container_id()); }));
  EXPECT_TRUE(ContainerExists(good.container_id()));
}

// Records that cannot be read at all are no reason to end every session: the containers
// stay until a start that can read the records re-attaches them.
TEST_F(SessionManagerTest, UnreadableRecordsLeaveThePreviousRunsContainersAlone) {
  FakeRecordStore store;
  SessionManager* m1 = StartManager(Options(), &store);
  sandbox::v1::Session s = Create(m1);
  EXPECT_EQ(Eval(m1, s.id(), "x = 'kept'"), "");
  StopManager(m1);

  store.FailList(absl::InternalError("Input/output error"));
  SessionManager* m2 = StartManager(Options(), &store);
  EXPECT_EQ(m2->GetSession(s.id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(ContainerExists(s.container_id()));
  EXPECT_TRUE(store.Get(s.id()));
  StopManager(m2);

  store.FailList(absl::OkStatus());
  SessionManager* m3 = StartManager(Options(), &store);
  EXPECT_EQ(Eval(m3, s.id(), "x"), "'kept'");
}

// Deleting a session removes its record even while a catalog change of its last
// execution is still being recorded (the record must not come back).
TEST_F(SessionManagerTest, DeleteWhileACatalogChangeIsRecordedLeavesNoRecord) {
  FakeRecordStore store;
  SessionManager* m = StartManager(Options(), &store);
  for (int i = 0; i < 5; ++i) {
    sandbox::v1::Session s = CreateWithEchoCatalog(m);
    Started st = ExecWithCatalog(m, s.id(), "1", EchoCatalogProto("other-server", "ping"));
    ASSERT_TRUE(st.collector->WaitStarted());
    ASSERT_OK(m->DeleteSession(s.id()));
    absl::SleepFor(absl::Milliseconds(50));  // let a late record write land, if any
    EXPECT_FALSE(store.Get(s.id())) << "iteration " << i;
  }
}

// ---- warm pool ----------------------------------------------------------------------

TEST_F(SessionManagerTest, CreateSessionUsesThePool) {
  ManagerOptions o = Options();
  o.pool_size = 1;
  SessionManager* m = StartManager(o);
  EXPECT_EQ(m->GetInfo().pool_target(), 1u);
  ASSERT_TRUE(WaitFor([&] { return m->GetInfo().pool_ready() == 1; }));
  std::vector<std::string> pooled = PoolContainers(*runtime_);
  ASSERT_EQ(pooled.size(), 1u);

  sandbox::v1::CreateSessionRequest with_catalog;
  *with_catalog.mutable_catalog() = EchoCatalogProto();
  sandbox::v1::Session s = Create(m, with_catalog);
  ASSERT_FALSE(s.id().empty());
  EXPECT_EQ(s.container_id(), pooled[0]);  // the pooled container became the session
  EXPECT_EQ(Eval(m, s.id(), "'from the pool'"), "'from the pool'");
  // The pooled runner got the session's catalog.
  EXPECT_EQ(Eval(m, s.id(), "'mcp_srv' in globals()"), "True");

  // The pool refills.
  ASSERT_TRUE(WaitFor([&] { return m->GetInfo().pool_ready() == 1; }));
  std::vector<std::string> now = PoolContainers(*runtime_);
  std::string refill;
  for (const auto& n : now) {
    if (n != pooled[0]) refill = n;
  }
  ASSERT_FALSE(refill.empty());

  // Non-default limits never come from the pool.
  sandbox::v1::CreateSessionRequest r;
  r.mutable_limits()->set_pids(200);
  sandbox::v1::Session custom = Create(m, r);
  ASSERT_FALSE(custom.id().empty());
  EXPECT_NE(custom.container_id(), refill);
  EXPECT_EQ(m->GetInfo().pool_ready(), 1u);

  // Shutdown removes the pool's idle container but not the sessions'.
  StopManager(m);
  EXPECT_FALSE(ContainerExists(refill));
  EXPECT_TRUE(ContainerExists(s.container_id()));
  EXPECT_TRUE(ContainerExists(custom.container_id()));
}

// GetInfo's pool_target, the Python pool's from before there were two, follows a pool
// raised by demand as pools[0].target does.
TEST_F(SessionManagerTest, GetInfoSaysWhatThePoolFillsToNow) {
  ManagerOptions o = Options();
  o.pool_size = 1;
  o.pool_max = 4;
  SessionManager* m = StartManager(o);
  ASSERT_TRUE(WaitFor([&] { return m->GetInfo().pool_ready() == 1; }));
  runtime_->SetStartHeld(true);
  sandbox::v1::Session pooled = Create(m);  // the pool's one; its refill waits
  std::future<sandbox::v1::Session> cold = std::async(std::launch::async, [&] { return Create(m); });
  const bool raised = WaitFor([&] { return m->GetInfo().pools(0).target() == 2; });
  const sandbox::v1::Info info = m->GetInfo();
  runtime_->SetStartHeld(false);
  EXPECT_TRUE(raised) << "the second create missed";
  EXPECT_EQ(info.pool_target(), info.pools(0).target());
  EXPECT_FALSE(cold.get().id().empty());
}

TEST_F(SessionManagerTest, DeadPoolContainerIsSkipped) {
  ManagerOptions o = Options();
  o.pool_size = 1;
  SessionManager* m = StartManager(o);
  ASSERT_TRUE(WaitFor([&] { return m->GetInfo().pool_ready() == 1; }));
  std::vector<std::string> pooled = PoolContainers(*runtime_);
  ASSERT_EQ(pooled.size(), 1u);
  ASSERT_OK(runtime_->Kill(pooled[0], SIGKILL));
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<ContainerStatus> st = runtime_->Inspect(pooled[0]);
    return st.ok() && !st->running;
  }));
  sandbox::v1::Session s = Create(m);
  ASSERT_FALSE(s.id().empty());
  EXPECT_NE(s.container_id(), pooled[0]);
  EXPECT_EQ(Eval(m, s.id(), "1"), "1");
}

}  // namespace
}  // namespace sandboxd::testing
