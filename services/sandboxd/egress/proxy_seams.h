// What the egress proxy (session_proxy.h) takes from its caller: its limits, where its
// decisions go, how it resolves names, and the connection slots shared by one owner's
// sessions (docs/egress.md, "The proxy").
//
//   class AuditSink : public DecisionSink { void Record(const Decision& d) override; };
//   auto owner = std::make_shared<ConnectionSlots>("max_egress_connections_per_owner", 256);
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "egress/ip_address.h"

namespace sandboxd {
namespace egress {

struct ProxyLimits {
  size_t max_connections = 64;                         // open at once, per session
  uint64_t max_bytes_per_connection = uint64_t{1} << 30;  // both ways together
  uint64_t max_bytes_per_session = uint64_t{16} << 30;    // over the session's life
  size_t max_header_bytes = 16 << 10;                  // the request line and headers
  std::chrono::milliseconds header_timeout{10'000};    // the request head, then the ClientHello
  std::chrono::milliseconds connect_timeout{10'000};   // resolving and connecting
  std::chrono::milliseconds idle_timeout{60'000};      // no byte either way
  std::chrono::milliseconds max_connection_time{600'000};
  // When the host dials in: past a burst, the relay closing parked connections makes the
  // host dial one replacement per this interval (parked_dialer.h).
  std::chrono::milliseconds redial_interval{5};
};

// One connection's outcome, reported once: when it is refused, or when an allowed one ends.
struct Decision {
  std::string session;
  std::string owner;
  bool allowed = false;
  int status = 0;        // the HTTP status the client got (200 for a tunnel), 0 for none
  std::string method;    // "CONNECT", "GET", ...; empty when refused before the request
  std::string host;      // as the client named it, canonical
  uint16_t port = 0;
  std::string address;   // the address connected to; empty when none was
  uint64_t bytes_up = 0;    // client to destination
  uint64_t bytes_down = 0;  // destination to client
  uint64_t bytes_dropped = 0;  // the client's past a request's body: read, not sent, charged
  std::string reason;    // why refused, or how an allowed connection ended
};

// Receives every decision (the audit log and metrics, in the daemon). Called from the
// proxy's threads, concurrently: implementations synchronize.
class DecisionSink {
 public:
  virtual ~DecisionSink() = default;
  virtual void Record(const Decision& decision) = 0;
};

// Resolves a name to its addresses. The proxy calls it once per request and connects only
// to addresses from that answer that the policy allows. `done` may run on any thread.
class Resolver {
 public:
  using Callback = std::function<void(absl::StatusOr<std::vector<IpAddress>>)>;
  virtual ~Resolver() = default;
  virtual void Resolve(const std::string& host, Callback done) = 0;
};

// A count of open connections against a limit; shared by the sessions of one owner, or one
// session's own. Safe for concurrent use.
class ConnectionSlots : public std::enable_shared_from_this<ConnectionSlots> {
 public:
  // Held while a connection is open; gives its slot back when destroyed.
  class Slot {
   public:
    explicit Slot(std::shared_ptr<ConnectionSlots> slots) : slots_(std::move(slots)) {}
    Slot(Slot&&) = default;
    Slot& operator=(Slot&&) = default;
    ~Slot() {
      if (slots_) slots_->Give();
    }

   private:
    std::shared_ptr<ConnectionSlots> slots_;
  };

  ConnectionSlots(std::string name, size_t limit) : name_(std::move(name)), limit_(limit) {}
  // A slot, or ResourceExhausted naming the limit.
  absl::StatusOr<Slot> Take();
  size_t open() const;

 private:
  void Give();
  const std::string name_;
  const size_t limit_;
  mutable codemode::Mutex mu_;
  size_t open_ ABSL_GUARDED_BY(mu_) = 0;
};

// Bytes relayed over the life of a session (or of all an owner's sessions) against a limit;
// once spent, new connections get 429 and open ones are cut. Safe for concurrent use.
class ByteQuota {
 public:
  ByteQuota(std::string name, uint64_t limit) : name_(std::move(name)), limit_(limit) {}
  // Takes `n` bytes, or nothing and false when that would pass the limit.
  bool Charge(uint64_t n);
  // Counts `n` bytes used before (a session's recorded count after a restart), up to the
  // limit whatever `n` is; reaching it spends the quota.
  void Restore(uint64_t n);
  void Refund(uint64_t n) { used_.fetch_sub(n); }
  // Whether a charge was refused (what is left is too little for a read's worth).
  bool spent() const { return spent_.load(); }
  uint64_t used() const { return used_.load(); }
  const std::string& name() const { return name_; }

 private:
  const std::string name_;
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
  std::atomic<bool> spent_{false};
};

// Charges `n` bytes to each of `quotas`, or to none; the quota that refused them, or null.
const ByteQuota* ChargeAll(const std::vector<std::shared_ptr<ByteQuota>>& quotas, uint64_t n);

}  // namespace egress
}  // namespace sandboxd
