// Test harness for sandboxd integration tests: runs the real sandboxd binary against
// real Podman with a private state directory and socket, and gives a gRPC stub.
//
//   SandboxdProcess d({"--pool_size=1"});
//   ASSERT_TRUE(d.Start());
//   auto stub = d.Stub();
//   ... d.Stop();  // SIGTERM, wait
//   EXPECT_EQ(d.LiveContainers(), 0);
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "sandbox/v1/sandbox.grpc.pb.h"

namespace sandboxd::testing {

// An unprivileged account to run the daemon as (rootless podman).
struct RunAs {
  std::string user;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
  std::string runtime_dir;  // XDG_RUNTIME_DIR
  std::string binary;       // a copy of sandboxd the user can execute
};

class SandboxdProcess {
 public:
  // `extra_args` are appended to the defaults (private socket/state dir, both pools 0).
  explicit SandboxdProcess(std::vector<std::string> extra_args = {},
                           std::string state_dir = "", std::optional<RunAs> run_as = {});
  // Stops the daemon if running and removes its containers. If the test process dies
  // instead, the daemon dies with it (PR_SET_PDEATHSIG) and a watchdog removes them.
  ~SandboxdProcess();

  // Starts the daemon and waits until its socket answers GetInfo. False on failure
  // (with the daemon's log printed).
  bool Start(std::vector<std::string> env_overrides = {});
  // Starts a daemon that should refuse to start: returns its exit code once it has
  // exited, -1 when it serves instead (it is then running, as after Start), -2 when it
  // did neither within 30 s.
  int StartExpectingExit();
  // Starts the daemon without waiting for it to serve.
  void Launch() { Spawn({}); }
  // Serves on `path` (another daemon's socket, say) instead of a private one.
  void UseSocket(const std::string& path) { socket_ = path; }
  // SIGTERM and wait; returns the exit code (128+signal when killed).
  int Stop();
  // SIGKILL (a crash) and wait.
  void Kill();

  std::unique_ptr<sandbox::v1::SandboxService::Stub> Stub() const;
  std::shared_ptr<grpc::Channel> Channel() const;
  const std::string& socket() const { return socket_; }
  const std::string& state_dir() const { return state_dir_; }
  std::string Log() const;
  // Containers (any state) labelled with this daemon's instance.
  int LiveContainers() const;
  std::vector<std::string> ContainerNames() const;
  // Kills a session's sandbox under the daemon: its container, or its wasm process.
  void KillSandbox(const std::string& container_id) const;
  std::string instance() const;
  pid_t pid() const { return pid_; }
  // "podman", or podman run as the RunAs user.
  std::string PodmanCommand() const;

 private:
  // A detached process that, when this test process dies without cleaning up (an abort,
  // a crash, ctest's timeout kill), kills the daemon's process group and removes its
  // containers and directory. Told "done" by the destructor after a normal clean-up.
  void StartWatchdog();
  void TellWatchdog(const std::string& line);
  // Forks and execs the daemon (pid_).
  void Spawn(const std::vector<std::string>& env_overrides);
  // -1 once the socket answers GetInfo; the exit code once the daemon has exited; -2
  // after 30 s of neither.
  int WaitServingOrExit();

  std::optional<RunAs> run_as_;
  int watchdog_fd_ = -1;  // write end; closing it without "done" triggers the clean-up
  std::vector<std::string> args_;
  std::string dir_;
  std::string state_dir_;
  std::string socket_;
  std::string log_path_;
  pid_t pid_ = -1;
};

// Path of the built sandboxd binary (or $SANDBOXD_BENCH_BINARY, another build, when set).
std::string SandboxdBinary();

// The --js_runner flag of a copy of the JavaScript runner whose user code keeps the
// process's descriptors (runner_js/descriptors.js not in force): what code that got past
// Node (native code in the runner's process) could do, for tests of sandboxd's own
// defences against a hostile runner.
std::string RunnerKeepingDescriptorsFlag();

sandbox::v1::Info GetInfo(sandbox::v1::SandboxService::Stub& stub);
// The daemon's health for `service` ("" for the server as a whole).
grpc::health::v1::HealthCheckResponse::ServingStatus Health(SandboxdProcess& d,
                                                            const std::string& service);
// CreateSession that returns the status (and the session in `out` when given).
grpc::Status TryCreate(sandbox::v1::SandboxService::Stub& stub,
                       const sandbox::v1::CreateSessionRequest& req = {},
                       sandbox::v1::Session* out = nullptr);

// GetSession that returns the status (and the session in `out` when given).
grpc::Status GetSession(sandbox::v1::SandboxService::Stub& stub, const std::string& id,
                        sandbox::v1::Session* out = nullptr);

// GetSessionStats (as `owner` when not empty) with a 10 s deadline.
grpc::Status GetSessionStats(sandbox::v1::SandboxService::Stub& stub, const std::string& id,
                             sandbox::v1::SessionStats* out, const std::string& owner = "");

// The isolation mode this run of the suite is for: "container" or "gvisor"
// (SANDBOXD_TEST_ISOLATION, set by tests/CMakeLists.txt for the gvisor.* copies).
std::string TestIsolation();

// The --wasm_dir of every daemon of a wasm run; a session's workspace is its w/<name> (under
// bwrap a tmpfs mounted at that path inside the sandbox, seen in /proc/<pid>/root).
std::string TestWasmDir();

// Shell that kills each process named in the wasm records matching `records` (a shell glob
// or a variable) while it is still the process recorded (pid and start time).
std::string KillRecordedWasmProcesses(const std::string& records);

// Polls `pred` every 100 ms until it holds or `timeout_ms` has passed; its last answer.
template <typename Pred>
bool WaitFor(Pred pred, int timeout_ms = 20000) {
  for (int waited = 0; waited < timeout_ms; waited += 100) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

// Runs a shell command, returns stdout (for podman inspection in tests).
std::string Sh(const std::string& cmd, int* exit_code = nullptr);

// Creates a session with default settings; fails the test on error.
sandbox::v1::Session CreateSession(sandbox::v1::SandboxService::Stub& stub,
                                   const sandbox::v1::CreateSessionRequest& req = {});

// Unary Run; returns the Finished (status OK expected at the gRPC level).
sandbox::v1::Finished RunCode(sandbox::v1::SandboxService::Stub& stub,
                              const std::string& session_id, const std::string& code,
                              uint32_t timeout_ms = 0, grpc::Status* status = nullptr);

}  // namespace sandboxd::testing

namespace sandboxd::testing {

struct ExecuteOutcome {
  grpc::Status status;
  sandbox::v1::Finished finished;
  bool got_finished = false;
  std::vector<sandbox::v1::ExecuteResponse> messages;  // everything but finished
  std::string StreamedStdout() const;
};

using ToolHandler = std::function<sandbox::v1::ToolResult(const sandbox::v1::ToolCall&)>;

// Runs one Execute stream. Each tool call is answered by `handler` on its own thread
// (so slow answers overlap); with `half_close` the client closes its side right after
// `start` (what `grpcurl -d @` does). `on_message` sees every server message as it arrives.
ExecuteOutcome Execute(sandbox::v1::SandboxService::Stub& stub,
                       const sandbox::v1::StartExecution& start, ToolHandler handler = nullptr,
                       bool half_close = false,
                       std::function<void(const sandbox::v1::ExecuteResponse&,
                                          grpc::ClientReaderWriter<sandbox::v1::ExecuteRequest,
                                                                   sandbox::v1::ExecuteResponse>*)>
                           on_message = nullptr);

sandbox::v1::StartExecution Start(const std::string& session_id, const std::string& code,
                                  uint32_t timeout_ms = 0);

// A ToolResult whose result_json is a CallToolResult with one text block.
sandbox::v1::ToolResult TextResult(const std::string& call_id, const std::string& text);

}  // namespace sandboxd::testing
