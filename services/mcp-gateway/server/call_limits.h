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
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "nlohmann/json.hpp"
#include "server/read_turns.h"

namespace gateway {

class CallLimits {
 public:
  // A call's arguments are charged this many times their size: a queued run_python holds
  // them about three times over (the request's parse, the work's copy, the run's code and
  // its proto). Charged once, 48 MB of queued code would take the gateway up 145 MiB.
  static constexpr uint64_t kCopies = 3;

  struct Options {
    uint32_t max_calls = 256;                     // --max_calls_in_flight
    uint32_t max_calls_per_credential = 64;       // --max_calls_in_flight_per_credential
    uint64_t max_bytes = 64 << 20;                // --max_call_bytes_in_flight
    uint64_t max_bytes_per_credential = 16 << 20; // --max_call_bytes_in_flight_per_credential
    uint32_t max_reads = 4;                       // --max_resource_reads_in_flight
    uint32_t max_reads_per_credential = 2;        // --max_resource_reads_in_flight_per_credential
    absl::Duration read_wait = absl::Seconds(30);  // --resource_read_wait (ReadTurns)
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
    // A read waiting in line for its slot (ReadTurns): AwaitRead before reading.
    bool waiting() const { return waiting_ != nullptr; }
    // Until the read has its slot (OK), `cancel` is cancelled or the wait passes.
    absl::Status AwaitRead(const std::shared_ptr<codemode::CancelToken>& cancel);

   private:
    friend class CallLimits;
    // The credential's budgets, each charged while the ticket lives: 1 call, 1 read (null
    // for a call that is not a read), bytes_ bytes.
    std::shared_ptr<codemode::ByteBudget> calls_;
    std::shared_ptr<codemode::ByteBudget> reads_;
    std::shared_ptr<codemode::ByteBudget> bytes_budget_;
    uint64_t bytes_ = 0;
    std::shared_ptr<ReadTurns> turns_;                // told when reads_ is released
    std::shared_ptr<ReadTurns::Waiter> waiting_;      // in line for reads_
    std::shared_ptr<codemode::ByteBudget> wanted_;    // reads_ once the line gives it
  };

  // The bytes draw on `ceiling` (the gateway's and the credential's share) when given.
  explicit CallLimits(Options options, std::shared_ptr<codemode::BufferCeiling> ceiling = nullptr);
  // New limits whose per-credential bounds are the overall ones (for a server where every
  // client is the same credential, as HTTP under --no_auth).
  std::shared_ptr<CallLimits> OverallOnly() const;

  // Counts one call of `credential` (a resources/read when `read`) holding `bytes`, or
  // RESOURCE_EXHAUSTED with a message naming the flag whose bound it would pass. A read of a
  // credential holding none may wait in line for its slot instead (Ticket::waiting).
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
  const Options options_;
  const std::shared_ptr<codemode::BufferCeiling> ceiling_;
  // Counts (charged 1 per call or read; outside the byte ceiling) and bytes, each overall
  // and per credential, the last eighth of a count kept for credentials with little in
  // flight (CountReserve), the bytes' for those below their fair share (FairReserve).
  const std::shared_ptr<codemode::ByteBudget> calls_;
  codemode::ByteBudgets calls_per_credential_;
  const std::shared_ptr<codemode::ByteBudget> reads_;
  codemode::ByteBudgets reads_per_credential_;
  const std::shared_ptr<ReadTurns> read_turns_;  // the order reads_ is handed out in
  const std::shared_ptr<codemode::ByteBudget> bytes_;  // draws on the ceiling's all()
  codemode::ByteBudgets bytes_per_credential_;         // each draws on bytes_ and a share
};


}  // namespace gateway
