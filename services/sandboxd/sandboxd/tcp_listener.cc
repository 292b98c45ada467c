#include "sandboxd/tcp_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/log_text.h"
#include "base/mutex.h"
#include "base/thread.h"
#include "grpcpp/support/server_interceptor.h"
#include "sandboxd/log.h"
#include "sandboxd/tcp_auth.h"

namespace sandboxd {
namespace {

// A refused connection closes this long after its refusal, so that the refusal (written
// by gRPC right after the token check returns) reaches the peer first and it reads
// UNAUTHENTICATED with the reason rather than a reset connection.
constexpr absl::Duration kRefusalLinger = absl::Milliseconds(200);
// After accept(2) fails for want of descriptors or memory, the listening sockets rest
// this long instead of waking poll(2) at once again.
constexpr absl::Duration kAcceptBackoff = absl::Milliseconds(100);

// "ADDRESS:PORT" of a peer, the same for a sockaddr and for gRPC's peer string
// (IPv4-mapped IPv6 addresses as IPv4, IPv6 ones in brackets); "" for other families.
std::string PeerKey(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return absl::StrCat(text, ":", ntohs(in->sin_port));
  }
  if (a.ss_family != AF_INET6) return "";
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
  if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
    inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof text);
    return absl::StrCat(text, ":", ntohs(in6->sin6_port));
  }
  inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
  return absl::StrCat("[", text, "]:", ntohs(in6->sin6_port));
}

// PeerKey of gRPC's peer string ("ipv4:127.0.0.1:5555", "ipv6:%5B::1%5D:5555"); nullopt
// for anything else (a unix socket's peer).
std::optional<std::string> PeerKeyOfGrpcPeer(absl::string_view peer) {
  const bool v4 = absl::ConsumePrefix(&peer, "ipv4:");
  if (!v4 && !absl::ConsumePrefix(&peer, "ipv6:")) return std::nullopt;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  std::string text;  // percent-decoded (gRPC escapes the brackets of IPv6 addresses)
  for (size_t i = 0; i < peer.size(); ++i) {
    if (peer[i] == '%' && i + 2 < peer.size() && hex(peer[i + 1]) >= 0 && hex(peer[i + 2]) >= 0) {
      text.push_back(static_cast<char>(hex(peer[i + 1]) * 16 + hex(peer[i + 2])));
      i += 2;
    } else {
      text.push_back(peer[i]);
    }
  }
  const size_t colon = text.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(text.substr(colon + 1), &port) || port > 65535) {
    return std::nullopt;
  }
  std::string host = text.substr(0, colon);
  if (!v4) {
    if (host.size() < 2 || host.front() != '[' || host.back() != ']') return std::nullopt;
    host = host.substr(1, host.size() - 2);
    host = host.substr(0, host.find('%'));  // a scope id
  }
  sockaddr_storage a{};
  if (v4) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a);
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &in->sin_addr) != 1) return std::nullopt;
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) != 1) return std::nullopt;
  }
  return PeerKey(a);
}

// Closes a connection for good: gRPC, which holds another descriptor of it, sees it end.
void CloseConnection(int fd) {
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

void LogClosed(const std::string& peer, const char* why) {
  static codemode::LogRateLimit limit(2, 10);  // a flood of peers must not flood the log
  uint64_t dropped = 0;
  if (!limit.Allow(absl::Now(), &dropped)) return;
  spdlog::info("closed the TCP connection of {}: {}{}", peer, why,
               dropped ? absl::StrCat(" (", dropped, " more such lines dropped)") : "");
}

}  // namespace

// The unauthenticated connections, one per slot at most. Used by the listener's thread
// (which alone adds, closes and frees), by the slots' token checks (Refused) and by the
// interceptor (Authenticated), on gRPC's threads. Safe for concurrent use.
class TcpConnections {
 public:
  TcpConnections(TcpConnectionLimits limits, int wake_fd)
      : limits_(limits), wake_fd_(wake_fd), slots_(limits.max_unauthenticated) {
    for (size_t i = 0; i < slots_.size(); ++i) free_.push_back(i);
  }
  ~TcpConnections() {
    CloseAll();
    close(wake_fd_);
  }

  // One per slot, added before the server starts and never changed after.
  std::vector<std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor>> acceptors;

  int wake_fd() const { return wake_fd_; }
  // Whether any connection is unauthenticated (a hint for the interceptor).
  bool watching() const { return unauthenticated_.load(std::memory_order_relaxed) > 0; }

  // A call on `slot` was refused: its unauthenticated connection closes (after
  // kRefusalLinger). A refusal on a connection that authenticated before leaves it alone.
  void Refused(size_t slot) {
    codemode::MutexLock lock(&mu_);
    Entry& e = slots_[slot];
    if (e.fd < 0 || e.authenticated || e.refused != absl::InfiniteFuture()) return;
    e.refused = absl::Now();
    Wake();
  }

  // A call with the token reached a handler from `grpc_peer`: that connection is no
  // longer watched.
  void Authenticated(const std::string& grpc_peer) {
    std::optional<std::string> key = PeerKeyOfGrpcPeer(grpc_peer);
    if (!key) return;
    codemode::MutexLock lock(&mu_);
    for (Entry& e : slots_) {
      if (e.fd >= 0 && !e.authenticated && e.peer == *key) {
        e.authenticated = true;
        unauthenticated_.fetch_sub(1, std::memory_order_relaxed);
        Wake();  // the listener's thread frees the slot
      }
    }
  }

  // Hands a newly accepted connection `fd` from `peer` to gRPC on a free slot, closing the
  // oldest unauthenticated connection when none is free.
  void Add(int fd, const sockaddr_storage& peer, int listen_fd) {
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) {
      close(fd);
      LogClosed(PeerKey(peer), "no descriptor left to watch it");
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    size_t slot;
    {
      codemode::MutexLock lock(&mu_);
      for (size_t i = 0; free_.empty() && i < slots_.size(); ++i) {
        if (slots_[i].authenticated) Release(i);
      }
      if (free_.empty()) {  // every slot holds an unauthenticated connection
        size_t oldest = 0;
        for (size_t i = 1; i < slots_.size(); ++i) {
          if (slots_[i].accepted < slots_[oldest].accepted) oldest = i;
        }
        CloseLocked(oldest, "--tcp_max_unauthenticated connections without the token were open; this was the oldest");
      }
      slot = free_.front();
      free_.pop_front();
      slots_[slot] = Entry{own, PeerKey(peer), absl::Now()};
      unauthenticated_.fetch_add(1, std::memory_order_relaxed);
    }
    // Outside mu_: the slot's token check may run (and take mu_) at once.
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
    p.listener_fd = listen_fd;
    p.fd = fd;
    acceptors[slot]->HandleNewConnection(&p);
  }

  // Closes the connections due at `now` (refused, or too old) and frees the slots of the
  // authenticated ones; returns when the next one is due.
  absl::Time CloseDue(absl::Time now) {
    codemode::MutexLock lock(&mu_);
    absl::Time next = absl::InfiniteFuture();
    for (size_t i = 0; i < slots_.size(); ++i) {
      Entry& e = slots_[i];
      if (e.fd < 0) continue;
      if (e.authenticated) {
        Release(i);
      } else if (now >= e.refused + kRefusalLinger) {
        CloseLocked(i, "it sent a call without the token");
      } else if (now >= e.accepted + limits_.auth_timeout) {
        CloseLocked(i, "no call with the token within --tcp_auth_timeout");
      } else {
        next = std::min({next, e.refused + kRefusalLinger, e.accepted + limits_.auth_timeout});
      }
    }
    return next;
  }

  // Our descriptors of the watched connections.
  std::vector<int> Watched() {
    codemode::MutexLock lock(&mu_);
    std::vector<int> fds;
    for (const Entry& e : slots_) {
      if (e.fd >= 0) fds.push_back(e.fd);
    }
    return fds;
  }

  // The connection of our descriptor `fd` ended (the peer went, or gRPC closed it).
  void Gone(int fd) {
    codemode::MutexLock lock(&mu_);
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].fd != fd) continue;
      if (slots_[i].authenticated) {
        Release(i);
      } else {
        CloseLocked(i, nullptr);
      }
    }
  }

  void CloseAll() {
    codemode::MutexLock lock(&mu_);
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].fd < 0) continue;
      if (slots_[i].authenticated) {
        Release(i);
      } else {
        CloseLocked(i, nullptr);
      }
    }
  }

  void Wake() {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }

 private:
  struct Entry {
    int fd = -1;  // our duplicate of its descriptor; -1: the slot is free
    std::string peer;  // PeerKey
    absl::Time accepted = absl::InfiniteFuture();
    absl::Time refused = absl::InfiniteFuture();
    bool authenticated = false;  // its slot is freed next (CloseDue, Gone)
  };

  // Closes unauthenticated connection `slot` (logged with `why` unless null) and frees it.
  void CloseLocked(size_t slot, const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Entry& e = slots_[slot];
    CloseConnection(e.fd);
    if (why) LogClosed(e.peer, why);
    unauthenticated_.fetch_sub(1, std::memory_order_relaxed);
    e = Entry{};
    free_.push_back(slot);
  }
  // Stops watching authenticated connection `slot` (gRPC keeps it) and frees the slot.
  // Freed slots are taken in the order they were freed, so a slot is reused as late as
  // possible: a refusal gRPC still delivers for a connection already closed then lands on
  // no other.
  void Release(size_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    close(slots_[slot].fd);
    slots_[slot] = Entry{};
    free_.push_back(slot);
  }

  const TcpConnectionLimits limits_;
  const int wake_fd_;
  std::atomic<size_t> unauthenticated_{0};
  codemode::Mutex mu_;
  std::vector<Entry> slots_ ABSL_GUARDED_BY(mu_);
  std::deque<size_t> free_ ABSL_GUARDED_BY(mu_);
};

namespace {

// The token check of one slot: refusals are reported for that slot.
class SlotTokenCheck : public grpc::AuthMetadataProcessor {
 public:
  SlotTokenCheck(const std::string& token, size_t slot, std::shared_ptr<TcpConnections> connections)
      : check_(token), slot_(slot), connections_(std::move(connections)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override {
    grpc::Status status =
        check_.Process(auth_metadata, context, consumed_auth_metadata, response_metadata);
    if (!status.ok()) connections_->Refused(slot_);
    return status;
  }

 private:
  BearerTokenProcessor check_;
  const size_t slot_;
  const std::shared_ptr<TcpConnections> connections_;
};

// Sees every call that reached a handler; on the TCP port only calls with the token do.
class MarkAuthenticated : public grpc::experimental::Interceptor {
 public:
  MarkAuthenticated(grpc::experimental::ServerRpcInfo* info, std::shared_ptr<TcpConnections> connections)
      : info_(info), connections_(std::move(connections)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (!seen_) {
      seen_ = true;
      connections_->Authenticated(info_->server_context()->peer());
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* const info_;
  const std::shared_ptr<TcpConnections> connections_;
  bool seen_ = false;
};

class MarkAuthenticatedFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MarkAuthenticatedFactory(std::shared_ptr<TcpConnections> connections)
      : connections_(std::move(connections)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // A connection is watched before gRPC gets it, so none of its calls is missed here.
    if (!connections_->watching()) return nullptr;
    return new MarkAuthenticated(info, connections_);
  }

 private:
  const std::shared_ptr<TcpConnections> connections_;
};

// Listening sockets for `address` (HOST:PORT), all on one port; sets `*port`.
absl::StatusOr<std::vector<int>> Listen(const std::string& address, int* port) {
  absl::string_view a = address;
  absl::ConsumePrefix(&a, "dns:///");
  const size_t colon = a.rfind(':');
  uint32_t wanted = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(a.substr(colon + 1), &wanted) || wanted > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen_tcp '", address, "' is not HOST:PORT"));
  }
  std::string host(a.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "0", &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen_tcp '", address, "': cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  std::vector<int> fds;
  std::string error;
  *port = static_cast<int>(wanted);
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    sockaddr_storage to{};
    memcpy(&to, ai->ai_addr, ai->ai_addrlen);
    // Every address on the same port: the first bound picks it when PORT is 0.
    if (to.ss_family == AF_INET) {
      reinterpret_cast<sockaddr_in*>(&to)->sin_port = htons(static_cast<uint16_t>(*port));
    } else if (to.ss_family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&to)->sin6_port = htons(static_cast<uint16_t>(*port));
    } else {
      continue;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&to), ai->ai_addrlen) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
      error = strerror(errno);
      if (fd >= 0) close(fd);
      continue;
    }
    if (*port == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof bound;
      getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
      *port = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                               : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
    }
    fds.push_back(fd);
  }
  freeaddrinfo(found);
  if (fds.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot listen on --listen_tcp ", address, ": ", error));
  }
  return fds;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Create(
    const std::string& address, const std::string& token, const TcpTls& tls,
    const TcpConnectionLimits& limits, grpc::ServerBuilder* builder) {
  if (address.empty()) return nullptr;
  if (limits.max_unauthenticated == 0) {
    return absl::InvalidArgumentError("--tcp_max_unauthenticated must be at least 1");
  }
  if (limits.auth_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--tcp_auth_timeout must be positive");
  }
  int port = 0;
  absl::StatusOr<std::vector<int>> fds = Listen(address, &port);
  if (!fds.ok()) return fds.status();
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    for (int fd : *fds) close(fd);
    return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  }
  auto connections = std::make_shared<TcpConnections>(limits, wake);
  for (uint32_t slot = 0; slot < limits.max_unauthenticated; ++slot) {
    std::shared_ptr<grpc::ServerCredentials> creds = TcpServerCredentials(token, tls);
    creds->SetAuthMetadataProcessor(std::make_shared<SlotTokenCheck>(token, slot, connections));
    connections->acceptors.push_back(builder->experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, creds));
  }
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<MarkAuthenticatedFactory>(connections));
  builder->experimental().SetInterceptorCreators(std::move(creators));
  return std::unique_ptr<TcpListener>(new TcpListener(*std::move(fds), port, std::move(connections)));
}

TcpListener::TcpListener(std::vector<int> listen_fds, int port,
                         std::shared_ptr<TcpConnections> connections)
    : listen_fds_(std::move(listen_fds)), port_(port), connections_(std::move(connections)) {}

TcpListener::~TcpListener() {
  Stop();
  for (int fd : listen_fds_) close(fd);
}

void TcpListener::Start() {
  thread_ = codemode::StartThread("tcp listener", [this] { Run(); });
}

void TcpListener::Stop() {
  stopping_.store(true);
  connections_->Wake();
  if (thread_.joinable()) thread_.join();
  connections_->CloseAll();
}

void TcpListener::Run() {
  absl::Time accept_paused_until = absl::InfinitePast();
  std::vector<pollfd> polled;
  while (!stopping_.load()) {
    absl::Time now = absl::Now();
    absl::Time next = connections_->CloseDue(now);
    polled.clear();
    polled.push_back({connections_->wake_fd(), POLLIN, 0});
    const bool accepting = now >= accept_paused_until;
    if (accepting) {
      for (int fd : listen_fds_) polled.push_back({fd, POLLIN, 0});
    } else {
      next = std::min(next, accept_paused_until);
    }
    const size_t first_watched = polled.size();
    for (int fd : connections_->Watched()) polled.push_back({fd, POLLRDHUP, 0});
    int timeout_ms = -1;
    if (next != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(
          std::max<int64_t>(0, absl::ToInt64Milliseconds(absl::Ceil(next - now, absl::Milliseconds(1)))));
    }
    int n = poll(polled.data(), polled.size(), timeout_ms);
    if (n < 0) {
      if (errno != EINTR) spdlog::error("--listen_tcp: poll: {}", strerror(errno));
      continue;
    }
    if (polled[0].revents) {
      uint64_t count;
      (void)!read(connections_->wake_fd(), &count, sizeof count);
    }
    for (size_t i = first_watched; i < polled.size(); ++i) {
      if (polled[i].revents) connections_->Gone(polled[i].fd);
    }
    for (size_t i = 1; accepting && i < first_watched; ++i) {
      if (!polled[i].revents) continue;
      for (;;) {
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        int fd = accept4(polled[i].fd, reinterpret_cast<sockaddr*>(&peer), &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
          connections_->Add(fd, peer, polled[i].fd);
          continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          static codemode::LogRateLimit limit(1, 1);
          uint64_t dropped = 0;
          if (limit.Allow(absl::Now(), &dropped)) {
            spdlog::warn("--listen_tcp cannot accept connections: {}", strerror(errno));
          }
          accept_paused_until = absl::Now() + kAcceptBackoff;
        }
        break;  // EAGAIN: all taken
      }
    }
  }
}

}  // namespace sandboxd
