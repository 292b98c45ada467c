#include "egress/proxy_seams.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sandboxd {
namespace egress {

absl::StatusOr<ConnectionSlots::Slot> ConnectionSlots::Take() {
  codemode::MutexLock lock(&mu_);
  if (open_ >= limit_) {
    return absl::ResourceExhaustedError(
        absl::StrCat(open_, " connections are open (", name_, " is ", limit_, ")"));
  }
  ++open_;
  return Slot(shared_from_this());
}

size_t ConnectionSlots::open() const {
  codemode::MutexLock lock(&mu_);
  return open_;
}

void ConnectionSlots::Give() {
  codemode::MutexLock lock(&mu_);
  --open_;
}

bool ByteQuota::Charge(uint64_t n) {
  uint64_t used = used_.load();
  do {
    if (n > limit_ || used > limit_ - n) {
      spent_.store(true);
      return false;
    }
  } while (!used_.compare_exchange_weak(used, used + n));
  return true;
}

void ByteQuota::Restore(uint64_t n) {
  uint64_t used = used_.load();
  uint64_t next;
  do {
    next = n >= limit_ - std::min(used, limit_) ? limit_ : used + n;
  } while (!used_.compare_exchange_weak(used, next));
  if (next >= limit_) spent_.store(true);
}

const ByteQuota* ChargeAll(const std::vector<std::shared_ptr<ByteQuota>>& quotas, uint64_t n) {
  for (size_t i = 0; i < quotas.size(); ++i) {
    if (quotas[i]->Charge(n)) continue;
    for (size_t j = 0; j < i; ++j) quotas[j]->Refund(n);
    return quotas[i].get();
  }
  return nullptr;
}

}  // namespace egress
}  // namespace sandboxd
