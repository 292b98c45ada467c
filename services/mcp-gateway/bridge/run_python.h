// RunPythonTool: the gateway's one MCP tool. It maps each MCP session (and each named
// extra session of it) to a sandboxd session, runs the code there, streams output as
// progress notifications, routes the sandbox's tool calls to upstream MCP servers, and
// turns the Finished message into a result the model reads easily plus structured
// content matching the declared outputSchema.
//
//   RunPythonTool tool(&sandboxes, &upstreams, options);
//   HttpServer http(http_options, &tool, server_options);
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "server/mcp_server.h"
#include "base/mutex.h"
#include "bridge/sandbox_client.h"
#include "upstream/upstream.h"

namespace gateway {

// What run_python needs from the upstream side (UpstreamManager in production, a fake
// in unit tests).
class Upstreams {
 public:
  virtual ~Upstreams() = default;
  virtual std::vector<UpstreamStatus> Snapshot() const = 0;
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

struct RunPythonOptions {
  uint32_t default_timeout_seconds = 30;
  uint32_t max_timeout_seconds = 300;
  // Bound on the tool description (very large catalogs are summarised).
  size_t max_description_bytes = 8192;
  // Bound on the text block returned to the model (stdout/stderr are cut in the middle).
  size_t max_text_bytes = 64 * 1024;
  // Named extra sessions per MCP session.
  size_t max_named_sessions = 8;
};

// Builds the run_python tool description from the upstream catalog (exposed for tests).
std::string DescribeRunPython(const std::vector<UpstreamStatus>& upstreams, size_t max_bytes);

// The sandbox.v1 catalog for a run: connected upstreams, optionally restricted to
// `allowed` (empty: all).
sandbox::v1::Catalog BuildCatalog(const std::vector<UpstreamStatus>& upstreams,
                                  const std::set<std::string>& allowed);

class RunPythonTool : public ToolProvider {
 public:
  RunPythonTool(SandboxClient* sandboxes, Upstreams* upstreams, RunPythonOptions options);
  ~RunPythonTool() override;

  nlohmann::json ListTools() override;
  absl::StatusOr<nlohmann::json> CallTool(const std::string& name, const nlohmann::json& arguments,
                                          ToolCallContext& context) override;
  void SessionClosed(const std::string& session_key) override;

  // Deletes every sandbox session we created (gateway shutdown).
  void CloseAll();

 private:
  // One per (MCP session, name), registered before its sandbox session exists so that
  // concurrent first runs cannot create two (the first creates it under run_mu).
  struct Binding {
    // ref names the created sandbox session; written once, by the run holding run_mu.
    // Read without state_mu by runs that saw Ready(): written once, before ready is set.
    SandboxRef ref;
    bool Ready() {
      codemode::MutexLock lock(&state_mu);
      return ready;
    }
    // Records the created session; false (and nothing recorded) when Close() came first.
    bool SetReady(const SandboxRef& r) {
      codemode::MutexLock lock(&state_mu);
      if (closed) return false;
      ref = r;
      ready = true;
      return true;
    }
    // The MCP session ended: the session to delete, if one was created.
    std::optional<SandboxRef> Close() {
      codemode::MutexLock lock(&state_mu);
      closed = true;
      return ready ? std::optional<SandboxRef>(ref) : std::nullopt;
    }
    codemode::Mutex run_mu;  // one run at a time per binding, in order
    uint64_t catalog_version ABSL_GUARDED_BY(run_mu) = 0;  // of the catalog the session has
    std::string allowed_key ABSL_GUARDED_BY(run_mu);  // the `servers` restriction it was built with

   private:
    codemode::Mutex state_mu;
    bool ready ABSL_GUARDED_BY(state_mu) = false;
    bool closed ABSL_GUARDED_BY(state_mu) = false;
  };
  // The upstreams as the sandbox should see them: a server that is down keeps its last
  // known tools, so code can still call it (a dead stdio server is restarted on the call;
  // others answer with a clear ToolError) instead of hitting a NameError.
  std::vector<UpstreamStatus> CatalogView(const std::vector<UpstreamStatus>& snapshot);
  // The binding of `key`, registered (not yet ready) when there is none; RESOURCE_EXHAUSTED
  // past max_named_sessions for the MCP session.
  absl::StatusOr<std::shared_ptr<Binding>> FindOrRegister(const std::string& session_key,
                                                          const std::string& key);
  void Forget(const std::string& key, const std::shared_ptr<Binding>& b);

  SandboxClient* const sandboxes_;
  Upstreams* const upstreams_;
  const RunPythonOptions options_;
  codemode::Mutex mu_;
  // "<mcp session>\x1f<name>"
  std::map<std::string, std::shared_ptr<Binding>> bindings_ ABSL_GUARDED_BY(mu_);
  // By server name, while connected.
  std::map<std::string, UpstreamStatus> last_known_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gateway
