// Sandboxes: what the bridge needs from sandboxd. SandboxClient implements it over gRPC
// (sandbox.v1); unit tests use a fake (tests/mcp-gateway/bridge/bridge_fakes.h), so the
// run_python logic is tested without a daemon.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "upstream/transport.h"
#include "base/cancel.h"
#include "sandbox/v1/sandbox.pb.h"

namespace gateway {

// A sandbox session created by us.
struct SandboxRef {
  size_t endpoint = 0;  // which sandboxd (index into SandboxClient's endpoints)
  std::string session_id;
  // What the session runs ("python" or "javascript"): sealed into its handles. Not part of
  // its identity (a session's runtime never changes).
  std::string runtime = "python";
  bool operator==(const SandboxRef& o) const {
    return endpoint == o.endpoint && session_id == o.session_id;
  }
};

struct ExecuteHandlers {
  std::function<void(bool is_stderr, const std::string& text)> on_output;
  // Called on a worker thread for each tool call (several at once, up to the client's
  // in-flight limit); returns the answer to send back. The upstream's answer is charged to
  // `answer` (CallOptions::answer): the run's credential's budgets.
  std::function<sandbox::v1::ToolResult(const sandbox::v1::ToolCall& call,
                                        const AnswerCharges& answer)>
      on_tool_call;
  // Called for each call refused before on_tool_call could take it (a bound of the run, of
  // the credential or of the gateway: ToolCallLimits), with the error the sandbox gets:
  // it counts in the run's tool_calls_total, its metrics and its audit line as refused.
  std::function<void(const sandbox::v1::ToolCall& call, const std::string& why)> on_tool_call_refused;
  // Called when the stream has ended, before waiting for tool-call threads: cancel the
  // upstream calls still running so that waiting is short.
  std::function<void()> on_stream_end;
  // Who the run belongs to (ToolCallContext::credential): its tool calls' bytes count
  // against that credential's share of the gateway's tool-call budget.
  std::string credential;
  // The run's W3C traceparent, sent to sandboxd as gRPC metadata (its logs name the trace).
  std::string traceparent;
  // The language of the code ("python" or "javascript"), sent as StartExecution.runtime:
  // sandboxd refuses code that is not its session's language before it runs. Empty: unsaid.
  std::string runtime;
};

class Sandboxes {
 public:
  Sandboxes() = default;
  Sandboxes(const Sandboxes&) = delete;
  Sandboxes& operator=(const Sandboxes&) = delete;
  virtual ~Sandboxes() = default;

  // An endpoint's name as configured (what a sandbox handle records), and the endpoint of a
  // name; nullopt for a name this gateway is not configured with.
  virtual std::string EndpointName(size_t endpoint) const = 0;
  virtual std::optional<size_t> FindEndpoint(const std::string& name) const = 0;

  // How a new sandbox may make room in sandboxd (CreateSessionRequest.max_owner_sessions,
  // reclaim_idle).
  struct Room {
    // At most this many sandboxes of the owner, counting the new one (0: sandboxd's
    // --max_sessions_per_owner alone).
    uint32_t owner_limit = 0;
    // At a limit, end the owner's least recently used idle sandbox instead of failing.
    bool reclaim_idle = true;
  };
  // `runtime`: the language the session runs, "python" or "javascript"
  // (CreateSessionRequest.runtime); it never changes. `egress_policy`: the hosts its code
  // may reach (CreateSessionRequest.egress_policy; empty: sandboxd's --egress_default). A
  // policy sandboxd refuses fails the create with its message (INVALID_ARGUMENT or
  // PERMISSION_DENIED naming the entry, FAILED_PRECONDITION where it gives no egress).
  virtual absl::StatusOr<SandboxRef> CreateSession(const std::string& owner,
                                                   const std::string& label,
                                                   const sandbox::v1::Catalog& catalog,
                                                   const Room& room, const std::string& runtime,
                                                   const std::string& egress_policy) = 0;
  virtual absl::Status DeleteSession(const SandboxRef& ref) = 0;
  // The ready sandboxes `owner` holds on every endpoint (sandboxd's ListSessions by owner),
  // each endpoint's oldest first. An endpoint that does not answer is left out and clears
  // `complete`. For listings of a credential's files (stateless requests).
  struct Owned {
    std::vector<SandboxRef> refs;
    // Each ref's finished executions: while it stays the same, the sandbox's files changed
    // only by what its code left running in the background.
    std::vector<uint64_t> executions;
    bool complete = true;
    // Why each endpoint left out did not answer (its name, the gRPC status's code and text).
    std::vector<std::string> missing;
  };
  // Ends by `deadline` (at most 5 s from now), an endpoint that has not answered by then
  // being left out as missing.
  virtual Owned ListOwned(const std::string& owner, absl::Time deadline,
                          std::shared_ptr<codemode::CancelToken> cancel) = 0;
  virtual absl::Status ResetSession(const SandboxRef& ref) = 0;
  // The file calls end early, CANCELLED, when `cancel` is cancelled: the MCP request
  // behind them (a run, a resources/read) was cancelled or its session closed, and sandboxd
  // stops waiting on the sandbox for it. Every caller passes its request's token; nullptr
  // only where no request stands behind the call (say why there). No default argument: a
  // default on a virtual is bound by the static type, and it let the walk of out/ forget
  // the run's token.
  // Writes `data` to `path` in the session's workspace (sandboxd's UploadFile).
  virtual absl::Status UploadFile(const SandboxRef& ref, const std::string& path,
                                  const std::string& data,
                                  std::shared_ptr<codemode::CancelToken> cancel) = 0;
  // The two calls below also end, DEADLINE_EXCEEDED, at `deadline` (absl::InfiniteFuture():
  // only the client's own bound): the sandbox answers them itself and may never do so, so a
  // request that holds a scarce slot while it waits (resources/list, resources/read) bounds
  // the wait by its own flag.
  // One directory of the workspace (sandboxd's ListFiles); NOT_FOUND when it is missing.
  virtual absl::StatusOr<sandbox::v1::ListFilesResponse> ListFiles(
      const SandboxRef& ref, const std::string& path, uint32_t max_entries, absl::Time deadline,
      std::shared_ptr<codemode::CancelToken> cancel) = 0;
  // The bytes of a workspace file (sandboxd's DownloadFile); RESOURCE_EXHAUSTED, without
  // reading on, when it is longer than `max_bytes`.
  virtual absl::StatusOr<std::string> DownloadFile(
      const SandboxRef& ref, const std::string& path, size_t max_bytes, absl::Time deadline,
      std::shared_ptr<codemode::CancelToken> cancel) = 0;

  // Runs code; returns the Finished message, or the rpc's status (NOT_FOUND and
  // FAILED_PRECONDITION: the session is gone; UNAVAILABLE, ...). `catalog` (nullable)
  // replaces the session's catalog first. Cancelling the token cancels the execution.
  virtual absl::StatusOr<sandbox::v1::Finished> Execute(
      const SandboxRef& ref, const std::string& code, uint32_t timeout_ms,
      const sandbox::v1::Catalog* catalog, const ExecuteHandlers& handlers,
      std::shared_ptr<codemode::CancelToken> cancel) = 0;
};

}  // namespace gateway
