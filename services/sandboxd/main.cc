// sandboxd: runs Python and JavaScript for AI agents in hardened Podman containers behind
// the sandbox.v1 gRPC API. Flags: docs/operating.md; security model: docs/security.md; API: docs/api.md.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>

#include "base/daemon.h"
#include "base/deadline.h"
#include "base/log_text.h"
#include "base/secret_file.h"
#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "sandboxd/callback_queue_keeper.h"
#include "sandboxd/grpc_service.h"
#include "sandboxd/instance_lock.h"
#include "sandboxd/isolation_runtime.h"
#include "sandboxd/wasm_runtime.h"
#include "sandboxd/podman_runtime.h"
#include "sandboxd/tcp_listener.h"
#include "sandboxd/sd_notify.h"
#include "sandboxd/instance_id.h"
#include "sandboxd/session_manager.h"
#include "sandboxd/log.h"
#include "sandboxd/metrics.h"
#include "sandboxd/seccomp_profile.h"
#include "sandboxd/trusted_files.h"
#include "base/version.h"
#include "egress_flags.h"
#include "env_flags.h"
#include "limits_flags.h"
#include "podman_flags.h"
#include "flag_groups.h"
#include "gvisor_check.h"
#include "paths.h"
#include "self_check.h"
#include "state_flags.h"
#include "tcp_flags.h"
#include "wasm_flags.h"
#include "telemetry/metrics.h"
#include "telemetry/metrics_server.h"

ABSL_FLAG(std::string, image, "localhost/sandboxd-python:bookworm",
          "The default container image, with python3 (built by scripts/setup.sh); "
          "GetInfo names it \"default\".");
ABSL_FLAG(std::vector<std::string>, images, {"data=localhost/sandboxd-python-data:bookworm"},
          "More images clients may ask for by name in CreateSession, as NAME=REFERENCE "
          "pairs; the default offers the data image scripts/setup.sh builds (numpy, pandas, "
          "matplotlib, Pillow). --images= offers the default image only. Clients can never "
          "name a reference themselves.");
ABSL_FLAG(std::string, runner, "",
          "Path of sandbox_runner.pyz (the runner zipapp). Default: next to the sandboxd "
          "binary, else ../share/sandboxd/.");
ABSL_FLAG(std::string, js_runner, "",
          "Path of sandbox_runner.js (the JavaScript runner, for CreateSession runtime "
          "\"javascript\"). Default: next to the sandboxd binary, else ../share/sandboxd/; "
          "when there is none, JavaScript sessions are refused (FAILED_PRECONDITION).");
ABSL_FLAG(std::string, isolation, "container",
          "What stands between sandboxed code and the host kernel, by default: container "
          "(podman on runc/crun) or gvisor (podman on gVisor's runsc, a user-space kernel; "
          "slower). See docs/security.md, \"Isolation modes\".");
ABSL_FLAG(std::vector<std::string>, allowed_isolations, {},
          "Isolations clients may ask for per session (CreateSessionRequest.isolation), "
          "comma-separated; --isolation is always allowed.");
ABSL_FLAG(uint32_t, pool_size, 2,
          "Ready Python containers kept warm for CreateSession (0 disables).");
ABSL_FLAG(uint32_t, js_pool_size, 1,
          "Ready JavaScript containers kept warm for CreateSession runtime \"javascript\" (0 "
          "disables: JavaScript sessions start cold). An idle one holds about 21 MiB (gVisor: "
          "35 MiB) against 13 MiB (30 MiB) for a Python one, so keep it small unless many "
          "sessions are JavaScript. Empty, and said once in the log, while JavaScript cannot run here (no "
          "--js_runner, or a default image that does not offer nodejs).");
ABSL_FLAG(uint32_t, pool_max, 0,
          "How far demand may raise --pool_size: a CreateSession that finds the Python pool "
          "empty raises what it keeps ready to the creations since it was last full, up to "
          "this; at most --pool_size "
          "(the default): the pool never grows. Each held container costs about 11 MiB.");
ABSL_FLAG(uint32_t, js_pool_max, 0, "--pool_max for the JavaScript pool (--js_pool_size).");
ABSL_FLAG(absl::Duration, pool_shrink_after, absl::Minutes(5),
          "How long a pool raised by demand (--pool_max) stays raised after its last miss; "
          "then it keeps its configured size again and removes the containers over it.");
ABSL_FLAG(uint32_t, max_sessions, 64,
          "Maximum number of live sessions; when full, an idle one of the owner holding the "
          "most is ended for an owner holding fewer (docs/operating.md).");
ABSL_FLAG(uint32_t, max_sessions_per_owner, 32,
          "Sessions one owner (CreateSession.owner; the gateway sends one per credential) may "
          "hold at once, so no client takes every slot.");
ABSL_FLAG(absl::Duration, idle_ttl, absl::Minutes(30),
          "Sessions idle this long are deleted.");
ABSL_FLAG(absl::Duration, start_images_wait, absl::Seconds(5),
          "How long the start waits for podman to describe the images (GetInfo's images) "
          "before it serves; until podman answers, GetInfo lists none.");
ABSL_FLAG(absl::Duration, start_runtime_wait, absl::Seconds(15),
          "How long the start waits for podman's first answer (the gVisor check and the "
          "previous run's sessions re-attached included) before it serves; until podman answers, health is "
          "NOT_SERVING and CreateSession UNAVAILABLE.");
ABSL_FLAG(absl::Duration, lost_session_ttl, absl::Minutes(30),
          "A lost session frees its slot and container at once; its id answers 'session "
          "lost: <reason>' (FAILED_PRECONDITION) for this long unless deleted first.");
ABSL_FLAG(uint32_t, max_lost_sessions, 1024,
          "Lost sessions whose ids are remembered (a few KiB each); past it the oldest of "
          "the owner with the most are forgotten (their ids answer NOT_FOUND).");
ABSL_FLAG(absl::Duration, kill_grace, absl::Seconds(2),
          "After a timeout or cancel, how long interrupted code may take to stop before the "
          "container is killed.");
ABSL_FLAG(uint32_t, runner_cpu_millis, 100,
          "CPU sandboxd may spend reading and handling one session's runner frames, in "
          "thousandths of a core on average (past --runner_cpu_burst); over it that session's "
          "frames are read more slowly, so a runner writing frames as fast as it can does not "
          "take sandboxd's CPU from other sessions. 0: no limit.");
ABSL_FLAG(absl::Duration, runner_cpu_burst, absl::Seconds(5),
          "What a session's frames may use at once above --runner_cpu_millis, in time at that "
          "rate.");
ABSL_FLAG(uint64_t, max_output_bytes, 1 << 20,
          "Output kept and streamed per execution; the rest is dropped with a marker.");
ABSL_FLAG(uint64_t, max_display_bytes, 2 << 20,
          "Display data (images, HTML, ...) kept and streamed per execution, at most 8 MiB; "
          "displays past it are dropped with a marker. With the output cap it keeps Finished "
          "under gRPC's default 4 MiB message size.");
ABSL_FLAG(uint64_t, max_code_bytes, 1 << 20, "Largest accepted code.");
ABSL_FLAG(uint64_t, max_file_bytes, 64 << 20,
          "Largest file UploadFile and DownloadFile move (a session's workspace size also "
          "bounds uploads).");
ABSL_FLAG(uint32_t, max_queue, 16, "Executions that may wait behind the running one per session.");
ABSL_FLAG(uint64_t, max_stream_buffer_bytes, sandboxd::SandboxServiceImpl::kDefaultStreamBufferBytes,
          "Messages one Execute stream may hold for a client that does not read it (each "
          "counted as its size plus 64 bytes); past it that stream ends RESOURCE_EXHAUSTED and "
          "its execution is cancelled, the session kept. At least twice --max_output_bytes "
          "plus --max_display_bytes.");
ABSL_FLAG(uint32_t, max_rpc_threads, 128,
          "Threads gRPC may run synchronous rpcs on (every rpc but Execute), pollers "
          "included; calls past it are answered RESOURCE_EXHAUSTED at once. At least 4. A "
          "quarter of them at most are creations waiting for containers still starting for "
          "callers that gave up.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM, how long running calls may take to finish before they are cancelled; "
          "podman commands still running then are killed.");
ABSL_FLAG(std::string, metrics_listen, "",
          "Serve Prometheus metrics on http://<this>/metrics: IPv4:port or [IPv6]:port, port 0 "
          "picks a free one (logged). Empty: off, and nothing is counted. Unauthenticated and read-only: bind it to "
          "loopback (the shipped systemd unit sets 127.0.0.1:9464). See docs/observability.md.");
ABSL_FLAG(bool, self_check, false,
          "Check that this machine can run sandboxes with these flags, then exit: start one "
          "session (a private state directory, no socket), run print(1), delete it. Exit "
          "status 0 when it worked; otherwise 1 with podman's own error.");

namespace {

namespace fs = std::filesystem;

// `--self_check`: one session, print(1), clean up (PrepareSelfCheck; main removes its state
// directory). The verdict goes to stderr.
int RunSelfCheck(const sandboxd::ManagerOptions& options, sandboxd::ContainerRuntime* runtime,
                 sandboxd::Clock* clock) {
  absl::Status status;
  {
    // Destroyed before the state directory goes: its workers finish removing the
    // container and the socket directory first.
    sandboxd::SessionManager manager(options, runtime, clock);
    status = manager.Start();
    if (status.ok()) status = sandboxd::SelfCheck(manager);
    manager.Shutdown();
  }
  if (!status.ok()) {
    spdlog::critical("self-check failed: {}", status.message());
    return 1;
  }
  spdlog::info("self-check passed: a {} sandbox started, ran print(1) and was removed",
               sandboxd::IsolationName(options.isolation.default_isolation));
  return 0;
}

// The runners (--runner, --js_runner, else next to the binary), then a check of the paths
// podman is given as they are: those and the state directory (set before this).
absl::Status RunnersFromFlags(sandboxd::ManagerOptions* options) {
  options->runner_path = absl::GetFlag(FLAGS_runner);
  if (options->runner_path.empty()) {
    options->runner_path = sandboxd::DefaultRunner("sandbox_runner.pyz", SANDBOXD_BUILT_RUNNER);
  }
  if (std::error_code ec; !fs::exists(options->runner_path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("runner ", codemode::LogText(options->runner_path), " does not exist (--runner)"));
  }
  options->js_runner_path = absl::GetFlag(FLAGS_js_runner);
  if (std::error_code ec; !options->js_runner_path.empty() && !fs::exists(options->js_runner_path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("JavaScript runner ", codemode::LogText(options->js_runner_path),
                     " does not exist (--js_runner)"));
  }
  if (options->js_runner_path.empty()) {
    options->js_runner_path = sandboxd::DefaultRunner("sandbox_runner.js", SANDBOXD_BUILT_JS_RUNNER);
    if (std::error_code ec; !fs::exists(options->js_runner_path, ec)) options->js_runner_path.clear();
  }
  for (const auto& [path, flag] : {std::pair{options->state_dir, "--state_dir"},
                                   {options->runner_path, "--runner"}, {options->js_runner_path, "--js_runner"}}) {
    if (absl::Status s = sandboxd::CheckPodmanPath(path, flag); !s.ok()) return s;
  }
  // Every session runs its runner: another user who could change it would run code in each.
  for (const auto& [path, flag] :
       {std::pair{options->runner_path, "--runner"}, {options->js_runner_path, "--js_runner"}}) {
    if (path.empty()) continue;
    if (absl::Status s = sandboxd::CheckFilesOthersCannotChange(path, flag, {}); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The manager's options from the flags (and, for --pass_env, this process's environment).
// A client that reads its stream can still find one run's output queued twice (its output
// messages not yet written, then Finished repeating it) with its displays: a smaller
// --max_stream_buffer_bytes would end ordinary runs RESOURCE_EXHAUSTED. The least value is
// summed in 128 bits, so that a huge --max_output_bytes cannot wrap it around to a small one.
absl::Status CheckStreamBuffer(const sandboxd::ManagerOptions& options) {
  const absl::uint128 least = 2 * (absl::uint128(options.max_output_bytes) + options.max_display_bytes);
  if (absl::uint128(absl::GetFlag(FLAGS_max_stream_buffer_bytes)) >= least) return absl::OkStatus();
  std::ostringstream text;
  text << least;
  return absl::InvalidArgumentError(absl::StrCat(
      "--max_stream_buffer_bytes must be at least twice --max_output_bytes plus "
      "--max_display_bytes (", text.str(), " with these)"));
}

absl::StatusOr<sandboxd::ManagerOptions> OptionsFromFlags() {
  sandboxd::ManagerOptions options;
  if (absl::Status s = LimitsFromFlags(&options.default_limits, &options.max_limits); !s.ok()) {
    return s;
  }
  options.state_dir = StateDirFromFlags();  // checked in RunnersFromFlags
  if (absl::Status s = CheckSocketPath(); !s.ok()) return s;
  options.image = absl::GetFlag(FLAGS_image);
  options.images = absl::GetFlag(FLAGS_images);
  if (absl::StatusOr<sandboxd::ImageSet> images = sandboxd::ImageSet::Parse(options.image, options.images);
      !images.ok()) {
    return images.status();
  }
  if (absl::Status s = RunnersFromFlags(&options); !s.ok()) return s;
  if (absl::Status s = SessionUidsFromFlags(&options); !s.ok()) return s;
  absl::StatusOr<sandboxd::Isolation> isolation =
      sandboxd::ParseIsolation(absl::GetFlag(FLAGS_isolation));
  if (!isolation.ok()) return isolation.status();
  options.isolation.default_isolation = *isolation;
  for (const std::string& name : absl::GetFlag(FLAGS_allowed_isolations)) {
    absl::StatusOr<sandboxd::Isolation> allowed = sandboxd::ParseIsolation(name);
    if (!allowed.ok()) return allowed.status();
    options.isolation.allowed.push_back(*allowed);
  }
  options.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  options.max_waiting_creations = std::max<uint32_t>(1, absl::GetFlag(FLAGS_max_rpc_threads) / 4);
  options.max_sessions_per_owner = absl::GetFlag(FLAGS_max_sessions_per_owner);
  options.pool_size = absl::GetFlag(FLAGS_pool_size);
  options.js_pool_size = absl::GetFlag(FLAGS_js_pool_size);
  options.pool_max = absl::GetFlag(FLAGS_pool_max);
  options.js_pool_max = absl::GetFlag(FLAGS_js_pool_max);
  options.pool_shrink_after = absl::GetFlag(FLAGS_pool_shrink_after);
  options.idle_ttl = absl::GetFlag(FLAGS_idle_ttl);
  options.start_images_wait = absl::GetFlag(FLAGS_start_images_wait);
  options.start_runtime_wait = absl::GetFlag(FLAGS_start_runtime_wait);
  if (options.start_images_wait < absl::ZeroDuration() ||
      options.start_runtime_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--start_images_wait and --start_runtime_wait must not be negative");
  }
  options.lost_session_ttl = absl::GetFlag(FLAGS_lost_session_ttl);
  options.max_lost_sessions = absl::GetFlag(FLAGS_max_lost_sessions);
  options.max_code_bytes = absl::GetFlag(FLAGS_max_code_bytes);
  options.max_timeout_ms = absl::GetFlag(FLAGS_max_timeout_ms);
  options.max_output_bytes = absl::GetFlag(FLAGS_max_output_bytes);
  options.max_file_bytes = absl::GetFlag(FLAGS_max_file_bytes);
  options.max_display_bytes = absl::GetFlag(FLAGS_max_display_bytes);
  if (options.max_display_bytes > sandboxd::kMaxDisplayBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--max_display_bytes is over ",
                                                   sandboxd::kMaxDisplayBytes));
  }
  options.max_queue = absl::GetFlag(FLAGS_max_queue);
  if (absl::Status s = CheckStreamBuffer(options); !s.ok()) return s;
  if (absl::Status s = CheckTcpPortFlags(); !s.ok()) return s;
  if (const std::string listen = absl::GetFlag(FLAGS_metrics_listen); !listen.empty()) {
    absl::Status s = sandboxd::CheckPlainFlag("--metrics_listen", listen);
    if (s.ok()) s = codemode::telemetry::MetricsServer::CheckListen(listen);
    if (!s.ok()) return s;
  }
  if (absl::GetFlag(FLAGS_max_rpc_threads) < 4) {
    return absl::InvalidArgumentError("--max_rpc_threads must be at least 4");
  }
  options.kill_grace = absl::GetFlag(FLAGS_kill_grace);
  options.runner_share.millis = absl::GetFlag(FLAGS_runner_cpu_millis);
  options.runner_share.burst = absl::GetFlag(FLAGS_runner_cpu_burst);
  if (options.runner_share.burst <= absl::ZeroDuration() ||
      options.runner_share.burst > absl::Minutes(10)) {
    return absl::InvalidArgumentError("--runner_cpu_burst must be above 0 and at most 10m");
  }
  options.version = codemode::kVersion;
  if (absl::Status s = ContainerEnvFromFlags(&options.container_env); !s.ok()) return s;
  return options;
}

// gVisor and wasm, when asked for, work here or the operator hears why at once (a podman
// that has not answered by the start's deadline defers gVisor's check: gvisor_check.h).
absl::Status CheckRuntimes(GvisorStartCheck* gvisor, std::optional<sandboxd::WasmRuntime>& wasm,
                           const sandboxd::StartWait& wait) {
  if (gvisor) {
    if (absl::Status s = gvisor->Await(wait); !s.ok()) return s;
  }
  if (wasm) {
    if (absl::StatusOr<sandboxd::RuntimeInfo> w = wasm->Probe(); !w.ok()) return w.status();
  }
  return absl::OkStatus();
}

// What the runtimes the allowed isolations need are made from: podman's options only where
// a container isolation is in use (a wasm-only daemon needs no engine), with the seccomp
// base their profile derives from. Every program is found and checked here, and nothing
// is made, so that a start refused for one leaves nothing behind.
struct RuntimeFlags {
  std::optional<sandboxd::PodmanOptions> podman;
  std::string seccomp_base;  // "": podman's own profile
  std::optional<sandboxd::WasmRuntimeOptions> wasm;
};

absl::StatusOr<RuntimeFlags> RuntimesFromFlags(const sandboxd::ManagerOptions& options) {
  RuntimeFlags flags;
  if (options.isolation.Allows(sandboxd::Isolation::kContainer) ||
      options.isolation.Allows(sandboxd::Isolation::kGvisor)) {
    absl::StatusOr<sandboxd::PodmanOptions> podman = PodmanFromFlags(options);
    if (!podman.ok()) return podman.status();
    absl::StatusOr<std::string> base = SeccompBaseFromFlags(*podman);
    if (!base.ok()) return base.status();
    flags.podman = *std::move(podman);
    flags.seccomp_base = *std::move(base);
  }
  if (options.isolation.Allows(sandboxd::Isolation::kWasm)) {
    absl::StatusOr<sandboxd::WasmRuntimeOptions> wasm = WasmFromFlags(options);
    if (!wasm.ok()) return wasm.status();
    flags.wasm = *std::move(wasm);
  }
  return flags;
}

// The runtimes, once the state directory is claimed: the containers' seccomp profile is
// written into it first.
absl::Status MakeRuntimes(const RuntimeFlags& flags, const sandboxd::ManagerOptions& options,
                          sandboxd::SandboxdMetrics& metrics, std::optional<sandboxd::PodmanRuntime>& podman_runtime,
                          std::optional<sandboxd::WasmRuntime>& wasm_runtime) {
  if (flags.podman) {
    if (absl::Status s = WriteSeccompProfile(options, *flags.podman, flags.seccomp_base); !s.ok()) return s;
    podman_runtime.emplace(*flags.podman, &metrics);
  }
  if (flags.wasm) wasm_runtime.emplace(*flags.wasm);
  return absl::OkStatus();
}

// A SIGTERM or SIGINT before the daemon serves: it stops without serving. What the start
// left running on the runtime (a podman that hangs) is no client's, so it ends at once,
// and nothing more is asked of the runtime (there is nothing to clean up: no pool started).
// `manager` is null when the stop came before it was made.
int StopBeforeServing(sandboxd::ContainerRuntime& runtime, codemode::ShutdownSignal& shutdown,
                      sandboxd::SessionManager* manager) {
  spdlog::info("{} before serving: stopping", shutdown.Wait());
  runtime.EndCalls();
  if (manager) manager->Shutdown();
  spdlog::info("stopped");
  return 0;
}

// Health follows readiness: SERVING only while containers can be started (see
// docs/architecture.md, "Health and readiness"). Both the overall status ("") and the
// service's, since sandboxd has one job.
void SetHealth(grpc::HealthCheckServiceInterface* health, bool serving) {
  health->SetServingStatus("", serving);
  health->SetServingStatus("sandbox.v1.SandboxService", serving);
}

// --metrics_listen: serves `metrics`, with build info, on /metrics. Null when the flag is
// empty; an error when it cannot listen there.
absl::StatusOr<std::unique_ptr<codemode::telemetry::MetricsServer>> StartMetrics(
    const sandboxd::SandboxdMetrics& metrics) {
  using codemode::telemetry::MetricsServer;
  const std::string listen = absl::GetFlag(FLAGS_metrics_listen);
  if (listen.empty()) return nullptr;
  codemode::telemetry::AddBuildInfo(*metrics.registry(), "sandboxd", codemode::kVersion);
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start(listen, metrics.collectables());
  if (!server.ok()) return server.status();
  // The real port (--metrics_listen may say 0): tests and operators read it here.
  spdlog::info("metrics on http://{}:{}/metrics", listen.substr(0, listen.rfind(':')),
               (*server)->port());
  if (!MetricsServer::IsLoopback(listen)) {
    spdlog::warn("--metrics_listen {} is not a loopback address: whoever can connect can read "
                 "the metrics (no authentication)", listen);
  }
  return server;
}

// Connections cost a descriptor before any call is authenticated: bounded in time (idle
// TLS connections without a token could otherwise take every descriptor). The gateway
// pings every 10 s, calls or none, to notice a peer gone without a word; gRPC's default
// (one ping in 5 minutes without data) would answer that with GOAWAY.
void SetConnectionLimits(const TcpPortFlags& tcp, grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(tcp.handshake_timeout)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(tcp.idle_timeout)));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
}

// Serves `manager` on the unix socket (and the TCP port of `tcp`, when it has an address)
// until SIGTERM/SIGINT, then drains; `metrics_server` (may be null) stops serving as the
// drain begins. Returns the process's exit code.
int Serve(sandboxd::SessionManager& manager, const sandboxd::ManagerOptions& options,
          const std::string& socket_path, const TcpPortFlags& tcp,
          const sandboxd::SystemdNotifier& notifier, codemode::ShutdownSignal& shutdown,
          codemode::telemetry::MetricsServer* metrics_server) {
  // gRPC's built-in health service does not link its proto descriptor; touching ours
  // does, so reflection can describe grpc.health.v1.Health and grpcurl can call it.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  sandboxd::SandboxServiceImpl service(&manager, absl::GetFlag(FLAGS_max_stream_buffer_bytes));
  grpc::ServerBuilder builder;
  SetConnectionLimits(tcp, builder);
  builder.AddListeningPort(absl::StrCat("unix:", socket_path), grpc::InsecureServerCredentials());
  // Loopback is no boundary between the users of a machine: the TCP port wants a token and
  // bounds the connections that have not shown it (tcp_listener.h).
  absl::StatusOr<std::unique_ptr<sandboxd::TcpListener>> tcp_listener =
      sandboxd::TcpListener::Create(tcp.address, tcp.token, tcp.tls, tcp.limits, &builder);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_code_bytes + (16 << 20)));
  // Each synchronous rpc holds a thread while it waits (on podman, on a sandbox): without a
  // cap, callers could make us start threads up to pid_max.
  grpc::ResourceQuota quota("sandboxd rpc threads");
  quota.SetMaxThreads(static_cast<int>(absl::GetFlag(FLAGS_max_rpc_threads)));
  builder.SetResourceQuota(quota);
  std::unique_ptr<grpc::Server> server = tcp_listener.ok() ? builder.BuildAndStart() : nullptr;
  if (!server) {
    spdlog::critical("{}", !tcp_listener.ok() ? std::string(tcp_listener.status().message())
                                              : absl::StrCat("cannot listen on ", socket_path,
                                                             tcp.address.empty() ? "" : " / " + tcp.address));
    manager.Drain(absl::Now());  // what the start left running on podman ends now
    manager.Shutdown();
    return 1;
  }
  if (*tcp_listener) (*tcp_listener)->Start();
  sandboxd::CallbackQueueKeeper keeper(server->InProcessChannel({}), sandboxd::CallbackQueueKeeper::kPeriod);
  chmod(socket_path.c_str(), 0600);
  sandboxd::BoundSocket bound = sandboxd::BoundSocket::Pin(socket_path);
  auto* health = server->GetHealthCheckService();
  manager.SetReadinessListener([health, &notifier](const sandboxd::Readiness& r) {
    SetHealth(health, r.serving);
    (void)notifier.Notify(r.serving ? std::string("STATUS=serving")
                                    : "STATUS=cannot start containers: " + r.reason.substr(0, 200));
  });
  spdlog::info("sandboxd {} serving on unix:{}{} (state {}, image {}, pools {} python, {} javascript)",
               codemode::kVersion,
               socket_path,
               tcp.address.empty()
                   ? ""
                   : absl::StrCat(" and ", tcp.address, " (port ", (*tcp_listener)->port(), ", ",
                                  tcp.tls.client_ca.empty() ? "TLS" : "TLS with client certificates", ")"),
               options.state_dir, options.image, options.pool_size, options.js_pool_size);
  // READY=1: the socket accepts RPCs, and earlier sessions are re-attached once the runtime
  // has answered and listed them (now, or when the health status turns SERVING).
  (void)notifier.Notify("READY=1");

  spdlog::info("{}: draining and stopping", shutdown.Wait());
  (void)notifier.Notify("STOPPING=1\nSTATUS=draining");
  const absl::Duration grace = std::min(absl::GetFlag(FLAGS_shutdown_grace), codemode::kLongestWait);
  manager.SetReadinessListener(nullptr);
  manager.Drain(absl::Now() + grace);  // calls under way end within it, podman's too
  SetHealth(health, false);
  // civetweb takes up to 2 s to stop: on its own thread, beside the gRPC drain.
  if (metrics_server) metrics_server->BeginStop();
  if (*tcp_listener) (*tcp_listener)->Stop();
  keeper.Stop();
  server->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
  manager.Shutdown();
  // What is left on the runtime (a deferred gVisor check that hangs) is no client's.
  manager.Drain(absl::Now());
  bound.RemoveIfOurs();  // not a socket another daemon bound there since
  spdlog::info("stopped");
  return 0;
}

}  // namespace

// gRPC's and protobuf's own log lines (a failed TLS handshake is one, a request with
// invalid UTF-8 in a string field another) go through spdlog, rate-limited.
void RouteLibraryLogs() {
  gpr_set_log_function([](gpr_log_func_args* args) {
    codemode::LogLibraryLine("grpc", args->severity == GPR_LOG_SEVERITY_ERROR, args->message ? args->message : "");
  });
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel level, const char*, int, const std::string& text) {
    codemode::LogLibraryLine("protobuf", level >= google::protobuf::LOGLEVEL_ERROR, text);
  });
}

int main(int argc, char** argv) {
  codemode::StartMain(argc, argv, sandboxd::SandboxdHelp());
  const sandboxd::SystemdNotifier notifier;  // takes NOTIFY_SOCKET out of the environment
  codemode::ShutdownSignal shutdown;         // before any thread starts
  RouteLibraryLogs();
  spdlog::debug("open files limit {}", codemode::RaiseFileLimit());

  const auto refuse = [](int code, const absl::Status& why) {
    spdlog::critical("{}", why.message());
    return code;
  };
  absl::StatusOr<sandboxd::ManagerOptions> options = OptionsFromFlags();
  if (!options.ok()) return refuse(2, options.status());
  const std::string socket_path = SocketPathFromFlags();
  const bool self_check = absl::GetFlag(FLAGS_self_check);
  // --self_check runs in a private state directory and takes no lock.
  absl::StatusOr<sandboxd::DaemonLocks> locks = sandboxd::DaemonLocks{};
  if (self_check) locks = PrepareSelfCheck(&*options);
  if (!locks.ok()) return refuse(1, locks.status());
  // --self_check's private directory (the state directory's parent) goes last of all.
  const absl::Cleanup self_check_dir = [dir = self_check ? fs::path(options->state_dir).parent_path().string()
                                                          : std::string()] {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  };
  absl::StatusOr<RuntimeFlags> runtime_flags = RuntimesFromFlags(*options);
  if (!runtime_flags.ok()) return refuse(2, runtime_flags.status());
  // Held until exit, drain included (instance_lock.h). The claim names the state directory
  // as it resolves once it exists: the runtimes' options, which carry that name, are made
  // again when it differs from the one they were checked with.
  if (const std::string checked = options->state_dir; !self_check) {
    if (locks = ClaimState(&*options, socket_path); !locks.ok()) return refuse(1, locks.status());
    if (options->state_dir != checked) runtime_flags = RuntimesFromFlags(*options);
    if (!runtime_flags.ok()) return refuse(2, runtime_flags.status());
  }
  // Outlives the runtime, the manager and the server. Without --metrics_listen nothing is
  // counted (nobody could read it).
  sandboxd::SandboxdMetrics metrics(!absl::GetFlag(FLAGS_metrics_listen).empty());
  options->metrics = &metrics;
  std::optional<sandboxd::PodmanRuntime> podman_runtime;
  std::optional<sandboxd::WasmRuntime> wasm_runtime;
  if (absl::Status s = MakeRuntimes(*runtime_flags, *options, metrics, podman_runtime, wasm_runtime); !s.ok()) {
    return refuse(2, s);
  }
  sandboxd::IsolationRuntime runtime(podman_runtime ? &*podman_runtime : nullptr,
                                     wasm_runtime ? &*wasm_runtime : nullptr);
  sandboxd::RealClock clock;
  if (self_check) return RunSelfCheck(*options, &runtime, &clock);
  // A start that fails from here on ends what it left running on the runtime (a podman that
  // hangs) at once: the exit would otherwise wait for it, up to --podman_timeout.
  auto fail = [&runtime](int code, const absl::Status& why) {
    spdlog::critical("{}", why.message());
    runtime.CutOffCalls(absl::Now());
    return code;
  };
  // Every wait of the start for the runtime ends by one deadline, or at a SIGTERM.
  const sandboxd::StartWait start_wait(options->start_runtime_wait,
                                       [&shutdown] { return shutdown.Pending(); });
  std::optional<GvisorStartCheck> gvisor_check;  // before the runtimes go; ended by the cutoff
  if (podman_runtime) gvisor_check.emplace(*options, *podman_runtime);
  if (absl::Status s = CheckRuntimes(gvisor_check ? &*gvisor_check : nullptr, wasm_runtime, start_wait);
      !s.ok()) {
    return fail(1, s);
  }
  if (start_wait.stop_requested()) return StopBeforeServing(runtime, shutdown, nullptr);

  absl::StatusOr<TcpPortFlags> tcp = TcpPortFromFlags(options->state_dir);
  // Outlives the manager, whose sessions' proxies run on it.
  absl::StatusOr<std::unique_ptr<sandboxd::EgressHub>> egress = EgressHubFromFlags(&metrics);
  if (!tcp.ok() || !egress.ok()) return fail(2, !tcp.ok() ? tcp.status() : egress.status());
  options->egress = egress->get();
  sandboxd::SessionManager manager(*options, &runtime, &clock);
  if (absl::Status s = manager.Start(start_wait); !s.ok()) return fail(1, s);
  if (start_wait.stop_requested()) return StopBeforeServing(runtime, shutdown, &manager);
  // After the manager it reads, so it goes first.
  absl::StatusOr<std::unique_ptr<codemode::telemetry::MetricsServer>> metrics_server =
      StartMetrics(metrics);
  if (!metrics_server.ok()) return fail(2, metrics_server.status());
  return Serve(manager, *options, socket_path, *tcp, notifier, shutdown, metrics_server->get());
}
