// Integration: GetSessionStats against the real daemon and Podman. A session allocates
// 100 MiB, burns CPU and writes 5 MiB to /workspace; the stats show it, answer while code
// runs, and carry the session's limits. Runs in every isolation mode: under gVisor the
// numbers are the runsc sandbox's (its kernel included) and the workspace is not visible;
// on the wasm tier they come from /proc (each process's peak resident set for the peak) and
// the workspace's own measure (docs/wasm-tier.md).
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using sandbox::v1::Finished;
using sandbox::v1::SessionStats;

// Runs a busy loop in session `id` (it has printed, so it runs) and asks for its stats
// until they show more than 300 ms of CPU beyond `before`: each answer must come while the
// loop still runs, not once the execution is over.
void ExpectStatsWhileCodeRuns(sandbox::v1::SandboxService::Stub& stub, const std::string& id,
                              const SessionStats& before) {
  std::atomic<bool> looping{false}, done{false};
  ExecuteOutcome busy;
  std::thread runner([&] {
    busy = Execute(stub,
                   Start(id, "import time\nprint('looping', flush=True)\n"
                             "t = time.time() + 5\nwhile time.time() < t:\n    pass"),
                   nullptr, false, [&](const sandbox::v1::ExecuteResponse& m, auto*) {
                     if (m.has_output()) looping = true;
                   });
    done = true;
  });
  const bool began = WaitFor([&] { return looping.load(); }, 60000);
  SessionStats b;
  grpc::Status st;
  bool answered_while_running = true;
  std::chrono::steady_clock::duration took{};
  WaitFor([&] {
    auto t0 = std::chrono::steady_clock::now();
    st = GetSessionStats(stub, id, &b);
    took = std::chrono::steady_clock::now() - t0;
    answered_while_running = !done;
    return !st.ok() || !answered_while_running || b.cpu_time_ms() > before.cpu_time_ms() + 300;
  });
  runner.join();
  ASSERT_TRUE(began) << "the busy loop never printed";
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(busy.finished.status(), Finished::OK) << busy.finished.DebugString();
  EXPECT_TRUE(answered_while_running) << "GetSessionStats waited for the execution";
  EXPECT_GT(b.cpu_time_ms(), before.cpu_time_ms() + 300) << before.DebugString() << b.DebugString();
  std::printf("stats (%s): %s  answered in %lld us while code ran\n", TestIsolation().c_str(),
              b.ShortDebugString().c_str(),
              static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(took).count()));
}

TEST(SessionStatsTest, ShowMemoryCpuTasksAndWorkspaceEvenWhileCodeRuns) {
  SandboxdProcess d;
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  const bool gvisor = TestIsolation() == "gvisor";
  const bool wasm = TestIsolation() == "wasm";
  sandbox::v1::CreateSessionRequest create;
  create.set_owner("alice");
  create.mutable_limits()->set_memory_bytes(400ull << 20);
  create.mutable_limits()->set_pids(100);
  create.mutable_limits()->set_workspace_bytes(64ull << 20);
  sandbox::v1::Session s = CreateSession(*stub, create);
  ASSERT_FALSE(s.id().empty());

  Finished f = RunCode(*stub, s.id(),
                       "x = bytearray(100 << 20)\n"
                       "open('/workspace/blob', 'wb').write(b'w' * (5 << 20))\n"
                       "sum(range(10**7))");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  SessionStats a;
  grpc::Status st = GetSessionStats(*stub, s.id(), &a, "alice");
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(a.session_id(), s.id());
  EXPECT_EQ(a.source(), gvisor ? "gvisor" : wasm ? "procfs" : "cgroup_v1") << a.DebugString();
  EXPECT_GE(a.memory_bytes(), 100u << 20) << a.DebugString();
  EXPECT_GE(a.memory_peak_bytes(), a.memory_bytes()) << a.DebugString();
  EXPECT_GT(a.cpu_time_ms(), 0u);
  EXPECT_GE(a.processes(), 1u);
  // What the session costs the host: its processes' share of their pages, the 100 MiB it
  // wrote included, and the kernel's memory for it.
  EXPECT_GE(a.pss_bytes(), 100u << 20) << a.DebugString();
  EXPECT_GT(a.kernel_memory_bytes(), 0u) << a.DebugString();
  // The host cgroup of a gVisor sandbox holds its kernel too (podman_runtime.h).
  EXPECT_EQ(a.memory_limit_bytes(), (400ull << 20) + (gvisor ? 32ull << 20 : 0)) << a.DebugString();
  EXPECT_EQ(a.pids_limit(), gvisor ? 64u + 24u * 100u : 100u) << a.DebugString();
  if (gvisor) {
    EXPECT_FALSE(a.workspace_known());
  } else {
    EXPECT_TRUE(a.workspace_known());
    EXPECT_GE(a.workspace_bytes(), 5u << 20) << a.DebugString();
    EXPECT_EQ(a.workspace_limit_bytes(), 64u << 20) << a.DebugString();
  }

  // While a busy loop runs: the stats answer before it ends, and show its CPU time growing.
  ExpectStatsWhileCodeRuns(*stub, s.id(), a);

  // Another owner's session and an unknown id: the same NOT_FOUND.
  SessionStats none;
  st = GetSessionStats(*stub, s.id(), &none, "bob");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), absl::StrCat("no session '", s.id(), "'"));
  EXPECT_EQ(GetSessionStats(*stub, "s-nosuchsession", &none).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace sandboxd::testing
