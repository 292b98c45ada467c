// RunService: the gateway's run core, apart from MCP. A run request (the code's tool
// arguments, who runs, in which MCP session if any) goes down: its arguments are parsed
// (run_arguments.h), its sandbox is placed (the MCP session's sandbox of the run's name, the
// one a handle names, or a new one for a stateless request: session_bindings.h) with the
// upstream catalog as the approval policy lets the code see it (run_catalog.h), and the code
// runs there. Its tool calls come back up through the router (tool_call_router.h) and the
// approval gate (run_approvals.h), which asks through the request's Asker (run_scope.h). A
// run whose sandbox session was lost is retried once in a new one, and says so. What it
// left under /workspace/out/ is listed in the outcome (produced_files.h). Each run is
// counted, logged and audited once.
//
// The only MCP JSON here is the tool's arguments; the MCP adapter (adapter/run_code.h) turns the
// outcome into a CallToolResult and serves the produced files as resources.
//
//   RunService service(&sandboxes, &upstreams, options);
//   RunRequest request{&Spec(RunLanguage::kPython), arguments, "token 3f2a", "mcp-1"};
//   absl::StatusOr<FinishedRun> run = service.Run(request);  // not OK: arguments refused
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "audit/audit_log.h"
#include "bridge/owned_resources.h"
#include "bridge/resource_watch.h"
#include "bridge/run_approvals.h"
#include "bridge/run_arguments.h"
#include "bridge/run_catalog.h"
#include "bridge/run_language.h"
#include "bridge/run_report.h"
#include "bridge/run_scope.h"
#include "bridge/sandboxes.h"
#include "bridge/session_bindings.h"
#include "bridge/tool_call_router.h"
#include "bridge/upstreams.h"
#include "bridge/workspace_resources.h"
#include "handles/sandbox_handle.h"
#include "metrics/gateway_metrics.h"
#include "telemetry/trace_context.h"

namespace gateway {

struct RunServiceOptions {
  uint32_t default_timeout_seconds = 30;
  uint32_t max_timeout_seconds = 300;
  // Largest code accepted (RunLimits::max_code_bytes).
  uint64_t max_code_bytes = 1u << 20;
  // A run's stdout longer than this goes whole into a workspace file, and the model gets
  // its head and tail and the path (0: never). Code mode keeps bulk out of the context.
  size_t spill_stdout_bytes = 32 * 1024;
  // Named extra sessions per MCP session.
  size_t max_named_sessions = 8;
  // Sandbox sessions of one credential over all its MCP sessions (sandboxd's slots are
  // shared by everyone: well below its --max_sessions).
  size_t max_sandboxes_per_credential = 16;
  // sandboxd holds each credential to max_sandboxes_per_credential too (over every replica,
  // stateless or not: CreateSessionRequest.max_owner_sessions). Off where the credential
  // does not name one client: every stdio gateway process is "stdio" and every --no_auth
  // client "anonymous", and one process's new sandbox must not end another's;
  // sandboxd's own --max_sessions_per_owner still holds them.
  bool cap_credentials_in_sandboxd = true;
  // The egress policy of the sandboxes each credential creates (--sandbox_egress, the
  // credential settings file).
  SandboxEgress egress;
  // Produced files (resources/read size cap, bounds on the walk of out/).
  ResourceOptions resources;
  // Whose sandboxes resources/list shows a stateless request (owned_resources.h).
  OwnedScope owned_scope = OwnedScope::kSandboxd;
  // How often a credential's sandboxes are looked at while a subscriptions/listen stream
  // waits for resources/list_changed (changes through other replicas, expiry); a run
  // through this gateway is announced at once. 0: only those.
  absl::Duration resources_poll_interval = absl::Seconds(10);
  // A look at a credential's sandboxes for the watch is given up after this (a sandbox
  // answers its own listings, and may stall them); it then counts as no change.
  absl::Duration resources_look_timeout = absl::Seconds(5);
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

// One run as its caller asks for it.
struct RunRequest {
  const LanguageSpec* language = nullptr;
  // The tool's arguments (run_arguments.h: code, session, sandbox, files, ...).
  nlohmann::json arguments;
  // Who runs: what the run creates counts against this credential's caps.
  std::string credential;
  // The MCP session the run belongs to; absent for a stateless request (protocol
  // 2026-07-28), which belongs to none: its sandbox is one a handle names, or a new one.
  std::optional<std::string> mcp_session;
  // The client's trace, when it sent one: the run is a span of it.
  std::optional<codemode::telemetry::TraceContext> trace_parent;
  // Ends the run (nullable): the client's cancel.
  std::shared_ptr<codemode::CancelToken> cancel;
  // The run's output and its upstreams' progress (empty: the client asked for none).
  RunProgress::Sink progress;
  // Whom calls that need approval are put to (null: nobody can be asked).
  Asker* asker = nullptr;
  // Called when the run changed the files its caller's sandboxes hold (nullable).
  std::function<void()> files_changed;
};

// How a run ended: sandboxd's Finished (or why it did not finish) and what the gateway adds.
struct FinishedRun {
  absl::StatusOr<sandbox::v1::Finished> finished;
  RunReport report;
};

class RunService {
 public:
  RunService(Sandboxes* sandboxes, Upstreams* upstreams, RunServiceOptions options);
  ~RunService();

  // Runs `request` to its end. Not OK when its arguments are refused (INVALID_ARGUMENT):
  // nothing ran. Blocks while the code runs; thread-safe.
  absl::StatusOr<FinishedRun> Run(const RunRequest& request);
  // Whether any upstream tool needs asking (the policy over the catalog, kept per catalog
  // version): only then can a run wait for a person.
  bool MayAsk();
  // The upstreams as the code sees them now (the approval policy applied, within catalog
  // limits): what the tools' descriptions show.
  std::vector<UpstreamStatus> View();
  // Changes whenever View() may (Upstreams::catalog_version).
  uint64_t catalog_version() const;

  // The MCP session ended: deletes its sandboxes (SessionBindings::Close).
  void SessionClosed(const std::string& mcp_session) { bindings_.Close(mcp_session); }
  // Deletes every sandbox session we created (gateway shutdown), unless KeepSandboxes().
  void CloseAll() { bindings_.CloseAll(); }
  // Sandboxes held for clients now (metrics).
  size_t sandboxes_held() { return bindings_.size(); }
  // Sandboxes outlive their MCP sessions from now on (SessionBindings::KeepSandboxes).
  void KeepSandboxes() { bindings_.KeepSandboxes(); }

  // Seals and opens the sandbox handles of results (RunServiceOptions::handles).
  const HandleSealer* handles() const { return handles_.get(); }
  // What runs leave: the files of an MCP session's sandboxes, a credential's sandboxes, and
  // their changes (for the resources the adapter serves).
  WorkspaceResources& workspace() { return resources_; }
  OwnedResources& owned() { return owned_; }
  ResourceWatch& watch() { return watch_; }

 private:
  struct RunState;
  struct Placement;
  // The upstreams as runs see them: a function of the upstreams' snapshot and of the memory
  // (memory_.View), the approval policy (the service's for its life) and the catalog
  // limits (constants), so kept while the snapshot's catalog version and the memory's
  // generation are the ones it was built at. The version is read before the snapshot and
  // bumped in the critical section that changes what the snapshot shows (Upstreams), so a
  // version still unchanged means the snapshot is too.
  struct UpstreamsSeen {
    uint64_t upstream_version = 0;
    uint64_t memory_generation = 0;
    std::vector<UpstreamStatus> snapshot;  // Upstreams::Snapshot(), for the arguments
    std::vector<UpstreamStatus> view;      // what the gate judges calls by
  };
  // The sandbox catalog of one `servers` over one UpstreamsSeen, and its key.
  struct RunCatalog {
    std::shared_ptr<const UpstreamsSeen> seen;
    ServerAllowlist servers;
    sandbox::v1::Catalog catalog;
    std::string key;  // CatalogKey(catalog)
  };
  // The upstreams as a run sees them now: the last ones built while their inputs are
  // unchanged, else built anew. Thread-safe.
  std::shared_ptr<const UpstreamsSeen> Seen();
  // The catalog of `servers` over `seen`: the last one built for both, else built anew.
  std::shared_ptr<const RunCatalog> CatalogFor(const std::shared_ptr<const UpstreamsSeen>& seen,
                                               const ServerAllowlist& servers);
  // Runs where the run's `sandbox` handle or session name says.
  absl::StatusOr<sandbox::v1::Finished> Execute(RunState& run);
  // Runs on the binding `placement` finds, retrying once in a new sandbox when the old one
  // is gone.
  absl::StatusOr<sandbox::v1::Finished> ExecuteIn(RunState& run, const Placement& placement);
  // The sandbox a handle names for the run's credential (its runtime in SandboxRef::runtime);
  // PERMISSION_DENIED (HandleSealer::kInvalidHandle) for any handle that is not valid for it.
  absl::StatusOr<SandboxRef> OpenHandle(const std::string& handle, const std::string& credential);
  // One attempt on `binding`, whose run lock the caller holds. `session_gone`: sandboxd
  // no longer has the binding's session (worth one retry in a new one).
  absl::StatusOr<sandbox::v1::Finished> ExecuteOn(SessionBindings::Binding& binding, RunState& run,
                                                  bool first_attempt, bool& session_gone)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(binding.run_mu);
  // Writes a long stdout to the workspace and leaves its head and tail in `f`; whether it
  // wrote (or tried to write) into out/.
  bool SpillStdout(const SandboxRef& ref, RunState& run, sandbox::v1::Finished& f);
  // Walks out/ after a run and reports the files it created or changed (`out_digest`:
  // WorkspaceResources::Refresh).
  void ReportProducedFiles(SessionBindings::Binding& binding, RunState& run, const std::string& out_digest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(binding.run_mu);
  // The run's metrics, its log line and its audit line (one per run, refused or not).
  void Record(const RunRequest& request, const codemode::telemetry::TraceContext& trace,
              const std::string& code, const std::string& sandbox, RunOutcome outcome,
              absl::Duration took, const ToolCallStats* calls, const absl::Status& why);

  Sandboxes* const sandboxes_;
  Upstreams* const upstreams_;
  const RunServiceOptions options_;
  const std::shared_ptr<const HandleSealer> handles_;
  const std::shared_ptr<const ApprovalPolicy> policy_;
  SessionBindings bindings_;
  WorkspaceResources resources_;
  OwnedResources owned_;
  ResourceWatch watch_;  // after owned_, which its thread uses
  UpstreamMemory memory_;
  codemode::Mutex catalog_mu_;
  std::shared_ptr<const UpstreamsSeen> seen_ ABSL_GUARDED_BY(catalog_mu_);
  std::shared_ptr<const RunCatalog> catalog_ ABSL_GUARDED_BY(catalog_mu_);
  codemode::Mutex may_ask_mu_;
  uint64_t may_ask_version_ ABSL_GUARDED_BY(may_ask_mu_) = ~uint64_t{0};
  bool may_ask_ ABSL_GUARDED_BY(may_ask_mu_) = false;
};

}  // namespace gateway
