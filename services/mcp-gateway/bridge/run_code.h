// RunCodeTool: the gateway's MCP tools run_python and run_javascript (run_language.h; the
// operator offers either or both), which join the two sides. A call goes down:
// its arguments are parsed (run_arguments.h), the MCP session's sandbox session is found or
// created (session_bindings.h) with the upstream catalog (run_catalog.h), and the code runs
// there, its output streaming back as progress. Tool calls of the code come back up through
// the router (tool_call_router.h) to the upstreams, and the Finished message becomes the
// tool's result (run_result.h), with links to the files the run left under
// /workspace/out/, which the tool also serves as MCP resources (workspace_resources.h). A
// run whose sandbox session was lost is retried once in a new one, and says so. The two
// tools differ only in their description and the runtime of their sandboxes: an MCP
// session gets a main sandbox per language, and a sandbox (by handle or session name) runs
// only its own language's code.
//
//   SandboxClient sandboxes(endpoints);
//   ManagerUpstreams upstreams(&manager);
//   RunCodeTool tool(&sandboxes, &upstreams, options);
//   HttpServer http(http_options, &tool, server_options);
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bridge/run_arguments.h"
#include "bridge/run_catalog.h"
#include "bridge/run_language.h"
#include "bridge/owned_resources.h"
#include "bridge/pending_runs.h"
#include "bridge/resource_watch.h"
#include "bridge/run_approvals.h"
#include "bridge/run_result.h"
#include "bridge/sandboxes.h"
#include "bridge/session_bindings.h"
#include "bridge/tool_call_router.h"
#include "bridge/upstreams.h"
#include "bridge/workspace_resources.h"
#include "audit/audit_log.h"
#include "handles/sandbox_handle.h"
#include "metrics/gateway_metrics.h"
#include "server/tool_provider.h"

namespace gateway {

struct RunCodeOptions {
  // The tools offered, in tools/list order (--tools); at least one.
  std::vector<RunLanguage> languages = {RunLanguage::kPython, RunLanguage::kJavaScript};
  uint32_t default_timeout_seconds = 30;
  uint32_t max_timeout_seconds = 300;
  // Largest code accepted (RunLimits::max_code_bytes).
  uint64_t max_code_bytes = 1u << 20;
  // Bound on the tool description (very large catalogs are summarised).
  size_t max_description_bytes = 8192;
  // Bound on the text block returned to the model (stdout/stderr are cut in the middle).
  size_t max_text_bytes = 64 * 1024;
  // A run's stdout longer than this goes whole into a workspace file, and the model gets
  // its head and tail and the path (0: never). Code mode keeps bulk out of the context.
  size_t spill_stdout_bytes = 32 * 1024;
  // Named extra sessions per MCP session.
  size_t max_named_sessions = 8;
  // Sandbox sessions of one credential over all its MCP sessions (sandboxd's slots are
  // shared by everyone: well below its --max_sessions).
  size_t max_sandboxes_per_credential = 16;
  // sandboxd holds each credential to max_sandboxes_per_credential too (over every replica
  // and era: CreateSessionRequest.max_owner_sessions). Off where the credential does not
  // name one client: every stdio gateway process is "stdio" and every --no_auth client
  // "anonymous", and one process's new sandbox must not end another's (round 14's
  // re-check, N1); sandboxd's own --max_sessions_per_owner still holds them.
  bool cap_credentials_in_sandboxd = true;
  // Produced files (resources/read size cap, bounds on the walk of out/).
  ResourceOptions resources;
  // Whose sandboxes resources/list shows a request without an MCP session (owned_resources.h).
  OwnedScope owned_scope = OwnedScope::kSandboxd;
  // How often a credential's sandboxes are looked at while a subscriptions/listen stream
  // waits for resources/list_changed (changes through other replicas, expiry); a run
  // through this gateway is announced at once. 0: only those.
  absl::Duration resources_poll_interval = absl::Seconds(10);
  // A look at a credential's sandboxes for the watch is given up after this (a sandbox
  // answers its own listings, and may stall them); it then counts as no change.
  absl::Duration resources_look_timeout = absl::Seconds(5);
  // Runs of protocol 2026-07-28 held between the requests of a multi round-trip request
  // (pending_runs.h); `keep` is raised to at least the approval timeout.
  PendingRunsOptions pending;
  // Which upstream tools need a person's approval (null: the tools' annotations decide),
  // and how long a question waits.
  std::shared_ptr<const ApprovalPolicy> approvals;
  ApprovalOptions approval;
  // Runs, tool calls and approvals are counted here (null: not counted).
  std::shared_ptr<GatewayMetrics> metrics;
  // Each run and each tool call is a line here (null: none); with `audit_arguments` a tool
  // call's line holds its arguments too (--audit_arguments), not only their digest.
  std::shared_ptr<AuditLog> audit;
  bool audit_arguments = false;
  // Seals and opens sandbox handles (the `sandbox` argument and result). Null: a random key
  // of this process, so handles do not outlive it (tests; main.cc passes the key file's).
  std::shared_ptr<const HandleSealer> handles;
};

class RunCodeTool : public ToolProvider {
 public:
  RunCodeTool(Sandboxes* sandboxes, Upstreams* upstreams, RunCodeOptions options);
  ~RunCodeTool() override;

  nlohmann::json ListTools() override;
  absl::StatusOr<nlohmann::json> CallTool(const std::string& name, const nlohmann::json& arguments,
                                          ToolCallContext& context) override;
  void SessionClosed(const std::string& session_key) override;

  bool HasResources() override { return true; }
  absl::StatusOr<nlohmann::json> ListResources(const std::string& session_key,
                                               const std::string& cursor) override;
  absl::StatusOr<nlohmann::json> ListResourceTemplates(const std::string& session_key) override;
  absl::StatusOr<nlohmann::json> ReadResource(const std::string& uri,
                                              ToolCallContext& context) override;
  absl::StatusOr<nlohmann::json> ListOwnedResources(const std::string& cursor,
                                                    ToolCallContext& context) override;
  std::shared_ptr<void> WatchResources(const std::string& credential, std::function<void()> ready,
                                       std::function<void()> changed) override;

  // Deletes every sandbox session we created (gateway shutdown), unless KeepSandboxes().
  void CloseAll();
  // Sandboxes held for clients now (metrics).
  size_t sandboxes_held() { return bindings_.size(); }
  // Sandboxes outlive their MCP sessions from now on (SessionBindings::KeepSandboxes).
  void KeepSandboxes() { bindings_.KeepSandboxes(); }

 private:
  // One run as it goes down to the sandbox.
  struct Run {
    const LanguageSpec* language;
    RunArguments args;
    sandbox::v1::Catalog catalog;
    std::string catalog_key;  // CatalogKey(catalog)
    ToolCallContext* ctx;
    std::shared_ptr<codemode::CancelToken> end;  // ends the execution (ctx's cancel or the router's)
    ToolCallRouter* router;
    RunProgress* progress;
    RunReport* report;
    RunSandbox* sandbox;  // the sandbox the run is in, for its calls and its audit line
    std::string traceparent;  // the run's span, for sandboxd (gRPC metadata)
  };
  // Where a run's binding comes from, and how a lost one is let go: the MCP session's
  // binding of the run's name, or the binding of a handle's sandbox (attempt 0) and a new
  // detached one (attempt 1, when that sandbox is gone).
  struct Placement {
    std::function<absl::StatusOr<std::shared_ptr<SessionBindings::Binding>>(int attempt)> find;
    std::function<void(const std::shared_ptr<SessionBindings::Binding>&)> forget;
    // Called once the binding's sandbox exists (a detached binding is then kept by address).
    std::function<void(const std::shared_ptr<SessionBindings::Binding>&)> opened;
    // The run came by handle: its notes do not repeat sandboxd's messages, which name the
    // session id the handle keeps from the client.
    bool by_handle = false;
  };
  // Whether any upstream tool needs asking (the policy over the catalog, kept per catalog
  // version): only then does a 2026-07-28 run need a thread of its own.
  bool MayAsk();
  // CallTool on the caller's thread.
  absl::StatusOr<nlohmann::json> CallToolNow(const LanguageSpec& language, const nlohmann::json& arguments,
                                             ToolCallContext& context);
  // The language of `tool` when this gateway offers it.
  const LanguageSpec* Offered(const std::string& tool) const;
  // Runs where the run's `sandbox` handle or session name says.
  absl::StatusOr<sandbox::v1::Finished> Execute(Run& run);
  // Runs on the binding `placement` finds, retrying once in a new sandbox when the old one
  // is gone.
  absl::StatusOr<sandbox::v1::Finished> ExecuteIn(Run& run, const Placement& placement);
  // The sandbox a handle names for the run's credential (its runtime in SandboxRef::runtime);
  // PERMISSION_DENIED (HandleSealer::kInvalidHandle) for any handle that is not valid for it.
  absl::StatusOr<SandboxRef> OpenHandle(const std::string& handle, const std::string& credential);
  // The run's metrics, audit line (with `why` when it is an error) and log line.
  void Record(const Run& run, const codemode::telemetry::TraceContext& trace, RunOutcome outcome,
              absl::Duration took, const absl::Status& why);
  // One attempt on `binding`, whose run lock the caller holds. `session_gone`: sandboxd
  // no longer has the binding's session (worth one retry in a new one).
  absl::StatusOr<sandbox::v1::Finished> ExecuteOn(SessionBindings::Binding& binding, Run& run,
                                                  bool first_attempt, bool& session_gone)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(binding.run_mu);
  // Writes a long stdout to the workspace and leaves its head and tail in `f`.
  void SpillStdout(const SandboxRef& ref, Run& run, sandbox::v1::Finished& f);
  // Walks out/ after a run and reports the files it created or changed.
  void ReportProducedFiles(SessionBindings::Binding& binding, Run& run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(binding.run_mu);

  Sandboxes* const sandboxes_;
  Upstreams* const upstreams_;
  const RunCodeOptions options_;
  const std::shared_ptr<const HandleSealer> handles_;
  const std::shared_ptr<const ApprovalPolicy> policy_;
  SessionBindings bindings_;
  WorkspaceResources resources_;
  OwnedResources owned_;
  ResourceWatch watch_;  // after owned_, which its thread uses
  UpstreamMemory memory_;
  codemode::Mutex may_ask_mu_;
  uint64_t may_ask_version_ ABSL_GUARDED_BY(may_ask_mu_) = ~uint64_t{0};
  bool may_ask_ ABSL_GUARDED_BY(may_ask_mu_) = false;
  // Last: destroyed first, it cancels its runs and waits for them, which use all of the above.
  PendingRuns pending_;
};

}  // namespace gateway
