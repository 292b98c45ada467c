#include "server/byte_budget.h"

#include <algorithm>

namespace gateway {
namespace http {

bool ByteBudget::TryCharge(size_t bytes) {
  codemode::MutexLock lock(&mu_);
  if (bytes > limit_ - std::min(limit_, used_)) return false;
  if (parent_ && !parent_->TryCharge(bytes)) return false;
  used_ += bytes;
  return true;
}

void ByteBudget::Release(size_t bytes) {
  codemode::MutexLock lock(&mu_);
  bytes = std::min(bytes, used_);
  used_ -= bytes;
  if (parent_) parent_->Release(bytes);
}

size_t ByteBudget::used() const {
  codemode::MutexLock lock(&mu_);
  return used_;
}

}  // namespace http
}  // namespace gateway
