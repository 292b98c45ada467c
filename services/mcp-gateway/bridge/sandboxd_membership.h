// Membership: which sandboxd endpoints new sandboxes may go to, now. --sandboxd lists
// endpoints (unix:/path, host:port), and names that resolve to many addresses
// ("dns:///NAME:PORT", gRPC's own spelling of a DNS target; a Kubernetes headless
// Service's name): those are resolved at start and again every interval (the gateway's
// --sandboxd_resolve_interval) and soon after a create failed for an endpoint's own
// reasons. SandboxClient asks Current() for the placement set at every new sandbox.
//
// An address that leaves DNS gets no new sandboxes, but stays reachable for the handles
// that name it (SandboxClient keeps every endpoint it ever dialled), and a handle's address
// that this gateway has not seen (placed by another replica, or before a restart) is dialled
// when MayDial() says so: a handle is sealed by the gateway's key, so its address is one a
// gateway chose.
//
//   Membership m({"dns:///sandboxd.ns.svc.cluster.local:50051"}, SystemResolver());
//   m.Start();
//   for (const std::string& e : m.Current()) ...   // "10.0.3.7:50051", "[fd00::7]:50051"
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace gateway {

// A --sandboxd entry that names many addresses: "dns:///NAME:PORT" or "dns:NAME:PORT".
struct DnsTarget {
  std::string spelled;  // as given, for messages
  std::string name;
  std::string port;
};

// Whether `endpoint` is a DNS target ("dns:" ...), well formed or not.
bool IsDnsEndpoint(const std::string& endpoint);
// The target of a "dns:" endpoint; INVALID_ARGUMENT for one without a port, or naming a DNS
// server (dns://SERVER/...: the gateway asks the system's resolver).
absl::StatusOr<DnsTarget> ParseDnsEndpoint(const std::string& endpoint);
// Whether `endpoint` is an IP address and port, as resolution yields them: "10.0.3.7:50051",
// "[fd00::7]:50051".
bool IsAddressEndpoint(const std::string& endpoint);

// Resolves a DNS target to addresses.
class Resolver {
 public:
  virtual ~Resolver() = default;
  // Every address of the target, as endpoints (IsAddressEndpoint); an error when resolution
  // fails or finds none.
  virtual absl::StatusOr<std::vector<std::string>> Resolve(const DnsTarget& target) = 0;
};

// The system's resolver (getaddrinfo: /etc/hosts, /etc/resolv.conf; IPv4 and IPv6).
std::unique_ptr<Resolver> SystemResolver();

struct MembershipOptions {
  // How often DNS targets are resolved again.
  absl::Duration interval = absl::Seconds(5);
  // Resolutions that a failed create asks for come no closer than this to the last one.
  absl::Duration min_gap = absl::Seconds(1);
  // Addresses placed over per DNS target: every new sandbox asks each of them GetInfo.
  // Beyond it, the addresses already placed over are kept first.
  size_t max_addresses = kMaxAddresses;
  static constexpr size_t kMaxAddresses = 64;
};

class Membership {
 public:
  // `endpoints`: --sandboxd's entries (ParseDnsEndpoint must accept every "dns:" one). DNS
  // targets are resolved here, on the caller's thread, once; Start() keeps them current.
  Membership(std::vector<std::string> endpoints, std::unique_ptr<Resolver> resolver,
             MembershipOptions options = {});
  ~Membership();  // Stop()
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Starts the thread that resolves every interval and after Trouble(); none without a DNS
  // target.
  void Start();
  // Called by Start()'s thread after each of its resolutions (from the next one on, when
  // set while it runs), outside Membership's lock: what depends on the set changes with it
  // even while no caller asks Current().
  void AfterEachResolution(std::function<void()> after);
  // Stops the thread of Start(): once Stop returns, nothing calls AfterEachResolution's
  // function. Safe to call again.
  void Stop();
  // The endpoints new sandboxes may go to: every fixed one, and each DNS target's addresses
  // of its last good resolution (at most max_addresses each).
  std::vector<std::string> Current() const;
  // Whether the endpoint of a handle that Current() does not hold may be dialled: an address
  // (IsAddressEndpoint) when a DNS target is configured.
  bool MayDial(const std::string& endpoint) const;
  // A create failed for an endpoint's own reasons: resolve again soon (no sooner than
  // min_gap after the last resolution). Never blocks.
  void Trouble();
  // Resolves every DNS target now, on the caller's thread. A failure (or no address) keeps
  // the target's last set and logs a warning.
  void ResolveNow();
  // Resolutions done so far (each of every target).
  int resolutions() const;

 private:
  void Loop();
  bool Woken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // stopping, or Trouble() came
  // The target's new set from `found`: its current addresses still found first, then the
  // others, at most max_addresses.
  // Logs `text` as target t's warning unless it is the one logged less than a minute ago.
  void Warn(size_t t, const std::string& text) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> Bounded(const std::vector<std::string>& current,
                                   std::vector<std::string> found) const;

  const std::vector<std::string> fixed_;
  std::vector<DnsTarget> targets_;
  const std::unique_ptr<Resolver> resolver_;
  const MembershipOptions options_;
  mutable codemode::Mutex mu_;
  std::vector<std::vector<std::string>> addresses_ ABSL_GUARDED_BY(mu_);  // per target
  struct Warning {
    std::string text;
    absl::Time at = absl::InfinitePast();
  };
  std::vector<Warning> warnings_ ABSL_GUARDED_BY(mu_);  // per target: the last one logged
  codemode::SteadyTime last_resolved_ ABSL_GUARDED_BY(mu_) = codemode::SteadyTime::min();
  int resolutions_ ABSL_GUARDED_BY(mu_) = 0;
  bool soon_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> after_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gateway
