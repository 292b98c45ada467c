// LoadWatch. See load_watch.h.
#include "bridge/load_watch.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "base/thread.h"

namespace gateway {
sandbox::v1::Info WithPlaced(sandbox::v1::Info info, uint32_t placed) {
  auto lower = [placed](uint32_t ready) { return ready - std::min(ready, placed); };
  info.set_sessions(info.sessions() + placed);
  info.set_pool_ready(lower(info.pool_ready()));
  for (sandbox::v1::PoolInfo& pool : *info.mutable_pools()) pool.set_ready(lower(pool.ready()));
  return info;
}

sandbox::v1::Info LoadOf(const sandbox::v1::Info& info) {
  sandbox::v1::Info load;
  load.set_serving(info.serving());
  load.set_sessions(info.sessions());
  load.set_max_sessions(info.max_sessions());
  load.set_pool_ready(info.pool_ready());
  for (const sandbox::v1::PoolInfo& pool : info.pools()) {
    if (load.pools_size() == LoadWatch::kMaxPools) break;
    sandbox::v1::PoolInfo* kept = load.add_pools();
    kept->set_runtime(pool.runtime().substr(0, LoadWatch::kMaxReasonBytes));
    kept->set_ready(pool.ready());
    kept->set_unavailable(pool.unavailable().substr(0, LoadWatch::kMaxReasonBytes));
  }
  return load;
}

LoadWatch::LoadWatch(Ask ask, Members members, Options options)
    : ask_(std::move(ask)),
      members_(std::move(members)),
      options_(options),
      thread_(codemode::StartThread("load watch", [this] { Refresher(); })) {}

LoadWatch::~LoadWatch() {
  {
    codemode::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

std::vector<std::optional<sandbox::v1::Info>> LoadWatch::Infos(const std::vector<size_t>& endpoints) {
  std::vector<std::optional<sandbox::v1::Info>> infos(endpoints.size());
  std::vector<size_t> stale;  // indices into `endpoints`
  std::vector<size_t> first;  // being asked by another caller for the first time
  {
    codemode::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    used_at_ = now;
    stale = TakeAsks(endpoints, /*stale_only=*/true, now);
    for (size_t k = 0; k < endpoints.size(); ++k) {
      if (std::find(stale.begin(), stale.end(), k) != stale.end()) continue;
      const Seen& seen = seen_[endpoints[k]];
      // Fresh, or being asked by another caller (its last answer, if any, is the best known).
      if (seen.info) {
        infos[k] = WithPlaced(*seen.info, Placed(seen));
      } else if (seen.asking && seen.at == absl::InfinitePast()) {
        first.push_back(k);
      }
    }
  }
  std::vector<size_t> ask;
  for (size_t k : stale) ask.push_back(endpoints[k]);
  std::vector<std::optional<sandbox::v1::Info>> answers;
  if (!ask.empty()) {
    const absl::Time asked_at = absl::Now();
    answers = ask_(ask);
    Record(ask, answers, asked_at);
  }
  codemode::MutexLock lock(&mu_);
  for (size_t j = 0; j < stale.size() && j < answers.size(); ++j) {
    const Seen& seen = seen_[ask[j]];  // this answer, or a later one recorded meanwhile
    if (seen.info) infos[stale[j]] = WithPlaced(*seen.info, Placed(seen));
  }
  // An endpoint never answered yet (a host just added) whose first ask is out is waited
  // for, within that ask's deadline: read as "not answered" it would go behind every
  // endpoint that answered, however loaded.
  auto first_asked = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t k : first) {
      if (seen_[endpoints[k]].asking) return false;
    }
    return true;
  };
  mu_.Await(absl::Condition(&first_asked));
  for (size_t k : first) {
    const Seen& seen = seen_[endpoints[k]];
    if (seen.info) infos[k] = WithPlaced(*seen.info, Placed(seen));
  }
  return infos;
}

std::vector<size_t> LoadWatch::TakeAsks(const std::vector<size_t>& endpoints, bool stale_only, absl::Time now) {
  std::vector<size_t> asks;
  for (size_t k = 0; k < endpoints.size(); ++k) {
    Seen& seen = seen_[endpoints[k]];
    if (seen.asking || (stale_only && now - seen.at < options_.max_age)) continue;
    seen.asking = true;
    seen.made_at_ask = seen.made;
    asks.push_back(k);
  }
  return asks;
}

uint32_t LoadWatch::Out(const Seen& seen) { return static_cast<uint32_t>(seen.out.size()); }

uint32_t LoadWatch::Placed(const Seen& seen) {
  return static_cast<uint32_t>(std::min<uint64_t>(seen.made - seen.made_counted + seen.out.size(), UINT32_MAX));
}

absl::Time LoadWatch::Placing(size_t endpoint) {
  codemode::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  seen_[endpoint].out.insert(now);
  return now;
}

void LoadWatch::PlaceDone(size_t endpoint, absl::Time sent, Ended ended) {
  codemode::MutexLock lock(&mu_);
  Seen& seen = seen_[endpoint];
  if (auto it = seen.out.find(sent); it != seen.out.end()) seen.out.erase(it);
  if (ended != Ended::kNoAnswer) seen.answered_at = std::max(seen.answered_at, absl::Now());
  if (ended == Ended::kCreated) ++seen.made;
}

bool LoadWatch::Stuck(size_t endpoint) {
  codemode::MutexLock lock(&mu_);
  const Seen& seen = seen_[endpoint];
  if (seen.out.empty()) return false;
  const absl::Time oldest = *seen.out.begin();
  return absl::Now() - oldest > options_.stuck_after && seen.answered_at < oldest;
}

void LoadWatch::Record(const std::vector<size_t>& endpoints, const std::vector<std::optional<sandbox::v1::Info>>& infos,
                       absl::Time at) {
  codemode::MutexLock lock(&mu_);
  for (size_t j = 0; j < endpoints.size() && j < infos.size(); ++j) {
    Seen& seen = seen_[endpoints[j]];
    seen.asking = false;
    if (at < seen.at) continue;  // a later answer is there already
    seen.info = infos[j] ? std::optional<sandbox::v1::Info>(LoadOf(*infos[j])) : std::nullopt;
    seen.at = at;
    seen.made_counted = seen.made_at_ask;  // made before the ask was sent: in the answer
  }
}

void LoadWatch::Refresher() {
  for (;;) {
    std::vector<size_t> endpoints;
    {
      codemode::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || absl::Now() - used_at_ < options_.active;
      };
      mu_.Await(absl::Condition(&woken));  // until a create comes (or the end)
      if (stopping_) return;
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stop), options_.refresh)) return;
      if (absl::Now() - used_at_ >= options_.active) continue;
    }
    const std::vector<size_t> members = members_();  // outside the lock: it may dial
    {
      codemode::MutexLock lock(&mu_);
      for (size_t k : TakeAsks(members, /*stale_only=*/false, absl::Now())) endpoints.push_back(members[k]);
    }
    if (endpoints.empty()) continue;
    const absl::Time at = absl::Now();
    Record(endpoints, ask_(endpoints), at);
  }
}

}  // namespace gateway
