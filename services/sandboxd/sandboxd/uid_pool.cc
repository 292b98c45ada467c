#include "sandboxd/uid_pool.h"

namespace sandboxd {

std::shared_ptr<UidPool::Lease> UidPool::Acquire() {
  codemode::MutexLock lock(&mu_);
  for (uint32_t uid = first_; uid < first_ + count_; ++uid) {
    if (leased_.count(uid)) continue;
    auto lease = std::make_shared<Lease>(shared_from_this(), uid);
    leased_[uid] = lease;
    return lease;
  }
  return nullptr;
}

std::shared_ptr<UidPool::Lease> UidPool::Claim(uint32_t uid) {
  codemode::MutexLock lock(&mu_);
  if (auto it = leased_.find(uid); it != leased_.end()) {
    if (auto lease = it->second.lock()) return lease;
  }
  auto lease = std::make_shared<Lease>(shared_from_this(), uid);
  if (uid >= first_ && uid < first_ + count_) leased_[uid] = lease;
  return lease;
}

void UidPool::Release(uint32_t uid) {
  codemode::MutexLock lock(&mu_);
  auto it = leased_.find(uid);
  // Only if no newer lease took the uid meanwhile (a Claim after this lease expired).
  if (it != leased_.end() && it->second.expired()) leased_.erase(it);
}

}  // namespace sandboxd
