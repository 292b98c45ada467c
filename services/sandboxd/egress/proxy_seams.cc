#include "egress/proxy_seams.h"

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

}  // namespace egress
}  // namespace sandboxd
