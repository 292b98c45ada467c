// ServerTransport: what main needs of an MCP server transport, so that it has one start
// and one shutdown path for both (stdio_server.h, http_server.h), each feeding McpSession:
//
//   std::unique_ptr<ServerTransport> t = std::make_unique<HttpServer>(http, &provider, options);
//   absl::Status started = t->Start([] { /* ended by itself: stdin reached EOF */ });
//   if (!started.ok()) return started;
//   t->NotifyToolsChanged();            // broadcast to every session
//   t->Stop();
#pragma once

#include <functional>

#include "absl/status/status.h"

namespace gateway {

class ServerTransport {
 public:
  ServerTransport() = default;
  ServerTransport(const ServerTransport&) = delete;
  ServerTransport& operator=(const ServerTransport&) = delete;
  virtual ~ServerTransport() = default;
  // Starts serving on threads of its own. `on_end` runs once if the transport ends by
  // itself (stdin reached EOF); never after Stop() has returned.
  virtual absl::Status Start(std::function<void()> on_end) = 0;
  // Stops serving and closes every session. Idempotent.
  virtual void Stop() = 0;
  // Tells every session's client that the tool list changed.
  virtual void NotifyToolsChanged() = 0;
};

}  // namespace gateway
