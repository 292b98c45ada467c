// Upstreams: what the bridge needs from the upstream side. ManagerUpstreams forwards to the
// UpstreamManager in production; unit tests use a fake (tests/mcp-gateway/bridge/bridge_fakes.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "upstream/manager.h"

namespace gateway {

class Upstreams {
 public:
  Upstreams() = default;
  Upstreams(const Upstreams&) = delete;
  Upstreams& operator=(const Upstreams&) = delete;
  virtual ~Upstreams() = default;
  virtual std::vector<UpstreamStatus> Snapshot() const = 0;
  // Changes whenever what Snapshot() shows changes: a server's tools (connect, reconnect,
  // tools/list_changed), its state, or the reason it is unavailable. It changes in the
  // same critical section as what Snapshot() shows, so a snapshot taken after reading a
  // version that is still current shows the upstreams as they are (RunService keeps its
  // catalog by it).
  virtual uint64_t catalog_version() const = 0;
  virtual absl::StatusOr<nlohmann::json> CallTool(const std::string& server,
                                                  const std::string& tool,
                                                  const nlohmann::json& arguments,
                                                  const CallOptions& options) = 0;
};

class ManagerUpstreams : public Upstreams {
 public:
  explicit ManagerUpstreams(UpstreamManager* m) : m_(m) {}
  std::vector<UpstreamStatus> Snapshot() const override { return m_->Snapshot(); }
  uint64_t catalog_version() const override { return m_->catalog_version(); }
  absl::StatusOr<nlohmann::json> CallTool(const std::string& server, const std::string& tool,
                                          const nlohmann::json& arguments,
                                          const CallOptions& options) override {
    return m_->CallTool(server, tool, arguments, options);
  }

 private:
  UpstreamManager* m_;
};

}  // namespace gateway
