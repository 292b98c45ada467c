#include "harness.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sandboxd/instance_id.h"
#include <mutex>

namespace sandboxd::testing {
namespace fs = std::filesystem;

std::string SandboxdBinary() {
  // SANDBOXD_BENCH_BINARY: another build's daemon, for sandboxd_bench's same-hour A/B runs.
  const char* other = getenv("SANDBOXD_BENCH_BINARY");
  return other && *other ? other : SANDBOXD_BINARY;
}

std::string RunnerKeepingDescriptorsFlag() {
  namespace fs = std::filesystem;
  const std::string built = (fs::path(SandboxdBinary()).parent_path() / "sandbox_runner.js").string();
  std::ifstream in(built);
  std::stringstream text;
  text << in.rdbuf();
  std::string bundle = text.str();
  const std::string call = "\n  await lockDescriptors();\n";
  const size_t at = bundle.find(call);
  if (at == std::string::npos) {
    ADD_FAILURE() << built << " calls no lockDescriptors(): the test would not test a runner without it";
    return "--js_runner=" + built;
  }
  bundle.replace(at, call.size(), "\n");
  // Read by each session's own uid, like the built one; a directory of ours, in sticky /tmp.
  const fs::path dir = absl::StrCat("/tmp/sandboxd-test-runner-", getpid());
  // Gone when the test binary exits (every test asking for it writes it again).
  static const struct Remover {
    fs::path dir;
    ~Remover() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } remover{dir};
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  const fs::path copy = dir / "sandbox_runner.js";
  std::ofstream(copy) << bundle;
  fs::permissions(copy, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                            fs::perms::others_read);
  return "--js_runner=" + copy.string();
}

std::string Sh(const std::string& cmd, int* exit_code) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  if (exit_code) *exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

SandboxdProcess::SandboxdProcess(std::vector<std::string> extra_args, std::string state_dir,
                                 std::optional<RunAs> run_as)
    : run_as_(std::move(run_as)), args_(std::move(extra_args)) {
  char tmpl[] = "/tmp/sbxtest-XXXXXX";
  dir_ = mkdtemp(tmpl);
  if (run_as_) {
    if (chown(dir_.c_str(), run_as_->uid, run_as_->gid) != 0) ADD_FAILURE() << "chown " << dir_;
  }
  state_dir_ = state_dir.empty() ? dir_ + "/state" : state_dir;
  socket_ = dir_ + "/sandboxd.sock";
  log_path_ = dir_ + "/sandboxd.log";
  StartWatchdog();
}

// A process is the one recorded while its pid and start time (field 22 of /proc/<pid>/stat)
// both match. A pid alone is not enough: pids wrap (pid_max may be 32768), and a record outlives
// its process, so a bare pid may by now name another test's daemon.
std::string KillRecordedWasmProcesses(const std::string& records) {
  return absl::StrCat("sh '", PROJECT_SOURCE_DIR, "/tests/common/kill_recorded_wasm.sh' ", records, "; ");
}

// What the wasm tier leaves when a daemon dies or a test ends: its detached processes (the
// pids in its records, and any a kill left unrecorded: each names its workspace,
// <wasm_dir>/w/sbx-<instance>-..., on its command line) and its work directory beside or
// in the state directory. The bracket keeps pkill's pattern from matching its own shell.
std::string WasmCleanup(const std::string& state_dir) {
  const std::string instance = sandboxd::InstanceId(sandboxd::StateDirPath(state_dir));
  return absl::StrCat(KillRecordedWasmProcesses(absl::StrCat("'", state_dir, "'/wasm-records/*.json")),
                      "pkill -KILL -f -- '[/]w/sbx-", instance, "-' 2>/dev/null; ",
                      "rm -rf '", state_dir, "-wasm'; ");
}

void SandboxdProcess::StartWatchdog() {
  // The watchdog reads lines from a pipe: "pid=N" after each start of the daemon, "done"
  // after a normal clean-up. End of file without "done" means this process died.
  // Everything the child needs is built before fork(): this process has threads.
  std::string podman = PodmanCommand();
  std::string script = absl::StrCat(
      "pid=; while read -r word; do case $word in done) exit 0;; pid=*) pid=${word#pid=};; "
      "esac; done; ",
      "[ -n \"$pid\" ] && kill -KILL -- \"-$pid\" 2>/dev/null; sleep 1; ",
      "for i in 1 2 3; do ids=$(", podman, " ps -aq --filter label=io.sandboxd.state-dir=",
      state_dir_, "); [ -z \"$ids\" ] && break; ", podman, " rm -f -t 0 $ids; sleep 1; done; ",
      WasmCleanup(state_dir_), "rm -rf '", dir_, "'");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << strerror(errno);
    return;
  }
  pid_t w = fork();
  if (w == 0) {
    setsid();  // outlives a kill of the test's process group
    dup2(fds[0], 0);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    execl("/bin/sh", "sh", "-c", script.c_str(), "watchdog", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[0]);
  if (w < 0) {
    close(fds[1]);
    ADD_FAILURE() << "fork: " << strerror(errno);
    return;
  }
  watchdog_fd_ = fds[1];
}

void SandboxdProcess::TellWatchdog(const std::string& line) {
  if (watchdog_fd_ < 0) return;
  std::string l = line + "\n";
  (void)!write(watchdog_fd_, l.data(), l.size());
}

SandboxdProcess::~SandboxdProcess() {
  // A graceful stop lets a pool refill that is in flight finish and be removed; a
  // SIGKILL would leave its `podman run` to create a container after our clean-up.
  if (pid_ > 0) Stop();
  // Leave nothing behind, whatever the test did.
  Sh(absl::StrCat(PodmanCommand(), " ps -aq --filter label=io.sandboxd.instance=", instance(),
                  " | xargs -r ", PodmanCommand(), " rm -f -t 0 >/dev/null 2>&1"));
  // podman's removal of a container whose creation a kill cut short can leave it in runc
  // (the daemon's next start would remove it: StrayContainersTest); its annotations say
  // whose it is. Rootful runc only: a rootless podman's goes with its user namespace.
  if (!run_as_) {
    // runc 1.1 fails a list when a container it walks past is removed meanwhile: retried.
    Sh(absl::StrCat("for i in 1 2 3 4 5; do runc list --format=json 2>/dev/null && break; done | "
                    "python3 -c 'import json, sys; "
                    "[print(c[\"id\"]) for c in json.load(sys.stdin) or [] "
                    "if (c.get(\"annotations\") or {}).get(\"io.sandboxd.instance\") == \"", instance(),
                    "\"]' | xargs -r -n1 runc delete --force >/dev/null 2>&1"));
  }
  Sh(WasmCleanup(state_dir_));
  std::error_code ec;
  fs::remove_all(dir_, ec);
  TellWatchdog("done");
  if (watchdog_fd_ >= 0) close(watchdog_fd_);
}

std::string SandboxdProcess::PodmanCommand() const {
  if (!run_as_) return "podman";
  return absl::StrCat("setpriv --reuid=", run_as_->uid, " --regid=", run_as_->gid,
                      " --init-groups env HOME=", run_as_->home, " XDG_RUNTIME_DIR=",
                      run_as_->runtime_dir, " sh -c 'cd ~ && exec podman \"$@\"' podman");
}

std::string SandboxdProcess::instance() const {
  return sandboxd::InstanceId(sandboxd::StateDirPath(state_dir_));
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(SandboxdProcess& d,
                                                            const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(d.Channel());
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  EXPECT_TRUE(health->Check(&ctx, req, &resp).ok());
  return resp.status();
}

sandbox::v1::Info GetInfo(sandbox::v1::SandboxService::Stub& stub) {
  grpc::ClientContext ctx;
  sandbox::v1::Info info;
  EXPECT_TRUE(stub.GetInfo(&ctx, {}, &info).ok());
  return info;
}

grpc::Status GetSession(sandbox::v1::SandboxService::Stub& stub, const std::string& id,
                        sandbox::v1::Session* out) {
  grpc::ClientContext ctx;
  sandbox::v1::GetSessionRequest r;
  r.set_session_id(id);
  sandbox::v1::Session s;
  grpc::Status st = stub.GetSession(&ctx, r, &s);
  if (out) *out = s;
  return st;
}

grpc::Status GetSessionStats(sandbox::v1::SandboxService::Stub& stub, const std::string& id,
                             sandbox::v1::SessionStats* out, const std::string& owner) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  sandbox::v1::GetSessionStatsRequest req;
  req.set_session_id(id);
  req.set_owner(owner);
  return stub.GetSessionStats(&ctx, req, out);
}

grpc::Status TryCreate(sandbox::v1::SandboxService::Stub& stub,
                       const sandbox::v1::CreateSessionRequest& req, sandbox::v1::Session* out) {
  grpc::ClientContext ctx;
  sandbox::v1::Session s;
  grpc::Status st = stub.CreateSession(&ctx, req, &s);
  if (out) *out = s;
  return st;
}

std::string TestIsolation() {
  const char* isolation = getenv("SANDBOXD_TEST_ISOLATION");
  return isolation && *isolation ? isolation : "container";
}

std::string TestWasmDir() { return absl::StrCat("/tmp/sandboxd-test-wasm-", geteuid()); }

void SandboxdProcess::Spawn(const std::vector<std::string>& env_overrides) {
  std::vector<std::string> argv = {run_as_ && !run_as_->binary.empty() ? run_as_->binary : SandboxdBinary(),
                                   "--socket=" + socket_,
                                   "--state_dir=" + state_dir_, "--pool_size=0", "--js_pool_size=0",
                                   "--log_level=debug"};
  // The whole suite runs once per isolation mode (tests/CMakeLists.txt); a test's own
  // --isolation comes later and wins.
  argv.push_back("--isolation=" + TestIsolation());
  // One wasm directory for the whole run: the Python snapshot is made once, not per daemon.
  if (TestIsolation() == "wasm") argv.push_back("--wasm_dir=" + TestWasmDir());
  argv.insert(argv.end(), args_.begin(), args_.end());
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);  // its own group, so the watchdog can kill in-flight podman children too
    FILE* log = fopen(log_path_.c_str(), "a");
    dup2(fileno(log), 2);
    dup2(fileno(log), 1);
    for (const auto& e : env_overrides) putenv(strdup(e.c_str()));
    if (run_as_) {
      // What a systemd user service gets: the user's HOME and XDG_RUNTIME_DIR, no root.
      setenv("HOME", run_as_->home.c_str(), 1);
      setenv("XDG_RUNTIME_DIR", run_as_->runtime_dir.c_str(), 1);
      setenv("USER", run_as_->user.c_str(), 1);
      setenv("LOGNAME", run_as_->user.c_str(), 1);
      if (chdir(run_as_->home.c_str()) != 0) _exit(126);
      if (initgroups(run_as_->user.c_str(), run_as_->gid) != 0 || setgid(run_as_->gid) != 0 ||
          setuid(run_as_->uid) != 0) {
        _exit(126);
      }
    }
    // Dies with the test process (set after setuid, which clears it).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  if (pid_ > 0) TellWatchdog(absl::StrCat("pid=", pid_));
}

int SandboxdProcess::WaitServingOrExit() {
  for (int i = 0; i < 600; ++i) {
    // A fresh channel per attempt: a channel that failed once backs off for seconds.
    auto stub = Stub();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    sandbox::v1::Info info;
    if (fs::exists(socket_) && stub->GetInfo(&ctx, {}, &info).ok()) return -1;
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -2;
}

bool SandboxdProcess::Start(std::vector<std::string> env_overrides) {
  Spawn(env_overrides);
  const int rc = WaitServingOrExit();
  if (rc == -1) return true;
  ADD_FAILURE() << (rc == -2 ? "sandboxd did not answer within 30 s:\n"
                             : "sandboxd exited during start-up:\n")
                << Log();
  return false;
}

int SandboxdProcess::StartExpectingExit() {
  Spawn({});
  return WaitServingOrExit();
}

int SandboxdProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  // Bounded: a daemon that does not stop within 30 s is killed (and the test sees 137).
  for (int i = 0; i < 3000 && waitpid(pid_, &status, WNOHANG) == 0; ++i) {
    if (i == 2999) {
      ADD_FAILURE() << "sandboxd did not stop within 30 s of SIGTERM";
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void SandboxdProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::shared_ptr<grpc::Channel> SandboxdProcess::Channel() const {
  return grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
}

std::unique_ptr<sandbox::v1::SandboxService::Stub> SandboxdProcess::Stub() const {
  return sandbox::v1::SandboxService::NewStub(Channel());
}

std::string SandboxdProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> SandboxdProcess::ContainerNames() const {
  if (TestIsolation() == "wasm") {
    // The wasm tier's sandboxes: the records of processes that still run.
    std::string out = Sh(absl::StrCat(
        "for f in '", state_dir_, "'/wasm-records/*.json; do [ -f \"$f\" ] || continue; ",
        "p=$(grep -o '\"pid\":[0-9]*' \"$f\" | head -1 | cut -d: -f2); ",
        "kill -0 \"$p\" 2>/dev/null && basename \"$f\" .json; done"));
    return absl::StrSplit(out, '\n', absl::SkipEmpty());
  }
  std::string out = Sh(absl::StrCat(PodmanCommand(), " ps -a --format '{{.Names}}' --filter label=io.sandboxd.instance=",
                                    instance()));
  std::vector<std::string> names = absl::StrSplit(out, '\n', absl::SkipEmpty());
  return names;
}

int SandboxdProcess::LiveContainers() const { return static_cast<int>(ContainerNames().size()); }

void SandboxdProcess::KillSandbox(const std::string& container_id) const {
  if (TestIsolation() != "wasm") {
    Sh(absl::StrCat(PodmanCommand(), " kill ", container_id, " >/dev/null 2>&1"));
    return;
  }
  // "wasm-<pid>": that process and, under bwrap, its sandbox's init (wasm_runtime.h).
  const std::string pid = container_id.substr(container_id.find('-') + 1);
  Sh(absl::StrCat("records=$(grep -l '\"pid\":", pid, ",' '", state_dir_,
                  "'/wasm-records/*.json); ", KillRecordedWasmProcesses("$records")));
}

sandbox::v1::Session CreateSession(sandbox::v1::SandboxService::Stub& stub,
                                   const sandbox::v1::CreateSessionRequest& req) {
  grpc::ClientContext ctx;
  sandbox::v1::Session s;
  grpc::Status st = stub.CreateSession(&ctx, req, &s);
  EXPECT_TRUE(st.ok()) << st.error_code() << ": " << st.error_message();
  return s;
}

sandbox::v1::Finished RunCode(sandbox::v1::SandboxService::Stub& stub,
                              const std::string& session_id, const std::string& code,
                              uint32_t timeout_ms, grpc::Status* status) {
  grpc::ClientContext ctx;
  sandbox::v1::RunRequest req;
  req.set_session_id(session_id);
  req.set_code(code);
  req.set_timeout_ms(timeout_ms);
  sandbox::v1::Finished f;
  grpc::Status st = stub.Run(&ctx, req, &f);
  if (status) {
    *status = st;
  } else {
    EXPECT_TRUE(st.ok()) << st.error_code() << ": " << st.error_message();
  }
  return f;
}

}  // namespace sandboxd::testing

namespace sandboxd::testing {

std::string ExecuteOutcome::StreamedStdout() const {
  std::string s;
  for (const auto& m : messages) {
    if (m.has_output() && m.output().stream() == sandbox::v1::Output::STDOUT) s += m.output().text();
  }
  return s;
}

sandbox::v1::StartExecution Start(const std::string& session_id, const std::string& code,
                                  uint32_t timeout_ms) {
  sandbox::v1::StartExecution s;
  s.set_session_id(session_id);
  s.set_code(code);
  s.set_timeout_ms(timeout_ms);
  return s;
}

sandbox::v1::ToolResult TextResult(const std::string& call_id, const std::string& text) {
  sandbox::v1::ToolResult r;
  r.set_call_id(call_id);
  nlohmann::json j = {{"content", {{{"type", "text"}, {"text", text}}}}};
  r.set_result_json(j.dump());
  return r;
}

ExecuteOutcome Execute(
    sandbox::v1::SandboxService::Stub& stub, const sandbox::v1::StartExecution& start,
    ToolHandler handler, bool half_close,
    std::function<void(const sandbox::v1::ExecuteResponse&,
                       grpc::ClientReaderWriter<sandbox::v1::ExecuteRequest,
                                                sandbox::v1::ExecuteResponse>*)>
        on_message) {
  ExecuteOutcome out;
  grpc::ClientContext ctx;
  auto stream = stub.Execute(&ctx);
  std::mutex write_mu;
  sandbox::v1::ExecuteRequest first;
  *first.mutable_start() = start;
  stream->Write(first);
  if (half_close) stream->WritesDone();
  std::vector<std::thread> answerers;
  sandbox::v1::ExecuteResponse msg;
  while (stream->Read(&msg)) {
    if (msg.has_finished()) {
      out.finished = msg.finished();
      out.got_finished = true;
      continue;
    }
    if (on_message) on_message(msg, stream.get());
    if (msg.has_tool_call() && handler) {
      sandbox::v1::ToolCall call = msg.tool_call();
      answerers.emplace_back([&, call] {
        sandbox::v1::ExecuteRequest req;
        *req.mutable_tool_result() = handler(call);
        std::lock_guard<std::mutex> lock(write_mu);
        stream->Write(req);
      });
    }
    out.messages.push_back(msg);
  }
  for (auto& t : answerers) t.join();
  if (!half_close) {
    std::lock_guard<std::mutex> lock(write_mu);
    stream->WritesDone();
  }
  out.status = stream->Finish();
  return out;
}

}  // namespace sandboxd::testing
