#include "sandboxd/wasm_runtime.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/rand.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/thread.h"
#include "nlohmann/json.hpp"
#include "sandboxd/log.h"
#include "sandboxd/resource_usage.h"
#include "sandboxd/subprocess.h"
#include "sandboxd/trusted_files.h"
#include "sandboxd/wasm_last_words.h"
#include "sandboxd/wasm_process.h"
#include "sandboxd/wasm_snapshot.h"

namespace sandboxd {

namespace fs = std::filesystem;

namespace {

constexpr char kIdPrefix[] = "wasm-";
// Open files of one session: Node and Pyodide hold ~40; the rest is the user's.
constexpr uint32_t kNofile = 256;
// The environment entry that carries the runner's token (never passed on to user code).
constexpr char kRunnerTokenVariable[] = "SANDBOX_RUNNER_TOKEN";
constexpr uint64_t kV8Reservations = 3ull << 29;  // 1.5 GiB
// What a session's stderr file (the runner's log, code writing to fd 2) may hold on disk:
// the jail keeps it within this, WasmLastWords reads its last 16 KiB.
constexpr uint64_t kStderrCap = 64 << 10;
// How often the budget thread measures every workspace. Without bwrap, what a session
// writes in this time is what it can go over its budget by before it ends.
constexpr absl::Duration kBudgetInterval = absl::Milliseconds(200);
// How long a live session's workspace may go unmeasured before the session is ended, as
// one over its budget is: a budget nobody measures holds nothing. Not 0: in a session's
// first moments bwrap has not mounted its tmpfs yet.
constexpr absl::Duration kUnmeasuredBound = absl::Seconds(5);

// 128 random bits, hex; empty when the system has no randomness to give.
std::string RandomToken() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return "";
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

std::string OpensslConfig(const WasmRuntimeOptions& options) { return options.work_dir + "/openssl.cnf"; }

// Every file the tier runs or reads is there, and no user but root and us could change it:
// one who could would run code in every session (the jail, as sandboxd's user).
absl::Status CheckFilesSessionsRun(const WasmRuntimeOptions& options) {
  const fs::path node_modules = fs::path(options.node).parent_path().parent_path().parent_path();
  struct SessionFiles {
    std::string path;
    const char* flag;
    std::vector<std::string> required;
  };
  for (const SessionFiles& f : std::vector<SessionFiles>{
           {options.node, "--wasm_node", {}},
           // transform.js's acorn, beside Node's package: every JavaScript cell runs through it
           {(node_modules / "acorn").string(), "acorn beside --wasm_node", {"package.json"}},
           {options.jail.jail, "--wasm_jail", {}},
           {options.jail.bwrap, "--wasm_bwrap", {}},
           {options.js_runner, "--js_runner", {}},
           {options.python_runner, "--runner", {}},
           {options.pyodide_dir, "--wasm_pyodide", {"pyodide.js", "pyodide.asm.wasm", "python_stdlib.zip"}},
           {options.python_packages, "--wasm_python_packages",
            {".recipe", "dist-packages", "certs/ca-certificates.crt"}}}) {
    // A missing file "cannot be read: No such file or directory; scripts/setup.sh installs it".
    if (f.path.empty() && f.flag == std::string("--wasm_bwrap")) continue;  // not installed
    absl::Status s = f.path.empty() ? absl::UnavailableError(absl::StrCat(f.flag, " names no file"))
                                    : CheckFilesOthersCannotChange(f.path, f.flag, f.required);
    if (!s.ok()) return absl::UnavailableError(absl::StrCat("wasm: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> WasmNodeArgv(const WasmRuntimeOptions& options, Language language,
                                      const std::string& workspace, uint64_t heap_mb,
                                      const std::string& snapshot) {
  // The runtime's node_modules (.../node_modules/node/bin/node): Node's own files and the
  // acorn the JavaScript runner parses cells with.
  std::vector<std::string> reads = {
      fs::path(options.node).parent_path().parent_path().parent_path().string(), options.js_runner};
  const bool python = language == Language::kPython;
  if (python) {
    reads.push_back(options.pyodide_dir);
    reads.push_back(options.python_runner);
    reads.push_back(options.python_packages);
    if (!snapshot.empty()) {
      reads.push_back(snapshot);
      reads.push_back(snapshot + ".sha256");
    }
  }
  // Node reads /etc/ssl/openssl.cnf at start, which Landlock refuses: its own, empty one.
  reads.push_back(OpensslConfig(options));
  std::vector<std::string> argv = {options.node, "--permission", "--openssl-config=" + OpensslConfig(options)};
  for (const std::string& r : reads) argv.push_back("--allow-fs-read=" + r);
  argv.push_back("--allow-fs-read=" + workspace);
  argv.push_back("--allow-fs-write=" + workspace);
  for (const char* flag : {"--allow-worker", "--allow-net", "--disallow-code-generation-from-strings",
                           "--disable-proto=delete"}) {
    argv.emplace_back(flag);
  }
  argv.push_back(options.js_runner);
  argv.insert(argv.end(), {"--listen-fd", "3", "--env-fd", "5", "--egress-fd", "6", "--workspace", workspace,
                           "--language", python ? "python" : "javascript", "--heap-mb", absl::StrCat(heap_mb)});
  if (python) {
    argv.insert(argv.end(), {"--pyodide", options.pyodide_dir, "--python-runner", options.python_runner,
                             "--python-packages", options.python_packages});
    if (!snapshot.empty()) argv.insert(argv.end(), {"--snapshot", snapshot});
  }
  return argv;
}

WasmRuntime::WasmRuntime(WasmRuntimeOptions options) : options_(std::move(options)) {}

WasmRuntime::~WasmRuntime() {
  {
    codemode::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (budget_thread_.joinable()) budget_thread_.join();
  codemode::MutexLock lock(&mu_);
  cpu_.reset();  // continues the sessions it stopped
}

std::string WasmRuntime::RecordPath(const std::string& name) const {
  return absl::StrCat(options_.records_dir, "/", name, ".json");
}

std::string WasmRuntime::WorkspacePath(const std::string& name) const {
  return absl::StrCat(options_.work_dir, "/w/", name);
}

absl::StatusOr<RuntimeInfo> WasmRuntime::Probe() {
  {
    // The snapshot's SHA-256 alone takes a second: a daemon probes once (main.cc, then the
    // factory through IsolationRuntime) and the second gets the first's answer.
    codemode::MutexLock lock(&mu_);
    if (probed_) return *probed_;
  }
  if (absl::Status s = CheckFilesSessionsRun(options_); !s.ok()) return s;
  SubprocessOptions opts;
  opts.env = std::vector<std::string>{};
  opts.timeout = absl::Seconds(20);
  absl::StatusOr<SubprocessResult> version = RunSubprocess({options_.node, "--version"}, opts);
  if (!version.ok() || version->exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("wasm: ", options_.node, " --version failed: ",
                                               version.ok() ? version->stderr_text
                                                            : std::string(version.status().message())));
  }
  const std::string node_version(absl::StripAsciiWhitespace(version->stdout_text));
  absl::StatusOr<std::vector<WasmLayerState>> layers = ProbeWasmLayers(options_.jail, options_.layers);
  if (!layers.ok()) return absl::UnavailableError(absl::StrCat("wasm: ", layers.status().message()));
  if (absl::Status s = PrepareWasmWorkDir(options_.work_dir); !s.ok()) return s;
  std::error_code ec;
  fs::create_directories(options_.records_dir, ec);
  {
    std::ofstream cnf(OpensslConfig(options_), std::ios::trunc);
    cnf << "# sandboxd: the wasm tier's Node reads no system OpenSSL configuration.\n";
    if (!cnf.flush() || chmod(OpensslConfig(options_).c_str(), 0644) != 0) {
      return absl::UnavailableError(absl::StrCat("wasm: cannot write ", OpensslConfig(options_)));
    }
  }
  absl::StatusOr<std::string> snapshot = EnsureSnapshot(node_version);
  if (!snapshot.ok()) return snapshot.status();
  RuntimeInfo info;
  info.version = absl::StrCat("wasm: node ", node_version, ", pyodide ", PyodideVersion(options_.pyodide_dir));
  info.wasm_version = info.version.substr(6);
  info.oci_runtime = "wasm-jail";
  info.rootless = geteuid() != 0;
  info.cgroup_limits = false;
  std::vector<std::string> said;
  for (const WasmLayerState& l : *layers) {
    info.wasm_layers.push_back({std::string(WasmLayerName(l.layer)), l.in_force, l.detail});
    said.push_back(absl::StrCat(std::string(WasmLayerName(l.layer)), l.in_force ? " " : " (not in force: ",
                                l.detail, l.in_force ? "" : ")"));
  }
  info.wasm_layers.push_back({"cpu", true, absl::StrCat(
      "sandboxd holds each session's processes to limits.cpu_millis: it reads their CPU every ",
      absl::FormatDuration(kWasmCpuTick), " and stops them (SIGSTOP) while they are over it")});
  spdlog::info("wasm tier: {}; layers: {}", info.wasm_version, absl::StrJoin(said, "; "));
  LoadRecords();
  codemode::MutexLock lock(&mu_);
  if (probed_) return *probed_;  // a concurrent Probe got here first
  layers_ = *layers;
  snapshot_ = *snapshot;
  probed_ = info;
  budget_thread_ = codemode::StartThread("wasm budget", [this] { BudgetLoop(); });
  cpu_ = std::make_unique<WasmCpuLimiter>();
  for (const auto& [name, r] : records_) cpu_->Track(name, r.pid, r.start_time, r.cpu_millis);
  return info;
}

absl::StatusOr<std::string> WasmRuntime::EnsureSnapshot(const std::string& node_version) {
  absl::StatusOr<std::string> key = SnapshotKey(node_version, options_);
  if (!key.ok()) return key.status();
  return SnapshotAt(options_, absl::StrCat(options_.work_dir, "/snapshots/python-", *key, ".snap"));
}

absl::StatusOr<std::string> WasmRuntime::PrepareWorkspace(const ContainerSpec& spec) {
  const std::string dir = WorkspacePath(spec.name);
  std::error_code ec;
  fs::remove_all(dir, ec);
  // chmod as well: mkdir's mode passes through the process umask, which need not be 022.
  if (mkdir(dir.c_str(), 0700) != 0 || chmod(dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
  }
  if (geteuid() == 0 && chown(dir.c_str(), spec.uid, spec.uid) != 0) {
    return absl::InternalError(absl::StrCat("cannot give ", dir, " to uid ", spec.uid, ": ", strerror(errno)));
  }
  return dir;
}

WasmJailRequest WasmRuntime::JailRequest(const ContainerSpec& spec, const std::string& workspace,
                                         const std::string& snapshot, bool bwrap) const {
  WasmJailRequest request;
  for (const std::string& arg : WasmNodeArgv(options_, spec.language, workspace, 0, snapshot)) {
    if (absl::StartsWith(arg, "--allow-fs-read=")) request.read_paths.push_back(arg.substr(16));
  }
  request.read_paths.push_back(options_.node);
  request.workspace = workspace;
  request.env_fd = 5;
  request.egress_fd = 6;
  request.shares_sandboxd_uid = geteuid() != 0;
  // Node's only environment entry (WasmRuntimeOptions::malloc_mmap_threshold); user code
  // never sees it (its environment comes on fd 5).
  request.program_env = {
      absl::StrCat("GLIBC_TUNABLES=glibc.malloc.mmap_threshold=", options_.malloc_mmap_threshold)};
  // RLIMIT_DATA counts address space V8 reserves and never touches (its code range, the
  // heaps' reservations): Node alone needs 768 MiB of it to start, an idle Python session
  // holds 1.3 GiB (for 220 MiB resident). The session's limit comes on top of a fixed
  // 1.5 GiB allowance; it bounds Python's WebAssembly memory too.
  request.rlimit_data = spec.limits.memory_bytes + kV8Reservations;
  request.rlimit_fsize = spec.limits.workspace_bytes;
  request.rlimit_nofile = kNofile;
  request.stderr_cap_bytes = kStderrCap;
  request.rlimit_nproc = std::max<uint32_t>(spec.limits.pids, 64);
  if (bwrap) request.workspace_tmpfs_bytes = spec.limits.workspace_bytes;
  return request;
}

absl::StatusOr<std::string> WasmRuntime::Start(const ContainerSpec& spec) {
  std::vector<WasmLayerState> layers;
  std::string snapshot;
  {
    codemode::MutexLock lock(&mu_);
    layers = layers_;
    snapshot = snapshot_;
  }
  if (layers.empty()) return absl::FailedPreconditionError("wasm: Probe() has not succeeded yet");
  const std::string token = RandomToken();
  if (token.empty()) return absl::UnavailableError("wasm: no random bytes for the runner's token");
  absl::StatusOr<std::string> workspace = PrepareWorkspace(spec);
  if (!workspace.ok()) return workspace.status();
  const bool bwrap = std::any_of(layers.begin(), layers.end(), [](const WasmLayerState& l) {
    return l.layer == WasmLayer::kBwrap && l.in_force;
  });
  std::vector<std::string> argv =
      WasmJailArgv(options_.jail, layers, JailRequest(spec, *workspace, snapshot, bwrap));
  // As in a container: the worker's heap gets 3/4 of the memory limit.
  const uint64_t heap_mb = std::max<uint64_t>(16, spec.limits.memory_bytes / 4 * 3 >> 20);
  const std::vector<std::string> node = WasmNodeArgv(options_, spec.language, *workspace, heap_mb, snapshot);
  argv.insert(argv.end(), node.begin(), node.end());
  SpawnRequest spawn;
  spawn.argv = std::move(argv);
  spawn.socket_dir = spec.socket_dir;
  spawn.log_path = absl::StrCat(options_.records_dir, "/", spec.name, ".log");
  // The runner takes its token out of the environment before any user code runs.
  spawn.env = {absl::StrCat(kRunnerTokenVariable, "=", token)};
  spawn.env.insert(spawn.env.end(), spec.env.begin(), spec.env.end());
  spawn.uid = geteuid() == 0 ? std::optional<uid_t>(spec.uid) : std::nullopt;
  spawn.bwrap = bwrap;
  // bwrap names its sandbox's init on fd 4: killing that init ends the whole pid
  // namespace, killing bwrap itself would not.
  if (spawn.bwrap) spawn.argv.insert(spawn.argv.begin() + 1, {"--info-fd", "4"});
  absl::StatusOr<SpawnedProcess> process = SpawnJailed(spawn);
  if (!process.ok()) {
    std::error_code ec;
    fs::remove_all(*workspace, ec);
    fs::remove(spawn.log_path, ec);
    return process.status();
  }
  Record record;
  record.name = spec.name;
  record.pid = process->pid;
  record.init_pid = process->init_pid;
  record.start_time = ProcessStartTime("/proc", record.pid).value_or(0);
  if (record.init_pid) record.init_start_time = ProcessStartTime("/proc", record.init_pid).value_or(0);
  record.labels = spec.labels;
  record.token = token;
  record.budget = WasmWorkspaceBudgetFor(spec.limits.workspace_bytes);
  record.workspace_tmpfs = bwrap;
  record.cpu_millis = spec.limits.cpu_millis;
  if (absl::Status s = WriteRecord(record); !s.ok()) {
    kill(record.pid, SIGKILL);
    if (record.init_pid) kill(record.init_pid, SIGKILL);
    return s;
  }
  codemode::MutexLock lock(&mu_);
  cpu_->Track(record.name, record.pid, record.start_time, record.cpu_millis);
  return absl::StrCat(kIdPrefix, record.pid);
}

absl::Status WasmRuntime::WriteRecord(const Record& record) {
  nlohmann::json j = {{"name", record.name},           {"pid", record.pid},
                      {"start_time", record.start_time}, {"init_pid", record.init_pid},
                      {"init_start_time", record.init_start_time}, {"labels", record.labels},
                      {"token", record.token}, {"workspace_bytes", record.budget.bytes},
                      {"workspace_inodes", record.budget.inodes},
                      {"workspace_tmpfs", record.workspace_tmpfs}, {"cpu_millis", record.cpu_millis}};
  const std::string path = RecordPath(record.name);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump();
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
  }
  codemode::MutexLock lock(&mu_);
  records_[record.name] = record;
  return absl::OkStatus();
}

std::optional<WasmRuntime::Record> WasmRuntime::ReadRecordFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  Record r;
  try {
    r.name = j.at("name").get<std::string>();
    r.pid = j.at("pid").get<pid_t>();
    r.start_time = j.at("start_time").get<uint64_t>();
    r.init_pid = j.at("init_pid").get<pid_t>();
    r.init_start_time = j.at("init_start_time").get<uint64_t>();
    r.labels = j.at("labels").get<std::map<std::string, std::string>>();
    r.token = j.value("token", std::string());
    r.budget.bytes = j.value("workspace_bytes", uint64_t{0});
    r.budget.inodes = j.value("workspace_inodes", uint64_t{0});
    r.workspace_tmpfs = j.value("workspace_tmpfs", false);
    r.cpu_millis = j.value("cpu_millis", uint32_t{0});
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (fs::path(path).stem() != r.name || r.pid <= 0) return std::nullopt;
  return r;
}

void WasmRuntime::LoadRecords() {
  std::map<std::string, Record> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(options_.records_dir, ec)) {
    if (e.path().extension() != ".json") continue;
    if (std::optional<Record> r = ReadRecordFile(e.path().string())) found[r->name] = *r;
  }
  codemode::MutexLock lock(&mu_);
  if (!probed_) records_.insert(found.begin(), found.end());
}

std::optional<WasmRuntime::Record> WasmRuntime::FindRecord(const std::string& name) {
  codemode::MutexLock lock(&mu_);
  auto it = records_.find(name);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

void WasmRuntime::Reap(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == pid) {
    exits_[pid] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
}

bool WasmRuntime::Alive(pid_t pid, uint64_t start_time) {
  {
    codemode::MutexLock lock(&mu_);
    Reap(pid);
    if (exits_.count(pid)) return false;
  }
  return ProcessRunning(pid, start_time);
}

void WasmRuntime::EndProcess(const Record& r) {
  {
    codemode::MutexLock lock(&mu_);
    if (cpu_) cpu_->Forget(r.name);
  }
  // The namespace's init first: its death ends every process of the pid namespace.
  if (r.init_pid && Alive(r.init_pid, r.init_start_time)) KillChecked(r.init_pid, r.init_start_time);
  if (Alive(r.pid, r.start_time)) KillChecked(r.pid, r.start_time);
  WaitGone(r.pid, r.start_time, absl::Seconds(5));
}

RemovalFailures WasmRuntime::Remove(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (std::optional<Record> r = FindRecord(name)) {
      EndProcess(*r);
      codemode::MutexLock lock(&mu_);
      Reap(r->pid);
      exits_.erase(r->pid);
    }
    std::error_code ec;
    fs::remove(RecordPath(name), ec);
    fs::remove(absl::StrCat(options_.records_dir, "/", name, ".log"), ec);
    if (std::error_code left = RemoveWasmWorkspace(WorkspacePath(name)); left) {
      spdlog::warn("wasm: {}: its workspace {} is not fully deleted: {}", name, WorkspacePath(name),
                   left.message());
    }
    codemode::MutexLock lock(&mu_);
    records_.erase(name);
    over_budget_.erase(name);
    measured_.erase(name);
  }
  return {};
}

absl::StatusOr<ContainerStatus> WasmRuntime::Inspect(const std::string& name) {
  ContainerStatus status;
  std::optional<Record> r = FindRecord(name);
  if (!r) return status;  // exists = false
  status.exists = true;
  status.running = Alive(r->pid, r->start_time);
  status.state = status.running ? "running" : "exited";
  if (!status.running) {
    status.last_words = WasmLastWords(absl::StrCat(options_.records_dir, "/", name, ".log"));
    codemode::MutexLock lock(&mu_);
    auto it = exits_.find(r->pid);
    status.exit_code = it == exits_.end() ? -1 : it->second;
    // What the code said last is beside the point when sandboxd ended it, and how it ended
    // is known even for a process of an earlier sandboxd (not this one's to reap).
    if (auto why = over_budget_.find(name); why != over_budget_.end()) {
      status.last_words = why->second;
      status.exit_code = 128 + SIGKILL;
    }
  }
  return status;
}

absl::StatusOr<std::vector<std::string>> WasmRuntime::ImageOffers(const std::string& reference) {
  (void)reference;
  return std::vector<std::string>{"python3", "nodejs"};
}

absl::StatusOr<std::vector<ContainerSummary>> WasmRuntime::List(const std::string& label_key,
                                                                const std::string& label_value) {
  std::vector<Record> matching;
  {
    codemode::MutexLock lock(&mu_);
    for (const auto& [name, r] : records_) {
      auto label = r.labels.find(label_key);
      if (label != r.labels.end() && label->second == label_value) matching.push_back(r);
    }
  }
  std::vector<ContainerSummary> out;
  for (const Record& r : matching) {
    out.push_back({absl::StrCat(kIdPrefix, r.pid), r.name, Alive(r.pid, r.start_time), r.labels});
  }
  return out;
}

std::string WasmRuntime::RunnerToken(const std::string& name) {
  std::optional<Record> r = FindRecord(name);
  return r ? r->token : "";
}

absl::StatusOr<WasmWorkspaceUse> WasmRuntime::MeasureWorkspace(const Record& r, uint64_t stop_after_inodes) {
  // bwrap's tmpfs is in the sandbox's mount namespace: its init's root shows it.
  if (r.workspace_tmpfs) {
    return MeasureWasmTmpfsWorkspace(
        absl::StrCat("/proc/", r.init_pid ? r.init_pid : r.pid, "/root", WorkspacePath(r.name)),
        WorkspacePath(r.name));
  }
  return MeasureWasmWorkspace(WorkspacePath(r.name), stop_after_inodes, WasmProcessTree(r.pid));
}

absl::StatusOr<ResourceUsage> WasmRuntime::Usage(const std::string& name, Isolation isolation) {
  (void)isolation;
  std::optional<Record> r = FindRecord(name);
  if (!r || !Alive(r->pid, r->start_time)) {
    return absl::UnavailableError(absl::StrCat("the wasm process of ", name, " is not running"));
  }
  std::vector<pid_t> members;
  absl::StatusOr<ResourceUsage> usage = ReadProcTreeUsage("/proc", r->pid, &members);
  if (!usage.ok()) return usage.status();
  usage->memory_peak_bytes = std::max(usage->memory_bytes, SumPeakResident("/proc", members));
  // A session's cost is its share of the pages: Node's code is shared by every session (the
  // sum of the resident sets counts it once per session), the rest is the session's own.
  AddProcessPss("/proc", {}, &*usage);
  if (usage->pss_bytes != 0) usage->memory_bytes = usage->pss_bytes;
  if (r->budget.bytes != 0) {
    // A tmpfs's statvfs costs nothing; a walk is the budget thread's, whose last measure
    // this is, so that no client makes sandboxd walk a workspace at will.
    absl::StatusOr<WasmWorkspaceUse> use = absl::UnavailableError("not measured yet");
    if (r->workspace_tmpfs) {
      use = MeasureWorkspace(*r, 0);
    } else {
      codemode::MutexLock lock(&mu_);
      if (auto it = measured_.find(name); it != measured_.end()) use = it->second;
    }
    if (use.ok()) {
      usage->workspace_known = true;
      usage->workspace_bytes = use->bytes;
      usage->workspace_limit_bytes = r->budget.bytes;
    }
  }
  return usage;
}

void WasmRuntime::BudgetLoop() {
  for (;;) {
    {
      codemode::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stop), kBudgetInterval)) return;
    }
    CheckBudgets();
  }
}

void WasmRuntime::CheckBudgets() {
  std::vector<Record> live;
  {
    codemode::MutexLock lock(&mu_);
    for (const auto& [name, r] : records_) {
      if (r.budget.bytes != 0 && !over_budget_.count(name)) live.push_back(r);
    }
  }
  std::map<std::string, absl::Time> next_walk;
  const absl::Time now = absl::Now();
  for (const Record& r : live) {
    // A walk costs ~1.3 us an inode (85 ms at 65,536): NextWasmWorkspaceWalk paces them.
    auto at = next_walk_.find(r.name);
    if (at != next_walk_.end() && at->second > now) {
      next_walk[r.name] = at->second;
      continue;
    }
    if (!Alive(r.pid, r.start_time)) continue;
    const absl::Time start = absl::Now();
    absl::StatusOr<WasmWorkspaceUse> use = MeasureWorkspace(r, r.budget.inodes + 1);
    std::optional<absl::Time> unmeasured;
    std::string why;
    if (use.ok()) {
      unmeasured_since_.erase(r.name);
      codemode::MutexLock lock(&mu_);
      measured_[r.name] = *use;
      why = OverWasmWorkspaceBudget(*use, r.budget);
    } else if (unmeasured = unmeasured_since_.try_emplace(r.name, start).first->second;
               start - *unmeasured >= kUnmeasuredBound) {
      why = absl::StrCat("its workspace cannot be measured (for ", absl::FormatDuration(start - *unmeasured),
                         "): ", use.status().message());
    }
    next_walk[r.name] = NextWasmWorkspaceWalk(start, absl::Now() - start, unmeasured, kUnmeasuredBound);
    if (why.empty()) continue;
    why = absl::StrCat("sandboxd ended the session: ", why);
    spdlog::warn("wasm: {}: {}", r.name, why);
    {
      codemode::MutexLock lock(&mu_);
      over_budget_[r.name] = why;
    }
    EndProcess(r);
    // The disk goes back at once, not when the session is removed.
    if (!r.workspace_tmpfs) RemoveWasmWorkspace(WorkspacePath(r.name), /*keep_root=*/true);
  }
  next_walk_ = std::move(next_walk);  // the sessions gone meanwhile drop out
  for (auto it = unmeasured_since_.begin(); it != unmeasured_since_.end();) {
    it = next_walk_.count(it->first) ? std::next(it) : unmeasured_since_.erase(it);
  }
}

}  // namespace sandboxd
