#include "sandboxd/session_manager.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "base/notification.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/thread.h"
#include "absl/strings/str_format.h"
#include "base/log_text.h"
#include "base/secret_file.h"
#include "sandboxd/log.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;

}  // namespace

SessionManager::SessionManager(ManagerOptions options, ContainerRuntime* runtime, Clock* clock,
                               RecordStore* records)
    : options_(std::move(options)),
      owned_metrics_(options_.metrics ? nullptr : new SandboxdMetrics()),
      metrics_(options_.metrics ? options_.metrics : owned_metrics_.get()),
      runtime_(runtime), clock_(clock),
      instance_(InstanceId(options_.state_dir)),
      owned_store_(records ? nullptr : new DirRecordStore(options_.state_dir + "/sessions")),
      images_(ImageSet::Parse(options_.image, options_.images)),
      records_(records ? records : owned_store_.get()),
      factory_({options_.state_dir, instance_, options_.image, options_.runner_path,
                options_.js_runner_path, options_.container_env,
                options_.runner_start_timeout, options_.session_uid_first,
                options_.session_uid_count},
               runtime_, &workers_,
               {[this](const RuntimeInfo& info) { return OnProbed(info); },
                [this] { OnReadinessChanged(); }}),
      pools_(&factory_,
             {options_.default_limits, options_.isolation.default_isolation, /*image=*/"",
              Language::kPython},
             {options_.pool_size, options_.js_pool_size, /*refills=*/2, options_.pool_max,
              options_.js_pool_max, options_.pool_shrink_after},
             [this]() -> absl::Status {
               if (!images_.ok()) return images_.status();
               return CheckLanguage(Language::kJavaScript, images_->default_image(), /*refresh_images=*/true);
             },
             options_.js_pool_recheck) {
  env_.timers = &timers_;
  env_.workers = &workers_;
  env_.containers = &factory_;
  env_.records = &records_;
  env_.clock = clock_;
  env_.max_timeout_ms = options_.max_timeout_ms;
  env_.max_output_bytes = options_.max_output_bytes;
  env_.max_file_bytes = options_.max_file_bytes;
  env_.max_display_bytes = options_.max_display_bytes;
  env_.max_queue = options_.max_queue;
  env_.kill_grace = options_.kill_grace;
  env_.runner_share = options_.runner_share;
  env_.slots = this;
  env_.metrics = metrics_;
  metrics_->SetStateSource(this);
}

SessionManager::~SessionManager() {
  metrics_->ClearStateSource(this);  // before the pools go: a scrape reads them
  Shutdown();
  workers_.Stop();  // its tasks use records_ and factory_, which go before it
}

size_t SessionManager::sessions_active() {
  codemode::MutexLock lock(&mu_);  // held for map operations only, never across a session's
  return sessions_.size();
}

std::string SessionManager::NewId(const char* prefix) {
  codemode::MutexLock lock(&mu_);
  return absl::StrFormat("%s%016x", prefix, absl::Uniform<uint64_t>(rng_));
}

absl::Status SessionManager::OnProbed(const RuntimeInfo& info) {
  env_.cgroup_limits = info.cgroup_limits;
  return Recover();
}

void SessionManager::OnReadinessChanged() {
  pools_.SetServing(factory_.readiness().serving);
  codemode::MutexLock lock(&listener_mu_);
  // Always the latest state, so listeners converge even when changes race.
  if (listener_) listener_(readiness());
}

absl::Status SessionManager::Start() {
  return Start(StartWait(options_.start_runtime_wait));
}

absl::Status SessionManager::Start(const StartWait& wait) {
  if (!images_.ok()) return images_.status();
  absl::Status own = codemode::ClaimPrivateDirectory(options_.state_dir, "the state directory", "--state_dir");
  if (!own.ok()) return own;
  std::error_code ec;
  // Ours alone, as the state directory is, whatever the umask or an earlier run left.
  for (const char* sub : {"/sessions", "/c"}) {
    if (!ec) fs::create_directories(options_.state_dir + sub, ec);
    if (!ec) fs::permissions(options_.state_dir + sub, fs::perms::owner_all, ec);
  }
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create state directory ", options_.state_dir, ": ", ec.message()));
  }
  // A runtime that does not answer is logged (readiness) and retried by the pool's thread.
  const bool probed = options_.background ? FirstProbe(wait) : factory_.EnsureProbed().ok();
  if (wait.stop_requested()) return absl::OkStatus();
  if (options_.background) {
    // The images' cache filled before the daemon serves, so that GetInfo lists them from the
    // first call on and answers from the cache (a gateway asks it before each sandbox it
    // places), and before the pools start, which ask what the default image offers (a
    // JavaScript pool holds nothing on an image without nodejs). Inspected on a worker and
    // waited for only so long: until it answers, GetInfo lists no images (ImageInfos). A
    // runtime that did not answer its probe is not waited for at all.
    {
      codemode::MutexLock lock(&images_mu_);
      image_infos_refreshing_ = true;
    }
    workers_.Post([this] { InspectImages(); });
    if (probed) {
      wait.Within(options_.start_images_wait, [this](absl::Duration d) {
        codemode::MutexLock lock(&images_mu_);
        auto inspected = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(images_mu_) {
          return !image_infos_refreshing_;
        };
        return images_mu_.AwaitWithTimeout(absl::Condition(&inspected), d);
      });
      if (wait.stop_requested()) return absl::OkStatus();
    }
    pools_.Start();
    reaper_thread_ = codemode::StartThread("reaper", [this] { ReaperLoop(); });
  }
  return absl::OkStatus();
}

// The runtime's first answer, and the previous run's sessions re-attached with it, before
// the daemon serves, waited for only so long (--start_runtime_wait): a podman that hangs
// keeps neither the socket closed nor a SIGTERM waiting for --podman_timeout. The probe
// goes on, on a worker; until it answers, the runtime counts as failing (NOT_SERVING, and
// a creation answers UNAVAILABLE at once rather than hold its RPC's thread for up to
// --podman_timeout, whatever its caller's deadline).
bool SessionManager::FirstProbe(const StartWait& wait) {
  struct Answer {
    codemode::Notification done;
    std::atomic<bool> ok{false};
  };
  auto answer = std::make_shared<Answer>();
  workers_.Post([this, answer] {
    answer->ok = factory_.EnsureProbed().ok();
    answer->done.Notify();
  });
  if (wait.For([&](absl::Duration d) { return answer->done.WaitForNotificationWithTimeout(d); })) {
    return answer->ok;
  }
  // A stop is no failure of the runtime's: readiness and its log line stay as they are.
  if (!wait.stop_requested()) factory_.NoteProbeOverdue(wait.Waited());
  return false;
}

Readiness SessionManager::readiness() { return factory_.readiness(); }

void SessionManager::SetReadinessListener(std::function<void(const Readiness&)> listener) {
  codemode::MutexLock lock(&listener_mu_);
  listener_ = std::move(listener);
  if (listener_) listener_(readiness());
}

void SessionManager::ReaperLoop() {
  for (;;) {
    {
      codemode::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stop), absl::Seconds(1))) return;
    }
    factory_.RetryRemovals();
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
      s->RecordEgressUse();  // its egress count into its record, now and then
      int64_t idle_ms = now - s->last_used_ms();
      if (s->idle() && idle_ms > absl::ToInt64Milliseconds(options_.idle_ttl)) {
        expired.emplace_back(s->metadata().id, absl::StrCat("idle for ", idle_ms / 1000, " s"));
      }
    }
    for (const auto& [id, why] : expired) {
      spdlog::info("session {} expired ({})", id, codemode::LogLongText(why));
      (void)DeleteFor(id, SandboxdMetrics::EndReason::kIdle);
    }
    std::vector<std::string> forgotten;
    {
      codemode::MutexLock lock(&mu_);
      forgotten = lost_.ExpireBefore(now - absl::ToInt64Milliseconds(options_.lost_session_ttl));
    }
    for (const std::string& id : forgotten) {
      spdlog::info("lost session {} forgotten (--lost_session_ttl); its id is now unknown", id);
    }
  }
}

void SessionManager::Drain(absl::Time calls_end_by) {
  {
    codemode::MutexLock lock(&mu_);
    draining_ = true;
  }
  if (calls_end_by != absl::InfiniteFuture()) factory_.CutOffRuntimeCalls(calls_end_by);
}

void SessionManager::Shutdown() {
  std::map<std::string, std::shared_ptr<Session>> sessions;
  {
    codemode::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = draining_ = true;
    sessions.swap(sessions_);
  }
  pools_.Stop();
  if (reaper_thread_.joinable()) reaper_thread_.join();
  for (auto& [id, s] : sessions) s->Detach();
  metrics_->SessionsEnded(SandboxdMetrics::EndReason::kShutdown, sessions.size());
  spdlog::info("detached {} session(s); their containers stay for the next start", sessions.size());
  // What the start or the pool left queued (an inspection, removals) ends before the stop
  // is reported: by the runtime's cutoff, when one was set.
  workers_.Stop();
}

absl::StatusOr<sandbox::v1::Session> SessionManager::CreateSession(
    const sandbox::v1::CreateSessionRequest& r, const Wanted& wanted) {
  absl::StatusOr<ResolvedLimits> limits =
      ResolveLimits(r.limits(), options_.default_limits, options_.max_limits);
  if (!limits.ok()) return limits.status();
  absl::StatusOr<Isolation> isolation = options_.isolation.Resolve(r.isolation());
  if (!isolation.ok()) return isolation.status();
  if (!images_.ok()) return images_.status();
  absl::StatusOr<ImageChoice> image = images_->Resolve(r.image());
  if (!image.ok()) return image.status();
  absl::StatusOr<Catalog> catalog = Catalog::FromProto(r.catalog());
  if (!catalog.ok()) return catalog.status();
  if (r.label().size() > 1024 || r.owner().size() > 1024) {
    return absl::InvalidArgumentError("label and owner are limited to 1024 bytes");
  }
  absl::StatusOr<Language> language = ParseLanguage(r.runtime());
  if (!language.ok()) return language.status();
  if (absl::Status st = CheckLanguage(*language, *image, /*refresh_images=*/false); !st.ok()) return st;
  absl::StatusOr<std::string> egress = AdmitEgress(r);
  if (!egress.ok()) return egress.status();
  absl::StatusOr<Hold> hold = CheckRoom(RoomOf(r), wanted);
  if (!hold.ok()) return hold.status();
  const bool default_image = image->name == kDefaultImageName;
  const SandboxConfig config = {*limits, *isolation, default_image ? "" : image->reference,
                                *language};
  return CreateAdmitted(r, config, *image, *std::move(catalog), *egress, *hold, wanted);
}

absl::Status SessionManager::CheckLanguage(Language language, const ImageChoice& image,
                                           bool refresh_images) {
  if (language == Language::kPython) return absl::OkStatus();
  if (factory_.options().js_runner_path.empty()) {
    return absl::FailedPreconditionError(
        "this sandboxd has no JavaScript runner (sandbox_runner.js was not found; see --js_runner)");
  }
  for (const sandbox::v1::ImageInfo& info : ImageInfos(refresh_images)) {
    if (info.name() != image.name || info.offers().empty()) continue;
    const std::string want(LanguageOffer(language));
    if (std::find(info.offers().begin(), info.offers().end(), want) == info.offers().end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "image '", image.name, "' does not offer ", want, " (it offers ",
          absl::StrJoin(info.offers(), ", "), "): runtime ", std::string(LanguageName(language)),
          " needs an image that does"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<sandbox::v1::Session> SessionManager::CreateAdmitted(
    const sandbox::v1::CreateSessionRequest& r, const SandboxConfig& config,
    const ImageChoice& image, Catalog catalog, const std::string& egress_policy, Hold hold,
    const Wanted& wanted) {
  const absl::Time began = absl::Now();  // the checks before took microseconds
  // From the pool of its runtime when it is of the default config there.
  std::optional<Sandbox> sb = pools_.Take(config);
  const auto source = sb ? SandboxdMetrics::Source::kPool : SandboxdMetrics::Source::kCold;
  if (!sb) {
    absl::StatusOr<Sandbox> cold = factory_.Start(config, "session");
    if (!cold.ok()) {
      metrics_->SessionCreateFailed();
      return GiveBackRefused(hold, RoomOf(r), cold.status());
    }
    sb = std::move(*cold);
  }
  if (wanted && !wanted()) {  // most of a creation's time is behind it: asked here
    GiveBack(hold);
    factory_.Discard(sb->name);
    metrics_->SessionCreateFailed();
    return CallerGaveUp(r.owner());
  }
  Session::Metadata md;
  md.id = NewId("s-");
  md.label = r.label();
  md.owner = r.owner();
  md.container_name = sb->name;
  md.container_id = sb->id;
  md.limits = config.limits;
  md.isolation = config.isolation;
  md.image = image.name;
  md.language = config.language;
  md.created_at_ms = clock_->NowMs();
  md.uid_lease = std::move(sb->uid);
  std::unique_ptr<SessionEgress> egress;
  if (!egress_policy.empty()) {
    absl::StatusOr<std::unique_ptr<SessionEgress>> opened = OpenEgress(md, egress_policy, *sb->conn);
    if (!opened.ok()) {
      GiveBack(hold);
      factory_.Discard(sb->name);
      metrics_->SessionCreateFailed();
      return opened.status();
    }
    egress = *std::move(opened);
  }
  auto session = Session::Create(&env_, std::move(md), std::move(catalog), std::move(sb->conn),
                                 /*push_catalog=*/true);
  if (egress) session->AttachEgress(std::move(egress));  // before its record is written
  if (absl::Status refused = Register(session, RoomOf(r), hold, wanted); !refused.ok()) {
    metrics_->SessionCreateFailed();
    session->Terminate(absl::IsCancelled(refused) ? "its caller gave up" : "too many sessions");
    LetGo(std::move(session), /*remove_record=*/false);
    return refused;
  }
  const std::string& id = session->metadata().id;
  absl::Status st = records_.Add(id, [&] { return session->Record(); });
  {
    codemode::MutexLock lock(&mu_);
    pinned_.erase(id);  // Register pinned it: not reclaimed before its record exists
    if (!st.ok()) sessions_.erase(id);
  }
  if (!st.ok()) {
    // A session that would not survive a daemon restart is not handed out.
    session->Terminate("its record cannot be written");
    LetGo(std::move(session), /*remove_record=*/false);
    metrics_->SessionCreateFailed();
    spdlog::error("cannot create a session: its record cannot be written: {}",
                  codemode::LogLongText(st.message()));
    return absl::UnavailableError(
        absl::StrCat("cannot write the session record: ", st.message()));
  }
  spdlog::info("session {} created (container {}, owner '{}')", session->metadata().id,
               session->metadata().container_name, codemode::LogQuoted(session->metadata().owner));
  metrics_->SessionCreated(source, config.language, absl::Now() - began);
  // Lost while it was being created (the catalog could not be sent), or while pinned:
  // its tombstone tells.
  if (session->lost()) OnSessionLost(*session);
  return Describe(*session);
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Find(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("session_id is empty");
  codemode::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it != sessions_.end()) return it->second;
  if (const sandbox::v1::Session* lost = lost_.Find(id)) {
    return absl::FailedPreconditionError(absl::StrCat("session lost: ", lost->lost_reason()));
  }
  return NoSuchSession(id);
}

absl::Status SessionManager::NoSuchSession(const std::string& id) {
  if (!factory_.probed()) {  // the previous run not re-attached yet
    return absl::UnavailableError(absl::StrCat(
        "no session '", codemode::LogQuoted(id, 100),
        "' yet: the previous run's sessions are re-attached once the container runtime "
        "answers (health says SERVING then)"));
  }
  return UnknownSessionError(id);
}

absl::Status UnknownSessionError(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("no session '", codemode::LogQuoted(id, 100), "'"));
}

void SessionManager::OnSessionLost(const Session& lost) {
  sandbox::v1::Session tombstone = lost.ToProto();  // before mu_: it takes the session's lock
  Retired retired;
  {
    codemode::MutexLock lock(&mu_);
    // Its CreateSession looks at it again once it unpins it (or retires it: a reclaim).
    if (pinned_.count(lost.metadata().id)) return;
    retired = RetireLocked(lost, std::move(tombstone));
  }
  FinishRetired(std::move(retired));
}

SessionManager::Retired SessionManager::RetireLocked(const Session& lost,
                                                     sandbox::v1::Session tombstone) {
  Retired retired;
  auto it = sessions_.find(lost.metadata().id);
  // Deleted, refused or not registered yet (CreateSession and Reattach check again).
  if (it == sessions_.end() || it->second.get() != &lost) return retired;
  retired.held = std::move(it->second);
  sessions_.erase(it);
  retired.pushed_out = lost_.Add(std::move(tombstone), clock_->NowMs());
  return retired;
}

void SessionManager::FinishRetired(Retired retired) {
  if (!retired.held) return;
  metrics_->SessionsEnded(retired.reclaimed.empty() ? SandboxdMetrics::EndReason::kLost
                                                    : SandboxdMetrics::EndReason::kLimit);
  const std::string& id = retired.held->metadata().id;
  const std::string& owner = retired.held->metadata().owner;
  if (retired.reclaimed.empty()) {
    spdlog::info(
        "session {} (owner '{}') lost: its slot is free; its id answers 'session lost' "
        "until deleted or for --lost_session_ttl",
        id, codemode::LogQuoted(owner));
  } else {
    spdlog::info("session {} (owner '{}') ended to make room for a new session ({})",
                 codemode::LogText(id), codemode::LogQuoted(owner),
                 codemode::LogLongText(retired.reclaimed));
  }
  for (const std::string& old : retired.pushed_out) {
    spdlog::info("lost session {} forgotten (--max_lost_sessions); its id is now unknown", old);
  }
  LetGo(std::move(retired.held), /*remove_record=*/true);
}

// On a worker, with our reference (moved: this may be the session's reader thread, which
// the last reference joins). Its container is being removed already (Session::LoseLocked).
void SessionManager::LetGo(std::shared_ptr<Session> s, bool remove_record) {
  workers_.Post([this, s = std::move(s), remove_record]() mutable {
    const std::string id = s->metadata().id;
    const std::string name = s->metadata().container_name;
    if (remove_record) {
      if (absl::Status st = records_.Remove(id); !st.ok()) {
        spdlog::warn("cannot remove the record of session {}: {}", id,
                     codemode::LogLongText(st.message()));
      }
    }
    s.reset();  // frees its uid and joins its reader
    factory_.RemoveSocketDir(name);
  });
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::SessionForFiles(const std::string& id) {
  absl::StatusOr<std::shared_ptr<Session>> s = Find(id);
  if (!s.ok()) return s.status();
  if ((*s)->lost()) {
    return absl::FailedPreconditionError(absl::StrCat("session lost: ", (*s)->lost_reason()));
  }
  (*s)->Touch();
  return s;
}

absl::StatusOr<sandbox::v1::Session> SessionManager::GetSession(const std::string& id) {
  {
    codemode::MutexLock lock(&mu_);
    if (const sandbox::v1::Session* lost = lost_.Find(id)) return *lost;
  }
  absl::StatusOr<std::shared_ptr<Session>> s = Find(id);
  if (!s.ok()) return s.status();
  return Describe(**s);
}

absl::StatusOr<std::vector<sandbox::v1::Session>> SessionManager::ListSessions(
    const std::string& owner) {
  if (!factory_.probed()) {  // the previous run not re-attached yet
    return absl::UnavailableError(
        "the previous run's sessions are re-attached once the container runtime answers "
        "(health says SERVING then)");
  }
  std::vector<std::shared_ptr<Session>> all;
  std::vector<sandbox::v1::Session> lost;
  {
    codemode::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) {
      if (owner.empty() || s->metadata().owner == owner) all.push_back(s);
    }
    lost = lost_.List(owner);
  }
  std::vector<sandbox::v1::Session> out;
  for (const auto& s : all) out.push_back(Describe(*s));
  for (auto& s : lost) out.push_back(std::move(s));
  return out;
}

absl::Status SessionManager::DeleteSession(const std::string& id) {
  return DeleteFor(id, SandboxdMetrics::EndReason::kClosed);
}

absl::Status SessionManager::DeleteFor(const std::string& id, SandboxdMetrics::EndReason reason) {
  if (id.empty()) return absl::InvalidArgumentError("session_id is empty");
  std::shared_ptr<Session> s;
  {
    codemode::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      if (lost_.Remove(id)) {
        spdlog::info("lost session {} deleted", id);
        return absl::OkStatus();
      }
      return NoSuchSession(id);
    }
    s = std::move(it->second);
    sessions_.erase(it);
  }
  s->Terminate("the session was deleted", sandbox::v1::Finished::CANCELLED);
  metrics_->SessionsEnded(reason);
  if (absl::Status st = records_.Remove(id); !st.ok()) {
    // Harmless: the next start finds the container gone and drops the record.
    spdlog::warn("cannot remove the record of session {}: {}", id,
                 codemode::LogLongText(st.message()));
  }
  LetGo(std::move(s), /*remove_record=*/false);
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
  return Describe(**s);
}

absl::StatusOr<std::shared_ptr<Execution>> SessionManager::Execute(
    const std::string& session_id, ExecutionRequest request,
    std::shared_ptr<ExecutionObserver> observer) {
  auto queue = [&]() -> absl::StatusOr<std::shared_ptr<Execution>> {
    if (request.code.empty()) return absl::InvalidArgumentError("code is empty");
    if (request.code.size() > options_.max_code_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("code is ", request.code.size(),
                                                     " bytes; the limit is ",
                                                     options_.max_code_bytes));
    }
    absl::StatusOr<std::shared_ptr<Session>> s = Find(session_id);
    if (!s.ok()) return s.status();
    if (absl::Status st = CheckExecutionRuntime(request.runtime, (*s)->metadata().language,
                                                session_id);
        !st.ok()) {
      return st;
    }
    return (*s)->Enqueue(std::move(request), std::move(observer));
  };
  absl::StatusOr<std::shared_ptr<Execution>> queued = queue();
  // Refused before it was queued: no Finished will count it.
  if (!queued.ok()) metrics_->ExecutionRejected();
  return queued;
}

}  // namespace sandboxd
