// SandboxdMetrics as the daemon fills it: what the registry holds after sessions come and
// go and executions finish is what happened. Read back through the collectables
// MetricsServer serves (the same families a scrape serializes).
#include <map>

#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"
#include "sandboxd/metrics.h"
#include "metrics_read.h"
#include "sandboxd/podman_runtime.h"
#include "session_manager_fixture.h"

namespace sandboxd::testing {
namespace {

std::string Serialize(const SandboxdMetrics& metrics) {
  std::vector<prometheus::MetricFamily> all;
  for (const auto& collectable : metrics.collectables()) {
    for (auto& family : collectable->Collect()) all.push_back(std::move(family));
  }
  return prometheus::TextSerializer().Serialize(all);
}

const std::string kP = "codemode_sandboxd_";
const Labels kPython = {{"runtime", "python"}};
const Labels kJavaScript = {{"runtime", "javascript"}};

// sessions_created_total's labels of a Python session from `source`.
Labels Python(const std::string& source) { return {{"source", source}, {"runtime", "python"}}; }

// The metrics outlive the managers: members go after TearDown, which destroys them.
class MetricsTest : public SessionManagerTest {
 protected:
  double Get(const std::string& name, const Labels& labels = {}) {
    return Read(metrics_, kP + name, labels);
  }
  double Executions(const std::string& status) { return Get("executions_total", {{"status", status}}); }
  double Ended(const std::string& reason) { return Get("sessions_ended_total", {{"reason", reason}}); }

  SandboxdMetrics metrics_;
};

TEST_F(MetricsTest, SessionsAndExecutionsAreCountedAsTheyHappen) {
  ManagerOptions o = Options();
  o.metrics = &metrics_;
  o.pool_size = 1;
  SessionManager* m = StartManager(o);
  EXPECT_EQ(Get("pool_target", kPython), 1);
  EXPECT_TRUE(WaitFor([&] { return Get("pool_target", kJavaScript) == 0; }))
      << "this manager cannot run JavaScript: its pool wants nothing";
  ASSERT_TRUE(WaitFor([&] { return Get("pool_ready", kPython) == 1; }));
  EXPECT_EQ(Get("pool_ready", kJavaScript), 0);

  sandbox::v1::Session pooled = Create(m);
  sandbox::v1::CreateSessionRequest other;
  other.mutable_limits()->set_memory_bytes(300ull << 20);  // not the pool's config: cold
  sandbox::v1::Session cold = Create(m, other);
  ASSERT_FALSE(pooled.id().empty());
  ASSERT_FALSE(cold.id().empty());
  EXPECT_EQ(Get("sessions_created_total", Python("pool")), 1);
  EXPECT_EQ(Get("sessions_created_total", Python("cold")), 1);
  EXPECT_EQ(Get("session_create_duration_seconds", Python("pool")), 1);
  EXPECT_EQ(Get("session_create_duration_seconds", Python("cold")), 1);
  EXPECT_EQ(Get("sessions_created_total", {{"source", "pool"}, {"runtime", "javascript"}}), 0);
  EXPECT_EQ(Get("sessions_active"), 2);

  EXPECT_EQ(Eval(m, pooled.id(), "6 * 7"), "42");
  std::optional<Finished> f = Run(m, pooled.id(), "1 / 0");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::ERROR);
  f = Run(m, pooled.id(), "import time\ntime.sleep(30)", /*timeout_ms=*/300);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::TIMEOUT);
  EXPECT_FALSE(m->Execute(pooled.id(), {}, std::make_shared<Collector>()).ok());  // empty code
  ExecutionRequest unknown_session;
  unknown_session.code = "1";
  EXPECT_FALSE(m->Execute("s-nope", unknown_session, std::make_shared<Collector>()).ok());
  EXPECT_EQ(Executions("ok"), 1);
  EXPECT_EQ(Executions("error"), 1);
  EXPECT_EQ(Executions("timeout"), 1);
  EXPECT_EQ(Executions("rejected"), 2);
  EXPECT_EQ(Executions("cancelled"), 0);
  EXPECT_EQ(Executions("crashed"), 0);
  EXPECT_EQ(Get("execution_duration_seconds"), 3);  // rejected ones never ran
  EXPECT_EQ(Get("execution_queue_wait_seconds"), 3);

  // Lost under a running execution: the session ends "lost", the execution "crashed".
  Started running = Exec(m, cold.id(), "import time\ntime.sleep(30)");
  ASSERT_TRUE(running.collector->WaitStarted());
  ASSERT_OK(runtime_->Kill(cold.container_id(), SIGKILL));
  f = running.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST);
  EXPECT_TRUE(WaitFor([&] { return Ended("lost") == 1; }));
  EXPECT_EQ(Executions("crashed"), 1);

  ASSERT_OK(m->DeleteSession(pooled.id()));
  EXPECT_EQ(Ended("closed"), 1);
  sandbox::v1::Session idle = Create(m);
  clock_.Advance(o.idle_ttl + absl::Seconds(1));
  EXPECT_TRUE(WaitFor([&] { return Ended("idle") == 1; }));
  sandbox::v1::Session detached = Create(m);
  EXPECT_EQ(Get("sessions_active"), 1);
  EXPECT_EQ(Get("sessions_created_total", Python("pool")) +
                Get("sessions_created_total", Python("cold")), 4);
  StopManager(m);
  EXPECT_EQ(Ended("shutdown"), 1);
  EXPECT_EQ(Ended("limit"), 0);
  EXPECT_EQ(Get("session_create_failures_total"), 0);
  EXPECT_EQ(Get("sessions_active"), 0) << "a manager that is gone is not read";
  // Every series of the table is there, with its labels, and no session id is.
  const std::string text = Serialize(metrics_);
  EXPECT_THAT(text, Not(HasSubstr(pooled.id())));
  EXPECT_THAT(text, HasSubstr(kP + "tool_calls_total{outcome=\"ok\"} 0"));
  EXPECT_THAT(text, HasSubstr(kP + "file_transfer_bytes_total{direction=\"upload\"} 0"));
}

// The pool gauges and sessions_created_total have a series per runtime: a JavaScript
// session from its pool counts under runtime="javascript", one outside the pool's config
// as cold there too, and the Python series stay at zero.
TEST_F(MetricsTest, JavaScriptSessionsAndPoolsAreCountedUnderTheirRuntime) {
  ManagerOptions o = Options();
  o.metrics = &metrics_;
  o.js_runner_path = SANDBOXD_JS_RUNNER_PATH;
  o.js_pool_size = 1;
  runtime_->SetImageOffers({"python3", "nodejs"});
  SessionManager* m = StartManager(o);
  EXPECT_EQ(Get("pool_target", kJavaScript), 1);
  EXPECT_EQ(Get("pool_target", kPython), 0);
  ASSERT_TRUE(WaitFor([&] { return Get("pool_ready", kJavaScript) == 1; }));
  sandbox::v1::CreateSessionRequest js;
  js.set_runtime("javascript");
  Create(m, js);
  js.mutable_limits()->set_pids(77);  // not the pool's config
  Create(m, js);
  const Labels pooled = {{"source", "pool"}, {"runtime", "javascript"}};
  const Labels cold = {{"source", "cold"}, {"runtime", "javascript"}};
  EXPECT_EQ(Get("sessions_created_total", pooled), 1);
  EXPECT_EQ(Get("sessions_created_total", cold), 1);
  EXPECT_EQ(Get("session_create_duration_seconds", pooled), 1);
  EXPECT_EQ(Get("sessions_created_total", Python("pool")), 0);
  EXPECT_EQ(Get("sessions_created_total", Python("cold")), 0);
  EXPECT_TRUE(WaitFor([&] { return Get("pool_ready", kJavaScript) == 1; })) << "refilled";
}

// A container whose removal fails (podman timed out) is counted, and removed again by the
// daemon's reaper once podman works instead of running on after its session ended.
TEST_F(MetricsTest, AContainerWhoseRemovalFailedIsCountedAndRemovedLater) {
  ManagerOptions o = Options();
  o.metrics = &metrics_;
  SessionManager* m = StartManager(o);
  sandbox::v1::Session s = Create(m);
  EXPECT_EQ(Get("containers_failing_removal"), 0);
  runtime_->SetRemoveFailure("podman rm timed out");
  ASSERT_OK(m->DeleteSession(s.id()));
  auto alive = [&] {
    const std::vector<std::string> names = runtime_->Names();
    return std::find(names.begin(), names.end(), s.container_id()) != names.end();
  };
  ASSERT_TRUE(WaitFor([&] { return Get("containers_failing_removal") == 1; }));
  EXPECT_EQ(Get("containers_awaiting_removal"), 1);
  EXPECT_TRUE(alive());
  runtime_->SetRemoveFailure(std::nullopt);
  EXPECT_TRUE(WaitFor([&] { return !alive(); })) << "the failed removal was not tried again";
  EXPECT_TRUE(WaitFor([&] { return Get("containers_failing_removal") == 0; }));
  EXPECT_TRUE(WaitFor([&] { return Get("containers_awaiting_removal") == 0; }));
}

TEST_F(MetricsTest, FailedCreationsToolCallsAndCapsAreCounted) {
  ManagerOptions o = Options();
  o.metrics = &metrics_;
  o.max_output_bytes = 100;
  SessionManager* m = StartManager(o);
  runtime_->SetStartFailure("no space left on device");
  EXPECT_FALSE(m->CreateSession({}).ok());
  EXPECT_EQ(Get("session_create_failures_total"), 1);
  EXPECT_EQ(Get("sessions_created_total", Python("cold")), 0);
  runtime_->SetStartFailure(std::nullopt);

  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  Started st = Exec(m, s.id(),
                    "r = await mcp_srv.echo(message='a')\n"
                    "try:\n  await mcp_srv.echo(message='b')\nexcept Exception:\n  pass\n"
                    "print('x' * 999)");
  ASSERT_TRUE(st.execution);
  std::optional<sandbox::v1::ToolCall> call = st.collector->WaitToolCall(1);
  ASSERT_TRUE(call);
  sandbox::v1::ToolResult ok;
  ok.set_call_id(call->call_id());
  ok.set_result_json(R"({"content":[{"type":"text","text":"a"}]})");
  ASSERT_OK(st.execution->SubmitToolResult(ok));
  call = st.collector->WaitToolCall(2);
  ASSERT_TRUE(call);
  sandbox::v1::ToolResult failed;
  failed.set_call_id(call->call_id());
  failed.set_error("the upstream is down");
  ASSERT_OK(st.execution->SubmitToolResult(failed));
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_TRUE(f->output_truncated());
  EXPECT_EQ(Get("tool_calls_total", {{"outcome", "ok"}}), 1);
  EXPECT_EQ(Get("tool_calls_total", {{"outcome", "error"}}), 1);
  // 1000 bytes printed ('x' * 999 and the newline), 100 kept.
  EXPECT_EQ(Get("output_dropped_bytes_total"), 900);
}

// PodmanRuntime counts each podman command by subcommand and podman's exit status: here
// "podman" is `false` (every command fails) and then `true` (every command succeeds). A
// failed `rm` is tried once more, and each try counts.
TEST(PodmanMetricsTest, EachCommandIsCountedByItsSubcommandAndResult) {
  SandboxdMetrics metrics;
  PodmanOptions options;
  options.podman = "false";
  PodmanRuntime failing(options, &metrics);
  EXPECT_EQ(failing.Remove({"c1"}).size(), 1u);
  EXPECT_FALSE(failing.List("io.sandboxd.instance", "x").ok());
  options.podman = "true";
  PodmanRuntime working(options, &metrics);
  EXPECT_TRUE(working.Remove({"c1", "c2"}).empty());
  EXPECT_TRUE(working.Remove({}).empty());  // nothing to remove: no command
  auto ops = [&](const std::string& op, const std::string& result) {
    return Read(metrics, kP + "container_operations_total", {{"op", op}, {"result", result}});
  };
  EXPECT_EQ(ops("rm", "error"), 2);
  EXPECT_EQ(ops("rm", "ok"), 1);
  EXPECT_EQ(ops("ps", "error"), 1);
  EXPECT_EQ(ops("ps", "ok"), 0);
  EXPECT_EQ(ops("run", "ok"), 0);
  EXPECT_EQ(Read(metrics, kP + "container_operation_duration_seconds", {{"op", "rm"}}), 3);
}

// Without --metrics_listen sandboxd counts nothing: every event leaves the registry as it
// was (the series exist, at zero), and the scrape-time gauges still answer.
TEST(SandboxdMetricsOffTest, CountsNothing) {
  SandboxdMetrics metrics(/*counting=*/false);
  EXPECT_FALSE(metrics.counting());
  metrics.SessionCreated(SandboxdMetrics::Source::kPool, Language::kPython, absl::Milliseconds(3));
  metrics.SessionCreateFailed();
  metrics.SessionsEnded(SandboxdMetrics::EndReason::kIdle, 2);
  metrics.ExecutionFinished(sandbox::v1::Finished::OK, true, absl::Milliseconds(1));
  metrics.ExecutionRejected();
  metrics.QueueWaited(absl::Milliseconds(1));
  metrics.ToolCall(true);
  metrics.OutputDropped(10);
  metrics.DisplaysDropped(1);
  metrics.ContainerOpDone(SandboxdMetrics::ContainerOp::kRun, true, absl::Milliseconds(5));
  metrics.FileBytes(SandboxdMetrics::Direction::kUpload, 100);
  EXPECT_EQ(Read(metrics, kP + "sessions_created_total",
                 {{"source", "pool"}, {"runtime", "python"}}), 0);
  EXPECT_EQ(Read(metrics, kP + "session_create_failures_total"), 0);
  EXPECT_EQ(Read(metrics, kP + "sessions_ended_total", {{"reason", "idle"}}), 0);
  EXPECT_EQ(Read(metrics, kP + "executions_total", {{"status", "ok"}}), 0);
  EXPECT_EQ(Read(metrics, kP + "executions_total", {{"status", "rejected"}}), 0);
  EXPECT_EQ(Read(metrics, kP + "execution_queue_wait_seconds"), 0);
  EXPECT_EQ(Read(metrics, kP + "tool_calls_total", {{"outcome", "ok"}}), 0);
  EXPECT_EQ(Read(metrics, kP + "output_dropped_bytes_total"), 0);
  EXPECT_EQ(Read(metrics, kP + "container_operations_total", {{"op", "run"}, {"result", "ok"}}), 0);
  EXPECT_EQ(Read(metrics, kP + "file_transfer_bytes_total", {{"direction", "upload"}}), 0);
  EXPECT_EQ(Read(metrics, kP + "sessions_active"), 0);

  SandboxdMetrics on;  // the same events counted: the names above are real series
  on.SessionCreateFailed();
  on.ExecutionRejected();
  on.FileBytes(SandboxdMetrics::Direction::kUpload, 100);
  EXPECT_EQ(Read(on, kP + "session_create_failures_total"), 1);
  EXPECT_EQ(Read(on, kP + "executions_total", {{"status", "rejected"}}), 1);
  EXPECT_EQ(Read(on, kP + "file_transfer_bytes_total", {{"direction", "upload"}}), 100);
}

}  // namespace
}  // namespace sandboxd::testing
