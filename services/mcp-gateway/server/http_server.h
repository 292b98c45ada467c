// HttpServer: the MCP Streamable HTTP transport (one endpoint, POST/GET/DELETE,
// Mcp-Session-Id, resumable SSE streams) on Boost.Beast, and its options. The front's
// parts are private to gateway_server (http_*.h); docs/gateway.md describes them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/mcp_session.h"
#include "server/server_transport.h"

namespace gateway {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // loopback by default
  int port = 8931;                 // 0 picks a free port (see HttpServer::port())
  std::string path = "/mcp";
  // When not empty, every request needs "Authorization: Bearer <one of them>" (401
  // otherwise). Each token is one credential (one client) for max_sessions_per_credential.
  std::vector<std::string> bearer_tokens;
  // Origins allowed in an Origin header (403 otherwise). Empty: only loopback origins
  // (http://localhost[:port], http://127.0.0.1[:port], http://[::1][:port]).
  std::vector<std::string> allowed_origins;
  // Host header values allowed (DNS-rebinding protection; 403 otherwise). Empty: the
  // loopback names with any port, plus the bind host.
  std::vector<std::string> allowed_hosts;
  size_t max_body_bytes = 4u << 20;    // 413 past it
  size_t max_header_bytes = 60u << 10;  // request line + headers; 431 past it
  size_t max_headers = 100;             // header fields; 431 past it
  absl::Duration idle_timeout = absl::Seconds(60);    // a kept-alive connection with no request
  absl::Duration header_timeout = absl::Seconds(10);  // first byte to the end of the headers
  absl::Duration body_timeout = absl::Seconds(60);
  absl::Duration write_timeout = absl::Seconds(30);   // a client that does not read is dropped
  absl::Duration session_idle_ttl = absl::Minutes(30);
  // MCP sessions held at once, overall and per credential (bearer token); an initialize
  // past either gets 503. Each session may hold sandbox sessions, calls and streams.
  size_t max_sessions = 256;
  size_t max_sessions_per_credential = 64;
  // Open TCP connections. Past it a new one closes the oldest connection that has not yet
  // passed the checks (path, Origin/Host, token), or is closed at once when every open one
  // has (server/http_admission.h).
  size_t max_connections = 4096;
  // Connections that have not yet passed the checks; a new one past it closes the oldest
  // of the peer (local user, or address) holding the most. Anyone who can reach the port
  // can open these: they never keep a token holder out.
  size_t max_unauthenticated_connections = 256;
  // Connections one credential (bearer token) holds; a request that would take one more
  // gets 503 and its connection closes. Not applied without tokens (one shared credential).
  size_t max_connections_per_credential = 2048;
  // How long a tools/call whose SSE stream lost its connection keeps running, waiting for
  // the client to resume it with Last-Event-ID; then it is cancelled.
  absl::Duration resume_grace = absl::Seconds(30);
  // Bytes kept so that streams can be resumed (events, and what a resumption replays into
  // its connection until it ends), overall and per MCP session. A response too large to
  // keep is delivered live only; a resumption past the budget gets 503.
  size_t max_replay_bytes = 64u << 20;
  size_t max_replay_bytes_per_session = 16u << 20;
  // Call streams one MCP session keeps (running, or finished and resumable for
  // resume_grace). Past it a new call drops the session's oldest finished stream (a
  // resumption of it is then treated as one of an unknown id); running calls' streams are
  // never dropped (the call limits bound them).
  size_t max_resumable_streams_per_session = 1000;
  // Requests being received, overall and per credential; a request past either gets 503
  // (with Retry-After) and its connection closes. A declared Content-Length is charged when
  // the headers arrive, a chunked body as it grows; the headers of a connection that
  // authenticated before are charged max_header_bytes while they arrive (pre-auth
  // connections are bounded by max_unauthenticated_connections instead).
  size_t max_request_bytes_in_flight = 48u << 20;
  size_t max_request_bytes_in_flight_per_credential = 16u << 20;
  // Response bytes queued for clients that have not read them yet, overall and per
  // credential; the connection whose write would pass either is closed (a resumable
  // stream can be picked up again with Last-Event-ID). Each connection also has its own
  // 64 MiB cap.
  size_t max_pending_write_bytes = 96u << 20;
  size_t max_pending_write_bytes_per_credential = 48u << 20;
  // What a connection with less than 64 KiB queued may still queue when the budgets above
  // (or the ceiling) refuse its write, overall and per credential; outside the ceiling.
  // Past it the connection is closed (http_connection.h, Budgets).
  size_t max_write_overdraft_bytes = 8u << 20;
  size_t max_write_overdraft_bytes_per_credential = 2u << 20;
  // Event-loop threads. Handlers never block on a client, so a few serve thousands.
  int threads = 2;
};

class HttpServer : public ServerTransport {
 public:
  HttpServer(HttpServerOptions options, ToolProvider* provider, ServerOptions server_options);
  ~HttpServer() override;  // Stop()s
  absl::Status Start();
  // As Start(); HTTP never ends by itself, so `on_end` is not called.
  absl::Status Start(std::function<void()> on_end) override { return Start(); }
  int port() const;
  void Stop() override;
  void NotifyToolsChanged() override;
  size_t session_count() const;
  size_t connection_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gateway
