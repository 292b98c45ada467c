#include "sandboxd/warm_pool.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "base/thread.h"
#include "base/log_text.h"
#include "sandboxd/log.h"

namespace sandboxd {

WarmPool::WarmPool(SandboxFactory* factory, size_t target, SandboxConfig config,
                   PoolOptions options)
    : factory_(factory), target_(target), config_(std::move(config)),
      options_(std::move(options)), want_(target) {}

void WarmPool::Start() {
  for (size_t i = 0; i < std::max<size_t>(1, options_.refills); ++i) {
    threads_.push_back(codemode::StartThread(options_.name, [this, i] { Loop(i); }));
  }
}

void WarmPool::SetServing(bool serving) {
  codemode::MutexLock lock(&mu_);
  serving_ = serving;
}

size_t WarmPool::ready() {
  codemode::MutexLock lock(&mu_);
  return ready_.size();
}

size_t WarmPool::target() {
  codemode::MutexLock lock(&mu_);
  return want_;
}

uint64_t WarmPool::taken_total() {
  codemode::MutexLock lock(&mu_);
  return taken_total_;
}

std::string WarmPool::unavailable() {
  codemode::MutexLock lock(&mu_);
  return unavailable_;
}

std::optional<Sandbox> WarmPool::Take() {
  bool counted = false;  // one take is one demand, whatever dead containers it discards
  for (;;) {
    std::optional<Sandbox> sb;
    {
      codemode::MutexLock lock(&mu_);
      if (!std::exchange(counted, true)) ++demand_;
      const size_t cap = std::max(options_.max, want_);
      if (ready_.empty()) {
        want_ = std::min(std::max(want_ + 1, demand_), cap);
        missed_ = true;
        missed_at_ = std::chrono::steady_clock::now();
        return std::nullopt;
      }
      // After a miss, what a refill serves belongs to the same burst.
      if (missed_) want_ = std::min(std::max(want_, demand_), cap);
      sb = std::move(ready_.front());
      ready_.pop_front();
    }
    if (sb->conn->PingSync(absl::Seconds(1)).ok()) {
      codemode::MutexLock lock(&mu_);
      ++taken_total_;
      return sb;
    }
    spdlog::warn("{}: pooled container {} is dead; discarding it", options_.name, sb->name);
    factory_->Discard(sb->name);
  }
}

void WarmPool::Loop(size_t index) {
  absl::Duration backoff = absl::Seconds(1);
  for (;;) {
    bool probe_only = false;
    {
      codemode::MutexLock lock(&mu_);
      AwaitWork(index);
      if (stopping_) return;
      probe_only = ready_.size() + starting_ >= want_;
      if (!probe_only) ++starting_;
    }
    if (index == 0 && !Available()) {
      codemode::MutexLock lock(&mu_);
      if (!probe_only) --starting_;
      continue;
    }
    absl::StatusOr<Sandbox> sb = factory_->Start(config_, probe_only ? "probe" : "pool");
    codemode::MutexLock lock(&mu_);
    if (!probe_only) --starting_;
    if (!sb.ok()) {
      // A probing pool's failures are the daemon's readiness, which the factory logs; the
      // others' (JavaScript's) are said here, once until a start works again.
      const auto level = options_.probes || said_ ? spdlog::level::debug : spdlog::level::warn;
      spdlog::log(level, "{}: cannot start a container: {} (retrying in {})", options_.name,
                  codemode::LogLongText(sb.status().message()), absl::FormatDuration(backoff));
      said_ = true;
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stop), backoff);
      backoff = std::min(backoff * 2, absl::Seconds(15));
      continue;
    }
    said_ = false;
    backoff = absl::Seconds(1);
    // Over the target when it was lowered while this one started.
    if (stopping_ || probe_only || ready_.size() >= want_) {
      factory_->Discard(sb->name);
      if (stopping_) return;
      continue;
    }
    ready_.push_back(std::move(*sb));
    if (ready_.size() >= want_) {
      demand_ = 0;
      missed_ = false;
    }
  }
}

void WarmPool::AwaitWork(size_t index) {
  // Thread 0 also wakes when containers stop starting, to find out when they work again;
  // the others refill only while they start.
  auto work = [this, index]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stopping_) return true;
    if (index > 0) return serving_ && available_ && ready_.size() + starting_ < want_;
    return ready_.size() + starting_ < want_ || (options_.probes && !serving_);
  };
  for (;;) {
    if (index > 0 || want_ <= target_) return mu_.Await(absl::Condition(&work));
    if (mu_.AwaitWithDeadline(absl::Condition(&work), codemode::SteadyAfter(missed_at_, options_.shrink_after))) {
      return;
    }
    const codemode::SteadyTime shrink_at = codemode::SteadyAfter(missed_at_, options_.shrink_after);
    if (std::chrono::steady_clock::now() < shrink_at) continue;  // missed again meanwhile
    want_ = target_;
    demand_ = 0;
    missed_ = false;
    std::vector<Sandbox> over;
    while (ready_.size() > want_) {
      over.push_back(std::move(ready_.back()));
      ready_.pop_back();
    }
    spdlog::info("{}: no miss for {}: back to {} containers, {} removed", options_.name,
                 absl::FormatDuration(options_.shrink_after), want_, over.size());
    mu_.Unlock();
    for (Sandbox& sb : over) {
      sb.conn->Close();
      factory_->Discard(sb.name);
    }
    mu_.Lock();
  }
}

bool WarmPool::Available() {
  if (!options_.available) {
    codemode::MutexLock lock(&mu_);
    available_ = true;
    return true;
  }
  const absl::Status st = options_.available();
  const std::string why(st.message());
  codemode::MutexLock lock(&mu_);
  available_ = st.ok();
  if (why != unavailable_) {  // said once, and again only when it changes
    if (st.ok()) {
      spdlog::info("{}: can start containers again", options_.name);
    } else {
      spdlog::info("{}: holds no containers: {}", options_.name, codemode::LogLongText(why));
    }
    unavailable_ = why;
  }
  if (st.ok()) return true;
  auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  mu_.AwaitWithTimeout(absl::Condition(&stop), options_.recheck);
  return false;
}

void WarmPool::Stop() {
  std::deque<Sandbox> left;
  {
    codemode::MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  {
    // After the joins: a start under way at Stop() is discarded by its thread.
    codemode::MutexLock lock(&mu_);
    left.swap(ready_);
  }
  std::vector<std::string> names;
  for (auto& sb : left) {
    names.push_back(sb.name);
    sb.conn->Close();
  }
  // At once and in one podman call: the daemon is shutting down.
  factory_->RemoveNow(names);
}

WarmPools::WarmPools(SandboxFactory* factory, SandboxConfig defaults, PoolTargets targets,
                     std::function<absl::Status()> js_available, absl::Duration js_recheck)
    : defaults_(ConfigOf(std::move(defaults), Language::kPython)) {
  pools_[Index(Language::kPython)] = std::make_unique<WarmPool>(
      factory, targets.python, defaults_,
      PoolOptions{"warm pool (python)", true, {}, absl::Seconds(30), targets.refills,
                  targets.python_max, targets.shrink_after});
  PoolOptions js{"warm pool (javascript)", /*probes=*/false, std::move(js_available), js_recheck,
                 targets.refills, targets.javascript_max, targets.shrink_after};
  pools_[Index(Language::kJavaScript)] = std::make_unique<WarmPool>(
      factory, targets.javascript, ConfigOf(defaults_, Language::kJavaScript), std::move(js));
}

SandboxConfig WarmPools::ConfigOf(SandboxConfig defaults, Language language) {
  defaults.language = language;
  defaults.image.clear();  // the default image
  return defaults;
}

std::optional<Language> WarmPools::PoolOf(const SandboxConfig& config,
                                          const SandboxConfig& defaults) {
  if (config != ConfigOf(defaults, config.language)) return std::nullopt;
  return config.language;
}

void WarmPools::Start() {
  pool(Language::kPython).Start();  // with any target: it probes
  if (pool(Language::kJavaScript).target() > 0) pool(Language::kJavaScript).Start();
}

void WarmPools::Stop() {
  for (auto& p : pools_) p->Stop();
}

void WarmPools::SetServing(bool serving) {
  for (auto& p : pools_) p->SetServing(serving);
}

std::optional<Sandbox> WarmPools::Take(const SandboxConfig& config) {
  std::optional<Language> language = PoolOf(config, defaults_);
  if (!language) return std::nullopt;
  return pool(*language).Take();
}

size_t WarmPools::target(Language language) {
  WarmPool& p = pool(language);
  return p.unavailable().empty() ? p.target() : 0;
}

}  // namespace sandboxd
