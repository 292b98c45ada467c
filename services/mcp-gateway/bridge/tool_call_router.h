// The way back up: a tool call made by sandboxed code reaches its upstream MCP server
// through ToolCallRouter, which refuses any call outside the catalog the run's sandbox
// was given (and then ends the run), re-checks the arguments' JSON (the sandbox is
// untrusted, and so is every peer), relays the upstream's progress as progress of the
// run, and counts the calls for the result.
//
//   RunProgress progress(ctx.progress);
//   auto end_run = std::make_shared<codemode::CancelToken>();
//   RouterOptions options;  // the gate, metrics, trace, audit, sandbox
//   ToolCallRouter router(upstreams, CallableTools::Of(catalog), end_run, &progress, options);
//   handlers.on_tool_call = [&](const ToolCall& c) { return router.Route(c, cancel); };
//   ToolCallStats stats = router.stats();
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "base/cancel.h"
#include "base/log_text.h"
#include "base/mutex.h"
#include "bridge/run_arguments.h"
#include "bridge/run_scope.h"
#include "bridge/upstreams.h"
#include "audit/audit_log.h"
#include "metrics/gateway_metrics.h"
#include "telemetry/trace_context.h"
#include "nlohmann/json.hpp"
#include "sandbox/v1/sandbox.pb.h"

namespace gateway {

// The progress notifications of one run. They come from the stream reader (output) and
// from tool-call threads (upstream progress) and must strictly increase: one counter under
// one lock. An upstream's progress is its to send at any rate and size: at most
// kUpstreamPerSecond a second (bursts of kUpstreamBurst) are relayed, each message clipped
// to kUpstreamMessageBytes: each message is copied about nine times on its way to the
// client, and an upstream may send many large ones per call.
class RunProgress {
 public:
  static constexpr double kUpstreamPerSecond = 10;
  static constexpr double kUpstreamBurst = 20;
  static constexpr size_t kUpstreamMessageBytes = 1024;

  using Sink = std::function<void(double progress, std::optional<double> total,
                                  const std::string& message)>;
  explicit RunProgress(Sink sink)
      : sink_(std::move(sink)), upstream_limit_(kUpstreamPerSecond, kUpstreamBurst) {}
  // False when the client asked for no progress: then nothing needs to be built for it.
  bool wanted() const { return static_cast<bool>(sink_); }
  // Sends `message` as the next progress step (nothing when the client asked for none).
  void Report(const std::string& message);
  // Sends an upstream's notifications/progress `params` for `tool` ("server.tool") as the
  // next step, unless upstreams already sent their share of this run's progress.
  void ReportUpstream(const std::string& tool, const nlohmann::json& params);

 private:
  const Sink sink_;
  codemode::LogRateLimit upstream_limit_;
  codemode::Mutex mu_;
  uint64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
};

// "server.tool: message (progress/total)" from the params of an upstream's
// notifications/progress (untrusted: any field may be missing or of the wrong type), the
// message clipped to RunProgress::kUpstreamMessageBytes at a character boundary.
std::string UpstreamProgressMessage(const std::string& tool, const nlohmann::json& params);

// The calls a run may make: the (server, tool) pairs of the catalog its sandbox was given.
// sandboxd refuses every other call already; the gateway checks again because a peer at
// sandboxd's address has proved nothing by being there, and neither has sandboxd's own
// answer.
class CallableTools {
 public:
  static CallableTools Of(const sandbox::v1::Catalog& catalog);
  bool Has(const std::string& server, const std::string& tool) const {
    return pairs_.count({server, tool}) > 0;
  }

 private:
  std::set<std::pair<std::string, std::string>> pairs_;
};

struct ToolCallStats {
  nlohmann::json listed = nlohmann::json::array();  // the first calls: server, tool, ok, duration_ms
  uint64_t total = 0;
  uint64_t failed = 0;  // refused, failed, or answered with isError
};

// Asked before each call goes upstream, with its parsed arguments (approvals:
// run_approvals.h); a non-OK status is the call's error. `approval` gets the decision
// when the call needed one (RunApprovals::Check).
using ToolCallGate = std::function<absl::Status(const std::string& server, const std::string& tool,
                                                const nlohmann::json& arguments,
                                                const std::shared_ptr<codemode::CancelToken>& cancel,
                                                std::string* approval)>;

// How a run's calls are judged, counted and logged. The defaults: no gate, no metrics, a
// trace of each call's own, no audit.
struct RouterOptions {
  ToolCallGate gate;
  // Each call is counted here too (null: not).
  GatewayMetrics* metrics = nullptr;
  // Each call gets a span of the run's trace, sent upstream as params._meta.traceparent.
  std::optional<codemode::telemetry::TraceContext> trace;
  // Each call is one line of `audit` (null: none), naming `credential` and the sandbox
  // the run is in (`sandbox`; null: none named); with `audit_arguments` the line holds
  // the arguments too.
  AuditLog* audit = nullptr;
  std::string credential;
  bool audit_arguments = false;
  const RunSandbox* sandbox = nullptr;
};

class ToolCallRouter {
 public:
  // structuredContent.tool_calls lists at most this many calls of a run; the totals count all.
  static constexpr size_t kListedCalls = 100;

  // A call outside `callable` is refused, and its run ended: `end_run` is cancelled with
  // the reason, which violation() keeps; every later call of the run is refused too.
  ToolCallRouter(Upstreams* upstreams, CallableTools callable,
                 std::shared_ptr<codemode::CancelToken> end_run, RunProgress* progress,
                 RouterOptions options = {});

  // Answers one call (blocking while the upstream works); `cancel` cancels the upstream
  // call; the upstream's answer is charged to `answer` (CallOptions::answer). Thread-safe:
  // calls of one run are answered concurrently.
  sandbox::v1::ToolResult Route(const sandbox::v1::ToolCall& call,
                                std::shared_ptr<codemode::CancelToken> cancel,
                                AnswerCharges answer = {});
  // Records a call the gateway refused before routing it (ToolCallDispatcher's bounds):
  // counted as failed in stats(), `refused` in the metrics and the audit log. Thread-safe.
  void Refused(const sandbox::v1::ToolCall& call);

  ToolCallStats stats() const;
  // Why the run was ended: the first call outside its catalog; empty when none came.
  std::string violation() const {
    codemode::MutexLock lock(&mu_);
    return violation_;
  }

 private:
  // The upstream's answer: the result's JSON, or an error for the sandboxed code.
  // What one call was, for its audit line.
  struct CallRecord {
    ToolOutcome outcome = ToolOutcome::kRefused;
    std::string approval;  // the decision, when it needed one
    std::optional<codemode::telemetry::TraceContext> span;  // the call's own
  };
  sandbox::v1::ToolResult Forward(const sandbox::v1::ToolCall& call, CallRecord& record,
                                  std::shared_ptr<codemode::CancelToken> cancel,
                                  AnswerCharges answer);
  void Audit(const sandbox::v1::ToolCall& call, const CallRecord& record, absl::Duration took);
  void Count(const sandbox::v1::ToolCall& call, bool ok, int64_t duration_ms);

  Upstreams* const upstreams_;
  const CallableTools callable_;
  const std::shared_ptr<codemode::CancelToken> end_run_;
  RunProgress* const progress_;
  const RouterOptions options_;
  mutable codemode::Mutex mu_;
  ToolCallStats stats_ ABSL_GUARDED_BY(mu_);
  std::string violation_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gateway
