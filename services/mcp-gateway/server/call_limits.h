// Work in flight after a request is dispatched: tools/call and resources/read run on a
// worker thread of their own and hold their arguments (and a read its file, its base64 and
// its JSON) until the response is handed to the transport. The request budgets
// (byte_budget.h) stop charging a body once it is dispatched, and a session's
// max_concurrent_calls bounds only that session, so a token with many sessions could
// otherwise make the gateway hold thousands of threads and bodies. CallLimits bounds that
// work per credential and overall: calls in flight, the bytes their arguments hold, and
// resources/read (whose peak is several copies of a file up to --max_resource_bytes).
//
//   auto limits = std::make_shared<CallLimits>(CallLimits::Options{...});
//   absl::StatusOr<CallLimits::Ticket> ticket = limits->Acquire("token 0", false, bytes);
//   if (!ticket.ok()) refuse(ticket.status().message());  // names the flag
//   // hold `*ticket` for as long as the call holds its bytes; its destructor releases
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/byte_budget.h"
#include "base/mutex.h"
#include "nlohmann/json.hpp"

namespace gateway {

class CallLimits : public std::enable_shared_from_this<CallLimits> {
 public:
  // A call's arguments are charged this many times their size: a queued run_python holds
  // them about three times over (the request's parse, the work's copy, the run's code and
  // its proto). Charged once, 48 MB of queued code took the gateway up 145 MiB (attack
  // round 6).
  static constexpr uint64_t kCopies = 3;

  struct Options {
    uint32_t max_calls = 256;                     // --max_calls_in_flight
    uint32_t max_calls_per_credential = 64;       // --max_calls_in_flight_per_credential
    uint64_t max_bytes = 64 << 20;                // --max_call_bytes_in_flight
    uint64_t max_bytes_per_credential = 16 << 20; // --max_call_bytes_in_flight_per_credential
    uint32_t max_reads = 4;                       // --max_resource_reads_in_flight
    uint32_t max_reads_per_credential = 2;        // --max_resource_reads_in_flight_per_credential
  };

  // What one call holds; released when destroyed (movable, not copyable).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept { *this = std::move(other); }
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { Release(); }
    void Release();

   private:
    friend class CallLimits;
    std::shared_ptr<CallLimits> owner_;
    std::string credential_;
    bool read_ = false;
    std::shared_ptr<codemode::ByteBudget> budget_;  // the credential's, holding bytes_
    uint64_t bytes_ = 0;
  };

  // The bytes draw on `ceiling` (the gateway's and the credential's share) when given.
  explicit CallLimits(Options options, std::shared_ptr<codemode::BufferCeiling> ceiling = nullptr);
  // New limits whose per-credential bounds are the overall ones (for a server where every
  // client is the same credential, as HTTP under --no_auth).
  std::shared_ptr<CallLimits> OverallOnly() const;

  // Counts one call of `credential` (a resources/read when `read`) holding `bytes`, or
  // RESOURCE_EXHAUSTED with a message naming the flag whose bound it would pass.
  absl::StatusOr<Ticket> Acquire(const std::string& credential, bool read, uint64_t bytes);

  // Counts, for tests and logs.
  struct Usage {
    uint32_t calls = 0;
    uint32_t reads = 0;
    uint64_t bytes = 0;
  };
  Usage Total() const;
  Usage Of(const std::string& credential) const;

 private:
  void Release(const std::string& credential, bool read);
  static uint32_t Reserve(uint32_t mine, uint32_t per_credential, uint32_t max);

  const Options options_;
  const std::shared_ptr<codemode::BufferCeiling> ceiling_;
  const std::shared_ptr<codemode::ByteBudget> bytes_;  // draws on the ceiling's all()
  codemode::ByteBudgets bytes_per_credential_;         // each draws on bytes_ and a share
  mutable codemode::Mutex mu_;
  Usage total_ ABSL_GUARDED_BY(mu_);
  // Only credentials with work in flight (an entry goes when its counts reach zero); the
  // bytes are counted in bytes_per_credential_.
  std::map<std::string, Usage> by_credential_ ABSL_GUARDED_BY(mu_);
};


}  // namespace gateway
