// SandboxdEndpoints: channels with fast reconnect and keepalive, TLS to TCP endpoints (see
// sandboxd_endpoints.h).
#include "bridge/sandboxd_endpoints.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

// How often the channel to an endpoint pings it, and how long an answer may take.
constexpr std::chrono::milliseconds kKeepaliveTime{10000};
constexpr std::chrono::milliseconds kKeepaliveTimeout{5000};
// How long one attempt to connect to an endpoint may take before it is cut and tried again.
// A refused connection (sandboxd restarting) fails at once whatever this is; a host that
// drops the packets (cut off, gone) holds an attempt this long, during which calls to it
// wait (up to their deadlines) instead of failing at once.
constexpr std::chrono::milliseconds kConnectTimeout{5000};

std::shared_ptr<grpc::Channel> DialChannel(const std::string& endpoint, const SandboxdTls& tls,
                                   std::chrono::milliseconds idle_timeout, int max_receive) {
  grpc::ChannelArguments args;
  // A channel without calls for idle_timeout goes idle: it drops its connection and stops
  // reconnecting and pinging until the next call. An endpoint that left DNS, or went away,
  // then costs nothing however long the gateway lives (it is dialled again if a handle
  // names it).
  args.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS, static_cast<int>(idle_timeout.count()));
  // sandboxd restarts should be noticed within a second, not after gRPC's default
  // exponential backoff of up to two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // gRPC reads this argument as the least time a connection attempt gets (TCP, TLS and
  // HTTP/2's settings), not as a backoff: kConnectTimeout lets a loaded host or a long
  // link finish its handshake, where a second would cut every attempt and never reach it.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(kConnectTimeout.count()));
  // A peer that is gone without a word (its host cut off, its machine down) is noticed by
  // a ping unanswered within kKeepaliveTimeout, every kKeepaliveTime, whether or not a
  // call is open: calls on it fail then, naming the endpoint, instead of at their deadline,
  // and a reconnect follows. sandboxd accepts pings this often (its Serve()).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTime.count());
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeout.count());
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetMaxReceiveMessageSize(max_receive);
  args.SetMaxSendMessageSize(64 << 20);
  // A TCP peer proves who it is before the token or any code goes to it: TLS always
  // (with no CA given, the system's trust store decides; CheckEndpoints refuses that
  // at start). A unix socket's directory is the boundary. An address resolved from a DNS
  // name is checked against --sandboxd_tls_server_name, which CheckEndpoints requires then.
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!IsUnixEndpoint(endpoint)) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = tls.ca;
    ssl.pem_cert_chain = tls.cert_chain;
    ssl.pem_private_key = tls.private_key;
    creds = grpc::SslCredentials(ssl);
    if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  }
  return grpc::CreateCustomChannel(endpoint, creds, args);
}

}  // namespace

SandboxdEndpoints::SandboxdEndpoints(const SandboxdTls& tls, std::string tcp_token,
                                     std::chrono::milliseconds idle_timeout)
    : tls_(tls), tcp_token_(std::move(tcp_token)), idle_timeout_(idle_timeout) {}

size_t SandboxdEndpoints::Add(const std::string& name) {
  codemode::MutexLock lock(&mu_);
  auto [it, added] = index_.try_emplace(name, endpoints_.size());
  if (!added) return it->second;
  auto e = std::make_unique<Endpoint>();
  e->name = name;
  e->tcp = !IsUnixEndpoint(name);
  endpoints_.push_back(std::move(e));
  return it->second;
}

std::optional<size_t> SandboxdEndpoints::Find(const std::string& name) const {
  codemode::MutexLock lock(&mu_);
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

size_t SandboxdEndpoints::size() const {
  codemode::MutexLock lock(&mu_);
  return endpoints_.size();
}

SandboxdEndpoints::Endpoint& SandboxdEndpoints::At(size_t i) const {
  codemode::MutexLock lock(&mu_);
  return *endpoints_.at(i);
}

std::string SandboxdEndpoints::Name(size_t i) const { return At(i).name; }

std::shared_ptr<SandboxdEndpoints::Dial> SandboxdEndpoints::DialOf(size_t i, Use use) {
  codemode::MutexLock lock(&mu_);
  Endpoint& e = *endpoints_.at(i);
  if (use == Use::kCall) e.used_at = absl::Now();
  if (!e.dial) {
    dialled_.insert(i);
    // Dialling makes objects, not connections (a channel connects at its first call).
    std::shared_ptr<grpc::Channel> channel = DialChannel(e.name, tls_, idle_timeout_, kMaxReceiveBytes);
    std::shared_ptr<grpc::Channel> info = DialChannel(e.name, tls_, idle_timeout_, kMaxInfoBytes);
    e.dial = std::make_shared<Dial>(
        Dial{channel, sandbox::v1::SandboxService::Stub(channel), info, sandbox::v1::SandboxService::Stub(info)});
  }
  return e.dial;
}

SandboxdEndpoints::StubPtr SandboxdEndpoints::Stub(size_t i) {
  std::shared_ptr<Dial> d = DialOf(i, Use::kCall);
  grpc_connectivity_state state = d->channel->GetState(/*try_to_connect=*/true);
  auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
  while (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_SHUTDOWN) {
    if (!d->channel->WaitForStateChange(state, deadline)) break;
    state = d->channel->GetState(true);
  }
  return StubPtr(d, &d->stub);
}

SandboxdEndpoints::StubPtr SandboxdEndpoints::StubNow(size_t i) {
  std::shared_ptr<Dial> d = DialOf(i, Use::kCall);
  return StubPtr(d, &d->stub);
}

SandboxdEndpoints::StubPtr SandboxdEndpoints::InfoStub(size_t i) {
  std::shared_ptr<Dial> d = DialOf(i, Use::kCall);
  return StubPtr(d, &d->info_stub);
}

SandboxdEndpoints::StubPtr SandboxdEndpoints::ListStub(size_t i) {
  std::shared_ptr<Dial> d = DialOf(i, Use::kList);
  return StubPtr(d, &d->stub);
}

void SandboxdEndpoints::ConnectForPlacement(size_t i) {
  if (!At(i).tcp) return;  // a unix socket connects at once
  (void)DialOf(i, Use::kList)->info_channel->GetState(/*try_to_connect=*/true);
}

void SandboxdEndpoints::Answered(size_t i) {
  codemode::MutexLock lock(&mu_);
  endpoints_.at(i)->served_at = absl::Now();
}

std::vector<size_t> SandboxdEndpoints::Serving() const {
  codemode::MutexLock lock(&mu_);
  const absl::Time since = absl::Now() - absl::FromChrono(idle_timeout_);
  std::vector<size_t> serving;
  for (size_t i : dialled_) {
    if (endpoints_[i]->served_at > since) serving.push_back(i);
  }
  return serving;
}

bool SandboxdEndpoints::InUse(size_t i) const {
  std::shared_ptr<Dial> d;
  {
    codemode::MutexLock lock(&mu_);
    d = endpoints_.at(i)->dial;
  }
  return d && d->channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_IDLE;
}

bool SandboxdEndpoints::dialled(size_t i) const {
  codemode::MutexLock lock(&mu_);
  return endpoints_.at(i)->dial != nullptr;
}

size_t SandboxdEndpoints::Release(const std::vector<size_t>& members, absl::Duration unused) {
  std::vector<std::shared_ptr<Dial>> released;  // destroyed outside the lock
  {
    codemode::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    const std::set<size_t> kept(members.begin(), members.end());
    for (auto it = dialled_.begin(); it != dialled_.end();) {
      Endpoint& e = *endpoints_[*it];
      // use_count 1: no stub of it is held (a new one is only taken under mu_).
      if (e.dial.use_count() > 1 || now - e.used_at < unused || kept.count(*it) > 0 ||
          now - e.served_at < absl::FromChrono(idle_timeout_)) {
        ++it;
        continue;
      }
      released.push_back(std::move(e.dial));
      it = dialled_.erase(it);
    }
  }
  return released.size();
}

void SandboxdEndpoints::Prepare(grpc::ClientContext& ctx, size_t i,
                                std::chrono::system_clock::time_point deadline) const {
  ctx.set_deadline(deadline);
  if (!tcp_token_.empty() && At(i).tcp) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", tcp_token_));
}

int SandboxdEndpoints::created(size_t i) const {
  codemode::MutexLock lock(&mu_);
  return endpoints_.at(i)->created;
}

void SandboxdEndpoints::Created(size_t i) {
  codemode::MutexLock lock(&mu_);
  ++endpoints_.at(i)->created;
}

absl::Time SandboxdEndpoints::failed_at(size_t i) const {
  codemode::MutexLock lock(&mu_);
  return endpoints_.at(i)->failed_at;
}

bool SandboxdEndpoints::Failed(size_t i, absl::Time now) {
  codemode::MutexLock lock(&mu_);
  Endpoint& e = *endpoints_.at(i);
  e.failed_at = now;
  if (now - e.warned_at < kFailedCreatePenalty) return false;
  e.warned_at = now;
  return true;
}

absl::Time SandboxdEndpoints::silent_at(size_t i) const {
  codemode::MutexLock lock(&mu_);
  return endpoints_.at(i)->silent_at;
}

void SandboxdEndpoints::Heard(size_t i, const grpc::Status& status) {
  const grpc::StatusCode code = status.error_code();
  const bool silent = code == grpc::StatusCode::DEADLINE_EXCEEDED || code == grpc::StatusCode::RESOURCE_EXHAUSTED;
  std::string name;
  {
    codemode::MutexLock lock(&mu_);
    Endpoint& e = *endpoints_.at(i);
    e.silent_at = silent ? absl::Now() : absl::InfinitePast();
    // What is logged is a change of the status code it ended with.
    if (e.heard == static_cast<int>(code)) return;
    e.heard = static_cast<int>(code);
    name = e.name;
  }
  if (code == grpc::StatusCode::DEADLINE_EXCEEDED) {
    spdlog::debug("sandboxd at {}: did not answer placement's GetInfo in time; placed after those that do", name);
  } else if (status.ok()) {
    spdlog::debug("sandboxd at {}: answers placement's GetInfo", name);
  } else {
    spdlog::debug("sandboxd at {}: placement's GetInfo failed ({}: {}); placed after those that answer", name,
                  static_cast<int>(status.error_code()), codemode::LogLongText(status.error_message()));
  }
}

}  // namespace gateway
