// Watching credentials' resource lists. See resource_watch.h.
#include "bridge/resource_watch.h"

#include <chrono>
#include <vector>

#include "base/thread.h"

namespace gateway {

namespace {

codemode::ThreadPoolOptions LookOptions() {
  codemode::ThreadPoolOptions o;
  o.name = "resource look";
  o.max_threads = ResourceWatch::kMaxLooks;
  o.max_idle = ResourceWatch::kMaxLooks;
  o.idle_timeout = absl::Minutes(1);
  return o;
}

}  // namespace

ResourceWatch::ResourceWatch(FingerprintFn fingerprint, absl::Duration interval,
                             absl::Duration look_timeout)
    : fingerprint_(std::move(fingerprint)), interval_(interval), look_timeout_(look_timeout),
      looks_(LookOptions()) {}

ResourceWatch::~ResourceWatch() {
  std::vector<std::shared_ptr<codemode::CancelToken>> looks;
  {
    codemode::MutexLock lock(&mu_);
    stopping_ = true;
    for (const auto& [id, r] : running_) looks.push_back(r.cancel);
  }
  for (const auto& look : looks) look->Cancel("the gateway is stopping");
  if (thread_.joinable()) thread_.join();
  if (timer_.joinable()) timer_.join();
  looks_.Stop();
}

std::shared_ptr<void> ResourceWatch::Subscribe(const std::string& credential, std::function<void()> ready,
                                               std::function<void()> changed) {
  uint64_t id = 0;
  {
    codemode::MutexLock lock(&mu_);
    id = ++next_id_;
    subscribers_[id] = Subscriber{credential, std::move(ready), std::move(changed)};
    credentials_[credential].poked = true;  // its first look makes it ready
    if (!thread_.joinable() && !stopping_) {
      thread_ = codemode::StartThread("resource watch", [this] { Loop(); });
      timer_ = codemode::StartThread("resource timer", [this] { Timer(); });
    }
  }
  // Ends the subscription when the subscriber drops it. The watch outlives its subscribers
  // (the tool owns it; sessions end before the tool).
  class Subscription {
   public:
    Subscription(ResourceWatch* watch, uint64_t id) : watch_(watch), id_(id) {}
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    ~Subscription() { watch_->Unsubscribe(id_); }

   private:
    ResourceWatch* const watch_;
    const uint64_t id_;
  };
  return std::make_shared<Subscription>(this, id);
}

void ResourceWatch::Unsubscribe(uint64_t id) {
  codemode::MutexLock lock(&mu_);
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return;
  const std::string credential = it->second.credential;
  subscribers_.erase(it);
  for (const auto& [other, s] : subscribers_) {
    if (s.credential == credential) return;
  }
  // Nobody listens: forget its last look (a look under way finds it gone and drops out).
  credentials_.erase(credential);
}

void ResourceWatch::Poke(const std::string& credential) {
  codemode::MutexLock lock(&mu_);
  auto it = credentials_.find(credential);
  if (it != credentials_.end()) it->second.poked = true;
}

bool ResourceWatch::Due() const {
  if (static_cast<int>(running_.size()) >= kMaxLooks) return false;
  for (const auto& [credential, state] : credentials_) {
    if (state.poked && !state.looking) return true;
  }
  return false;
}

void ResourceWatch::Loop() {
  using Steady = std::chrono::steady_clock;
  codemode::SteadyTime next_round = codemode::SteadyDeadline(interval_);
  codemode::MutexLock lock(&mu_);
  while (true) {
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || Due(); };
    if (interval_ > absl::ZeroDuration()) {
      mu_.AwaitWithDeadline(absl::Condition(&woken), next_round);
    } else {
      mu_.Await(absl::Condition(&woken));
    }
    if (stopping_) return;
    if (interval_ > absl::ZeroDuration() && Steady::now() >= next_round) {
      next_round = codemode::SteadyDeadline(interval_);
      for (auto& [credential, state] : credentials_) state.poked = true;
    }
    for (auto& [credential, state] : credentials_) {
      if (static_cast<int>(running_.size()) >= kMaxLooks) break;
      if (!state.poked || state.looking) continue;
      state.poked = false;
      state.looking = true;
      auto cancel = std::make_shared<codemode::CancelToken>();
      const uint64_t look = ++next_look_;
      running_[look] = Running{cancel, codemode::SteadyDeadline(look_timeout_)};
      absl::Status started = looks_.Schedule([this, credential = credential, cancel, look] {
        Look(credential, cancel);
        codemode::MutexLock done(&mu_);
        running_.erase(look);
      });
      if (!started.ok()) {  // no thread now: the next round tries again
        running_.erase(look);
        state.looking = false;
        state.poked = true;
        break;
      }
    }
  }
}

void ResourceWatch::Timer() {
  codemode::MutexLock lock(&mu_);
  while (!stopping_) {
    codemode::SteadyTime earliest = codemode::SteadyTime::max();
    for (const auto& [id, r] : running_) earliest = std::min(earliest, r.deadline);
    const size_t count = running_.size();
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || running_.size() != count; };
    if (mu_.AwaitWithDeadline(absl::Condition(&changed), earliest)) continue;
    const codemode::SteadyTime now = std::chrono::steady_clock::now();
    for (auto& [id, r] : running_) {
      if (r.deadline <= now) {
        r.cancel->Cancel("the look took longer than its timeout");  // its callbacks: a gRPC TryCancel
        r.deadline = codemode::SteadyTime::max();
      }
    }
  }
}

void ResourceWatch::Look(const std::string& credential, std::shared_ptr<codemode::CancelToken> cancel) {
  const std::optional<size_t> now = fingerprint_(credential, cancel);
  std::vector<std::function<void()>> calls;
  {
    codemode::MutexLock lock(&mu_);
    auto state = credentials_.find(credential);
    if (state == credentials_.end()) return;  // nobody listens any more
    state->second.looking = false;
    if (stopping_) return;
    // A cancelled look may have stopped short of some files: no change.
    const bool complete = now && !cancel->cancelled();
    const bool differs = complete && state->second.last && *now != *state->second.last;
    if (complete) state->second.last = now;
    for (auto& [id, s] : subscribers_) {
      if (s.credential != credential) continue;
      if (!s.is_ready) {
        // Ready after its first look, complete or not: the acknowledgement must not wait on
        // an endpoint that is down.
        s.is_ready = true;
        calls.push_back(s.ready);
      } else if (differs) {
        calls.push_back(s.changed);
      }
    }
  }
  for (const auto& call : calls) {
    if (call) call();
  }
}

}  // namespace gateway
