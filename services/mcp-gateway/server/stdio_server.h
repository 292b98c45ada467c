// StdioServer: the MCP stdio transport, one JSON message per line on a pair of file
// descriptors. Run() serves on the calling thread (tests); Start() on a thread of its own.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "server/mcp_session.h"
#include "server/server_transport.h"

namespace gateway {

class StdioServer : public ServerTransport {
 public:
  StdioServer(int in_fd, int out_fd, ToolProvider* provider, ServerOptions options);
  ~StdioServer() override;  // Stop()s
  // Reads until EOF (or Stop()). Nothing but protocol messages is ever written to out_fd.
  void Run();
  // Run() on a thread of its own, then `on_end` unless stopped.
  absl::Status Start(std::function<void()> on_end) override;
  void Stop() override;
  void NotifyToolsChanged() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gateway
