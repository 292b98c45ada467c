// The --listen_tcp port's flags (listen_tcp, tcp_*, tls_*), read into what Serve needs: the
// address, the token, the TLS it speaks (the operator's certificate or sandboxd's own; the
// port never speaks plaintext) and the bounds on connections.
//
//   absl::StatusOr<TcpPortFlags> tcp = TcpPortFromFlags(options.state_dir);
//   if (!tcp.ok()) return Fail(tcp.status());
//   TcpListener::Create(tcp->address, tcp->token, tcp->tls, tcp->limits, &builder);
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sandboxd/tcp_auth.h"
#include "sandboxd/tcp_listener.h"

struct TcpPortFlags {
  std::string address;  // --listen_tcp; empty: no TCP port (and nothing else is read)
  std::string token;    // --tcp_token_file's
  sandboxd::TcpTls tls;
  sandboxd::TcpConnectionLimits limits;
  absl::Duration handshake_timeout;  // --tcp_handshake_timeout
  absl::Duration idle_timeout;       // --tcp_idle_timeout
};

// The checks that need nothing read: --listen_tcp needs --tcp_token_file, the TLS flags
// need --listen_tcp. INVALID_ARGUMENT naming the flags otherwise.
absl::Status CheckTcpPortFlags();

// The flags read and checked (CheckTcpPortFlags first): the token file (created when missing), the TLS files, or
// sandboxd's own identity in <state_dir>/tls (made when missing; logged for clients to
// pin). INVALID_ARGUMENT or FAILED_PRECONDITION with the flag named otherwise.
absl::StatusOr<TcpPortFlags> TcpPortFromFlags(const std::string& state_dir);
