// MCP server transports: stdio (one JSON message per line) and Streamable HTTP (one
// endpoint, POST/GET/DELETE, Mcp-Session-Id), both feeding McpSession.
//
//   StdioServer stdio(STDIN_FILENO, STDOUT_FILENO, &provider, options);
//   stdio.Run();                        // until EOF on stdin; then the session is closed
//
//   HttpServer http(http_options, &provider, options);
//   RETURN_IF_ERROR(http.Start());      // binds, serves on its own threads
//   http.NotifyToolsChanged();          // broadcast to every session
//   http.Stop();
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gateway/mcp_server.h"

namespace gateway {

class StdioServer {
 public:
  StdioServer(int in_fd, int out_fd, ToolProvider* provider, ServerOptions options);
  ~StdioServer();
  // Reads until EOF (or Stop()). Nothing but protocol messages is ever written to out_fd.
  void Run();
  void Stop();
  void NotifyToolsChanged();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // loopback by default
  int port = 8931;                 // 0 picks a free port (see HttpServer::port())
  std::string path = "/mcp";
  // When set, every request needs "Authorization: Bearer <token>" (401 otherwise).
  std::string bearer_token;
  // Origins allowed in an Origin header (403 otherwise). Empty: only loopback origins
  // (http://localhost[:port], http://127.0.0.1[:port], http://[::1][:port]).
  std::vector<std::string> allowed_origins;
  // Host header values allowed (DNS-rebinding protection; 403 otherwise). Empty: the
  // loopback names with any port, plus the bind host.
  std::vector<std::string> allowed_hosts;
  size_t max_body_bytes = 4u << 20;  // 413 past it
  absl::Duration session_idle_ttl = absl::Minutes(30);
  // MCP sessions held at once; an initialize past it gets 503 (each session may hold
  // sandbox sessions, upstream calls and a GET stream).
  size_t max_sessions = 256;
  int threads = 64;                  // concurrent requests (each SSE stream holds one)
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, ToolProvider* provider, ServerOptions server_options);
  ~HttpServer();  // Stop()s
  absl::Status Start();
  int port() const;
  void Stop();
  void NotifyToolsChanged();
  size_t session_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gateway
