// RunCodeTool: the gateway's MCP tools run_python and run_javascript (run_tools.h; the
// operator offers either or both), the MCP adapter of the run core (bridge/run_service.h). It
// answers tools/list (schemas, descriptions) and tools/call: the call's context becomes a
// RunRequest (the MCP session, present or absent; an Asker over the client: client_asker.h),
// and the run's outcome a CallToolResult (run_result.h), with links to the files the run
// left under /workspace/out/, which RunResources serves as MCP resources
// (run_resources.h). A stateless request (protocol 2026-07-28) whose run may ask for an
// approval runs on a thread of its own, answered by input_required results until it ends
// (pending_runs.h). The two tools differ only in their description and the runtime of
// their sandboxes.
//
//   SandboxClient sandboxes(endpoints);
//   ManagerUpstreams upstreams(&manager);
//   RunCodeTool tool(&sandboxes, &upstreams, options);
//   HttpServer http(http_options, &tool, server_options);
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "adapter/pending_runs.h"
#include "adapter/run_resources.h"
#include "adapter/run_tools.h"
#include "base/mutex.h"
#include "bridge/run_service.h"
#include "server/tool_provider.h"

namespace gateway {

struct RunCodeOptions : RunServiceOptions {
  // The tools offered, in tools/list order (--tools); at least one.
  std::vector<RunLanguage> languages = {RunLanguage::kPython, RunLanguage::kJavaScript};
  // Bound on the tool description (very large catalogs are summarised).
  size_t max_description_bytes = 8192;
  // Bound on the text block returned to the model (stdout/stderr are cut in the middle).
  size_t max_text_bytes = 64 * 1024;
  // Stateless runs held between the requests of a multi round-trip request
  // (pending_runs.h); `keep` is raised to at least the approval timeout.
  PendingRunsOptions pending;
};

class RunCodeTool : public ToolProvider {
 public:
  RunCodeTool(Sandboxes* sandboxes, Upstreams* upstreams, RunCodeOptions options);
  ~RunCodeTool() override;

  // The tools with the descriptions of `credential`'s egress policy (RunServiceOptions::egress).
  nlohmann::json ListTools(const std::string& credential) override;
  absl::StatusOr<nlohmann::json> CallTool(const std::string& name, const nlohmann::json& arguments,
                                          ToolCallContext& context) override;
  void SessionClosed(const std::string& session_key) override { service_.SessionClosed(session_key); }
  ResourceProvider* resources() override { return &resources_; }

  // Deletes every sandbox session we created (gateway shutdown), unless KeepSandboxes().
  void CloseAll() { service_.CloseAll(); }
  // The egress policies of the sandboxes, per credential.
  const SandboxEgress& egress() const { return options_.egress; }
  // Sandboxes held for clients now (metrics).
  size_t sandboxes_held() { return service_.sandboxes_held(); }
  // Sandboxes outlive their MCP sessions from now on (SessionBindings::KeepSandboxes).
  void KeepSandboxes() { service_.KeepSandboxes(); }

 private:
  // CallTool on the caller's thread.
  absl::StatusOr<nlohmann::json> CallToolNow(const LanguageSpec& language, const nlohmann::json& arguments,
                                             ToolCallContext& context);
  // The language of `tool` when this gateway offers it.
  const LanguageSpec* Offered(const std::string& tool) const;
  // tools/list's answer for the upstreams as they are now, describing `egress`.
  nlohmann::json BuildToolList(const std::string& egress);

  const RunCodeOptions options_;
  RunService service_;
  // tools/list's answers by the egress policy they describe, and the catalog version they
  // were built for: describing 10,000 tools costs the HTTP event loop ~0.2 s, paid once per
  // catalog change and policy, never per request. The policies are the operator's (the
  // flag, one per configured credential), so the map stays small.
  codemode::Mutex listed_mu_;
  uint64_t listed_version_ ABSL_GUARDED_BY(listed_mu_) = 0;
  std::map<std::string, nlohmann::json> listed_ ABSL_GUARDED_BY(listed_mu_);
  RunResources resources_;
  // Last: destroyed first, it cancels its runs and waits for them, which use the service.
  PendingRuns pending_;
};

}  // namespace gateway
