// SessionManager end to end with real runner processes (ProcessRuntime: the runner runs
// as a plain host subprocess, no podman) and a fake clock for idle expiry.
//
// Every wait is bounded (kWait) so that a regression fails instead of hanging.
#include "sandboxd/session_manager.h"

#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process_runtime.h"
#include "sandboxd/session.h"

#ifndef SANDBOXD_RUNNER_PATH
#error "SANDBOXD_RUNNER_PATH must be defined (absolute path of sandbox_runner.py)"
#endif

namespace sandboxd {
namespace {

namespace fs = std::filesystem;
using ::sandbox::v1::Finished;
using ::testing::HasSubstr;
using ::testing::Not;
using ProcessRuntime = ::sandboxd::testing::ProcessRuntime;

// Upper bound of any single wait in this file.
constexpr absl::Duration kWait = absl::Seconds(15);

#define ASSERT_OK(expr)                          \
  do {                                           \
    const absl::Status _st = (expr);             \
    ASSERT_TRUE(_st.ok()) << #expr << ": " << _st; \
  } while (0)

class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t now_ms) : now_(now_ms) {}
  int64_t NowMs() override { return now_.load(); }
  void Advance(absl::Duration d) { now_ += absl::ToInt64Milliseconds(d); }
  void Set(int64_t ms) { now_ = ms; }

 private:
  std::atomic<int64_t> now_;
};

// Polls `pred` every 20 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout = kWait) {
  absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// Records everything an execution reports.
class Collector : public ExecutionObserver {
 public:
  // Optional: shared log of started execution ids across collectors (ordering tests).
  explicit Collector(std::shared_ptr<std::vector<uint64_t>> start_log = nullptr,
                     std::shared_ptr<std::mutex> start_log_mu = nullptr)
      : start_log_(std::move(start_log)), start_log_mu_(std::move(start_log_mu)) {}

  void OnStarted(uint64_t execution_id) override {
    if (start_log_) {
      std::lock_guard<std::mutex> l(*start_log_mu_);
      start_log_->push_back(execution_id);
    }
    std::lock_guard<std::mutex> l(mu_);
    ++started_count_;
    started_id_ = execution_id;
    events_.push_back("started");
    cv_.notify_all();
  }
  void OnOutput(OutputStream stream, const std::string& text) override {
    std::lock_guard<std::mutex> l(mu_);
    if (stream == OutputStream::kStdout) {
      stdout_ += text;
      ++stdout_chunks_;
      events_.push_back("stdout");
    } else {
      stderr_ += text;
      ++stderr_chunks_;
      events_.push_back("stderr");
    }
    cv_.notify_all();
  }
  void OnToolCall(const sandbox::v1::ToolCall& call) override {
    std::lock_guard<std::mutex> l(mu_);
    calls_.push_back(call);
    events_.push_back("tool_call");
    cv_.notify_all();
  }
  void OnFinished(const Finished& finished) override {
    std::lock_guard<std::mutex> l(mu_);
    ++finished_count_;
    finished_ = finished;
    events_.push_back("finished");
    cv_.notify_all();
  }

  std::optional<Finished> WaitFinished(absl::Duration timeout = kWait) {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, absl::ToChronoMilliseconds(timeout),
                      [&] { return finished_.has_value(); })) {
      return std::nullopt;
    }
    return finished_;
  }
  bool WaitStarted(absl::Duration timeout = kWait) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, absl::ToChronoMilliseconds(timeout),
                        [&] { return started_count_ > 0; });
  }
  // Waits until `n` tool calls arrived; returns the n-th.
  std::optional<sandbox::v1::ToolCall> WaitToolCall(size_t n = 1, absl::Duration timeout = kWait) {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, absl::ToChronoMilliseconds(timeout),
                      [&] { return calls_.size() >= n || finished_.has_value(); }) ||
        calls_.size() < n) {
      return std::nullopt;
    }
    return calls_[n - 1];
  }
  bool WaitStdout(const std::string& text, absl::Duration timeout = kWait) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, absl::ToChronoMilliseconds(timeout),
                        [&] { return absl::StrContains(stdout_, text); });
  }

  std::string stdout_text() {
    std::lock_guard<std::mutex> l(mu_);
    return stdout_;
  }
  std::string stderr_text() {
    std::lock_guard<std::mutex> l(mu_);
    return stderr_;
  }
  int stdout_chunks() {
    std::lock_guard<std::mutex> l(mu_);
    return stdout_chunks_;
  }
  int started_count() {
    std::lock_guard<std::mutex> l(mu_);
    return started_count_;
  }
  int finished_count() {
    std::lock_guard<std::mutex> l(mu_);
    return finished_count_;
  }
  size_t tool_call_count() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_.size();
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> l(mu_);
    return events_;
  }

 private:
  std::shared_ptr<std::vector<uint64_t>> start_log_;
  std::shared_ptr<std::mutex> start_log_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  int started_count_ = 0;
  uint64_t started_id_ = 0;
  std::string stdout_, stderr_;
  int stdout_chunks_ = 0, stderr_chunks_ = 0;
  std::vector<sandbox::v1::ToolCall> calls_;
  int finished_count_ = 0;
  std::optional<Finished> finished_;
  std::vector<std::string> events_;
};

sandbox::v1::Catalog EchoCatalogProto(const std::string& server = "srv",
                                      const std::string& tool = "echo") {
  sandbox::v1::Catalog c;
  auto* s = c.add_servers();
  s->set_name(server);
  s->set_description("test server");
  auto* t = s->add_tools();
  t->set_name(tool);
  t->set_description("Echoes back the input");
  t->set_input_schema_json(
      R"({"type":"object","properties":{"message":{"type":"string"}},"required":["message"]})");
  return c;
}

class SessionManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbxut-XXXXXX";  // short: unix socket paths are limited to 107 bytes
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    state_dir_ = tmpl;
    runtime_ = std::make_unique<ProcessRuntime>();
  }

  void TearDown() override {
    managers_.clear();  // Shutdown + join before the runtime goes away
    runtime_.reset();   // kills every runner still running
    std::error_code ec;
    fs::remove_all(state_dir_, ec);
  }

  ManagerOptions Options() {
    ManagerOptions o;
    o.state_dir = state_dir_;
    o.image = "host-python";
    o.runner_path = SANDBOXD_RUNNER_PATH;
    o.default_limits.default_timeout_ms = 10000;
    o.max_limits.memory_bytes = 1ull << 30;
    o.max_limits.cpu_millis = 4000;
    o.max_limits.pids = 1024;
    o.max_limits.nofile = 4096;
    o.max_limits.tmp_bytes = 1ull << 30;
    o.max_limits.workspace_bytes = 1ull << 30;
    o.max_limits.default_timeout_ms = 20000;
    o.max_sessions = 16;
    o.pool_size = 0;
    o.idle_ttl = absl::Minutes(10);
    o.max_code_bytes = 64 << 10;
    o.runner_start_timeout = absl::Seconds(15);
    o.max_timeout_ms = 20000;
    o.max_output_bytes = 1 << 20;
    o.max_queue = 16;
    o.kill_grace = absl::Milliseconds(500);
    o.version = "test";
    return o;
  }

  SessionManager* StartManager(const ManagerOptions& o) {
    auto m = std::make_unique<SessionManager>(o, runtime_.get(), &clock_);
    absl::Status s = m->Start();
    EXPECT_TRUE(s.ok()) << s;
    if (o.pool_size == 0) {
      // Without a pool the manager starts one probe container to learn whether containers
      // start (its readiness). Let that settle and be removed, so tests count only their own.
      for (int i = 0; i < 500; ++i) {
        Readiness r = m->readiness();
        if (r.checked && runtime_->Names().empty()) break;
        absl::SleepFor(absl::Milliseconds(10));
      }
      runtime_->ResetCounters();
    }
    managers_.push_back(std::move(m));
    return managers_.back().get();
  }
  SessionManager* StartManager() { return StartManager(Options()); }

  // Shuts down and destroys `m`.
  void StopManager(SessionManager* m) {
    for (auto it = managers_.begin(); it != managers_.end(); ++it) {
      if (it->get() == m) {
        (*it)->Shutdown();
        managers_.erase(it);
        return;
      }
    }
    ADD_FAILURE() << "unknown manager";
  }

  // Creates a session; returns its proto (id empty and a failure recorded on error).
  sandbox::v1::Session Create(SessionManager* m, sandbox::v1::CreateSessionRequest r = {}) {
    absl::StatusOr<sandbox::v1::Session> s = m->CreateSession(r);
    if (!s.ok()) {
      ADD_FAILURE() << "CreateSession: " << s.status();
      return {};
    }
    return *s;
  }

  // Queues `request` with a fresh collector.
  struct Started {
    std::shared_ptr<Collector> collector;
    std::shared_ptr<Execution> execution;
  };
  sandbox::v1::Session CreateWithEchoCatalog(SessionManager* m) {
    sandbox::v1::CreateSessionRequest r;
    *r.mutable_catalog() = EchoCatalogProto();
    return Create(m, r);
  }
  Started Exec(SessionManager* m, const std::string& id, ExecutionRequest request) {
    Started st;
    st.collector = std::make_shared<Collector>();
    absl::StatusOr<std::shared_ptr<Execution>> e = m->Execute(id, std::move(request), st.collector);
    if (!e.ok()) {
      ADD_FAILURE() << "Execute: " << e.status();
    } else {
      st.execution = *e;
    }
    return st;
  }
  Started Exec(SessionManager* m, const std::string& id, const std::string& code,
               uint32_t timeout_ms = 0) {
    ExecutionRequest r;
    r.code = code;
    r.timeout_ms = timeout_ms;
    return Exec(m, id, std::move(r));
  }

  // Runs `code` to completion.
  std::optional<Finished> Run(SessionManager* m, const std::string& id, const std::string& code,
                              uint32_t timeout_ms = 0) {
    Started st = Exec(m, id, code, timeout_ms);
    if (!st.execution) return std::nullopt;
    std::optional<Finished> f = st.collector->WaitFinished();
    if (!f) ADD_FAILURE() << "execution did not finish within " << kWait << ":\n" << code;
    return f;
  }

  // Runs `code`, expects OK and returns the repr of its trailing expression.
  std::string Eval(SessionManager* m, const std::string& id, const std::string& code) {
    std::optional<Finished> f = Run(m, id, code);
    if (!f) return "<no result>";
    EXPECT_EQ(f->status(), Finished::OK) << code << "\n" << f->DebugString();
    return f->result_repr();
  }

  std::string SessionRecordPath(const std::string& id) {
    return absl::StrCat(state_dir_, "/sessions/", id, ".json");
  }

  bool ContainerExists(const std::string& name) {
    absl::StatusOr<ContainerStatus> st = runtime_->Inspect(name);
    return st.ok() && st->exists;
  }

  std::string state_dir_;
  FakeClock clock_{1700000000000};
  std::unique_ptr<ProcessRuntime> runtime_;
  std::vector<std::unique_ptr<SessionManager>> managers_;
};

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

  EXPECT_EQ(m->ListSessions("").size(), 2u);
  std::vector<sandbox::v1::Session> alice = m->ListSessions("alice");
  ASSERT_EQ(alice.size(), 1u);
  EXPECT_EQ(alice[0].id(), a.id());
  EXPECT_EQ(m->ListSessions("nobody").size(), 0u);
  EXPECT_EQ(m->GetInfo().sessions(), 2u);

  ASSERT_OK(m->DeleteSession(a.id()));
  EXPECT_EQ(m->GetSession(a.id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->DeleteSession(a.id()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->ListSessions("").size(), 1u);
  EXPECT_FALSE(fs::exists(SessionRecordPath(a.id())));
  // The container goes away (removed by a worker).
  EXPECT_TRUE(WaitFor([&] { return !ContainerExists(a.container_id()); }));
  // The other session is unaffected.
  EXPECT_EQ(Eval(m, b.id(), "1 + 1"), "2");
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

// ---- tool calls ---------------------------------------------------------------------

TEST_F(SessionManagerTest, ToolCallRoundTrip) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  Started st = Exec(m, s.id(), "print('calling')\nr = await mcp_srv.echo(message='hi')\nr");
  ASSERT_TRUE(st.execution);
  std::optional<sandbox::v1::ToolCall> call = st.collector->WaitToolCall();
  ASSERT_TRUE(call);
  EXPECT_EQ(call->server(), "srv");
  EXPECT_EQ(call->tool(), "echo");
  EXPECT_EQ(nlohmann::json::parse(call->arguments_json()), nlohmann::json({{"message", "hi"}}));
  EXPECT_FALSE(call->call_id().empty());
  // Output written before the call arrives before it.
  EXPECT_EQ(st.collector->stdout_text(), "calling\n");

  sandbox::v1::ToolResult unknown;
  unknown.set_call_id("no-such-call");
  unknown.set_result_json("{}");
  EXPECT_EQ(st.execution->SubmitToolResult(unknown).code(), absl::StatusCode::kNotFound);

  sandbox::v1::ToolResult res;
  res.set_call_id(call->call_id());
  res.set_result_json(R"({"content":[{"type":"text","text":"hello back"}]})");
  ASSERT_OK(st.execution->SubmitToolResult(res));
  // Answering twice is an error.
  EXPECT_EQ(st.execution->SubmitToolResult(res).code(), absl::StatusCode::kNotFound);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_EQ(f->result_repr(), "'hello back'");
  EXPECT_EQ(f->tool_calls(), 1u);
  EXPECT_EQ(m->GetInfo().tool_calls_total(), 1u);
}

// The caller's in-flight limit reaches the runner, which holds further calls back: ten
// gathered calls arrive three at a time, and all of them complete.
TEST_F(SessionManagerTest, CallerInFlightLimitHoldsCallsBackInTheSandbox) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  ExecutionRequest req;
  req.code = "rs = await asyncio.gather(*(mcp_srv.echo(message=str(i)) for i in range(10)))\nlen(rs)";
  req.max_tool_calls_in_flight = 3;
  Started st = Exec(m, s.id(), std::move(req));
  ASSERT_TRUE(st.execution);
  ASSERT_TRUE(st.collector->WaitToolCall(3));
  absl::SleepFor(absl::Milliseconds(300));  // a fourth must not come while three are open
  EXPECT_EQ(st.collector->tool_call_count(), 3u);
  size_t answered = 0;
  for (size_t n = 1; n <= 10; ++n) {
    std::optional<sandbox::v1::ToolCall> call = st.collector->WaitToolCall(n);
    ASSERT_TRUE(call) << "call " << n;
    EXPECT_LE(st.collector->tool_call_count() - answered, 3u);
    sandbox::v1::ToolResult res;
    res.set_call_id(call->call_id());
    res.set_result_json(R"({"content":[{"type":"text","text":"ok"}]})");
    ASSERT_OK(st.execution->SubmitToolResult(res));
    ++answered;
  }
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_EQ(f->result_repr(), "10");
  EXPECT_EQ(f->tool_calls(), 10u);
}

TEST_F(SessionManagerTest, ToolCallStructuredAndErrorResults) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  Started st = Exec(m, s.id(),
                    "a = await mcp_srv.echo(message='1')\n"
                    "try:\n"
                    "    await mcp_srv.echo(message='2')\n"
                    "    b = 'no error'\n"
                    "except ToolError as e:\n"
                    "    b = str(e)\n"
                    "(a, b)");
  ASSERT_TRUE(st.execution);
  std::optional<sandbox::v1::ToolCall> c1 = st.collector->WaitToolCall(1);
  ASSERT_TRUE(c1);
  sandbox::v1::ToolResult r1;
  r1.set_call_id(c1->call_id());
  r1.set_result_json(R"({"content":[],"structuredContent":{"v":42}})");
  ASSERT_OK(st.execution->SubmitToolResult(r1));
  std::optional<sandbox::v1::ToolCall> c2 = st.collector->WaitToolCall(2);
  ASSERT_TRUE(c2);
  EXPECT_NE(c1->call_id(), c2->call_id());
  sandbox::v1::ToolResult r2;
  r2.set_call_id(c2->call_id());
  r2.set_error("upstream is down");
  ASSERT_OK(st.execution->SubmitToolResult(r2));
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_THAT(f->result_repr(), HasSubstr("{'v': 42}"));
  EXPECT_THAT(f->result_repr(), HasSubstr("upstream is down"));
  EXPECT_EQ(f->tool_calls(), 2u);
}

TEST_F(SessionManagerTest, InvalidToolResultFailsTheCallInPython) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  Started st = Exec(m, s.id(),
                    "try:\n"
                    "    await mcp_srv.echo(message='x')\n"
                    "    r = 'no error'\n"
                    "except ToolError as e:\n"
                    "    r = str(e)\n"
                    "r");
  std::optional<sandbox::v1::ToolCall> c = st.collector->WaitToolCall();
  ASSERT_TRUE(c);
  sandbox::v1::ToolResult res;
  res.set_call_id(c->call_id());
  res.set_result_json("[not json");
  EXPECT_EQ(st.execution->SubmitToolResult(res).code(), absl::StatusCode::kInvalidArgument);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK);
  EXPECT_THAT(f->result_repr(), HasSubstr("invalid result"));
}

TEST_F(SessionManagerTest, TimeoutWhileWaitingForATool) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  EXPECT_EQ(Eval(m, s.id(), "x = 'kept'"), "");
  Started st = Exec(m, s.id(), "await mcp_srv.echo(message='never answered')", 300);
  std::optional<sandbox::v1::ToolCall> c = st.collector->WaitToolCall();
  ASSERT_TRUE(c);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::TIMEOUT) << f->DebugString();
  // Too late to answer.
  sandbox::v1::ToolResult res;
  res.set_call_id(c->call_id());
  res.set_result_json("{}");
  EXPECT_EQ(st.execution->SubmitToolResult(res).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Eval(m, s.id(), "x"), "'kept'");
}

TEST_F(SessionManagerTest, ToolOutsideCatalogNeverReachesTheObserver) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  // User code can bypass the proxies and send any tool_call frame through the runner's
  // own ToolCalls object; sandboxd must refuse it against the catalog.
  Started st = Exec(m, s.id(),
                    "import gc\n"
                    "calls = [o for o in gc.get_objects() if type(o).__name__ == 'ToolCalls'][0]\n"
                    "out = []\n"
                    "for server, tool in [('srv', 'secret'), ('other', 'echo')]:\n"
                    "    try:\n"
                    "        await calls.call(server, tool, {})\n"
                    "        out.append('no error')\n"
                    "    except ToolError as e:\n"
                    "        out.append(str(e))\n"
                    "out");
  ASSERT_TRUE(st.execution);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_THAT(f->result_repr(), HasSubstr("srv.secret': it is not in this session's catalog"));
  EXPECT_THAT(f->result_repr(), HasSubstr("other.echo': it is not in this session's catalog"));
  EXPECT_THAT(f->result_repr(), Not(HasSubstr("no error")));
  EXPECT_EQ(st.collector->tool_call_count(), 0u);
  EXPECT_EQ(f->tool_calls(), 0u);
  EXPECT_EQ(m->GetInfo().tool_calls_total(), 0u);
}

TEST_F(SessionManagerTest, WithoutToolRouterCallsFailImmediately) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  ExecutionRequest req;
  req.code = "await mcp_srv.echo(message='x')";
  req.tool_router = false;
  Started st = Exec(m, s.id(), std::move(req));
  ASSERT_TRUE(st.execution);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::ERROR) << f->DebugString();
  EXPECT_EQ(f->error().type(), "ToolError");
  EXPECT_THAT(f->error().message(), HasSubstr("not available"));
  EXPECT_EQ(st.collector->tool_call_count(), 0u);
}

TEST_F(SessionManagerTest, CloseToolRouterFailsPendingAndLaterCalls) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  Started st = Exec(m, s.id(),
                    "out = []\n"
                    "for i in range(2):\n"
                    "    try:\n"
                    "        await mcp_srv.echo(message=str(i))\n"
                    "        out.append('no error')\n"
                    "    except ToolError as e:\n"
                    "        out.append(str(e))\n"
                    "out");
  ASSERT_TRUE(st.execution);
  std::optional<sandbox::v1::ToolCall> c = st.collector->WaitToolCall();
  ASSERT_TRUE(c);
  st.execution->CloseToolRouter();
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_THAT(f->result_repr(), HasSubstr("closed its side"));
  EXPECT_THAT(f->result_repr(), HasSubstr("not available"));
  EXPECT_THAT(f->result_repr(), Not(HasSubstr("no error")));
  EXPECT_EQ(st.collector->tool_call_count(), 1u);
  // The pending call is gone: answering it now fails.
  sandbox::v1::ToolResult res;
  res.set_call_id(c->call_id());
  res.set_result_json("{}");
  EXPECT_EQ(st.execution->SubmitToolResult(res).code(), absl::StatusCode::kNotFound);
}

TEST_F(SessionManagerTest, CatalogReplacedByExecution) {
  SessionManager* m = StartManager();
  sandbox::v1::CreateSessionRequest r;
  *r.mutable_catalog() = EchoCatalogProto("srv", "echo");
  sandbox::v1::Session s = Create(m, r);
  EXPECT_EQ(Eval(m, s.id(), "sorted(k for k in globals() if k.startswith('mcp_') and k != 'mcp_servers')"),
            "['mcp_srv']");

  sandbox::v1::Catalog next = EchoCatalogProto("other-server", "ping");
  next.mutable_servers(0)->add_tools()->set_name("pong");
  absl::StatusOr<Catalog> cat = Catalog::FromProto(next);
  ASSERT_TRUE(cat.ok());
  ExecutionRequest req;
  req.code = "sorted(k for k in globals() if k.startswith('mcp_') and k != 'mcp_servers')";
  req.catalog = *cat;
  Started st = Exec(m, s.id(), std::move(req));
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_EQ(f->result_repr(), "['mcp_other_server']");
  EXPECT_EQ(m->GetSession(s.id())->tool_count(), 2u);

  // The new catalog is enforced by sandboxd too: the old tool is refused.
  f = Run(m, s.id(),
          "import gc\n"
          "calls = [o for o in gc.get_objects() if type(o).__name__ == 'ToolCalls'][0]\n"
          "try:\n"
          "    await calls.call('srv', 'echo', {'message': 'x'})\n"
          "    r = 'no error'\n"
          "except ToolError as e:\n"
          "    r = str(e)\n"
          "r");
  ASSERT_TRUE(f);
  EXPECT_THAT(f->result_repr(), HasSubstr("not in this session's catalog"));

  // And it is what the session record now holds (for re-attachment).
  std::ifstream in(SessionRecordPath(s.id()));
  std::stringstream buf;
  buf << in.rdbuf();
  EXPECT_THAT(buf.str(), HasSubstr("other-server"));
}

// An execution that carries a catalog may wait behind another one; the catalog it
// installs must still end up in the session record, or a re-attached session disagrees
// with its runner about which tools exist.
TEST_F(SessionManagerTest, CatalogOfAQueuedExecutionIsPersisted) {
  SessionManager* m = StartManager();
  sandbox::v1::CreateSessionRequest r;
  *r.mutable_catalog() = EchoCatalogProto("srv", "echo");
  sandbox::v1::Session s = Create(m, r);
  Started running = Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(running.collector->WaitStarted());

  absl::StatusOr<Catalog> cat = Catalog::FromProto(EchoCatalogProto("other-server", "ping"));
  ASSERT_TRUE(cat.ok());
  ExecutionRequest req;
  req.code = "sorted(k for k in globals() if k.startswith('mcp_') and k != 'mcp_servers')";
  req.catalog = *cat;
  Started queued = Exec(m, s.id(), std::move(req));
  ASSERT_TRUE(queued.execution);
  running.execution->Cancel();
  std::optional<Finished> f = queued.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->result_repr(), "['mcp_other_server']");

  {
    // The record is rewritten on a worker thread once the catalog is installed.
    std::string record;
    for (int i = 0; i < 100; ++i) {
      std::ifstream in(SessionRecordPath(s.id()));
      std::stringstream buf;
      buf << in.rdbuf();
      record = buf.str();
      if (record.find("other-server") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_THAT(record, HasSubstr("other-server")) << record;
  }

  // After a restart the re-attached session routes calls of the new catalog.
  StopManager(m);
  SessionManager* m2 = StartManager();
  ASSERT_TRUE(m2->GetSession(s.id()).ok());
  Started st = Exec(m2, s.id(), "await mcp_other_server.ping(message='x')");
  ASSERT_TRUE(st.execution);
  std::optional<sandbox::v1::ToolCall> call = st.collector->WaitToolCall();
  ASSERT_TRUE(call) << st.collector->WaitFinished()->DebugString();
  EXPECT_EQ(call->server(), "other-server");
  sandbox::v1::ToolResult res;
  res.set_call_id(call->call_id());
  res.set_result_json(R"({"content":[{"type":"text","text":"pong"}]})");
  ASSERT_OK(st.execution->SubmitToolResult(res));
  f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->result_repr(), "'pong'");
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
  EXPECT_FALSE(fs::exists(SessionRecordPath(idle.id())));
  // A session with a running execution is not idle.
  EXPECT_TRUE(m->GetSession(busy.id()).ok());
  st.execution->Cancel();
  ASSERT_TRUE(st.collector->WaitFinished());
  // Just used: it does not expire on the next sweeps.
  absl::SleepFor(absl::Milliseconds(1200));
  EXPECT_TRUE(m->GetSession(busy.id()).ok());
}

// ---- runtime failures ---------------------------------------------------------------

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
  s = m->CreateSession({});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Eval(m, s->id(), "6 * 7"), "42");
  info = m->GetInfo();
  EXPECT_EQ(info.oci_runtime(), "process");
  EXPECT_EQ(info.memory_enforcement(), "cgroup");
  for (const auto& n : info.notes()) EXPECT_THAT(n, Not(HasSubstr("podman is broken")));
}

TEST_F(SessionManagerTest, StartFailureIsUnavailable) {
  SessionManager* m = StartManager();
  runtime_->SetStartFailure("no space left on device");
  absl::StatusOr<sandbox::v1::Session> s = m->CreateSession({});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("no space left on device"));
  EXPECT_EQ(m->ListSessions("").size(), 0u);
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
  EXPECT_EQ(m->ListSessions("").size(), 2u);
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
  ASSERT_OK(runtime_->Remove({s.container_id()}));
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
  SessionManager* m1 = StartManager();
  sandbox::v1::CreateSessionRequest r;
  r.set_label("survivor");
  r.set_owner("alice");
  *r.mutable_catalog() = EchoCatalogProto();
  sandbox::v1::Session s = Create(m1, r);
  ASSERT_FALSE(s.id().empty());
  EXPECT_EQ(Eval(m1, s.id(), "x = 41"), "");
  Started running = Exec(m1, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(running.collector->WaitStarted());
  std::string instance = m1->instance();

  StopManager(m1);
  // Work in flight ends, but the container stays.
  std::optional<Finished> f = running.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::SESSION_LOST);
  EXPECT_THAT(f->error().message(), HasSubstr("shutting down"));
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
  EXPECT_EQ(m2->ListSessions("alice").size(), 1u);
}

TEST_F(SessionManagerTest, RecoverDropsDeadSessionsAndStrayContainers) {
  SessionManager* m1 = StartManager();
  sandbox::v1::Session dead = Create(m1);
  sandbox::v1::Session alive = Create(m1);
  std::string instance = m1->instance();
  StopManager(m1);
  ASSERT_OK(runtime_->Remove({dead.container_id()}));

  // A container of this instance without a session record (say a pool container of a
  // daemon that crashed).
  std::string stray = "sbx-" + instance + "-stray";
  std::string stray_dir = state_dir_ + "/c/" + stray;
  fs::create_directories(stray_dir);
  ContainerSpec spec;
  spec.name = stray;
  spec.socket_dir = stray_dir;
  spec.runner_path = SANDBOXD_RUNNER_PATH;
  spec.labels = {{"io.sandboxd.instance", instance}, {"io.sandboxd.role", "pool"}};
  ASSERT_TRUE(runtime_->Start(spec).ok());
  // A container of another instance is none of our business.
  ContainerSpec foreign = spec;
  foreign.name = "sbx-foreign";
  foreign.socket_dir = state_dir_ + "/foreign";
  fs::create_directories(foreign.socket_dir);
  foreign.labels = {{"io.sandboxd.instance", "someone-else"}};
  ASSERT_TRUE(runtime_->Start(foreign).ok());

  SessionManager* m2 = StartManager();
  EXPECT_EQ(m2->GetSession(dead.id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(SessionRecordPath(dead.id())));
  EXPECT_TRUE(m2->GetSession(alive.id()).ok());
  EXPECT_FALSE(ContainerExists(stray));
  EXPECT_FALSE(fs::exists(stray_dir));
  EXPECT_TRUE(ContainerExists("sbx-foreign"));
  EXPECT_EQ(Eval(m2, alive.id(), "'ok'"), "'ok'");
}

// Start() with the runtime down skips re-attachment; once the runtime works again the
// sessions of the previous run should be re-attached (and stray containers removed)
// rather than leak until the next daemon restart.
TEST_F(SessionManagerTest, ReattachesWhenTheRuntimeComesBackAfterStart) {
  SessionManager* m1 = StartManager();
  sandbox::v1::Session s = Create(m1);
  EXPECT_EQ(Eval(m1, s.id(), "x = 5"), "");
  StopManager(m1);

  runtime_->SetProbeFailure("podman is not ready yet");
  SessionManager* m2 = StartManager();
  runtime_->SetProbeFailure(std::nullopt);
  absl::StatusOr<sandbox::v1::Session> fresh = m2->CreateSession({});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  absl::StatusOr<sandbox::v1::Session> got = m2->GetSession(s.id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Eval(m2, s.id(), "x"), "5");
}

TEST_F(SessionManagerTest, CreateAfterShutdownIsUnavailable) {
  SessionManager* m = StartManager();
  m->Shutdown();
  EXPECT_EQ(m->CreateSession({}).status().code(), absl::StatusCode::kUnavailable);
  m->Shutdown();  // idempotent
}

// ---- warm pool ----------------------------------------------------------------------

std::vector<std::string> PoolContainers(ProcessRuntime& rt) {
  std::vector<std::string> out;
  absl::StatusOr<std::vector<ContainerSummary>> l = rt.List("io.sandboxd.role", "pool");
  if (l.ok()) {
    for (const auto& c : *l) {
      if (c.running) out.push_back(c.name);
    }
  }
  return out;
}

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

  ASSERT_OK(rt.Remove({"pr-test", "never-existed"}));
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
}  // namespace sandboxd
