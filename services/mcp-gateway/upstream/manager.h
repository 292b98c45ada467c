// UpstreamManager: connects every configured upstream MCP server in parallel (stdio child
// process, Streamable HTTP, legacy HTTP+SSE), keeps their tool catalogs current and routes
// tool calls to them.
//
//   UpstreamManager upstreams(*configs, options);        // configs: config.h
//   upstreams.Start();                                   // connects in the background
//   upstreams.WaitInitial(absl::Seconds(10));
//   for (auto& s : upstreams.Snapshot()) ...             // name, connected, error, tools
//   absl::StatusOr<json> r = upstreams.CallTool("everything", "echo", {{"message","hi"}}, call);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "upstream/client.h"
#include "upstream/config.h"
#include "upstream/options.h"

namespace gateway {

struct UpstreamStatus {
  std::string name;
  UpstreamConfig::Type type;
  bool connected = false;
  std::string error;  // why it is unavailable (last failure), when not connected
  std::string server_name;     // from its initialize result
  std::string instructions;    // from its initialize result
  std::vector<UpstreamTool> tools;
};

// What metrics read of an upstream at every scrape: no catalog copy.
struct UpstreamHealth {
  std::string name;
  bool connected = false;
  size_t tools = 0;
  uint64_t reconnects = 0;  // connections made after the first
};

class UpstreamManager {
 public:
  UpstreamManager(std::vector<UpstreamConfig> configs, UpstreamOptions options);
  ~UpstreamManager();  // Stop()s
  UpstreamManager(const UpstreamManager&) = delete;
  UpstreamManager& operator=(const UpstreamManager&) = delete;

  // Connects every upstream in parallel, in the background. One that fails does not
  // block the others; it is retried with exponential backoff.
  void Start();
  // Waits until every upstream has connected or failed at least once (or the timeout).
  void WaitInitial(absl::Duration timeout);
  void Stop();

  std::vector<UpstreamStatus> Snapshot() const;
  std::vector<UpstreamHealth> Health() const;
  // Increases whenever what Snapshot() shows changes: connect, disconnect, a list_changed
  // refresh, a failed connect whose reason differs from the last one.
  uint64_t catalog_version() const;
  // Called (on an internal thread) after the catalog version changed.
  void SetCatalogListener(std::function<void()> listener);

  // Calls a tool and returns the upstream's CallToolResult object (which may have
  // isError: true). Errors: NOT_FOUND unknown server or tool, UNAVAILABLE server not
  // connected (a dead stdio server is restarted first), DEADLINE_EXCEEDED, CANCELLED,
  // INTERNAL for a JSON-RPC error from the upstream (its message included). Safe to call
  // concurrently: requests are multiplexed by id.
  absl::StatusOr<nlohmann::json> CallTool(const std::string& server, const std::string& tool,
                                          const nlohmann::json& arguments,
                                          const CallOptions& options);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gateway
