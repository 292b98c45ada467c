// Membership: DNS targets resolved by getaddrinfo on a thread of their own (see
// sandboxd_membership.h).
#include "bridge/sandboxd_membership.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log_text.h"
#include "base/thread.h"
#include "spdlog/spdlog.h"

namespace gateway {

bool IsDnsEndpoint(const std::string& endpoint) { return absl::StartsWith(endpoint, "dns:"); }

absl::StatusOr<DnsTarget> ParseDnsEndpoint(const std::string& endpoint) {
  std::string rest = endpoint.substr(4);
  if (absl::StartsWith(rest, "//")) {
    if (!absl::StartsWith(rest, "///")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sandboxd endpoint ", endpoint, " names a DNS server; the gateway asks the system's "
          "resolver (/etc/resolv.conf): write dns:///NAME:PORT"));
    }
    rest = rest.substr(3);
  }
  const size_t colon = rest.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(rest.substr(colon + 1), &port) ||
      port == 0 || port > 65535 || rest.find(':') != colon) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sandboxd endpoint ", endpoint, ": a DNS name is written dns:///NAME:PORT (sandboxd's "
        "--listen_tcp port), e.g. dns:///sandboxd.sandboxes.svc.cluster.local:50051"));
  }
  return DnsTarget{endpoint, rest.substr(0, colon), std::to_string(port)};
}

bool IsAddressEndpoint(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port == 0 ||
      port > 65535) {
    return false;
  }
  std::string host = endpoint.substr(0, colon);
  unsigned char buf[sizeof(in6_addr)];
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    return inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) == 1;
  }
  return inet_pton(AF_INET, host.c_str(), buf) == 1;
}

namespace {

class GetaddrinfoResolver : public Resolver {
 public:
  absl::StatusOr<std::vector<std::string>> Resolve(const DnsTarget& target) override {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (int rc = getaddrinfo(target.name.c_str(), target.port.c_str(), &hints, &found); rc != 0) {
      return absl::UnavailableError(gai_strerror(rc));
    }
    std::vector<std::string> addresses;
    for (const addrinfo* a = found; a; a = a->ai_next) {
      char text[INET6_ADDRSTRLEN] = {};
      if (a->ai_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof(text));
        addresses.push_back(absl::StrCat(text, ":", target.port));
      } else if (a->ai_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr, text, sizeof(text));
        addresses.push_back(absl::StrCat("[", text, "]:", target.port));
      }
    }
    freeaddrinfo(found);
    if (addresses.empty()) return absl::NotFoundError("no IPv4 or IPv6 address");
    return addresses;
  }
};

}  // namespace

std::unique_ptr<Resolver> SystemResolver() { return std::make_unique<GetaddrinfoResolver>(); }

Membership::Membership(std::vector<std::string> endpoints, std::unique_ptr<Resolver> resolver,
                       MembershipOptions options)
    : fixed_([&] {
        std::vector<std::string> fixed;
        for (const std::string& e : endpoints) {
          if (!IsDnsEndpoint(e)) fixed.push_back(e);
        }
        return fixed;
      }()),
      resolver_(std::move(resolver)),
      options_(options) {
  for (const std::string& e : endpoints) {
    if (!IsDnsEndpoint(e)) continue;
    absl::StatusOr<DnsTarget> target = ParseDnsEndpoint(e);
    if (target.ok()) targets_.push_back(*std::move(target));
    else spdlog::error("{}", std::string(target.status().message()));  // CheckEndpoints refused it before
  }
  {
    codemode::MutexLock lock(&mu_);
    addresses_.resize(targets_.size());
    warnings_.resize(targets_.size());
  }
  if (!targets_.empty()) ResolveNow();
}

Membership::~Membership() { Stop(); }

void Membership::Start() {
  if (targets_.empty() || thread_.joinable()) return;
  thread_ = codemode::StartThread("sandboxd dns", [this] { Loop(); });
}

void Membership::AfterEachResolution(std::function<void()> after) {
  codemode::MutexLock lock(&mu_);
  after_ = std::move(after);
}

void Membership::Stop() {
  {
    codemode::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Membership::Loop() {
  mu_.Lock();
  while (!stop_) {
    mu_.AwaitWithTimeout(absl::Condition(this, &Membership::Woken), options_.interval);
    if (stop_) break;
    // An early one waits out the gap since the last (a failing endpoint's creates come fast).
    if (soon_ && mu_.AwaitWithDeadline(absl::Condition(&stop_),
                                      codemode::SteadyAfter(last_resolved_, options_.min_gap))) {
      break;
    }
    soon_ = false;
    const std::function<void()> after = after_;
    mu_.Unlock();
    ResolveNow();  // getaddrinfo may take the resolver's timeouts: never under mu_
    if (after) after();
    mu_.Lock();
  }
  mu_.Unlock();
}

bool Membership::Woken() const { return stop_ || soon_; }

void Membership::Trouble() {
  codemode::MutexLock lock(&mu_);
  soon_ = true;
}

std::vector<std::string> Membership::Bounded(const std::vector<std::string>& current,
                                             std::vector<std::string> found) const {
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  std::vector<std::string> kept;
  for (const std::string& a : current) {
    if (std::binary_search(found.begin(), found.end(), a)) kept.push_back(a);
  }
  for (const std::string& a : found) {
    if (std::find(kept.begin(), kept.end(), a) == kept.end()) kept.push_back(a);
  }
  if (kept.size() > options_.max_addresses) kept.resize(options_.max_addresses);
  std::sort(kept.begin(), kept.end());
  return kept;
}

namespace {

// What of `a` is not in `b` (both sorted).
std::vector<std::string> Minus(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// Up to 8 of `addresses`, and how many more: a log line stays short whatever DNS answers.
std::string Sample(const std::vector<std::string>& addresses) {
  constexpr size_t kNamed = 8;
  if (addresses.empty()) return "none";
  std::vector<std::string> named(addresses.begin(), addresses.begin() + std::min(kNamed, addresses.size()));
  std::string out = absl::StrJoin(named, ", ");
  if (addresses.size() > kNamed) absl::StrAppend(&out, " and ", addresses.size() - kNamed, " more");
  return out;
}

}  // namespace

// A warning of target t's resolution: when it says something new, or a minute after it last
// did (a resolver that keeps failing, every period, is one line a minute).
void Membership::Warn(size_t t, const std::string& text) {
  Warning& w = warnings_[t];
  const absl::Time now = absl::Now();
  if (text == w.text && now - w.at < absl::Minutes(1)) return;
  w = {text, now};
  spdlog::warn("{}", text);
}

void Membership::ResolveNow() {
  for (size_t t = 0; t < targets_.size(); ++t) {
    const DnsTarget& target = targets_[t];
    absl::StatusOr<std::vector<std::string>> found = resolver_->Resolve(target);
    codemode::MutexLock lock(&mu_);
    ++resolutions_;
    last_resolved_ = std::chrono::steady_clock::now();
    std::vector<std::string>& current = addresses_[t];
    if (!found.ok() || found->empty()) {
      Warn(t, absl::StrCat("resolving ", target.spelled, " failed (",
                           found.ok() ? "no address" : codemode::LogText(found.status().message()),
                           "): new sandboxes go to its last ", current.size(), " address(es)"));
      continue;
    }
    if (found->size() > options_.max_addresses) {
      Warn(t, absl::StrCat(target.spelled, " has over ", options_.max_addresses,
                           " addresses: new sandboxes go to ", options_.max_addresses, " of them"));
    }
    std::vector<std::string> next = Bounded(current, *std::move(found));
    if (next == current) continue;
    spdlog::info("{}: new sandboxes go to {} address(es); added {}; gone {}", target.spelled, next.size(),
                 Sample(Minus(next, current)), Sample(Minus(current, next)));
    current = std::move(next);
  }
}

std::vector<std::string> Membership::Current() const {
  std::vector<std::string> current = fixed_;
  codemode::MutexLock lock(&mu_);
  for (const std::vector<std::string>& addresses : addresses_) {
    for (const std::string& a : addresses) {
      if (std::find(current.begin(), current.end(), a) == current.end()) current.push_back(a);
    }
  }
  return current;
}

bool Membership::MayDial(const std::string& endpoint) const {
  return !targets_.empty() && IsAddressEndpoint(endpoint);
}

int Membership::resolutions() const {
  codemode::MutexLock lock(&mu_);
  return resolutions_;
}

}  // namespace gateway
