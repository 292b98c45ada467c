// The files runs leave, as MCP resources. See run_resources.h.
#include "adapter/run_resources.h"

#include <utility>

namespace gateway {

using nlohmann::json;

absl::StatusOr<json> RunResources::ListResources(const std::string& session_key, const std::string& cursor) {
  return service_->workspace().List(session_key, cursor);
}

absl::StatusOr<json> RunResources::ListResourceTemplates(const std::string& session_key) {
  return service_->workspace().Templates(session_key);
}

absl::StatusOr<json> RunResources::ReadResource(const std::string& uri, ToolCallContext& context) {
  return service_->workspace().Read(context.mcp_session.value_or(""), context.credential, uri, context.cancel,
                                    context.budget);
}

absl::StatusOr<json> RunResources::ListOwnedResources(const std::string& cursor, ToolCallContext& context) {
  return service_->owned().List(context.credential, cursor, context.cancel);
}

std::shared_ptr<void> RunResources::WatchResources(const std::string& credential, std::function<void()> ready,
                                                   std::function<void()> changed) {
  return service_->watch().Subscribe(credential, std::move(ready), std::move(changed));
}

}  // namespace gateway
