#include "sandboxd/egress_hub.h"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/log_text.h"
#include "base/thread.h"
#include "egress/host_name.h"
#include "egress/session_proxy.h"
#include "egress/system_resolver.h"
#include "sandboxd/log.h"

namespace sandboxd {

using egress::Policy;

// --egress_hosts first, then the host's resolver.
class EgressHub::HostsResolver : public egress::Resolver {
 public:
  HostsResolver(boost::asio::io_context& io,
                const std::vector<std::pair<std::string, egress::IpAddress>>& hosts)
      : io_(io), system_(io) {
    for (const auto& [name, address] : hosts) hosts_[name].push_back(address);
  }
  void Resolve(const std::string& host, Callback done) override {
    auto it = hosts_.find(host);
    if (it == hosts_.end()) return system_.Resolve(host, std::move(done));
    boost::asio::post(io_, [addresses = it->second, done = std::move(done)] { done(addresses); });
  }

 private:
  boost::asio::io_context& io_;
  egress::SystemResolver system_;
  std::map<std::string, std::vector<egress::IpAddress>> hosts_;
};

class EgressHub::Proxy : public SessionEgress {
 public:
  Proxy(EgressHub* hub, std::string session, std::unique_ptr<egress::SessionProxy> proxy,
        std::shared_ptr<egress::ConnectionSlots> owner_slots,
        std::shared_ptr<egress::ByteQuota> owner_bytes)
      : hub_(hub),
        session_(std::move(session)),
        proxy_(std::move(proxy)),
        owner_slots_(std::move(owner_slots)),
        owner_bytes_(std::move(owner_bytes)) {}
  ~Proxy() override {
    proxy_->Stop();
    hub_->Forget(session_);
  }
  absl::Status Narrow(absl::string_view policy) override {
    absl::StatusOr<Policy> parsed = Policy::Parse(policy);
    if (!parsed.ok()) return parsed.status();
    return proxy_->Narrow(*parsed);
  }
  std::string policy() const override { return proxy_->policy().ToString(); }
  uint64_t bytes_used() const override { return proxy_->bytes_used(); }

 private:
  EgressHub* const hub_;
  const std::string session_;
  std::unique_ptr<egress::SessionProxy> proxy_;
  // The owner's shares live as long as one of its sessions has egress.
  std::shared_ptr<egress::ConnectionSlots> owner_slots_;
  std::shared_ptr<egress::ByteQuota> owner_bytes_;
};

absl::StatusOr<std::vector<std::pair<std::string, egress::IpAddress>>> ParseEgressHosts(
    absl::string_view text) {
  std::vector<std::pair<std::string, egress::IpAddress>> out;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    absl::StatusOr<std::string> name = egress::NormalizeHostName(kv.first);
    std::optional<egress::IpAddress> address = egress::IpAddress::Parse(kv.second);
    if (!name.ok() || !address) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--egress_hosts entry \"", codemode::LogText(entry), "\" is not NAME=ADDRESS"));
    }
    out.emplace_back(*name, *address);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<EgressHub>> EgressHub::Create(EgressHubOptions options) {
  absl::StatusOr<Policy> default_policy = Policy::Parse(options.default_policy);
  if (!default_policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--egress_default: ", default_policy.status().message()));
  }
  absl::StatusOr<Policy> max_policy =
      options.max_policy.empty() ? *default_policy : Policy::Parse(options.max_policy);
  if (!max_policy.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--egress_max: ", max_policy.status().message()));
  }
  if (absl::Status s = default_policy->WithinMaximum(*max_policy, "--egress_max allows"); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--egress_default: ", s.message()));
  }
  return std::unique_ptr<EgressHub>(
      new EgressHub(std::move(options), *std::move(default_policy), *std::move(max_policy)));
}

EgressHub::EgressHub(EgressHubOptions options, Policy default_policy, Policy max_policy)
    : options_(std::move(options)),
      default_(std::move(default_policy)),
      max_(std::move(max_policy)),
      work_(boost::asio::make_work_guard(io_)),
      resolver_(std::make_unique<HostsResolver>(io_, options_.hosts)),
      thread_(codemode::StartThread("egress", [this] {
        io_.run();
        drained_.Notify();
      })) {}

// The proxies are gone (the manager goes first): what is left to run is their last decisions
// and the end summaries' timers, which get their time, within a bound.
EgressHub::~EgressHub() {
  work_.reset();
  if (!drained_.WaitForNotificationWithTimeout(absl::FromChrono(kAuditEndWait) + absl::Seconds(1))) {
    io_.stop();
  }
  thread_.join();
}

absl::StatusOr<std::string> EgressHub::Admit(absl::string_view requested) const {
  if (requested.empty()) return default_.ToString();
  absl::StatusOr<Policy> policy = Policy::Parse(requested);
  if (!policy.ok()) return policy.status();
  if (absl::Status s = policy->WithinMaximum(max_); !s.ok()) return s;
  return policy->ToString();
}

absl::StatusOr<std::string> EgressHub::Canonical(absl::string_view policy) const {
  absl::StatusOr<Policy> parsed = Policy::Parse(policy);
  if (!parsed.ok()) return parsed.status();
  return parsed->ToString();
}

absl::StatusOr<std::unique_ptr<SessionEgress>> EgressHub::Open(const std::string& session,
                                                               const std::string& owner,
                                                               const std::string& policy,
                                                               const std::string& relay_socket,
                                                               codemode::UniqueFd listener,
                                                               uint64_t bytes_used) {
  absl::StatusOr<Policy> parsed = Policy::Parse(policy);
  if (!parsed.ok()) return parsed.status();
  std::shared_ptr<egress::ConnectionSlots> slots;
  std::shared_ptr<egress::ByteQuota> bytes;
  {
    codemode::MutexLock lock(&mu_);
    for (auto it = owners_.begin(); it != owners_.end();) {
      it = it->second.slots.expired() ? owners_.erase(it) : std::next(it);
    }
    Owner& o = owners_[owner];
    slots = o.slots.lock();
    bytes = o.bytes.lock();
    if (!slots) {
      slots = std::make_shared<egress::ConnectionSlots>("--egress_max_connections_per_owner",
                                                        options_.max_connections_per_owner);
      bytes = std::make_shared<egress::ByteQuota>("--egress_max_bytes_per_owner",
                                                  options_.max_bytes_per_owner);
      o = {slots, bytes};
    }
  }
  auto proxy = std::make_unique<egress::SessionProxy>(
      io_, egress::SessionProxy::Options{session, owner, *std::move(parsed), options_.limits, slots,
                                         bytes, bytes_used, resolver_.get(), this});
  if (absl::Status s = listener.get() >= 0 ? proxy->Adopt(std::move(listener))
                                            : proxy->DialUnix(relay_socket, options_.parked);
      !s.ok()) {
    return s;
  }
  // The owner's count after a restart is the sum of its sessions' recorded ones (each within
  // the session's quota): what its ended sessions used is not recorded.
  if (bytes_used > 0) bytes->Restore(std::min(bytes_used, options_.limits.max_bytes_per_session));
  return std::unique_ptr<SessionEgress>(
      new Proxy(this, session, std::move(proxy), std::move(slots), std::move(bytes)));
}

namespace {

// A peer's text inside '...' of an audit line.
std::string Quoted(absl::string_view text) { return codemode::LogQuoted(text); }

}  // namespace

void EgressHub::Hold(HeldBack* held, const egress::Decision& d) {
  ++held->count;
  held->up += d.bytes_up;
  held->down += d.bytes_down;
  held->dropped += d.bytes_dropped;
  const std::string destination = absl::StrCat(Quoted(d.host), ":", d.port);
  if (held->named.count(destination) == 0 && held->named.size() >= kAuditNamed) {
    ++held->unnamed;
  } else {
    held->named.insert(destination);
  }
}

// "3 allowed (up=.. down=.. dropped=..; to a:443, b:80 and 1 more) and 2 refused (...) connections
// not logged", or empty when none was held back.
std::string EgressHub::Summary(const AuditWindow& w) {
  std::vector<std::string> parts;
  for (int allowed : {1, 0}) {
    const HeldBack& h = w.held[allowed];
    if (h.count == 0) continue;
    std::string to = absl::StrJoin(h.named, ", ");
    if (h.unnamed > 0) absl::StrAppend(&to, " and ", h.unnamed, " to other destinations");
    parts.push_back(absl::StrCat(h.count, allowed ? " allowed" : " refused", " (up=", h.up,
                                 " down=", h.down, " dropped=", h.dropped, "; ", to, ")"));
  }
  if (parts.empty()) return "";
  return absl::StrCat(absl::StrJoin(parts, " and "), " connections not logged (over ",
                      kAuditBurstAllowed, " allowed and ", kAuditBurst, " refused a minute)");
}

void EgressHub::Record(const egress::Decision& d) {
  if (options_.metrics) options_.metrics->EgressDecision(d.allowed, d.bytes_up, d.bytes_down);
  std::string before;
  {
    codemode::MutexLock lock(&mu_);
    const int64_t now = absl::ToUnixMillis(absl::Now());
    PruneLocked(now);
    AuditWindow& w = audit_[d.session];
    if (!w.forgotten && now - w.started_ms >= 60'000) {
      before = Summary(w);
      w = AuditWindow();
      w.started_ms = now;
      w.owner = d.owner;
    }
    // Once the end's summary is written, the few decisions still to come (at most the
    // session's connection cap) are written in full, so that none goes unlogged.
    if (!w.summarized && w.written[d.allowed] >= (d.allowed ? kAuditBurstAllowed : kAuditBurst)) {
      Hold(&w.held[d.allowed], d);
      return;
    }
    ++w.written[d.allowed];
  }
  if (!before.empty()) {
    spdlog::info("egress session={} owner='{}': {}", d.session, Quoted(d.owner), before);
  }
  spdlog::info("egress {} session={} owner='{}' {} {}:{} address={} status={} up={} down={} "
               "dropped={} why='{}'",
               d.allowed ? "allowed" : "refused", d.session, Quoted(d.owner),
               d.method.empty() ? "-" : Quoted(d.method), Quoted(d.host), d.port,
               d.address.empty() ? "-" : d.address, d.status, d.bytes_up, d.bytes_down,
               d.bytes_dropped, Quoted(d.reason));
}

void EgressHub::Forget(const std::string& session) {
  {
    codemode::MutexLock lock(&mu_);
    PruneLocked(absl::ToUnixMillis(absl::Now()));
    // Kept (pruned with the others past 4096) so that the decisions of the connections its
    // end cuts, which come after this, are counted in this window, not in one of their own.
    audit_[session].forgotten = true;
  }
  auto timer = std::make_shared<boost::asio::steady_timer>(io_, kAuditEndWait);
  timer->async_wait([this, session, timer](boost::system::error_code) { WriteEndSummary(session); });
}

void EgressHub::WriteEndSummary(const std::string& session) {
  std::string summary, owner;
  {
    codemode::MutexLock lock(&mu_);
    auto it = audit_.find(session);
    if (it == audit_.end()) return;
    it->second.summarized = true;
    summary = Summary(it->second);
    owner = it->second.owner;
  }
  if (!summary.empty()) spdlog::info("egress session={} owner='{}': {}", session, Quoted(owner), summary);
}

void EgressHub::PruneLocked(int64_t now) {
  if (audit_.size() <= 4096) return;
  for (auto it = audit_.begin(); it != audit_.end();) {
    it = now - it->second.started_ms >= 60'000 ? audit_.erase(it) : std::next(it);
  }
}

}  // namespace sandboxd
