// TcpListener: sandboxd's --listen_tcp port, accepted by sandboxd itself and handed to gRPC,
// so that connections that have not shown the token are bounded whatever their peer sends.
//
// gRPC 1.51 closes a connection only when it is idle (GRPC_ARG_MAX_CONNECTION_IDLE_MS),
// and a refused call counts as activity: a peer without the token kept its connection open
// forever with one refused call every few seconds. Here a connection is *unauthenticated*
// until a call with the token reaches a handler on it, and an unauthenticated connection
//   - is closed right after its first refused call (the refusal goes out first),
//   - is closed when it is older than `auth_timeout`,
//   - is one of at most `max_unauthenticated`: a new connection past that closes the
//     oldest unauthenticated one.
// Authenticated connections are left to gRPC (--tcp_idle_timeout).
//
// How gRPC tells which connection a call came from: each of the `max_unauthenticated`
// slots has its own external connection acceptor, whose credentials carry a token check
// that knows its slot. A slot holds at most one unauthenticated connection (and any number
// that have authenticated since), so a refusal on a slot names its unauthenticated
// connection. A call that passes the check is seen again by a server interceptor, with its
// peer address, which marks that connection authenticated and frees its slot. sandboxd
// keeps a duplicate of each unauthenticated connection's descriptor to close it
// (shutdown(2), which gRPC notices) and to see the peer go.
//
//   absl::StatusOr<std::unique_ptr<TcpListener>> tcp =
//       TcpListener::Create("127.0.0.1:50051", token, /*tls=*/nullptr, limits, &builder);
//   std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
//   (*tcp)->Start();
//   ...
//   (*tcp)->Stop();  // before server->Shutdown
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/server_builder.h"

namespace sandboxd {

// Bounds on --listen_tcp connections that have not carried a call with the token.
struct TcpConnectionLimits {
  uint32_t max_unauthenticated = 32;              // --tcp_max_unauthenticated
  absl::Duration auth_timeout = absl::Seconds(10);  // --tcp_auth_timeout
};

class TcpConnections;  // the unauthenticated connections, by slot (tcp_listener.cc)
struct TcpTls;

class TcpListener {
 public:
  // Binds `address` (HOST:PORT; HOST may be a name, an IPv4 address or a bracketed IPv6
  // one; PORT 0 picks one) and adds the acceptors and the interceptor to `builder`, whose
  // interceptor creators it sets. Each acceptor has TcpServerCredentials(token, tls) (TLS
  // with `tls`) with the token check replaced by one that also
  // reports refusals. An empty `address`: no listener (null). Errors: a bad address or
  // limits, or a bind that fails.
  static absl::StatusOr<std::unique_ptr<TcpListener>> Create(const std::string& address,
                                                             const std::string& token,
                                                             const TcpTls& tls,
                                                             const TcpConnectionLimits& limits,
                                                             grpc::ServerBuilder* builder);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // The port it listens on.
  int port() const { return port_; }
  // Starts accepting; call once the server built from the builder has started.
  void Start();
  // Stops accepting and closes the unauthenticated connections; authenticated ones stay
  // with the server (whose Shutdown drains them). Idempotent.
  void Stop();

 private:
  TcpListener(std::vector<int> listen_fds, int port, std::shared_ptr<TcpConnections> connections);
  void Run();

  const std::vector<int> listen_fds_;
  const int port_;
  const std::shared_ptr<TcpConnections> connections_;  // shared with processors and interceptor
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace sandboxd
