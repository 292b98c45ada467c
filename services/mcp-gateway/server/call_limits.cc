#include "server/call_limits.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gateway {

CallLimits::CallLimits(Options options, std::shared_ptr<codemode::BufferCeiling> ceiling)
    : options_(options),
      ceiling_(std::move(ceiling)),
      bytes_(std::make_shared<codemode::ByteBudget>("max_call_bytes_in_flight", options.max_bytes,
                                                    codemode::AllOf(ceiling_))),
      bytes_per_credential_("max_call_bytes_in_flight_per_credential",
                            options.max_bytes_per_credential, {bytes_},
                            codemode::FairReserve(bytes_, options.max_bytes_per_credential)) {}

// The slots of `max` a credential holding `mine` may not take: an eighth (at least one),
// kept for credentials with nothing in flight, so that two credentials whose shares add up
// to the whole cannot leave a third nothing. None for a credential with nothing in flight,
// or when one credential may take everything anyway.
uint32_t CallLimits::Reserve(uint32_t mine, uint32_t per_credential, uint32_t max) {
  if (mine == 0 || per_credential >= max) return 0;
  return std::max<uint32_t>(1, max / 8);
}

CallLimits::Ticket& CallLimits::Ticket::operator=(Ticket&& other) noexcept {
  if (this == &other) return *this;
  Release();
  owner_ = std::move(other.owner_);
  credential_ = std::move(other.credential_);
  read_ = other.read_;
  budget_ = std::move(other.budget_);
  bytes_ = other.bytes_;
  other.owner_ = nullptr;
  return *this;
}

void CallLimits::Ticket::Release() {
  if (!owner_) return;
  budget_->Release(bytes_);
  owner_->Release(credential_, read_);
  owner_ = nullptr;
  budget_ = nullptr;
}

absl::StatusOr<CallLimits::Ticket> CallLimits::Acquire(const std::string& credential, bool read,
                                                       uint64_t bytes) {
  std::shared_ptr<codemode::ByteBudget> budget =
      bytes_per_credential_.Of(credential, codemode::SharesOf(ceiling_, credential));
  std::string refused;
  {
    codemode::MutexLock lock(&mu_);
    auto it = by_credential_.find(credential);
    const Usage mine = it == by_credential_.end() ? Usage() : it->second;
    // The credential's bounds first: the message then tells a token holder what it can
    // change (its own load) before what it cannot (everyone's).
    if (mine.calls >= options_.max_calls_per_credential) {
      refused = absl::StrCat("--max_calls_in_flight_per_credential=", options_.max_calls_per_credential);
    } else if (read && mine.reads >= options_.max_reads_per_credential) {
      refused = absl::StrCat("--max_resource_reads_in_flight_per_credential=",
                             options_.max_reads_per_credential);
    } else if (total_.calls + Reserve(mine.calls, options_.max_calls_per_credential,
                                      options_.max_calls) >= options_.max_calls) {
      refused = absl::StrCat("--max_calls_in_flight=", options_.max_calls);
    } else if (read && total_.reads + Reserve(mine.reads, options_.max_reads_per_credential,
                                              options_.max_reads) >= options_.max_reads) {
      refused = absl::StrCat("--max_resource_reads_in_flight=", options_.max_reads);
    } else if (const codemode::ByteBudget* full = budget->Charge(kCopies * bytes)) {
      refused = full->Describe();
    } else {
      Usage& entry = by_credential_[credential];
      for (Usage* u : {&entry, &total_}) {
        ++u->calls;
        if (read) ++u->reads;
      }
    }
  }
  if (!refused.empty()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "too much work in flight: ", read ? "a resources/read" : "a call", " holding ", bytes,
        " bytes (charged ", kCopies, " times for its copies) would pass ", refused,
        "; retry when a call finishes"));
  }
  Ticket ticket;
  ticket.owner_ = shared_from_this();
  ticket.credential_ = credential;
  ticket.read_ = read;
  ticket.budget_ = std::move(budget);
  ticket.bytes_ = kCopies * bytes;
  return ticket;
}

void CallLimits::Release(const std::string& credential, bool read) {
  codemode::MutexLock lock(&mu_);
  auto it = by_credential_.find(credential);
  if (it == by_credential_.end()) return;
  for (Usage* u : {&it->second, &total_}) {
    --u->calls;
    if (read) --u->reads;
  }
  if (it->second.calls == 0) by_credential_.erase(it);
}

std::shared_ptr<CallLimits> CallLimits::OverallOnly() const {
  Options o = options_;
  o.max_calls_per_credential = o.max_calls;
  o.max_bytes_per_credential = o.max_bytes;
  o.max_reads_per_credential = o.max_reads;
  return std::make_shared<CallLimits>(o, ceiling_);
}

CallLimits::Usage CallLimits::Total() const {
  Usage usage;
  {
    codemode::MutexLock lock(&mu_);
    usage = total_;
  }
  usage.bytes = bytes_->used();
  return usage;
}

CallLimits::Usage CallLimits::Of(const std::string& credential) const {
  Usage usage;
  {
    codemode::MutexLock lock(&mu_);
    auto it = by_credential_.find(credential);
    if (it != by_credential_.end()) usage = it->second;
  }
  usage.bytes = bytes_per_credential_.Used(credential);
  return usage;
}


}  // namespace gateway
