// SessionManager when containers misbehave: probes and starts that fail, runners that
// stop reading, exit, are killed or send garbage; per-session uids in rlimit mode.
#include <future>

#include "fake_record_store.h"
#include "session_manager_fixture.h"

namespace sandboxd::testing {
namespace {

// ---- runtime failures ---------------------------------------------------------------

class RecoveryTest : public SessionManagerTest {
 protected:
  // A session with x = 5, left by a manager that stopped.
  sandbox::v1::Session LeaveASession() {
    SessionManager* m1 = StartManager();
    sandbox::v1::Session old = Create(m1);
    EXPECT_EQ(Eval(m1, old.id(), "x = 5"), "");
    StopManager(m1);
    return old;
  }
  // A manager started while the runtime was down; the runtime answers again, and the
  // recovery's listing of the previous run's containers is held.
  SessionManager* RestartWithTheRecoveryHeld() {
    runtime_->SetProbeFailure("podman is not ready yet");
    SessionManager* m = StartManager();
    runtime_->SetListHeld(true);
    runtime_->SetProbeFailure(std::nullopt);
    return m;
  }
};

TEST_F(SessionManagerTest, ProbeFailureThenRecovery) {
  runtime_->SetProbeFailure("podman is broken");
  SessionManager* m = StartManager();  // not fatal
  sandbox::v1::Info info = m->GetInfo();
  int noted = 0;
  for (const auto& n : info.notes()) noted += absl::StrContains(n, "podman is broken");
  EXPECT_EQ(noted, 1) << "said once, not once per place that knows it: " << info.DebugString();

  absl::StatusOr<sandbox::v1::Session> s = m->CreateSession({});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("podman is broken"));
  EXPECT_EQ(runtime_->start_calls(), 0);

  runtime_->SetProbeFailure(std::nullopt);
  // The background retry may be probing at this moment: a creation then answers with the
  // last failure at once (SandboxFactory::EnsureProbed), and a later one finds it done.
  EXPECT_TRUE(WaitFor([&] {
    s = m->CreateSession({});
    return s.ok();
  })) << s.status();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Eval(m, s->id(), "6 * 7"), "42");
  info = m->GetInfo();
  EXPECT_EQ(info.oci_runtime(), "process");
  EXPECT_EQ(info.memory_enforcement(), "cgroup");
  for (const auto& n : info.notes()) EXPECT_THAT(n, Not(HasSubstr("podman is broken")));
}

// A runtime that comes back after sandboxd started: the first successful probe re-attaches
// the previous run's sessions and sweeps what it cannot re-attach, socket directories
// included. A container started meanwhile (another caller whose probe came second) would
// be swept as a stale one: nothing starts until the recovery is over, and a caller
// meanwhile is told to come back (UNAVAILABLE) rather than held.
TEST_F(RecoveryTest, ReattachesWhenTheRuntimeComesBackAndStartsNothingMeanwhile) {
  const sandbox::v1::Session old = LeaveASession();
  SessionManager* m2 = RestartWithTheRecoveryHeld();
  runtime_->ResetCounters();
  absl::StatusOr<sandbox::v1::Session> first, second;
  // This creation probes, or finds the pool's retry probing and is told to come back.
  std::thread recovering([&] { first = m2->CreateSession({}); });
  if (!WaitFor([&] { return runtime_->lists_held() == 1; })) {
    runtime_->SetListHeld(false);
    recovering.join();
    FAIL() << "no probe re-attached the previous run: " << first.status();
  }
  std::thread other([&] { second = m2->CreateSession({}); });
  // Waits for what must not happen: bounded, and never a failure with the starts held back.
  const bool started_meanwhile = WaitFor([&] { return runtime_->start_calls() > 0; }, absl::Seconds(2));
  runtime_->SetListHeld(false);
  recovering.join();
  other.join();
  EXPECT_FALSE(started_meanwhile) << "a container started while the previous run was recovered";
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  if (!first.ok()) {  // the pool's thread was probing
    EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
    ASSERT_TRUE(WaitFor([&] {
      first = m2->CreateSession({});
      return first.ok();
    })) << first.status();
  }
  EXPECT_EQ(Eval(m2, old.id(), "x"), "5");
  EXPECT_EQ(Eval(m2, first->id(), "1 + 1"), "2");
  // The pool's readiness probe (a container started and discarded) may still be going.
  EXPECT_TRUE(WaitFor([&] { return SocketDirs() == 2; })) << SocketDirs() << " socket directories";
}

// A listing of the previous run that hangs holds the start for --start_runtime_wait only:
// the daemon then serves NOT_SERVING saying why, a creation answers at once instead of
// holding its thread for podman, and once podman answers the previous run's sessions are
// back.
TEST_F(RecoveryTest, AHangingListingHoldsTheStartForABoundedTime) {
  const sandbox::v1::Session old = LeaveASession();
  runtime_->SetListHeld(true);
  ManagerOptions o = Options();
  o.start_runtime_wait = absl::Milliseconds(300);
  auto m = std::make_unique<SessionManager>(o, runtime_.get(), &clock_);
  std::future<absl::Status> started = std::async(std::launch::async, [&] { return m->Start(); });
  const bool returned = started.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  const Readiness readiness = m->readiness();
  std::future<absl::StatusOr<sandbox::v1::Session>> created;
  bool answered = false;
  if (returned) {
    created = std::async(std::launch::async, [&] { return m->CreateSession({}); });
    answered = created.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  }
  runtime_->SetListHeld(false);
  ASSERT_TRUE(returned) << "the start waited for podman's listing";
  ASSERT_OK(started.get());
  EXPECT_FALSE(readiness.serving);
  EXPECT_THAT(readiness.reason, HasSubstr("has not answered"));
  ASSERT_TRUE(answered) << "a creation waited for podman's listing";
  absl::StatusOr<sandbox::v1::Session> refused = created.get();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("has not answered"));
  EXPECT_TRUE(WaitFor([&] { return m->readiness().serving; })) << m->readiness().reason;
  EXPECT_EQ(Eval(m.get(), old.id(), "x"), "5");
  m->Shutdown();
}

// The same start told to stop (a SIGTERM) ends its wait at once.
TEST_F(RecoveryTest, AStopRequestedDuringTheStartEndsItsWait) {
  (void)LeaveASession();
  runtime_->SetListHeld(true);
  ManagerOptions o = Options();
  o.start_runtime_wait = absl::Hours(1);
  auto m = std::make_unique<SessionManager>(o, runtime_.get(), &clock_);
  std::atomic<bool> stop{false};
  std::future<absl::Status> started =
      std::async(std::launch::async, [&] {
        return m->Start(StartWait(o.start_runtime_wait, [&] { return stop.load(); }));
      });
  stop = true;
  const bool returned = started.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  runtime_->SetListHeld(false);
  ASSERT_TRUE(returned) << "the start waited for podman's listing after a stop was asked";
  ASSERT_OK(started.get());
  m->Shutdown();
}

// A daemon told to stop while it re-attaches the previous run's sessions leaves each of them
// for the next start, as it leaves the others: none is registered in a manager that has
// stopped (whose end would close its runner connection and lose it, record and all).
TEST_F(RecoveryTest, AShutdownDuringTheRecoveryLeavesItsSessionsForTheNextStart) {
  const sandbox::v1::Session old = LeaveASession();
  SessionManager* m2 = RestartWithTheRecoveryHeld();
  std::thread creating([&] { (void)m2->CreateSession({}); });  // or the pool's retry probes
  if (!WaitFor([&] { return runtime_->lists_held() == 1; })) {
    runtime_->SetListHeld(false);
    creating.join();
    FAIL() << "no probe re-attached the previous run";
  }
  std::thread stopping([&] { m2->Shutdown(); });
  const bool stopped = WaitFor([&] {
    return absl::StrContains(m2->CreateSession({}).status().message(), "shutting down");
  });
  runtime_->SetListHeld(false);
  creating.join();
  stopping.join();
  ASSERT_TRUE(stopped) << "Shutdown did not begin";
  StopManager(m2);

  SessionManager* m3 = StartManager();
  EXPECT_EQ(Eval(m3, old.id(), "x"), "5");
}

// The runtime answers its probe but cannot list the previous run's containers: the daemon is
// not ready (nothing re-attached or swept, so no session of that run keeps running unseen and
// uncounted) until a later probe can list them and re-attaches.
TEST_F(RecoveryTest, AListingOfThePreviousRunThatFailsIsRetriedNotSkipped) {
  const sandbox::v1::Session old = LeaveASession();

  // podman's error is the runtime's bytes: logged escaped, never as lines of their own.
  std::optional<LogCapture> log(std::in_place);
  runtime_->SetListFailure("podman ps: database is locked\n[2026-12-04] [info] forged line");
  SessionManager* m2 = StartManager();
  EXPECT_FALSE(m2->readiness().serving);
  EXPECT_THAT(m2->readiness().reason, HasSubstr("cannot list containers of the previous run"));
  absl::StatusOr<sandbox::v1::Session> refused = m2->CreateSession({});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  // Not yet re-attached: its id is not "gone" (a gateway forgets a session on NOT_FOUND),
  // and nothing ends it.
  EXPECT_EQ(m2->GetSession(old.id()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(m2->DeleteSession(old.id()).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(m2->GetSession("s-never-was").status().code(), absl::StatusCode::kUnavailable)
      << "an id the previous run may have had";
  // Nor is an empty list the answer: it would say the previous run's sessions are gone.
  EXPECT_EQ(m2->ListSessions("").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(m2->ListSessions(old.owner()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(ContainerExists(old.container_id()));
  EXPECT_GT(log->Count("database is locked\\n[2026-12-04]"), 0);
  EXPECT_EQ(log->Count("\n[2026-12-04] [info] forged line"), 0);
  // Each retry probes again; the runtime is described once.
  const int probes = runtime_->probe_calls();
  EXPECT_TRUE(WaitFor([&] {
    (void)m2->CreateSession({});
    return runtime_->probe_calls() > probes;
  }));
  EXPECT_EQ(log->Count("container runtime: process-runtime"), 1);

  runtime_->SetListFailure(std::nullopt);
  absl::StatusOr<sandbox::v1::Session> s;
  ASSERT_TRUE(WaitFor([&] {  // a probe that listed before the failure was cleared may answer
    s = m2->CreateSession({});
    return s.ok();
  })) << s.status();
  EXPECT_TRUE(m2->readiness().serving);
  EXPECT_EQ(Eval(m2, old.id(), "x"), "5");
  EXPECT_EQ(Eval(m2, s->id(), "1 + 1"), "2");
  EXPECT_EQ(m2->GetSession("s-never-was").status().code(), absl::StatusCode::kNotFound);
  ASSERT_OK(m2->ListSessions("").status());
  EXPECT_EQ(m2->ListSessions("")->size(), 2u);
}

// While the runtime is known not to work, a CreateSession that finds another caller's probe
// under way answers at once with the runtime's failure: waiting would hold its thread (an
// RPC's) for up to --podman_timeout, and a few such callers every RPC thread.
TEST_F(SessionManagerTest, ACreationFindingAProbeUnderWayAfterAFailureDoesNotWait) {
  runtime_->SetProbeFailure("podman info timed out");
  SessionManager* m = StartManager();
  ASSERT_FALSE(m->readiness().serving);
  runtime_->SetProbeFailure(std::nullopt);
  runtime_->SetListHeld(true);  // the next probe's hook lists the previous run's containers
  std::future<absl::StatusOr<sandbox::v1::Session>> first =
      std::async(std::launch::async, [m] { return m->CreateSession({}); });
  if (!WaitFor([&] { return runtime_->lists_held() == 1; })) {
    runtime_->SetListHeld(false);
    FAIL() << "no probe listed the containers";
  }
  std::future<absl::StatusOr<sandbox::v1::Session>> second =
      std::async(std::launch::async, [m] { return m->CreateSession({}); });
  const bool answered = second.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  runtime_->SetListHeld(false);
  ASSERT_TRUE(answered) << "a CreateSession waited for another caller's probe";
  absl::StatusOr<sandbox::v1::Session> refused = second.get();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  (void)first.get();  // the probe's own caller, or one that found the pool's retry under way
  absl::StatusOr<sandbox::v1::Session> s;
  EXPECT_TRUE(WaitFor([&] {
    s = m->CreateSession({});
    return s.ok();
  })) << s.status();
}

TEST_F(SessionManagerTest, StartFailureIsUnavailable) {
  SessionManager* m = StartManager();
  runtime_->SetStartFailure("no space left on device");
  absl::StatusOr<sandbox::v1::Session> s = m->CreateSession({});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("no space left on device"));
  EXPECT_EQ(m->ListSessions("")->size(), 0u);
  // No socket directory is left behind (by this attempt, nor by the background re-check).
  EXPECT_TRUE(WaitFor([&] { return fs::is_empty(state_dir_ + "/c"); }));
  runtime_->SetStartFailure(std::nullopt);
  s = m->CreateSession({});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Eval(m, s->id(), "'up'"), "'up'");
}

TEST_F(SessionManagerTest, ReadinessFollowsContainerStartsAndRecoversByItself) {
  codemode::Mutex mu;
  std::vector<Readiness> seen;
  auto record = [&](const Readiness& r) {
    codemode::MutexLock lock(&mu);
    seen.push_back(r);
  };
  auto last = [&] {
    codemode::MutexLock lock(&mu);
    return seen.empty() ? Readiness{} : seen.back();
  };
  runtime_->SetStartFailure("container-init binary not found");
  ManagerOptions o = Options();
  o.pool_size = 1;
  auto m = std::make_unique<SessionManager>(o, runtime_.get(), &clock_);
  m->SetReadinessListener(record);
  ASSERT_OK(m->Start());
  ASSERT_TRUE(WaitFor([&] { return m->readiness().checked; }));
  EXPECT_FALSE(last().serving);
  sandbox::v1::Info info = m->GetInfo();
  EXPECT_FALSE(info.serving());
  bool noted = false;
  for (const auto& n : info.notes()) noted |= absl::StrContains(n, "container-init binary not found");
  EXPECT_TRUE(noted) << info.DebugString();
  absl::StatusOr<sandbox::v1::Session> s = m->CreateSession({});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("container-init binary not found"));

  // Nobody calls: the pool's background re-check finds that containers start again.
  runtime_->SetStartFailure(std::nullopt);
  EXPECT_TRUE(WaitFor([&] { return last().serving; }, absl::Seconds(20)));
  EXPECT_TRUE(m->GetInfo().serving());
  EXPECT_TRUE(m->CreateSession({}).ok());
  m->SetReadinessListener(nullptr);
  size_t calls = seen.size();
  runtime_->SetStartFailure("broken again");
  sandbox::v1::CreateSessionRequest custom;  // not from the pool: a cold start
  custom.mutable_limits()->set_pids(64);
  EXPECT_EQ(m->CreateSession(custom).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(m->readiness().serving);
  EXPECT_EQ(seen.size(), calls);  // unregistered listeners are not called
  m->Shutdown();
}

TEST_F(SessionManagerTest, ARunnerThatStopsReadingNeverHoldsUpCallersOrOtherSessions) {
  ManagerOptions o = Options();
  o.max_code_bytes = 2u << 20;
  SessionManager* m = StartManager(o);
  sandbox::v1::Session a = Create(m);
  sandbox::v1::Session b = Create(m);
  ASSERT_OK(runtime_->Kill(a.container_id(), SIGSTOP));  // a's runner reads nothing now
  // A frame far larger than the socket buffer: the old code blocked in send() under a's
  // lock (and lost the session after 5 s); now it waits in a's outbox.
  ExecutionRequest big;
  big.code = "x = '" + std::string(900 * 1024, 'a') + "'\nlen(x)";
  Started st = Exec(m, a.id(), std::move(big));
  ASSERT_TRUE(st.execution);
  EXPECT_TRUE(m->GetSession(a.id()).ok());
  EXPECT_TRUE(m->GetSession(b.id()).ok());
  EXPECT_EQ(m->ListSessions("")->size(), 2u);
  EXPECT_EQ(Eval(m, b.id(), "6 * 7"), "42");
  ASSERT_OK(runtime_->Kill(a.container_id(), SIGCONT));
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->result_repr(), "921600");
}

TEST_F(SessionManagerTest, RunnerRemovedUnderUs) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(st.collector->WaitStarted());
  ASSERT_TRUE(runtime_->Remove({s.container_id()}).empty());
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST) << f->DebugString();
  EXPECT_THAT(f->error().message(), HasSubstr("disappeared"));
  absl::StatusOr<sandbox::v1::Session> got = m->GetSession(s.id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state(), sandbox::v1::Session::LOST);
  ExecutionRequest r;
  r.code = "1";
  EXPECT_EQ(m->Execute(s.id(), r, std::make_shared<Collector>()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// The cleanup of a lost session runs on the manager's workers and uses the manager's
// records and factory: a manager that ends while it runs waits for it (freeing the
// factory first would have the worker read freed memory, which ASan reports). The slow
// Delete keeps the cleanup running as the manager ends.
TEST_F(SessionManagerTest, AManagerEndingDuringALostSessionsCleanupWaitsForIt) {
  FakeRecordStore store;
  SessionManager* m = StartManager(Options(), &store);
  sandbox::v1::Session s = Create(m);
  ASSERT_TRUE(store.Get(s.id()));
  store.DelayDeletes(absl::Milliseconds(300));
  ASSERT_TRUE(runtime_->Remove({s.container_id()}).empty());
  // The manager has taken the loss and its cleanup is in the slow Delete (before that, a
  // manager that ends detaches the session and keeps its record, as it should).
  ASSERT_TRUE(WaitFor([&] { return store.deletes_begun() > 0; }));
  StopManager(m);
  EXPECT_FALSE(store.Get(s.id())) << "the lost session's record outlived its manager";
}

// A restart removes what the previous run left in the background: it serves while podman
// cannot remove a stray container, and the container goes once podman can.
TEST_F(SessionManagerTest, AStrayContainerPodmanCannotRemoveAtARestartGoesLater) {
  SessionManager* m1 = StartManager();
  const std::string instance = m1->instance();
  StopManager(m1);
  const std::string stray = StartStray(instance);
  runtime_->SetRemoveFailure("podman rm timed out");
  SessionManager* m2 = StartManager();
  sandbox::v1::Session s = Create(m2);
  EXPECT_EQ(Eval(m2, s.id(), "1 + 1"), "2");
  EXPECT_TRUE(ContainerExists(stray));
  runtime_->SetRemoveFailure(std::nullopt);
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(stray); })) << "its removal was not tried again";
}

TEST_F(SessionManagerTest, RunnerExitsOnItsOwn) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  sandbox::v1::Session other = Create(m);
  std::optional<Finished> f = Run(m, s.id(), "import os\nos._exit(3)");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST) << f->DebugString();
  EXPECT_THAT(f->error().message(), HasSubstr("exited with code 3"));
  EXPECT_THAT(m->GetSession(s.id())->lost_reason(), HasSubstr("exited with code 3"));
  ExecutionRequest r;
  r.code = "1";
  EXPECT_EQ(m->Execute(s.id(), r, std::make_shared<Collector>()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Eval(m, other.id(), "'fine'"), "'fine'");
}

TEST_F(SessionManagerTest, RunnerKilledBySignal) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(st.collector->WaitStarted());
  ASSERT_OK(runtime_->Kill(s.container_id(), SIGKILL));
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST) << f->DebugString();
  EXPECT_THAT(f->error().message(), HasSubstr("SIGKILL"));
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(s.container_id()); }));
}

// In rlimit mode memory is not enforced by the OOM killer of a cgroup, so a SIGKILL must
// not be blamed on memory (DescribeContainerDeath's cgroup_limits parameter).
TEST_F(SessionManagerTest, SigkillInRlimitModeIsNotBlamedOnMemory) {
  runtime_->SetCgroupLimits(false);
  SessionManager* m = StartManager();
  EXPECT_EQ(m->GetInfo().memory_enforcement(), "rlimit");
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(st.collector->WaitStarted());
  ASSERT_OK(runtime_->Kill(s.container_id(), SIGKILL));
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST);
  EXPECT_THAT(f->error().message(), HasSubstr("SIGKILL"));
  EXPECT_THAT(f->error().message(), Not(HasSubstr("out of memory")));
}

// Where the process limit is RLIMIT_NPROC (rlimit mode), which counts per user id, each
// container runs as a user id of its own; in cgroup mode all run as 65534.
std::set<std::string> ContainerUids(ProcessRuntime& runtime, SessionManager* m) {
  std::set<std::string> uids;
  auto containers = runtime.List("io.sandboxd.instance", m->instance());
  for (const auto& c : *containers) {
    auto it = c.labels.find("io.sandboxd.uid");
    uids.insert(it == c.labels.end() ? "shared" : it->second);
  }
  return uids;
}

TEST_F(SessionManagerTest, InRlimitModeEachContainerHasAUidOfItsOwn) {
  runtime_->SetCgroupLimits(false);
  SessionManager* m = StartManager();
  std::vector<sandbox::v1::Session> sessions;
  for (int i = 0; i < 3; ++i) sessions.push_back(Create(m));
  size_t containers = runtime_->Names().size();
  std::set<std::string> uids = ContainerUids(*runtime_, m);
  EXPECT_EQ(uids.size(), containers) << "two containers share a uid";
  EXPECT_EQ(uids.count("shared"), 0u);
  for (const auto& uid : uids) EXPECT_GE(std::stoi(uid), 10000) << uid;
}

TEST_F(SessionManagerTest, InCgroupModeContainersShareTheNobodyUid) {
  SessionManager* m = StartManager();
  Create(m);
  EXPECT_EQ(ContainerUids(*runtime_, m), std::set<std::string>{"shared"});
}

TEST_F(SessionManagerTest, GarbageFrameLosesOnlyThatSession) {
  SessionManager* m = StartManager();
  sandbox::v1::Session bad = Create(m);
  sandbox::v1::Session good = Create(m);
  EXPECT_EQ(Eval(m, good.id(), "v = 'good'"), "");
  // User code writes a broken frame (length 0xffffffff) straight onto the runner's socket.
  std::optional<Finished> f =
      Run(m, bad.id(),
          "import gc, os\n"
          "conns = [o for o in gc.get_objects()\n"
          "         if type(o).__name__ == 'FrameConnection' and o.alive]\n"
          "for c in conns:\n"
          "    os.write(c._sock.fileno(), b'\\xff\\xff\\xff\\xffjunk')\n"
          "import time\n"
          "time.sleep(5)\n");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST) << f->DebugString();
  EXPECT_THAT(f->error().message(), HasSubstr("protocol violation"));
  absl::StatusOr<sandbox::v1::Session> got = m->GetSession(bad.id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state(), sandbox::v1::Session::LOST);
  EXPECT_THAT(got->lost_reason(), HasSubstr("protocol violation"));
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(bad.container_id()); }));
  // The other session is untouched.
  EXPECT_EQ(Eval(m, good.id(), "v"), "'good'");
  EXPECT_EQ(m->GetSession(good.id())->state(), sandbox::v1::Session::READY);
}

TEST_F(SessionManagerTest, ForgedFramesForOtherExecutionsAreIgnored) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  // Valid frames with a wrong execution id: a forged `done` must not finish anything.
  std::optional<Finished> f = Run(
      m, s.id(),
      "import gc, json, struct\n"
      "c = [o for o in gc.get_objects()\n"
      "     if type(o).__name__ == 'FrameConnection' and o.alive][0]\n"
      "c.send({'type': 'done', 'id': 999, 'status': 'ok', 'result': 'forged',\n"
      "        'error': None, 'output_bytes': 0, 'dropped_bytes': 0})\n"
      "c.send({'type': 'output', 'id': 999, 'chunks': [['stdout', 'forged output']]})\n"
      "c.send({'type': 'ready', 'runner_version': 1})\n"
      "'real'");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_EQ(f->result_repr(), "'real'");
  EXPECT_THAT(f->stdout(), Not(HasSubstr("forged")));
  EXPECT_EQ(Eval(m, s.id(), "1"), "1");
}

}  // namespace
}  // namespace sandboxd::testing
