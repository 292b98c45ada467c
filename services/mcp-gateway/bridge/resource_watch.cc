// Watching credentials' resource lists. See resource_watch.h.
#include "bridge/resource_watch.h"

#include <vector>

namespace gateway {

ResourceWatch::ResourceWatch(FingerprintFn fingerprint, absl::Duration interval,
                             absl::Duration look_timeout)
    : fingerprint_(std::move(fingerprint)), interval_(interval), look_timeout_(look_timeout) {}

ResourceWatch::~ResourceWatch() {
  std::shared_ptr<codemode::CancelToken> look;
  {
    codemode::MutexLock lock(&mu_);
    stopping_ = true;
    look = look_;
  }
  if (look) look->Cancel("the gateway is stopping");
  if (thread_.joinable()) thread_.join();
  if (timer_.joinable()) timer_.join();
}

std::shared_ptr<void> ResourceWatch::Subscribe(const std::string& credential, std::function<void()> ready,
                                               std::function<void()> changed) {
  uint64_t id = 0;
  {
    codemode::MutexLock lock(&mu_);
    id = ++next_id_;
    subscribers_[id] = Subscriber{credential, std::move(ready), std::move(changed)};
    credentials_[credential].poked = true;  // its first look makes it ready
    any_poked_ = true;
    if (!thread_.joinable() && !stopping_) {
      thread_ = std::thread([this] { Loop(); });
      timer_ = std::thread([this] { Timer(); });
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
  credentials_.erase(credential);  // nobody listens: forget its last look
}

void ResourceWatch::Poke(const std::string& credential) {
  codemode::MutexLock lock(&mu_);
  auto it = credentials_.find(credential);
  if (it == credentials_.end()) return;
  it->second.poked = true;
  any_poked_ = true;
}

void ResourceWatch::Loop() {
  absl::Time next_round = absl::Now() + interval_;
  while (true) {
    std::vector<std::string> look;
    {
      codemode::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || any_poked_; };
      const absl::Condition cond(&woken);
      if (interval_ > absl::ZeroDuration()) {
        mu_.AwaitWithDeadline(cond, next_round);
      } else {
        mu_.Await(cond);
      }
      if (stopping_) return;
      const bool round = interval_ > absl::ZeroDuration() && absl::Now() >= next_round;
      if (round) next_round = absl::Now() + interval_;
      for (auto& [credential, state] : credentials_) {
        if (round || state.poked) look.push_back(credential);
        state.poked = false;
      }
      any_poked_ = false;
    }
    for (const std::string& credential : look) Look(credential);
  }
}

void ResourceWatch::Timer() {
  while (true) {
    std::shared_ptr<codemode::CancelToken> overdue;
    {
      codemode::MutexLock lock(&mu_);
      auto looking = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || look_ != nullptr; };
      mu_.Await(absl::Condition(&looking));
      if (stopping_) return;
      const std::shared_ptr<codemode::CancelToken> current = look_;
      auto over = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || look_ != current; };
      if (mu_.AwaitWithDeadline(absl::Condition(&over), look_deadline_)) continue;
      overdue = current;
    }
    overdue->Cancel("the look took longer than its timeout");
    codemode::MutexLock lock(&mu_);
    auto over = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || look_ != overdue; };
    mu_.Await(absl::Condition(&over));
    if (stopping_) return;
  }
}

void ResourceWatch::Look(const std::string& credential) {
  auto token = std::make_shared<codemode::CancelToken>();
  {
    codemode::MutexLock lock(&mu_);
    if (stopping_) return;
    look_ = token;
    look_deadline_ = absl::Now() + look_timeout_;
  }
  const std::optional<size_t> now = fingerprint_(credential, token);
  std::vector<std::function<void()>> calls;
  {
    codemode::MutexLock lock(&mu_);
    look_ = nullptr;
    auto state = credentials_.find(credential);
    if (stopping_ || state == credentials_.end()) return;
    // A cancelled look may have stopped short of some files: no change.
    const bool complete = now && !token->cancelled();
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
