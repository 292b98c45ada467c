#include "sandboxd/session_manager.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/thread.h"
#include "absl/strings/str_format.h"
#include "sandboxd/log.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;

constexpr char kInstanceLabel[] = "io.sandboxd.instance";
constexpr char kStateDirLabel[] = "io.sandboxd.state-dir";
constexpr char kRoleLabel[] = "io.sandboxd.role";
constexpr char kUidLabel[] = "io.sandboxd.uid";

// FNV-1a: a stable id of the state directory, so several daemons (root, users, tests)
// never touch each other's containers.
std::string InstanceId(const std::string& state_dir) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : state_dir) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%012x", h & 0xffffffffffffull);
}

SessionRecord RecordOf(const Session& s) {
  return {s.ToProto(), s.catalog().ToProto(), s.metadata().container_name};
}

// Once the runner listens, its socket directory stops being writable from the container:
// the runner (uid 65534, or a subordinate uid when rootless) is not the directory's owner,
// so user code can neither fill the host's disk through it, nor leave files sandboxd
// cannot delete, nor swap the socket for a symlink that a restarted sandboxd would follow.
void SealSocketDir(const std::string& dir) {
  if (chmod(dir.c_str(), 0755) != 0) {
    spdlog::warn("cannot make {} read-only for its sandbox: {}", dir, strerror(errno));
  }
}

}  // namespace

SessionManager::SessionManager(ManagerOptions options, ContainerRuntime* runtime, Clock* clock,
                               RecordStore* records)
    : options_(std::move(options)), runtime_(runtime), clock_(clock),
      instance_(InstanceId(options_.state_dir)),
      owned_store_(records ? nullptr : new DirRecordStore(options_.state_dir + "/sessions")),
      records_(records ? records : owned_store_.get()) {
  env_.timers = &timers_;
  env_.workers = &workers_;
  env_.runtime = runtime_;
  env_.clock = clock_;
  env_.max_timeout_ms = options_.max_timeout_ms;
  env_.max_output_bytes = options_.max_output_bytes;
  env_.max_queue = options_.max_queue;
  env_.kill_grace = options_.kill_grace;
  env_.executions_total = &executions_total_;
  env_.tool_calls_total = &tool_calls_total_;
  env_.on_catalog_changed = [this](const Session& s) {
    absl::Status st = records_.Update(s.metadata().id, [&s] { return RecordOf(s); });
    if (!st.ok()) {
      spdlog::error("session {}: cannot record its new catalog ({}); after a daemon restart "
                    "it would have the old one", s.metadata().id, st.message());
    }
  };
}

SessionManager::~SessionManager() { Shutdown(); }

std::string SessionManager::SocketDir(const std::string& container_name) const {
  return absl::StrCat(options_.state_dir, "/c/", container_name);
}

std::string SessionManager::NewId(const char* prefix) {
  codemode::MutexLock lock(&mu_);
  return absl::StrFormat("%s%016x", prefix, absl::Uniform<uint64_t>(rng_));
}

absl::Status SessionManager::EnsureProbed() {
  {
    codemode::MutexLock lock(&mu_);
    if (runtime_info_) return absl::OkStatus();
  }
  absl::StatusOr<RuntimeInfo> info = runtime_->Probe();
  if (!info.ok()) {
    absl::Status error = absl::UnavailableError(info.status().message());
    {
      codemode::MutexLock lock(&mu_);
      runtime_error_ = std::string(info.status().message());
    }
    NoteStartResult(error);
    return error;
  }
  bool recover = false;
  {
    codemode::MutexLock lock(&mu_);
    spdlog::info("container runtime: {}, OCI runtime {}, {}, cgroup {}, limits via {}",
                 info->version, info->oci_runtime, info->rootless ? "rootless" : "rootful",
                 info->cgroup_version, info->cgroup_limits ? "cgroups" : "rlimits");
    for (const auto& n : info->notes) spdlog::warn("{}", n);
    runtime_info_ = *info;
    runtime_error_.clear();
    env_.cgroup_limits = info->cgroup_limits;
    recover = !recovered_;
    recovered_ = true;
  }
  if (recover) Recover();
  return absl::OkStatus();
}

absl::Status SessionManager::Start() {
  std::error_code ec;
  fs::create_directories(options_.state_dir + "/sessions", ec);
  fs::create_directories(options_.state_dir + "/c", ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create state directory ", options_.state_dir, ": ", ec.message()));
  }
  chmod(options_.state_dir.c_str(), 0700);
  // A runtime that does not answer is logged (NoteStartResult) and retried by PoolLoop.
  (void)EnsureProbed();
  if (options_.background) {
    pool_thread_ = codemode::StartThread("warm pool", [this] { PoolLoop(); });
    reaper_thread_ = codemode::StartThread("reaper", [this] { ReaperLoop(); });
  }
  return absl::OkStatus();
}

Readiness SessionManager::readiness() {
  codemode::MutexLock lock(&mu_);
  return readiness_;
}

void SessionManager::SetReadinessListener(std::function<void(const Readiness&)> listener) {
  codemode::MutexLock lock(&listener_mu_);
  listener_ = std::move(listener);
  if (listener_) listener_(readiness());
}

void SessionManager::NotifyReadiness() {
  codemode::MutexLock lock(&listener_mu_);
  // Always the latest state, so listeners converge even when changes race.
  if (listener_) listener_(readiness());
}

void SessionManager::NoteStartResult(const absl::Status& status) {
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
                  "UNAVAILABLE; retrying in the background)", status.message());
  }
  if (serving_changed) NotifyReadiness();
}

void SessionManager::Recover() {
  absl::StatusOr<std::vector<ContainerSummary>> containers = runtime_->List(kInstanceLabel, instance_);
  if (!containers.ok()) {
    spdlog::error("cannot list containers of the previous run: {}", containers.status().message());
    return;
  }
  absl::StatusOr<SessionRecords::Loaded> loaded = records_.Load();
  if (!loaded.ok()) {
    // Removing "stale" containers now could end sessions whose records are only out of
    // reach for the moment; they stay until a start that can read the records.
    spdlog::error("cannot read the session records ({}); the {} container(s) of the previous "
                  "run are left alone", loaded.status().message(), containers->size());
    return;
  }
  std::map<std::string, ContainerSummary> by_name;
  for (auto& c : *containers) by_name[c.name] = c;
  std::set<std::string> kept;
  auto drop = [this](const std::string& id, const std::string& why) {
    spdlog::warn("session {} cannot be re-attached: {}", id, why);
    if (absl::Status st = records_.Remove(id); !st.ok()) {
      spdlog::error("cannot remove the record of session {}: {}", id, st.message());
    }
  };
  for (const auto& [id, why] : loaded->broken) drop(id, why);
  for (const SessionRecord& record : loaded->records) {
    std::string why;
    if (Reattach(record, by_name, &why)) {
      kept.insert(record.container_name);
    } else {
      drop(record.session.id(), why);
    }
  }
  std::vector<std::string> stale;
  for (const auto& [name, c] : by_name) {
    if (!kept.count(name)) stale.push_back(name);
  }
  if (!stale.empty()) {
    spdlog::info("removing {} container(s) of the previous run that cannot be re-attached",
                 stale.size());
    if (absl::Status s = runtime_->Remove(stale); !s.ok()) {
      spdlog::error("cannot remove stale containers: {}", s.message());
    }
  }
  std::error_code ec;
  for (fs::directory_iterator it(options_.state_dir + "/c", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (!kept.count(it->path().filename().string())) {
      std::error_code rm;
      fs::remove_all(it->path(), rm);
    }
  }
}

bool SessionManager::Reattach(const SessionRecord& record,
                              const std::map<std::string, ContainerSummary>& containers,
                              std::string* why) {
  const std::string& name = record.container_name;
  auto it = containers.find(name);
  if (it == containers.end() || !it->second.running) {
    *why = "its container is gone";
    return false;
  }
  absl::StatusOr<Catalog> catalog = Catalog::FromProto(record.catalog);
  if (!catalog.ok()) {
    *why = std::string(catalog.status().message());
    return false;
  }
  SealSocketDir(SocketDir(name));  // records of older versions left it writable
  absl::StatusOr<std::unique_ptr<RunnerConnection>> conn =
      RunnerConnection::Connect(SocketDir(name) + "/runner.sock", absl::Seconds(5));
  if (!conn.ok()) {
    *why = std::string(conn.status().message());
    return false;
  }
  const sandbox::v1::Session& sp = record.session;
  Session::Metadata md;
  md.id = sp.id();
  md.label = sp.label();
  md.owner = sp.owner();
  md.container_name = name;
  md.container_id = it->second.id;
  md.limits = FromProto(sp.limits());
  md.created_at_ms = sp.created_at_ms();
  if (auto uid = it->second.labels.find(kUidLabel); uid != it->second.labels.end()) {
    uint32_t value = 0;
    if (absl::SimpleAtoi(uid->second, &value)) md.uid_lease = uids_->Claim(value);
  }
  uint64_t execs = (*conn)->ready().execs;
  auto session = Session::Create(&env_, std::move(md), std::move(*catalog), std::move(*conn),
                                 /*push_catalog=*/false);
  records_.Adopt(sp.id());
  {
    codemode::MutexLock lock(&mu_);
    sessions_[sp.id()] = session;
  }
  spdlog::info("re-attached session {} (container {}, {} executions in its namespace)", sp.id(),
               name, execs);
  return true;
}

absl::StatusOr<SessionManager::Sandbox> SessionManager::StartSandbox(const ResolvedLimits& limits,
                                                                     const std::string& role) {
  Sandbox sb;
  sb.name = absl::StrCat("sbx-", instance_, "-", NewId("").substr(0, 12));
  std::string dir = SocketDir(sb.name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  // The runner runs as uid 65534 (rootless: a subordinate uid) and must create its socket
  // here; the state directory above is 0700, so no other host user can reach it.
  chmod(dir.c_str(), 0777);
  ContainerSpec spec;
  spec.name = sb.name;
  spec.image = options_.image;
  spec.limits = limits;
  spec.socket_dir = dir;
  spec.runner_path = options_.runner_path;
  spec.labels = {{kInstanceLabel, instance_}, {kStateDirLabel, options_.state_dir}, {kRoleLabel, role}};
  spec.env = options_.container_env;
  bool per_session_uid;
  {
    codemode::MutexLock lock(&mu_);
    per_session_uid = !env_.cgroup_limits;
  }
  if (per_session_uid) {
    // The process rlimit counts per user id: a uid of its own makes it this session's.
    sb.uid = uids_->Acquire();
    if (!sb.uid) {
      fs::remove_all(dir, ec);
      return absl::ResourceExhaustedError(absl::StrCat(
          "all ", uids_->count(), " per-session user ids are in use"));
    }
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
    DiscardSandbox(sb.name);
    return absl::UnavailableError(absl::StrCat("the sandbox runner did not start: ",
                                               conn.status().message()));
  }
  SealSocketDir(dir);
  sb.conn = std::move(*conn);
  return sb;
}

void SessionManager::DiscardSandbox(const std::string& name) {
  std::string dir = SocketDir(name);
  workers_.Post([this, name, dir] {
    if (absl::Status s = runtime_->Remove({name}); !s.ok()) {
      spdlog::error("cannot remove container {}: {}", name, s.message());
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
  });
}

std::optional<SessionManager::Sandbox> SessionManager::TakeFromPool() {
  for (;;) {
    std::optional<Sandbox> sb;
    {
      codemode::MutexLock lock(&mu_);
      if (pool_.empty()) return std::nullopt;
      sb = std::move(pool_.front());
      pool_.pop_front();
    }
    // A pooled container may have died while it waited.
    if (sb->conn->PingSync(absl::Seconds(1)).ok()) return sb;
    spdlog::warn("pooled container {} is dead; discarding it", sb->name);
    DiscardSandbox(sb->name);
  }
}

void SessionManager::PoolLoop() {
  absl::Duration backoff = absl::Seconds(1);
  for (;;) {
    bool probe_only = false;
    {
      codemode::MutexLock lock(&mu_);
      // Also wakes when containers stop starting, to find out when they work again.
      auto need = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || pool_.size() < options_.pool_size || !readiness_.serving;
      };
      mu_.Await(absl::Condition(&need));
      if (stopping_) return;
      probe_only = pool_.size() >= options_.pool_size;
    }
    absl::Status probe = EnsureProbed();
    absl::StatusOr<Sandbox> sb =
        probe.ok() ? StartSandbox(options_.default_limits, probe_only ? "probe" : "pool")
                   : absl::StatusOr<Sandbox>(probe);
    if (probe.ok()) NoteStartResult(sb.status());
    codemode::MutexLock lock(&mu_);
    if (!sb.ok()) {
      spdlog::debug("warm pool: cannot start a container: {} (retrying in {})",
                    sb.status().message(), absl::FormatDuration(backoff));
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stop), backoff);
      backoff = std::min(backoff * 2, absl::Seconds(15));
      if (!probe.ok()) runtime_info_.reset();
      continue;
    }
    backoff = absl::Seconds(1);
    if (stopping_ || probe_only) {
      DiscardSandbox(sb->name);
      if (stopping_) return;
      continue;
    }
    pool_.push_back(std::move(*sb));
  }
}

void SessionManager::ReaperLoop() {
  for (;;) {
    {
      codemode::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stop), absl::Seconds(1))) return;
    }
    int64_t now = clock_->NowMs();
    // Sessions' locks are taken only after the manager's is released: a session that is
    // busy never holds up the manager (and so every other session's RPCs).
    std::vector<std::shared_ptr<Session>> all;
    {
      codemode::MutexLock lock(&mu_);
      for (const auto& [id, s] : sessions_) all.push_back(s);
    }
    std::vector<std::pair<std::string, std::string>> expired;
    for (const auto& s : all) {
      int64_t idle_ms = now - s->last_used_ms();
      if (s->idle() && idle_ms > absl::ToInt64Milliseconds(options_.idle_ttl)) {
        expired.emplace_back(s->metadata().id, absl::StrCat("idle for ", idle_ms / 1000, " s"));
      }
    }
    for (const auto& [id, why] : expired) {
      spdlog::info("session {} expired ({})", id, why);
      (void)DeleteSession(id);
    }
  }
}

void SessionManager::Shutdown() {
  std::deque<Sandbox> pool;
  std::map<std::string, std::shared_ptr<Session>> sessions;
  {
    codemode::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    pool.swap(pool_);
    sessions.swap(sessions_);
  }
  if (pool_thread_.joinable()) pool_thread_.join();
  if (reaper_thread_.joinable()) reaper_thread_.join();
  std::vector<std::string> names;
  for (auto& sb : pool) {
    names.push_back(sb.name);
    sb.conn->Close();
  }
  if (!names.empty()) {
    if (absl::Status s = runtime_->Remove(names); !s.ok()) {
      spdlog::error("cannot remove pool containers: {}", s.message());
    }
    for (const auto& n : names) {
      std::error_code ec;
      fs::remove_all(SocketDir(n), ec);
    }
  }
  for (auto& [id, s] : sessions) s->Detach();
  spdlog::info("detached {} session(s); their containers stay for the next start", sessions.size());
}

absl::StatusOr<sandbox::v1::Session> SessionManager::CreateSession(
    const sandbox::v1::CreateSessionRequest& r) {
  absl::StatusOr<ResolvedLimits> limits =
      ResolveLimits(r.limits(), options_.default_limits, options_.max_limits);
  if (!limits.ok()) return limits.status();
  absl::StatusOr<Catalog> catalog = Catalog::FromProto(r.catalog());
  if (!catalog.ok()) return catalog.status();
  if (r.label().size() > 1024 || r.owner().size() > 1024) {
    return absl::InvalidArgumentError("label and owner are limited to 1024 bytes");
  }
  {
    codemode::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the daemon is shutting down");
    if (sessions_.size() >= options_.max_sessions) {
      return absl::ResourceExhaustedError(
          absl::StrCat("too many sessions (the limit is ", options_.max_sessions, ")"));
    }
  }
  std::optional<Sandbox> sb;
  if (*limits == options_.default_limits) sb = TakeFromPool();
  if (!sb) {
    if (absl::Status s = EnsureProbed(); !s.ok()) return s;
    absl::StatusOr<Sandbox> cold = StartSandbox(*limits, "session");
    NoteStartResult(cold.status());
    if (!cold.ok()) return cold.status();
    sb = std::move(*cold);
  }
  Session::Metadata md;
  md.id = NewId("s-");
  md.label = r.label();
  md.owner = r.owner();
  md.container_name = sb->name;
  md.container_id = sb->id;
  md.limits = *limits;
  md.created_at_ms = clock_->NowMs();
  md.uid_lease = std::move(sb->uid);
  auto session = Session::Create(&env_, std::move(md), std::move(*catalog), std::move(sb->conn),
                                 /*push_catalog=*/true);
  bool admitted;
  {
    codemode::MutexLock lock(&mu_);
    admitted = sessions_.size() < options_.max_sessions && !stopping_;
    if (admitted) sessions_[session->metadata().id] = session;
  }
  if (!admitted) {
    session->Terminate("too many sessions");
    return absl::ResourceExhaustedError(
        absl::StrCat("too many sessions (the limit is ", options_.max_sessions, ")"));
  }
  const std::string& id = session->metadata().id;
  if (absl::Status st = records_.Add(id, [&] { return RecordOf(*session); }); !st.ok()) {
    // A session that would not survive a daemon restart is not handed out.
    {
      codemode::MutexLock lock(&mu_);
      sessions_.erase(id);
    }
    session->Terminate("its record cannot be written");
    DiscardSandbox(session->metadata().container_name);
    workers_.Post([session]() mutable { session.reset(); });  // joins its reader off this thread
    spdlog::error("cannot create a session: its record cannot be written: {}", st.message());
    return absl::UnavailableError(
        absl::StrCat("cannot write the session record: ", st.message()));
  }
  spdlog::info("session {} created (container {}, owner '{}')", session->metadata().id,
               session->metadata().container_name, session->metadata().owner);
  return session->ToProto();
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Find(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("session_id is empty");
  codemode::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id.substr(0, 100), "'"));
  return it->second;
}

absl::StatusOr<sandbox::v1::Session> SessionManager::GetSession(const std::string& id) {
  absl::StatusOr<std::shared_ptr<Session>> s = Find(id);
  if (!s.ok()) return s.status();
  return (*s)->ToProto();
}

std::vector<sandbox::v1::Session> SessionManager::ListSessions(const std::string& owner) {
  std::vector<std::shared_ptr<Session>> all;
  {
    codemode::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) {
      if (owner.empty() || s->metadata().owner == owner) all.push_back(s);
    }
  }
  std::vector<sandbox::v1::Session> out;
  for (const auto& s : all) out.push_back(s->ToProto());
  return out;
}

absl::Status SessionManager::DeleteSession(const std::string& id) {
  std::shared_ptr<Session> s;
  {
    codemode::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id.substr(0, 100), "'"));
    s = std::move(it->second);
    sessions_.erase(it);
  }
  s->Terminate("the session was deleted", sandbox::v1::Finished::CANCELLED);
  if (absl::Status st = records_.Remove(id); !st.ok()) {
    // Harmless: the next start finds the container gone and drops the record.
    spdlog::warn("cannot remove the record of session {}: {}", id, st.message());
  }
  std::string dir = SocketDir(s->metadata().container_name);
  workers_.Post([dir, s]() mutable {
    // Dropping the last reference here joins the reader thread off the gRPC thread.
    s.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  });
  spdlog::info("session {} deleted", id);
  return absl::OkStatus();
}

absl::StatusOr<sandbox::v1::Session> SessionManager::ResetSession(const std::string& id) {
  absl::StatusOr<std::shared_ptr<Session>> s = Find(id);
  if (!s.ok()) return s.status();
  if (absl::Status st = (*s)->Reset(absl::Seconds(30) + absl::Milliseconds(options_.max_timeout_ms));
      !st.ok()) {
    return st;
  }
  return (*s)->ToProto();
}

absl::StatusOr<std::shared_ptr<Execution>> SessionManager::Execute(
    const std::string& session_id, ExecutionRequest request,
    std::shared_ptr<ExecutionObserver> observer) {
  if (request.code.empty()) return absl::InvalidArgumentError("code is empty");
  if (request.code.size() > options_.max_code_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("code is ", request.code.size(),
                                                   " bytes; the limit is ",
                                                   options_.max_code_bytes));
  }
  absl::StatusOr<std::shared_ptr<Session>> s = Find(session_id);
  if (!s.ok()) return s.status();
  return (*s)->Enqueue(std::move(request), std::move(observer));
}

sandbox::v1::Info SessionManager::GetInfo() {
  sandbox::v1::Info info;
  info.set_version(options_.version);
  info.set_image(options_.image);
  *info.mutable_default_limits() = ToProto(options_.default_limits);
  *info.mutable_max_limits() = ToProto(options_.max_limits);
  info.set_max_timeout_ms(options_.max_timeout_ms);
  info.set_max_code_bytes(options_.max_code_bytes);
  info.set_max_output_bytes(options_.max_output_bytes);
  info.set_pool_target(options_.pool_size);
  info.set_max_sessions(options_.max_sessions);
  info.set_executions_total(executions_total_);
  info.set_tool_calls_total(tool_calls_total_);
  info.set_state_dir(options_.state_dir);
  codemode::MutexLock lock(&mu_);
  info.set_pool_ready(static_cast<uint32_t>(pool_.size()));
  info.set_sessions(static_cast<uint32_t>(sessions_.size()));
  if (runtime_info_) {
    info.set_podman_version(runtime_info_->version);
    info.set_oci_runtime(runtime_info_->oci_runtime);
    info.set_rootless(runtime_info_->rootless);
    const char* mode = runtime_info_->cgroup_limits ? "cgroup" : "rlimit";
    info.set_memory_enforcement(mode);
    info.set_pids_enforcement(mode);
    info.set_cpu_enforced(runtime_info_->cgroup_limits);
    for (const auto& n : runtime_info_->notes) info.add_notes(n);
  } else {
    info.add_notes(absl::StrCat("container runtime unavailable: ", runtime_error_));
  }
  info.set_serving(readiness_.serving);
  // (A failed probe that is also why health is NOT_SERVING is said once, above.)
  if (!readiness_.serving && (runtime_info_ || readiness_.reason != runtime_error_)) {
    info.add_notes(absl::StrCat("cannot start containers (health NOT_SERVING): ",
                                readiness_.reason));
  }
  return info;
}

}  // namespace sandboxd
