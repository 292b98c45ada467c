// EgressHub: the daemon's EgressService (egress_service.h) on sandboxd_egress. It holds the
// operator's default and maximum policies, runs every session's proxy on one io_context
// thread of its own, shares connection slots and byte quotas among one owner's sessions,
// and turns each proxy decision into an audit line and metrics (docs/egress.md).
//
//   absl::StatusOr<std::unique_ptr<EgressHub>> hub = EgressHub::Create(options);
//   manager_options.egress = hub->get();   // the hub outlives the manager
//
// Decisions are logged within a rate per session (of each minute, the first
// kAuditBurstAllowed allowed and kAuditBurst refused connections in full), so that a session
// cannot flood the log; the rest of the minute's decisions are summed into one line (how
// many, their bytes each way, the first kAuditNamed destinations by name), written when the
// next minute's first decision comes or the session's egress ends. The connections a
// session's end cuts are logged too: the end's summary waits kAuditEndWait for them. The
// metrics count every decision. The peer's texts in a line (owner, host, reason) are
// escaped, quotes included. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/notification.h"
#include "base/mutex.h"
#include "egress/policy.h"
#include "egress/proxy_seams.h"
#include "sandboxd/egress_service.h"
#include "sandboxd/metrics.h"

namespace sandboxd {

struct EgressHubOptions {
  std::string default_policy;  // --egress_default
  std::string max_policy;      // --egress_max; empty: the default is the maximum
  egress::ProxyLimits limits;  // per session (and per connection)
  size_t max_connections_per_owner = 256;
  uint64_t max_bytes_per_owner = uint64_t{64} << 30;
  size_t parked = 4;  // connections the host keeps parked on each relay
  // Names answered without asking the host's resolver (--egress_hosts), as /etc/hosts.
  std::vector<std::pair<std::string, egress::IpAddress>> hosts;
  SandboxdMetrics* metrics = nullptr;  // outlives the hub; null: none
};

// "name=address" entries separated by commas (--egress_hosts); INVALID_ARGUMENT naming the
// entry.
absl::StatusOr<std::vector<std::pair<std::string, egress::IpAddress>>> ParseEgressHosts(
    absl::string_view text);

class EgressHub final : public EgressService, private egress::DecisionSink {
 public:
  static constexpr uint64_t kAuditBurst = 20;
  static constexpr uint64_t kAuditBurstAllowed = 60;
  static constexpr size_t kAuditNamed = 8;
  static constexpr std::chrono::milliseconds kAuditEndWait{500};
  // INVALID_ARGUMENT naming the flag when a policy does not parse, or when the default is
  // wider than the maximum.
  static absl::StatusOr<std::unique_ptr<EgressHub>> Create(EgressHubOptions options);
  ~EgressHub() override;
  EgressHub(const EgressHub&) = delete;
  EgressHub& operator=(const EgressHub&) = delete;

  absl::StatusOr<std::string> Admit(absl::string_view requested) const override;
  absl::StatusOr<std::string> Canonical(absl::string_view policy) const override;
  absl::StatusOr<std::unique_ptr<SessionEgress>> Open(const std::string& session,
                                                      const std::string& owner,
                                                      const std::string& policy,
                                                      const std::string& relay_socket,
                                                      codemode::UniqueFd listener,
                                                      uint64_t bytes_used) override;
  std::string default_policy() const override { return default_.ToString(); }
  std::string max_policy() const override { return max_.ToString(); }

 private:
  class Proxy;
  class HostsResolver;
  struct Owner {
    std::weak_ptr<egress::ConnectionSlots> slots;
    std::weak_ptr<egress::ByteQuota> bytes;
  };
  struct HeldBack {  // the decisions of one kind past the window's bound, summed
    uint64_t count = 0;
    uint64_t up = 0;
    uint64_t down = 0;
    uint64_t dropped = 0;
    std::set<std::string> named;  // the first kAuditNamed destinations, host:port
    uint64_t unnamed = 0;         // the decisions for other destinations
  };
  struct AuditWindow {  // [0] refused, [1] allowed
    int64_t started_ms = 0;
    std::string owner;
    uint64_t written[2] = {0, 0};
    HeldBack held[2];
    bool forgotten = false;   // the session's proxy is gone; its summary is due
    bool summarized = false;  // ... and was written: later decisions are written in full
  };
  EgressHub(EgressHubOptions options, egress::Policy default_policy, egress::Policy max_policy);
  void Record(const egress::Decision& decision) override;
  // The session's proxy stopped: the decisions of the connections it cut are still to
  // come, so its summary is written kAuditEndWait later, on the io thread.
  void Forget(const std::string& session);
  void WriteEndSummary(const std::string& session);
  static void Hold(HeldBack* held, const egress::Decision& d);
  static std::string Summary(const AuditWindow& w);
  // Past 4096 windows, drops those a minute old (ended sessions' among them).
  void PruneLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const EgressHubOptions options_;
  const egress::Policy default_;
  const egress::Policy max_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::unique_ptr<HostsResolver> resolver_;
  codemode::Mutex mu_;
  std::map<std::string, Owner> owners_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, AuditWindow> audit_ ABSL_GUARDED_BY(mu_);
  codemode::Notification drained_;  // io_ ran out of work
  std::thread thread_;  // last: runs io_ once everything above exists
};

}  // namespace sandboxd
