#include "server/call_limits.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gateway {

namespace {

std::shared_ptr<codemode::ByteBudget> Overall(const char* flag, uint64_t limit,
                                              codemode::ByteBudget::Parents parents = {}) {
  return std::make_shared<codemode::ByteBudget>(flag, limit, std::move(parents));
}

}  // namespace

CallLimits::CallLimits(Options options, std::shared_ptr<codemode::BufferCeiling> ceiling)
    : options_(options),
      ceiling_(std::move(ceiling)),
      calls_(Overall("max_calls_in_flight", options.max_calls)),
      calls_per_credential_("max_calls_in_flight_per_credential",
                            options.max_calls_per_credential, {calls_},
                            codemode::CountReserve(calls_, options.max_calls_per_credential)),
      reads_(Overall("max_resource_reads_in_flight", options.max_reads)),
      reads_per_credential_("max_resource_reads_in_flight_per_credential",
                            options.max_reads_per_credential, {reads_},
                            codemode::CountReserve(reads_, options.max_reads_per_credential)),
      // A quarter of the calls at most wait in line for a read (each holds its call).
      read_turns_(std::make_shared<ReadTurns>(reads_, options.read_wait, std::max<uint32_t>(1, options.max_calls / 4))),
      bytes_(Overall("max_call_bytes_in_flight", options.max_bytes, codemode::AllOf(ceiling_))),
      bytes_per_credential_("max_call_bytes_in_flight_per_credential",
                            options.max_bytes_per_credential, {bytes_},
                            codemode::FairReserve(bytes_, options.max_bytes_per_credential)) {}

CallLimits::Ticket& CallLimits::Ticket::operator=(Ticket&& other) noexcept {
  if (this == &other) return *this;
  Release();
  calls_ = std::move(other.calls_);
  reads_ = std::move(other.reads_);
  bytes_budget_ = std::move(other.bytes_budget_);
  bytes_ = std::exchange(other.bytes_, 0);
  turns_ = std::move(other.turns_);
  waiting_ = std::move(other.waiting_);
  wanted_ = std::move(other.wanted_);
  return *this;
}

void CallLimits::Ticket::Release() {
  if (calls_) calls_->Release(1);
  if (reads_) {
    reads_->Release(1);
    turns_->Released();
  }
  if (waiting_) turns_->Leave(waiting_);
  if (bytes_budget_) bytes_budget_->Release(bytes_);
  calls_ = reads_ = bytes_budget_ = wanted_ = nullptr;
  waiting_ = nullptr;
  bytes_ = 0;
}

absl::Status CallLimits::Ticket::AwaitRead(const std::shared_ptr<codemode::CancelToken>& cancel) {
  if (!waiting_) return absl::OkStatus();
  absl::Status s = turns_->Await(waiting_, cancel);
  waiting_ = nullptr;
  if (s.ok()) reads_ = std::move(wanted_);
  return s;
}

absl::StatusOr<CallLimits::Ticket> CallLimits::Acquire(const std::string& credential, bool read,
                                                       uint64_t bytes) {
  // The counts first: the message then tells a token holder what it can change (its own
  // load) before what it cannot (everyone's); a budget names its own bound before its
  // parent's.
  Ticket ticket;
  const codemode::ByteBudget* full = nullptr;
  // Held to the end: `full` may point at one of them (a credential's budget lives only
  // while someone holds it).
  std::shared_ptr<codemode::ByteBudget> calls = calls_per_credential_.Of(credential);
  std::shared_ptr<codemode::ByteBudget> reads =
      read ? reads_per_credential_.Of(credential) : nullptr;
  std::shared_ptr<codemode::ByteBudget> budget =
      bytes_per_credential_.Of(credential, codemode::SharesOf(ceiling_, credential));
  if ((full = calls->Charge(1)) == nullptr) {
    ticket.calls_ = calls;
    if (reads) {
      ReadTurns::Turn turn = read_turns_->Take(credential, reads);
      if ((full = turn.full) == nullptr) {
        ticket.turns_ = read_turns_;
        if (turn.waiting) {
          ticket.waiting_ = std::move(turn.waiting);
          ticket.wanted_ = reads;
        } else {
          ticket.reads_ = reads;
        }
      }
    }
  }
  const bool counted = full == nullptr;  // a refusal past here is for the bytes
  if (counted && (full = budget->Charge(kCopies * bytes)) == nullptr) {
    ticket.bytes_budget_ = budget;
    ticket.bytes_ = kCopies * bytes;
  }
  if (full == nullptr) return ticket;
  // Refused; the ticket releases what was charged.
  const char* what = read ? "a resources/read or resources/list" : "a call";
  if (counted) {
    return absl::ResourceExhaustedError(absl::StrCat("too much work in flight: ", what, " holding ", bytes,
                                                     " bytes (charged ", kCopies, " times for its copies) would pass ",
                                                     full->Describe(), "; retry when a call finishes"));
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("too much work in flight: ", what, " would pass ", full->Describe(), "; retry when one finishes"));
}

std::shared_ptr<CallLimits> CallLimits::OverallOnly() const {
  Options o = options_;
  o.max_calls_per_credential = o.max_calls;
  o.max_bytes_per_credential = o.max_bytes;
  o.max_reads_per_credential = o.max_reads;
  return std::make_shared<CallLimits>(o, ceiling_);
}

CallLimits::Usage CallLimits::Total() const {
  return {static_cast<uint32_t>(calls_->used()), static_cast<uint32_t>(reads_->used()),
          bytes_->used()};
}

CallLimits::Usage CallLimits::Of(const std::string& credential) const {
  return {static_cast<uint32_t>(calls_per_credential_.Used(credential)),
          static_cast<uint32_t>(reads_per_credential_.Used(credential)),
          bytes_per_credential_.Used(credential)};
}

}  // namespace gateway
