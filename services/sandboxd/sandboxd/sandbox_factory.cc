#include "sandboxd/sandbox_factory.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log_text.h"
#include "sandboxd/log.h"
#include "sandboxd/refusal.h"

namespace sandboxd {

namespace fs = std::filesystem;

SandboxFactory::SandboxFactory(FactoryOptions options, ContainerRuntime* runtime,
                               WorkerPool* workers, FactoryHooks hooks)
    : options_(std::move(options)), runtime_(runtime), workers_(workers),
      hooks_(std::move(hooks)) {}

std::string SandboxFactory::SocketDir(const std::string& container_name) const {
  return absl::StrCat(options_.state_dir, "/c/", container_name);
}

// Once the runner listens, its socket directory stops being writable from the container:
// the runner (uid 65534, or a subordinate uid when rootless) is not the directory's owner,
// so user code can neither fill the host's disk through it, nor leave files sandboxd
// cannot delete, nor swap the socket for a symlink that a restarted sandboxd would follow.
void SandboxFactory::SealSocketDir(const std::string& container_name) const {
  std::string dir = SocketDir(container_name);
  if (chmod(dir.c_str(), 0755) != 0) {
    spdlog::warn("cannot make {} read-only for its sandbox: {}", dir, strerror(errno));
  }
}

absl::Status SandboxFactory::EnsureProbed() {
  uint64_t failures_seen;
  {
    codemode::MutexLock lock(&mu_);
    if (probed_) return absl::OkStatus();
    failures_seen = probe_failures_;
  }
  // One probe at a time, and the first success's hook (re-attaching the previous run's
  // sessions, sweeping what it cannot) before anything starts: a container started during
  // the sweep would be taken for a stale one. A caller that waited here while another's
  // probe failed takes that answer instead of asking the runtime again. Once a probe has
  // failed, a caller finding another under way does not wait for it at all: it answers
  // with the runtime's last failure at once, rather than hold its thread (an RPC's) for
  // up to --podman_timeout while readiness already says NOT_SERVING.
  if (!probe_mu_.TryLock()) {
    if (failures_seen > 0) {
      codemode::MutexLock lock(&mu_);
      return absl::UnavailableError(
          runtime_error_.empty() ? "the container runtime answers again; the previous run's "
                                   "sessions are being re-attached"
                                 : runtime_error_);
    }
    probe_mu_.Lock();
  }
  absl::Status probed = ProbeLocked(failures_seen);
  probe_mu_.Unlock();
  return probed;
}

absl::Status SandboxFactory::ProbeLocked(uint64_t failures_seen) {
  {
    codemode::MutexLock lock(&mu_);
    if (probed_) return absl::OkStatus();
    if (probe_failures_ != failures_seen) return absl::UnavailableError(runtime_error_);
  }
  absl::StatusOr<RuntimeInfo> info = runtime_->Probe();
  if (!info.ok()) return ProbeFailed(info.status().message());
  // Said once, not again on each retry while the hook fails (every few seconds).
  std::string described = absl::StrCat(
      "container runtime: ", info->version, ", OCI runtime ", info->oci_runtime, ", ",
      info->rootless ? "rootless" : "rootful", ", cgroup ", info->cgroup_version,
      ", limits via ", info->cgroup_limits ? "cgroups" : "rlimits");
  if (described != described_runtime_) {
    spdlog::info("{}", described);
    if (!info->gvisor_version.empty()) {
      spdlog::info("gVisor: {}, platform {}", info->gvisor_version, info->gvisor_platform);
    }
    for (const auto& n : info->notes) spdlog::warn("{}", n);
    described_runtime_ = std::move(described);
  }
  {
    codemode::MutexLock lock(&mu_);
    runtime_info_ = *info;
    runtime_error_.clear();
  }
  if (hooks_.on_probed) {
    if (absl::Status hooked = hooks_.on_probed(*info); !hooked.ok()) {
      return ProbeFailed(hooked.message());
    }
  }
  codemode::MutexLock lock(&mu_);
  probed_ = true;
  return absl::OkStatus();
}

absl::Status SandboxFactory::ProbeFailed(absl::string_view why) {
  {
    codemode::MutexLock lock(&mu_);
    runtime_error_ = std::string(why);
    ++probe_failures_;
  }
  absl::Status error = absl::UnavailableError(why);
  NoteStartResult(error);
  return error;
}

void SandboxFactory::NoteProbeOverdue(absl::Duration waited) {
  {
    codemode::MutexLock lock(&mu_);
    if (probed_) return;
  }
  (void)ProbeFailed(absl::StrCat("the container runtime has not answered in ",
                                 absl::FormatDuration(waited), " (still asking; see --podman_timeout)"));
}

void SandboxFactory::RemoveNow(const std::vector<std::string>& names) {
  if (names.empty()) return;
  EndProcesses(names);
  for (const auto& [name, why] : runtime_->Remove(names)) {
    spdlog::error("cannot remove container {}: {}", name, codemode::LogLongText(why.message()));
  }
  for (const auto& name : names) {
    std::error_code ec;
    fs::remove_all(SocketDir(name), ec);
  }
}

absl::StatusOr<Sandbox> SandboxFactory::Start(const SandboxConfig& config,
                                              const std::string& role) {
  if (absl::Status probe = EnsureProbed(); !probe.ok()) return probe;
  absl::StatusOr<Sandbox> sb = StartContainer(config, role);
  // Readiness says whether sessions can be had here: Python's (the default) tell. A failed
  // JavaScript start says only that JavaScript is broken (its pool and its CreateSession
  // say so); counted, it flipped health with each pool retry while Python served.
  if (sb.ok() || config.language == Language::kPython) NoteStartResult(sb.status());
  return sb;
}

absl::StatusOr<std::shared_ptr<UidPool::Lease>> SandboxFactory::LeaseUid(Isolation isolation) {
  bool per_session_uid;
  {
    codemode::MutexLock lock(&mu_);
    // A wasm process started by root gets a uid of its own too: never 65534, which the
    // host's other services share (any of them could read its memory through /proc), nor
    // another session's. Its rlimits are its own anyway (the jail sets them).
    per_session_uid = isolation == Isolation::kWasm ? geteuid() == 0
                                                    : runtime_info_ && !runtime_info_->cgroup_limits;
  }
  if (!per_session_uid) return nullptr;
  // The process rlimit counts per user id: a uid of its own makes it this session's. A
  // wasm session runs as the uid and gid itself, so no thread may have it as a uid or gid
  // already (ThreadIds), nor may a host account or group (which could log in or start
  // later); containers' uids are mapped into their user namespace.
  std::shared_ptr<UidPool::Lease> lease =
      isolation == Isolation::kWasm
          ? uids_->Acquire(thread_ids_.InUse(),
                           [this](uint32_t id) { return named_ids_.Named(id); })
          : uids_->Acquire();
  if (!lease) {
    return RefusedForRoom(absl::StrCat("all ", uids_->count(), " per-session user ids are in use"),
                          /*daemon_full=*/true);
  }
  return lease;
}

absl::StatusOr<Sandbox> SandboxFactory::StartContainer(const SandboxConfig& config,
                                                       const std::string& role) {
  Sandbox sb;
  {
    codemode::MutexLock lock(&mu_);
    sb.name = absl::StrFormat("sbx-%s-%012x", options_.instance,
                              absl::Uniform<uint64_t>(rng_) & 0xffffffffffffull);
  }
  std::string dir = SocketDir(sb.name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  // The runner runs as uid 65534 (rootless: a subordinate uid) and must create its socket
  // here; the state directory above is 0700, so no other host user can reach it.
  chmod(dir.c_str(), 0777);
  ContainerSpec spec;
  spec.name = sb.name;
  spec.image = config.image.empty() ? options_.image : config.image;
  spec.limits = config.limits;
  spec.isolation = config.isolation;
  spec.socket_dir = dir;
  spec.language = config.language;
  spec.runner_path =
      config.language == Language::kJavaScript ? options_.js_runner_path : options_.runner_path;
  spec.labels = {{kInstanceLabel, options_.instance},
                 {kStateDirLabel, options_.state_dir},
                 {kRoleLabel, role},
                 {kIsolationLabel, std::string(IsolationName(config.isolation))},
                 {kLanguageLabel, std::string(LanguageName(config.language))}};
  spec.env = options_.container_env;
  absl::StatusOr<std::shared_ptr<UidPool::Lease>> uid = LeaseUid(config.isolation);
  if (!uid.ok()) {
    fs::remove_all(dir, ec);
    return uid.status();
  }
  sb.uid = *std::move(uid);
  if (sb.uid) {
    spec.uid = sb.uid->uid();
    spec.labels[kUidLabel] = absl::StrCat(spec.uid);
  }
  absl::StatusOr<std::string> id = runtime_->Start(spec);
  if (!id.ok()) {
    fs::remove_all(dir, ec);
    return id.status();
  }
  sb.id = *id;
  absl::StatusOr<std::unique_ptr<RunnerConnection>> conn =
      RunnerConnection::Connect(dir + "/runner.sock", options_.runner_start_timeout);
  if (!conn.ok()) {
    // A process that said why it ended (the wasm tier keeps its stderr) tells the operator;
    // it may take a moment to end after closing its connection.
    absl::StatusOr<ContainerStatus> st = runtime_->Inspect(sb.name);
    for (int i = 0; i < 20 && st.ok() && st->running; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
      st = runtime_->Inspect(sb.name);
    }
    std::string said;
    if (st.ok() && !st->running && !st->last_words.empty()) {
      said = absl::StrCat("; it said: ", codemode::LogText(st->last_words));
    }
    Discard(sb.name);
    return absl::UnavailableError(
        absl::StrCat("the sandbox runner did not start: ", conn.status().message(), said));
  }
  if (absl::Status s = CheckRunnerToken(sb.name, (*conn)->ready()); !s.ok()) {
    Discard(sb.name);
    return s;
  }
  SealSocketDir(sb.name);
  // The socket's peer is the runner that listened: no code of the sandbox has run yet.
  const pid_t peer = (*conn)->peer_pid();
  NoteProcesses(sb.name, peer > 0 ? NestedNamespaceInit("/proc", peer) : std::nullopt);
  sb.conn = std::move(*conn);
  return sb;
}

absl::Status SandboxFactory::CheckRunnerToken(const std::string& name, const ReadyMessage& ready) {
  const std::string want = runtime_->RunnerToken(name);
  if (want.empty() || ready.token == want) return absl::OkStatus();
  return absl::UnavailableError(
      "what answered on the runner's socket did not show the session's runner token (code of the "
      "session answering in the runner's place?)");
}

void SandboxFactory::NoteProcesses(const std::string& name, std::optional<ProcessRef> init) {
  codemode::MutexLock lock(&mu_);
  if (init) {
    inits_[name] = *init;
  } else {
    inits_.erase(name);
  }
}

std::optional<ProcessRef> SandboxFactory::NotedProcesses(const std::string& name) {
  codemode::MutexLock lock(&mu_);
  auto it = inits_.find(name);
  if (it == inits_.end()) return std::nullopt;
  return it->second;
}

void SandboxFactory::EndProcesses(const std::vector<std::string>& names) {
  std::vector<ProcessRef> doomed;
  {
    codemode::MutexLock lock(&mu_);
    for (const std::string& name : names) {
      auto it = inits_.find(name);
      if (it == inits_.end()) continue;
      doomed.push_back(it->second);
      inits_.erase(it);
    }
  }
  for (const ProcessRef& p : doomed) KillChecked(p.pid, p.start_time);
}

void SandboxFactory::Discard(const std::string& name) {
  EndProcesses({name});
  removals_->Add(name, SocketDir(name));
}

void SandboxFactory::Kill(const std::string& name) {
  EndProcesses({name});
  removals_->Add(name, "");
}

void SandboxFactory::RetryRemovals() {
  removals_->RetryDue();
  // Containers podman lost while its OCI runtime holds them are never in a list of podman's:
  // a creation a crash cut short, and podman's removal (the start's sweep) of one. They go
  // from under podman once the sweep's removals have been tried, on a worker: the runtime's
  // commands may take up to --podman_timeout each, and the reaper calls this every second.
  if (removals_->awaiting() == removals_->failing() && strays_due_.exchange(false)) {
    ContainerRuntime* const runtime = runtime_;  // outlives the workers
    workers_->Post([runtime, instance = options_.instance] { runtime->RemoveStrays(kInstanceLabel, instance); });
  }
}

size_t SandboxFactory::removals_awaiting() { return removals_->awaiting(); }

size_t SandboxFactory::removals_failing() { return removals_->failing(); }

void SandboxFactory::RemoveSocketDir(const std::string& name) {
  std::error_code ec;
  fs::remove_all(SocketDir(name), ec);
}

absl::StatusOr<std::vector<ContainerSummary>> SandboxFactory::ListLeftOver() {
  return runtime_->List(kInstanceLabel, options_.instance);
}

void SandboxFactory::Sweep(const std::vector<ContainerSummary>& left_over,
                           const std::set<std::string>& kept) {
  // The stale containers go as discarded ones do, in the background with their socket
  // directories: a restart serves without waiting for podman to remove them (seconds, when
  // many sessions could not be re-attached), and a removal that fails is tried again.
  strays_due_ = true;
  std::set<std::string> stale;
  for (const ContainerSummary& c : left_over) {
    if (!kept.count(c.name)) stale.insert(c.name);
  }
  if (!stale.empty()) {
    spdlog::info("removing {} container(s) of the previous run that cannot be re-attached",
                 stale.size());
  }
  for (const std::string& name : stale) Discard(name);
  std::error_code ec;
  for (fs::directory_iterator it(options_.state_dir + "/c", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!kept.count(name) && !stale.count(name)) {
      std::error_code rm;
      fs::remove_all(it->path(), rm);
    }
  }
}

void SandboxFactory::NoteStartResult(const absl::Status& status) {
  // A stopping daemon's cut commands fail: that is no news of the runtime, nor is a retry
  // coming.
  if (!status.ok() && runtime_->calls_cut()) return;
  bool serving_changed = false;
  {
    codemode::MutexLock lock(&mu_);
    Readiness next{status.ok(), std::string(status.message()), true};
    if (readiness_.checked && next.serving == readiness_.serving &&
        next.reason == readiness_.reason) {
      return;
    }
    serving_changed = next.serving != readiness_.serving;
    readiness_ = std::move(next);
  }
  if (status.ok()) {
    spdlog::info("containers start: health SERVING");
  } else {
    spdlog::error("cannot start containers: {} (health NOT_SERVING; CreateSession answers "
                  "UNAVAILABLE; retrying in the background)", codemode::LogLongText(status.message()));
  }
  if (serving_changed && hooks_.on_readiness_changed) hooks_.on_readiness_changed();
}

Readiness SandboxFactory::readiness() {
  codemode::MutexLock lock(&mu_);
  return readiness_;
}

std::optional<RuntimeInfo> SandboxFactory::runtime_info() {
  codemode::MutexLock lock(&mu_);
  return runtime_info_;
}

std::string SandboxFactory::runtime_error() {
  codemode::MutexLock lock(&mu_);
  return runtime_error_;
}

}  // namespace sandboxd
