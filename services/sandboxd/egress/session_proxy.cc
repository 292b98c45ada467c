#include "egress/session_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <type_traits>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "egress/parked_dialer.h"
#include "egress/proxy_connection.h"

namespace sandboxd {
namespace egress {

namespace asio = boost::asio;
using boost::system::error_code;

class SessionProxy::State : public std::enable_shared_from_this<State> {
 public:
  State(asio::io_context& io, Options options)
      : io_(io),
        owner_slots_(std::move(options.owner_slots)),
        session_slots_(std::make_shared<ConnectionSlots>("max_connections", options.limits.max_connections)),
        policy_(std::make_shared<const Policy>(std::move(options.policy))) {
    auto context = std::make_shared<ProxyConnection::Context>();
    context->session = std::move(options.session);
    context->owner = std::move(options.owner);
    context->limits = options.limits;
    context->resolver = options.resolver;
    context->sink = options.sink;
    context->quotas.push_back(
        std::make_shared<ByteQuota>("max_bytes_per_session", options.limits.max_bytes_per_session));
    if (options.bytes_used > 0) context->quotas.front()->Restore(options.bytes_used);
    if (options.owner_bytes) context->quotas.push_back(std::move(options.owner_bytes));
    context_ = std::move(context);
  }

  template <typename Protocol>
  absl::Status Listen(const typename Protocol::endpoint& endpoint, std::string* bound) {
    auto acceptor = std::make_shared<typename Protocol::acceptor>(asio::make_strand(io_));
    error_code ec;
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("egress proxy cannot listen: ", ec.message()));
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      if (bound) *bound = std::to_string(acceptor->local_endpoint().port());
    }
    return Serve(std::move(acceptor));
  }

  // Accepts on `acceptor` until Stop.
  template <typename Acceptor>
  absl::Status Serve(std::shared_ptr<Acceptor> acceptor) {
    {
      codemode::MutexLock lock(&mu_);
      if (stopped_) return absl::FailedPreconditionError("the egress proxy is stopped");
      closers_.push_back([acceptor] {
        asio::post(acceptor->get_executor(), [acceptor] {
          error_code ignored;
          acceptor->close(ignored);
        });
      });
    }
    Accept(acceptor);
    return absl::OkStatus();
  }

  // An accept that fails (no descriptor left: EMFILE, ENFILE, ENOBUFS) leaves the
  // connection waiting, so accepting again at once would fail again at once, spinning the
  // thread every session's egress shares: the next try waits, 10 ms doubling to 1 s.
  template <typename Acceptor>
  void Accept(std::shared_ptr<Acceptor> acceptor, std::chrono::milliseconds pause = {}) {
    acceptor->async_accept(asio::make_strand(io_), [self = shared_from_this(), acceptor, pause](
                                                       error_code ec, auto socket) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
      if (!ec) {
        self->OnAccepted(ProxyConnection::Socket(std::move(socket)));
        return self->Accept(acceptor);
      }
      const auto next = std::min<std::chrono::milliseconds>(
          std::max<std::chrono::milliseconds>(pause * 2, std::chrono::milliseconds(10)),
          std::chrono::seconds(1));
      auto timer = std::make_shared<asio::steady_timer>(acceptor->get_executor(), next);
      timer->async_wait([self, acceptor, timer, next](error_code) {
        if (acceptor->is_open()) self->Accept(acceptor, next);
      });
    });
  }

  void OnAccepted(ProxyConnection::Socket socket);
  std::chrono::milliseconds redial_interval() const { return context_->limits.redial_interval; }
  absl::Status Narrow(const Policy& narrower);
  void Stop();

  asio::io_context& io_;
  const std::shared_ptr<ConnectionSlots> owner_slots_;
  const std::shared_ptr<ConnectionSlots> session_slots_;
  std::shared_ptr<const ProxyConnection::Context> context_;
  mutable codemode::Mutex mu_;
  std::shared_ptr<const Policy> policy_ ABSL_GUARDED_BY(mu_);
  std::vector<std::weak_ptr<ProxyConnection>> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> closers_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::string unix_path_ ABSL_GUARDED_BY(mu_);  // removed by Stop
};

// Takes the session's slot, then the owner's; a full cap is answered 429 without reading
// the request, so a flood costs one accept and one short write per connection.
void SessionProxy::State::OnAccepted(ProxyConnection::Socket socket) {
  std::vector<ConnectionSlots::Slot> slots;
  std::string refusal;
  absl::StatusOr<ConnectionSlots::Slot> mine = session_slots_->Take();
  if (!mine.ok()) refusal = std::string(mine.status().message());
  if (mine.ok()) slots.push_back(*std::move(mine));
  for (const auto& quota : context_->quotas) {
    if (refusal.empty() && quota->spent()) {
      refusal = absl::StrCat(quota->used(), " bytes relayed (", quota->name(), ")");
    }
  }
  if (refusal.empty() && owner_slots_) {
    absl::StatusOr<ConnectionSlots::Slot> owners = owner_slots_->Take();
    if (!owners.ok()) refusal = std::string(owners.status().message());
    if (owners.ok()) slots.push_back(*std::move(owners));
  }
  std::shared_ptr<ProxyConnection> connection;
  {
    codemode::MutexLock lock(&mu_);
    if (stopped_) return;
    connection = std::make_shared<ProxyConnection>(std::move(socket), context_, policy_,
                                                   std::move(slots));
    connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                      [](const auto& c) { return c.expired(); }),
                       connections_.end());
    connections_.push_back(connection);
  }
  asio::post(connection->executor(), [connection, refusal] {
    if (refusal.empty()) return connection->Start();
    connection->Refuse(429, absl::StrCat("the session's egress cap: ", refusal));
  });
}

absl::Status SessionProxy::State::Narrow(const Policy& narrower) {
  std::vector<std::weak_ptr<ProxyConnection>> connections;
  std::shared_ptr<const Policy> next;
  {
    codemode::MutexLock lock(&mu_);
    if (absl::Status s = narrower.WithinMaximum(*policy_, "the session's policy"); !s.ok()) return s;
    next = std::make_shared<const Policy>(narrower);
    policy_ = next;
    connections = connections_;
  }
  for (const auto& weak : connections) {
    if (auto c = weak.lock()) asio::post(c->executor(), [c, next] { c->Recheck(next); });
  }
  return absl::OkStatus();
}

void SessionProxy::State::Stop() {
  std::vector<std::weak_ptr<ProxyConnection>> connections;
  std::vector<std::function<void()>> closers;
  std::string unix_path;
  {
    codemode::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    unix_path.swap(unix_path_);
    connections.swap(connections_);
    closers.swap(closers_);
  }
  for (const auto& close : closers) close();
  for (const auto& weak : connections) {
    if (auto c = weak.lock()) asio::post(c->executor(), [c] { c->Cut("the session's egress stopped"); });
  }
  if (!unix_path.empty()) unlink(unix_path.c_str());
}

SessionProxy::SessionProxy(asio::io_context& io, Options options)
    : state_(std::make_shared<State>(io, std::move(options))) {}

SessionProxy::~SessionProxy() { Stop(); }

absl::Status SessionProxy::ListenUnix(const std::string& path) {
  absl::Status s = state_->Listen<asio::local::stream_protocol>(
      asio::local::stream_protocol::endpoint(path), nullptr);
  if (s.ok()) {
    codemode::MutexLock lock(&state_->mu_);
    state_->unix_path_ = path;
  }
  return s;
}

absl::StatusOr<uint16_t> SessionProxy::ListenLoopback() {
  std::string port;
  absl::Status s = state_->Listen<asio::ip::tcp>(
      asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0), &port);
  if (!s.ok()) return s;
  return static_cast<uint16_t>(std::stoi(port));
}

namespace {

// The protocol of `fd` when it is a listening TCP socket bound to a loopback address (a
// runner's, in its own network namespace); INVALID_ARGUMENT saying what it is otherwise.
absl::StatusOr<asio::ip::tcp> LoopbackListener(int fd) {
  auto option = [fd](int name) {
    int value = -1;
    socklen_t len = sizeof value;
    return getsockopt(fd, SOL_SOCKET, name, &value, &len) == 0 ? value : -1;
  };
  const int domain = option(SO_DOMAIN);
  if ((domain != AF_INET && domain != AF_INET6) || option(SO_TYPE) != SOCK_STREAM ||
      option(SO_PROTOCOL) != IPPROTO_TCP) {
    return absl::InvalidArgumentError("the handed-over egress listener is not a TCP socket");
  }
  if (option(SO_ACCEPTCONN) != 1) {
    return absl::InvalidArgumentError("the handed-over egress listener is not listening");
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return absl::InvalidArgumentError("the handed-over egress listener has no address");
  }
  const bool loopback =
      domain == AF_INET
          ? (ntohl(reinterpret_cast<sockaddr_in*>(&bound)->sin_addr.s_addr) >> 24) == 127
          : IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(&bound)->sin6_addr);
  if (!loopback) {
    return absl::InvalidArgumentError("the handed-over egress listener is not on loopback");
  }
  return domain == AF_INET ? asio::ip::tcp::v4() : asio::ip::tcp::v6();
}

}  // namespace

absl::Status SessionProxy::Adopt(codemode::UniqueFd listener) {
  absl::StatusOr<asio::ip::tcp> protocol = LoopbackListener(listener.get());
  if (!protocol.ok()) return protocol.status();
  auto acceptor = std::make_shared<asio::ip::tcp::acceptor>(asio::make_strand(state_->io_));
  error_code ec;
  acceptor->assign(*protocol, listener.get(), ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("egress proxy cannot adopt its listener: ", ec.message()));
  }
  listener.Release();  // the acceptor's now
  return state_->Serve(std::move(acceptor));
}

absl::Status SessionProxy::DialUnix(const std::string& path, size_t parked) {
  std::weak_ptr<State> weak = state_;
  auto dialer = std::make_shared<ParkedDialer>(state_->io_, path, parked,
                                               [weak](ParkedDialer::Socket socket) {
                                                 if (auto state = weak.lock()) {
                                                   state->OnAccepted(std::move(socket));
                                                 }
                                               },
                                               state_->redial_interval());
  {
    codemode::MutexLock lock(&state_->mu_);
    if (state_->stopped_) return absl::FailedPreconditionError("the egress proxy is stopped");
    state_->closers_.push_back([dialer] { dialer->Stop(); });
  }
  dialer->Start();
  return absl::OkStatus();
}

absl::Status SessionProxy::Narrow(const Policy& narrower) { return state_->Narrow(narrower); }

Policy SessionProxy::policy() const {
  codemode::MutexLock lock(&state_->mu_);
  return *state_->policy_;
}

size_t SessionProxy::open_connections() const { return state_->session_slots_->open(); }

uint64_t SessionProxy::bytes_used() const { return state_->context_->quotas.front()->used(); }

void SessionProxy::Stop() { state_->Stop(); }

}  // namespace egress
}  // namespace sandboxd
