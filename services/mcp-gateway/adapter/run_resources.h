// RunResources: the files runs leave, served as MCP resources (ResourceProvider,
// server/tool_provider.h): an MCP session's sandboxes' files (bridge/workspace_resources.h), a
// stateless request's list of every sandbox its credential holds (bridge/owned_resources.h), and
// the watch that announces their changes (bridge/resource_watch.h). All of them are the run
// core's (bridge/run_service.h), as pages of files and file bytes; this is their MCP face:
// Resource objects, cursors, templates and the text or blob of a read.
//
//   RunService service(&sandboxes, &upstreams, options);
//   RunResources resources(&service);
//   absl::StatusOr<json> page = resources.ListResources("mcp-1", "");
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "bridge/run_service.h"
#include "server/tool_provider.h"

namespace gateway {

class RunResources : public ResourceProvider {
 public:
  // `service` outlives this.
  explicit RunResources(RunService* service) : service_(service) {}

  absl::StatusOr<nlohmann::json> ListResources(const std::string& session_key,
                                               const std::string& cursor) override;
  absl::StatusOr<nlohmann::json> ListResourceTemplates(const std::string& session_key) override;
  absl::StatusOr<nlohmann::json> ReadResource(const std::string& uri, ToolCallContext& context) override;
  absl::StatusOr<nlohmann::json> ListOwnedResources(const std::string& cursor,
                                                    ToolCallContext& context) override;
  std::shared_ptr<void> WatchResources(const std::string& credential, std::function<void()> ready,
                                       std::function<void()> changed) override;

 private:
  RunService* const service_;
};

}  // namespace gateway
