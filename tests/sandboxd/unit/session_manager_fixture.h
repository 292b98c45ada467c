// The SessionManager test fixture: real runner processes (ProcessRuntime: the runner runs
// as a plain host subprocess, no podman), a fake clock for idle expiry, and a Collector
// that records what an execution reports. The SessionManagerTest suites live in
// session_manager_test.cc (lifecycle, restart, pool), execution_test.cc,
// tool_call_test.cc and runtime_failure_test.cc.
//
// Every wait is bounded (kWait) so that a regression fails instead of hanging.
#pragma once

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
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
#include "sandboxd/record_store.h"
#include "sandboxd/session.h"
#include "sandboxd/session_manager.h"
#include "log_capture.h"
#include "spdlog/spdlog.h"

#ifndef SANDBOXD_RUNNER_PATH
#error "SANDBOXD_RUNNER_PATH must be defined (absolute path of sandbox_runner.pyz)"
#endif

namespace sandboxd::testing {

namespace fs = std::filesystem;
using ::sandbox::v1::Finished;
using ::testing::HasSubstr;
using ::testing::Not;

// Upper bound of any single wait in these tests.
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
inline bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout = kWait) {
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
  void OnDisplay(const sandbox::v1::Display& display) override {
    std::lock_guard<std::mutex> l(mu_);
    displays_.push_back(display);
    events_.push_back("display");
    cv_.notify_all();
  }
  std::vector<sandbox::v1::Display> displays() {
    std::lock_guard<std::mutex> l(mu_);
    return displays_;
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
  std::vector<sandbox::v1::Display> displays_;
  int finished_count_ = 0;
  std::optional<Finished> finished_;
  std::vector<std::string> events_;
};

inline sandbox::v1::Catalog EchoCatalogProto(const std::string& server = "srv",
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

using testlog::LogCapture;  // log_capture.h

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

  // `records` nullptr: the real files under the state directory.
  SessionManager* StartManager(const ManagerOptions& o, RecordStore* records = nullptr) {
    auto m = std::make_unique<SessionManager>(o, runtime_.get(), &clock_, records);
    const std::vector<std::string> before = runtime_->Names();  // a previous run's
    absl::Status s = m->Start();
    EXPECT_TRUE(s.ok()) << s;
    if (o.pool_size == 0) {
      // Without a pool the manager starts one probe container to learn whether containers
      // start (its readiness). Let that settle and be removed, so tests count only their own.
      auto only_before = [&] {
        for (const std::string& name : runtime_->Names()) {
          if (std::find(before.begin(), before.end(), name) == before.end()) return false;
        }
        return true;
      };
      for (int i = 0; i < 500 && !(m->readiness().checked && only_before()); ++i) {
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
  // Queues `code` with a catalog that replaces the session's first.
  Started ExecWithCatalog(SessionManager* m, const std::string& id, const std::string& code,
                          const sandbox::v1::Catalog& catalog) {
    absl::StatusOr<Catalog> cat = Catalog::FromProto(catalog);
    if (!cat.ok()) {
      ADD_FAILURE() << "Catalog::FromProto: " << cat.status();
      return {};
    }
    ExecutionRequest r;
    r.code = code;
    r.catalog = *std::move(cat);
    return Exec(m, id, std::move(r));
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

  // The record of session `id` once it contains `text` (records of catalog changes are
  // written on a worker thread, after the execution that installed the catalog started).
  std::string WaitForRecordContaining(const std::string& id, const std::string& text) {
    std::string record;
    WaitFor([&] {
      std::ifstream in(SessionRecordPath(id));
      std::stringstream buf;
      buf << in.rdbuf();
      record = buf.str();
      return absl::StrContains(record, text);
    });
    return record;
  }

  // The socket directories under the state directory (one per container until it goes).
  size_t SocketDirs() {
    std::error_code ec;
    size_t n = 0;
    for (fs::directory_iterator it(state_dir_ + "/c", ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      ++n;
    }
    return n;
  }

  bool ContainerExists(const std::string& name) {
    absl::StatusOr<ContainerStatus> st = runtime_->Inspect(name);
    return st.ok() && st->exists;
  }

  // Starts a container of `instance` that no session record names (say a pool container
  // of a daemon that crashed), with its socket directory; its name.
  std::string StartStray(const std::string& instance) {
    ContainerSpec spec;
    spec.name = "sbx-" + instance + "-stray";
    spec.socket_dir = state_dir_ + "/c/" + spec.name;
    fs::create_directories(spec.socket_dir);
    spec.runner_path = SANDBOXD_RUNNER_PATH;
    spec.labels = {{"io.sandboxd.instance", instance}, {"io.sandboxd.role", "pool"}};
    EXPECT_TRUE(runtime_->Start(spec).ok());
    return spec.name;
  }

  // Names of the running containers the warm pool holds.
  static std::vector<std::string> PoolContainers(ProcessRuntime& rt) {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<ContainerSummary>> l = rt.List("io.sandboxd.role", "pool");
    if (l.ok()) {
      for (const auto& c : *l) {
        if (c.running) out.push_back(c.name);
      }
    }
    return out;
  }

  std::string state_dir_;
  FakeClock clock_{1700000000000};
  std::unique_ptr<ProcessRuntime> runtime_;
  std::vector<std::unique_ptr<SessionManager>> managers_;
};

}  // namespace sandboxd::testing
