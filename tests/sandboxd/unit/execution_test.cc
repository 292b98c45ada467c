// SessionManager executions: namespaces, output, timeouts, cancellation and order.
#include "session_manager_fixture.h"

namespace sandboxd::testing {
namespace {

// ---- executions ---------------------------------------------------------------------

TEST_F(SessionManagerTest, VariablesPersistAcrossExecutions) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  ASSERT_FALSE(s.id().empty());
  std::optional<Finished> f = Run(m, s.id(), "x = 41\ndef inc(v):\n    return v + 1");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK);
  EXPECT_EQ(f->result_repr(), "");
  EXPECT_EQ(Eval(m, s.id(), "inc(x)"), "42");
  EXPECT_EQ(Eval(m, s.id(), "import math\ny = math.sqrt(16)"), "");
  EXPECT_EQ(Eval(m, s.id(), "y"), "4.0");
  absl::StatusOr<sandbox::v1::Session> got = m->GetSession(s.id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->executions(), 4u);
  EXPECT_EQ(m->GetInfo().executions_total(), 4u);
}

TEST_F(SessionManagerTest, ErrorsAreReported) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  std::optional<Finished> f = Run(m, s.id(), "print('before')\n1 / 0");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::ERROR);
  EXPECT_EQ(f->error().type(), "ZeroDivisionError");
  EXPECT_THAT(f->error().message(), HasSubstr("division by zero"));
  EXPECT_THAT(f->error().traceback(), HasSubstr("ZeroDivisionError"));
  EXPECT_EQ(f->stdout(), "before\n");
  f = Run(m, s.id(), "def broken(:\n  pass");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::ERROR);
  EXPECT_EQ(f->error().type(), "SyntaxError");
  // The session is fine afterwards.
  EXPECT_EQ(Eval(m, s.id(), "'still here'"), "'still here'");
}

// The runner fingerprints out/ after each execution; sandboxd passes it on.
TEST_F(SessionManagerTest, FinishedCarriesTheFingerprintOfOut) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  std::optional<Finished> f = Run(m, s.id(), "pass");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->out_digest(), "-") << "no out/ yet";
  f = Run(m, s.id(), "import os\nos.makedirs('out/d')\nopen('out/d/a.txt', 'w').write('x')");
  ASSERT_TRUE(f);
  const std::string written = f->out_digest();
  EXPECT_EQ(written.size(), 32u) << written;
  f = Run(m, s.id(), "x = 1");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->out_digest(), written) << "nothing under out/ changed";
  f = Run(m, s.id(), "open('out/d/a.txt', 'w').write('xy')");
  ASSERT_TRUE(f);
  EXPECT_NE(f->out_digest(), written);
  EXPECT_EQ(f->out_digest().size(), 32u);
}

TEST_F(SessionManagerTest, OutputIsStreamed) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(),
                    "import sys, time\n"
                    "for i in range(3):\n"
                    "    print(i, flush=True)\n"
                    "    time.sleep(0.1)\n"
                    "sys.stderr.write('err\\n')\n");
  ASSERT_TRUE(st.execution);
  // The first line arrives while the code still runs.
  ASSERT_TRUE(st.collector->WaitStdout("0\n"));
  EXPECT_EQ(st.collector->finished_count(), 0);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK);
  EXPECT_EQ(st.collector->stdout_text(), "0\n1\n2\n");
  EXPECT_EQ(st.collector->stderr_text(), "err\n");
  EXPECT_GE(st.collector->stdout_chunks(), 2);
  EXPECT_EQ(f->stdout(), "0\n1\n2\n");
  EXPECT_EQ(f->stderr(), "err\n");
  EXPECT_FALSE(f->output_truncated());
  EXPECT_EQ(f->output_bytes(), 10u);
  std::vector<std::string> ev = st.collector->events();
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.front(), "started");
  EXPECT_EQ(ev.back(), "finished");
  EXPECT_EQ(st.collector->started_count(), 1);
  EXPECT_EQ(st.collector->finished_count(), 1);
}

TEST_F(SessionManagerTest, OutputCapTruncates) {
  ManagerOptions o = Options();
  o.max_output_bytes = 1000;
  SessionManager* m = StartManager(o);
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(), "print('x' * 5000)\nprint('more')");
  ASSERT_TRUE(st.execution);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK);
  EXPECT_TRUE(f->output_truncated());
  EXPECT_EQ(f->output_bytes(), 5001u + 5u);
  EXPECT_EQ(f->stdout().substr(0, 1000), std::string(1000, 'x'));
  EXPECT_THAT(f->stdout().substr(1000), HasSubstr("output truncated"));
  EXPECT_THAT(f->stdout(), Not(HasSubstr("more")));
  // The streamed text never exceeds the cap (markers aside).
  std::string streamed = st.collector->stdout_text();
  EXPECT_LE(streamed.size(), 1000u);
  EXPECT_EQ(streamed, std::string(streamed.size(), 'x'));
  // The session keeps working and the cap is per execution.
  EXPECT_EQ(Eval(m, s.id(), "print('ok')\n1"), "1");
}

TEST_F(SessionManagerTest, TimeoutInterruptsAndKeepsNamespace) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  EXPECT_EQ(Eval(m, s.id(), "x = 7"), "");
  std::optional<Finished> f = Run(m, s.id(), "while True:\n    pass", /*timeout_ms=*/300);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::TIMEOUT) << f->DebugString();
  EXPECT_EQ(f->error().type(), "TimeoutError");
  EXPECT_THAT(f->error().message(), HasSubstr("300 ms"));
  EXPECT_GE(f->duration_ms(), 250u);
  EXPECT_EQ(Eval(m, s.id(), "x"), "7");
  absl::StatusOr<sandbox::v1::Session> got = m->GetSession(s.id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state(), sandbox::v1::Session::READY);
}

TEST_F(SessionManagerTest, SessionDefaultTimeoutApplies) {
  SessionManager* m = StartManager();
  sandbox::v1::CreateSessionRequest r;
  r.mutable_limits()->set_default_timeout_ms(300);
  sandbox::v1::Session s = Create(m, r);
  std::optional<Finished> f = Run(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::TIMEOUT);
}

TEST_F(SessionManagerTest, IgnoredInterruptKillsTheSession) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  std::optional<Finished> f = Run(m, s.id(),
                                  "import signal, time\n"
                                  "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                  "while True:\n"
                                  "    time.sleep(0.05)\n",
                                  /*timeout_ms=*/300);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST) << f->DebugString();
  EXPECT_THAT(f->error().message(), HasSubstr("timeout"));
  absl::StatusOr<sandbox::v1::Session> got = m->GetSession(s.id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state(), sandbox::v1::Session::LOST);
  EXPECT_THAT(got->lost_reason(), HasSubstr("timeout"));
  ExecutionRequest r;
  r.code = "1";
  auto e = m->Execute(s.id(), r, std::make_shared<Collector>());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("timeout"));
  EXPECT_EQ(m->ResetSession(s.id()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(s.container_id()); }));
  // A lost session can still be deleted.
  ASSERT_OK(m->DeleteSession(s.id()));
}

TEST_F(SessionManagerTest, CancelRunningExecution) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  EXPECT_EQ(Eval(m, s.id(), "x = 'kept'"), "");
  Started st = Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(st.execution);
  ASSERT_TRUE(st.collector->WaitStarted());
  st.execution->Cancel();
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::CANCELLED) << f->DebugString();
  EXPECT_EQ(Eval(m, s.id(), "x"), "'kept'");
  st.execution->Cancel();  // after the fact: harmless
  EXPECT_EQ(st.collector->finished_count(), 1);
}

TEST_F(SessionManagerTest, CancelIgnoredKillsTheSession) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(),
                    "import signal, time\n"
                    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                    "print('ignoring', flush=True)\n"
                    "while True:\n"
                    "    time.sleep(0.05)\n");
  ASSERT_TRUE(st.execution);
  ASSERT_TRUE(st.collector->WaitStdout("ignoring"));
  st.execution->Cancel();
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST) << f->DebugString();
  EXPECT_THAT(f->error().message(), HasSubstr("cancelled"));
  EXPECT_EQ(m->GetSession(s.id())->state(), sandbox::v1::Session::LOST);
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(s.container_id()); }));
}

TEST_F(SessionManagerTest, CancelQueuedExecution) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  Started first = Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  Started second = Exec(m, s.id(), "ran_second = True");
  ASSERT_TRUE(first.execution && second.execution);
  ASSERT_TRUE(first.collector->WaitStarted());
  EXPECT_EQ(m->GetSession(s.id())->queued(), 1u);
  second.execution->Cancel();
  std::optional<Finished> f2 = second.collector->WaitFinished();
  ASSERT_TRUE(f2);
  EXPECT_EQ(f2->status(), Finished::CANCELLED);
  EXPECT_EQ(second.collector->started_count(), 0);
  EXPECT_EQ(first.collector->finished_count(), 0);  // the running one is untouched
  first.execution->Cancel();
  std::optional<Finished> f1 = first.collector->WaitFinished();
  ASSERT_TRUE(f1);
  EXPECT_EQ(f1->status(), Finished::CANCELLED);
  EXPECT_EQ(Eval(m, s.id(), "'ran_second' in globals()"), "False");
}

TEST_F(SessionManagerTest, ExecutionsRunInOrder) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  EXPECT_EQ(Eval(m, s.id(), "order = []"), "");
  auto log = std::make_shared<std::vector<uint64_t>>();
  auto log_mu = std::make_shared<std::mutex>();
  std::vector<Started> all;
  for (int i = 0; i < 6; ++i) {
    Started st;
    st.collector = std::make_shared<Collector>(log, log_mu);
    ExecutionRequest r;
    // Earlier ones are slower, so any reordering would show.
    r.code = absl::StrCat("import time\ntime.sleep(", (6 - i) * 0.02, ")\norder.append(", i,
                          ")\nprint(", i, ")\n", i);
    auto e = m->Execute(s.id(), std::move(r), st.collector);
    ASSERT_TRUE(e.ok()) << e.status();
    st.execution = *e;
    all.push_back(st);
  }
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) {
    std::optional<Finished> f = all[i].collector->WaitFinished();
    ASSERT_TRUE(f) << i;
    EXPECT_EQ(f->status(), Finished::OK);
    EXPECT_EQ(f->result_repr(), std::to_string(i));
    EXPECT_EQ(f->stdout(), absl::StrCat(i, "\n"));
    EXPECT_EQ(f->execution_id(), all[i].execution->id());
    ids.push_back(all[i].execution->id());
  }
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_LT(ids[i - 1], ids[i]);
  {
    std::lock_guard<std::mutex> l(*log_mu);
    EXPECT_EQ(*log, ids);
  }
  EXPECT_EQ(Eval(m, s.id(), "order"), "[0, 1, 2, 3, 4, 5]");
}

TEST_F(SessionManagerTest, QueueLimit) {
  ManagerOptions o = Options();
  o.max_queue = 2;
  SessionManager* m = StartManager(o);
  sandbox::v1::Session s = Create(m);
  Started running = Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(running.execution);
  ASSERT_TRUE(running.collector->WaitStarted());
  Started q1 = Exec(m, s.id(), "1");
  Started q2 = Exec(m, s.id(), "2");
  ASSERT_TRUE(q1.execution && q2.execution);
  ExecutionRequest r;
  r.code = "3";
  auto e = m->Execute(s.id(), r, std::make_shared<Collector>());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m->ResetSession(s.id()).status().code(), absl::StatusCode::kResourceExhausted);
  running.execution->Cancel();
  for (Started* st : {&running, &q1, &q2}) ASSERT_TRUE(st->collector->WaitFinished());
  EXPECT_EQ(q2.collector->WaitFinished()->result_repr(), "2");
  // Room again.
  EXPECT_EQ(Eval(m, s.id(), "4"), "4");
}

TEST_F(SessionManagerTest, MaxSessions) {
  ManagerOptions o = Options();
  o.max_sessions = 1;
  SessionManager* m = StartManager(o);
  sandbox::v1::Session a = Create(m);
  ASSERT_FALSE(a.id().empty());
  absl::StatusOr<sandbox::v1::Session> b = m->CreateSession({});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(runtime_->start_calls(), 1);  // refused before starting a container
  ASSERT_OK(m->DeleteSession(a.id()));
  sandbox::v1::Session c = Create(m);
  EXPECT_FALSE(c.id().empty());
}

// ---- DescribeContainerDeath ---------------------------------------------------------

TEST(DescribeContainerDeathTest, Messages) {
  ResolvedLimits l;
  l.memory_bytes = 256ull << 20;
  ContainerStatus gone;
  EXPECT_THAT(DescribeContainerDeath(gone, l, true), HasSubstr("disappeared"));

  ContainerStatus oom;
  oom.exists = true;
  oom.oom_killed = true;
  oom.exit_code = 137;
  EXPECT_THAT(DescribeContainerDeath(oom, l, true), HasSubstr("out of memory (limit 256 MiB)"));

  ContainerStatus running;
  running.exists = true;
  running.running = true;
  EXPECT_THAT(DescribeContainerDeath(running, l, true), HasSubstr("kept running"));

  ContainerStatus killed;
  killed.exists = true;
  killed.exit_code = 137;
  EXPECT_THAT(DescribeContainerDeath(killed, l, true), HasSubstr("SIGKILL"));
  EXPECT_THAT(DescribeContainerDeath(killed, l, true), HasSubstr("256 MiB"));
  EXPECT_THAT(DescribeContainerDeath(killed, l, false), HasSubstr("SIGKILL"));
  EXPECT_THAT(DescribeContainerDeath(killed, l, false), Not(HasSubstr("memory")));

  ContainerStatus exited;
  exited.exists = true;
  exited.exit_code = 3;
  EXPECT_THAT(DescribeContainerDeath(exited, l, true), HasSubstr("exited with code 3"));
  // The JavaScript runner ends itself with SIGTERM when 3 workers are stuck in system calls.
  exited.exit_code = 143;
  EXPECT_THAT(DescribeContainerDeath(exited, l, true), HasSubstr("stuck in system calls"));
}

// ---- ProcessRuntime itself ----------------------------------------------------------

TEST(ProcessRuntimeTest, StartInspectListRemove) {
  char tmpl[] = "/tmp/sbxpr-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  ProcessRuntime rt;
  absl::StatusOr<RuntimeInfo> info = rt.Probe();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->oci_runtime, "process");
  EXPECT_TRUE(info->cgroup_limits);

  ContainerSpec spec;
  spec.name = "pr-test";
  spec.socket_dir = dir;
  spec.runner_path = SANDBOXD_RUNNER_PATH;
  spec.labels = {{"k", "v"}};
  absl::StatusOr<std::string> id = rt.Start(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(rt.Start(spec).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(WaitFor([&] { return fs::exists(dir + "/runner.sock"); }));
  absl::StatusOr<ContainerStatus> st = rt.Inspect("pr-test");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->exists);
  EXPECT_TRUE(st->running);
  auto listed = rt.List("k", "v");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "pr-test");
  EXPECT_EQ((*listed)[0].id, *id);
  EXPECT_TRUE((*listed)[0].running);
  EXPECT_EQ(rt.List("k", "other")->size(), 0u);

  ASSERT_OK(rt.Kill("pr-test", SIGKILL));
  EXPECT_TRUE(WaitFor([&] { return !rt.Inspect("pr-test")->running; }));
  st = rt.Inspect("pr-test");
  EXPECT_TRUE(st->exists);
  EXPECT_EQ(st->exit_code, 137);

  ASSERT_TRUE(rt.Remove({"pr-test", "never-existed"}).empty());
  EXPECT_FALSE(rt.Inspect("pr-test")->exists);
  EXPECT_TRUE(rt.Names().empty());

  rt.SetStartFailure("nope");
  absl::StatusOr<std::string> failed = rt.Start(spec);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().message(), "nope");
  rt.SetProbeFailure("down");
  EXPECT_EQ(rt.Probe().status().code(), absl::StatusCode::kUnavailable);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace sandboxd::testing
