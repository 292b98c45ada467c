// SessionManager: what GetInfo reports (the daemon's settings, its runtime, its images and
// its counts). The rest of SessionManager is in session_manager.cc.
#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "sandboxd/session_manager.h"

namespace sandboxd {
namespace {

void AddLayers(const std::vector<IsolationLayer>& layers,
               google::protobuf::RepeatedPtrField<sandbox::v1::Layer>* out) {
  for (const IsolationLayer& l : layers) {
    sandbox::v1::Layer* layer = out->Add();
    layer->set_name(l.name);
    layer->set_in_force(l.in_force);
    layer->set_detail(l.detail);
  }
}

}  // namespace

std::vector<sandbox::v1::ImageInfo> SessionManager::ImageInfos(bool refresh_if_stale) {
  if (!images_.ok()) return {};
  {
    codemode::MutexLock lock(&images_mu_);
    // podman image inspect costs tens of milliseconds: asked at most every few seconds, so a
    // rebuilt image shows soon, and on a worker, so that no caller waits for it (a gateway
    // asks every endpoint's GetInfo before each new sandbox it places). The start's
    // inspection runs on a worker (Start); a caller finding nothing known and none under
    // way (a manager without background work) inspects inline. Nobody waits under the lock
    // (a GetInfo refreshing it once held a JavaScript CreateSession for 20 ms), nor for
    // another caller's inspection: while the first one runs, nothing is known yet. A podman
    // that hangs then holds one thread, not every caller's for up to --podman_timeout a
    // command each.
    const bool stale = clock_->NowMs() - image_infos_at_ms_ > 5000;
    if (!image_infos_.empty()) {
      if (stale && refresh_if_stale && !image_infos_refreshing_) {
        image_infos_refreshing_ = true;
        workers_.Post([this] { InspectImages(); });
      }
      return image_infos_;
    }
    if (image_infos_refreshing_) return {};
    image_infos_refreshing_ = true;
  }
  return InspectImages();
}

std::vector<sandbox::v1::ImageInfo> SessionManager::InspectImages() {
  std::vector<sandbox::v1::ImageInfo> known;
  {
    codemode::MutexLock lock(&images_mu_);
    known = image_infos_;
  }
  std::vector<sandbox::v1::ImageInfo> infos;
  for (const ImageChoice& choice : images_->all()) {
    sandbox::v1::ImageInfo image;
    image.set_name(choice.name);
    image.set_reference(choice.reference);
    absl::StatusOr<std::vector<std::string>> offers = runtime_->ImageOffers(choice.reference);
    if (offers.ok()) {
      image.set_present(true);
      for (const std::string& offer : *offers) image.add_offers(offer);
    } else if (!absl::IsNotFound(offers.status())) {
      // Podman failed to answer (a timeout, its own error): what was known stays, and an
      // image never seen is not called absent.
      image.set_present(true);
      for (const sandbox::v1::ImageInfo& before : known) {
        if (before.name() == choice.name && before.reference() == choice.reference) image = before;
      }
    }
    infos.push_back(std::move(image));
  }
  codemode::MutexLock lock(&images_mu_);
  image_infos_ = infos;
  image_infos_at_ms_ = clock_->NowMs();
  image_infos_refreshing_ = false;
  return infos;
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
  info.set_max_file_bytes(options_.max_file_bytes);
  info.set_max_display_bytes(options_.max_display_bytes);
  // Python's, as before there were two pools: what it fills to now, as pools[0].target.
  info.set_pool_target(static_cast<uint32_t>(pools_.pool(Language::kPython).target()));
  info.set_max_sessions(options_.max_sessions);
  info.set_executions_total(env_.executions_total);
  info.set_tool_calls_total(env_.tool_calls_total);
  info.set_state_dir(options_.state_dir);
  if (options_.egress) {
    info.set_egress_default(options_.egress->default_policy());
    info.set_egress_max(options_.egress->max_policy());
  }
  info.set_pool_ready(static_cast<uint32_t>(pools_.pool(Language::kPython).ready()));
  for (Language language : {Language::kPython, Language::kJavaScript}) {
    WarmPool& pool = pools_.pool(language);
    sandbox::v1::PoolInfo* p = info.add_pools();
    p->set_runtime(std::string(LanguageName(language)));
    // Said also when no pool is asked for (the pool says it only once its thread has asked):
    // the gateway offers a language's tool by it. A runtime that cannot run wants nothing.
    std::string unavailable = pool.unavailable();
    if (unavailable.empty() && images_.ok()) {
      unavailable = std::string(CheckLanguage(language, images_->default_image(), /*refresh_images=*/false).message());
    }
    p->set_target(unavailable.empty() ? static_cast<uint32_t>(pools_.target(language)) : 0);
    p->set_ready(static_cast<uint32_t>(pool.ready()));
    p->set_taken_total(pool.taken_total());
    p->set_unavailable(unavailable);
  }
  info.set_default_isolation(ToProto(options_.isolation.default_isolation));
  for (Isolation i : options_.isolation.AllowedList()) info.add_allowed_isolations(ToProto(i));
  // Images are Podman's: a daemon whose only isolation is wasm runs none.
  const std::vector<Isolation> allowed = options_.isolation.AllowedList();
  if (std::any_of(allowed.begin(), allowed.end(), [](Isolation i) { return i != Isolation::kWasm; })) {
    for (const sandbox::v1::ImageInfo& image : ImageInfos()) *info.add_images() = image;
  }
  {
    codemode::MutexLock lock(&mu_);
    info.set_sessions(static_cast<uint32_t>(sessions_.size()));
    info.set_lost_sessions(static_cast<uint32_t>(lost_.size()));
    info.set_sessions_reclaimed_total(reclaimed_total_);
  }
  std::optional<RuntimeInfo> runtime = factory_.runtime_info();
  std::string runtime_error = factory_.runtime_error();
  Readiness readiness = factory_.readiness();
  if (runtime) {
    info.set_podman_version(runtime->version);
    info.set_oci_runtime(runtime->oci_runtime);
    info.set_rootless(runtime->rootless);
    const char* mode = runtime->cgroup_limits ? "cgroup" : "rlimit";
    info.set_memory_enforcement(mode);
    info.set_pids_enforcement(mode);
    info.set_cpu_enforced(runtime->cgroup_limits);
    info.set_gvisor_version(runtime->gvisor_version);
    info.set_gvisor_platform(runtime->gvisor_platform);
    for (const auto& n : runtime->notes) info.add_notes(n);
  } else {
    info.add_notes(absl::StrCat("container runtime unavailable: ", runtime_error));
  }
  DescribeIsolations(runtime, runtime_error, &info);
  info.set_serving(readiness.serving);
  // (A failed probe that is also why health is NOT_SERVING is said once, above.)
  if (!readiness.serving && (runtime || readiness.reason != runtime_error)) {
    info.add_notes(absl::StrCat("cannot start containers (health NOT_SERVING): ",
                                readiness.reason));
  }
  return info;
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::FindOwned(const std::string& id,
                                                                  const std::string& owner) {
  // Another owner's session must not be told apart from a missing one: not by its code,
  // not by its message, and not by being lost.
  {
    codemode::MutexLock lock(&mu_);
    if (const sandbox::v1::Session* lost = lost_.Find(id)) {
      if (!owner.empty() && lost->owner() != owner) return NoSuchSession(id);
      return absl::FailedPreconditionError(absl::StrCat("session lost: ", lost->lost_reason()));
    }
  }
  absl::StatusOr<std::shared_ptr<Session>> found = Find(id);
  if (!found.ok()) return found.status();
  if (!owner.empty() && (*found)->metadata().owner != owner) return NoSuchSession(id);
  return found;
}

absl::StatusOr<sandbox::v1::SessionStats> SessionManager::GetSessionStats(
    const std::string& id, const std::string& owner) {
  absl::StatusOr<std::shared_ptr<Session>> found = FindOwned(id, owner);
  if (!found.ok()) return found.status();
  const Session::Metadata& m = (*found)->metadata();
  if ((*found)->lost()) {
    return absl::FailedPreconditionError(absl::StrCat("session lost: ", (*found)->lost_reason()));
  }
  absl::StatusOr<ResourceUsage> u = runtime_->Usage(m.container_name, m.isolation);
  if (!u.ok()) {
    return absl::Status(u.status().code(), absl::StrCat("cannot read the resource use of session ",
                                                        id, ": ", u.status().message()));
  }
  if (u->source == "procfs") {
    // Without cgroups the limits are rlimits of each process (or of the container's user),
    // which nothing on the host sums: the session's own limits are the ones in force.
    u->memory_limit_bytes = m.limits.memory_bytes;
    u->pids_limit = m.limits.pids;
  }
  sandbox::v1::SessionStats stats;
  stats.set_session_id(id);
  stats.set_source(u->source);
  stats.set_cpu_time_ms(u->cpu_time_ns / 1000000);
  stats.set_memory_bytes(u->memory_bytes);
  stats.set_memory_peak_bytes(u->memory_peak_bytes);
  stats.set_memory_limit_bytes(u->memory_limit_bytes);
  auto clamp32 = [](uint64_t v) { return static_cast<uint32_t>(std::min<uint64_t>(v, UINT32_MAX)); };
  stats.set_processes(clamp32(u->processes));
  stats.set_pids_limit(clamp32(u->pids_limit));
  stats.set_workspace_known(u->workspace_known);
  stats.set_workspace_bytes(u->workspace_bytes);
  stats.set_workspace_limit_bytes(u->workspace_limit_bytes);
  stats.set_pss_bytes(u->pss_bytes);
  stats.set_kernel_memory_bytes(u->kernel_memory_bytes);
  return stats;
}

sandbox::v1::Session SessionManager::Describe(const Session& session) {
  sandbox::v1::Session p = session.ToProto();
  if (p.isolation() != sandbox::v1::ISOLATION_WASM) return p;
  // Every start applies the layers the probe found (the jail refuses to start otherwise).
  if (std::optional<RuntimeInfo> runtime = factory_.runtime_info()) {
    AddLayers(runtime->wasm_layers, p.mutable_layers());
  }
  return p;
}

void SessionManager::DescribeIsolations(const std::optional<RuntimeInfo>& runtime,
                                        const std::string& runtime_error, sandbox::v1::Info* info) {
  for (Isolation i : {Isolation::kContainer, Isolation::kGvisor, Isolation::kWasm}) {
    sandbox::v1::IsolationInfo* out = info->add_isolations();
    out->set_isolation(ToProto(i));
    if (!options_.isolation.Allows(i)) {
      out->set_detail("not in use by this daemon (sandboxd --isolation, --allowed_isolations)");
      continue;
    }
    out->set_available(runtime.has_value());
    if (!runtime) {
      out->set_detail(runtime_error);
    } else if (i == Isolation::kWasm) {
      out->set_detail(runtime->wasm_version);
      AddLayers(runtime->wasm_layers, out->mutable_layers());
    } else {
      out->set_detail(i == Isolation::kGvisor ? runtime->gvisor_version
                                               : absl::StrCat(runtime->version, ", ", runtime->oci_runtime));
    }
  }
}

}  // namespace sandboxd
