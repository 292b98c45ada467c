// Tool calls from the sandbox to the upstreams, and the run's progress. See
// tool_call_router.h.
#include "bridge/tool_call_router.h"

#include "absl/time/clock.h"

#include "absl/strings/str_cat.h"
#include "base/untrusted_json.h"
#include "base/utf8.h"

namespace gateway {

using nlohmann::json;

void RunProgress::Report(const std::string& message) {
  if (!sink_) return;
  codemode::MutexLock lock(&mu_);
  sink_(static_cast<double>(++steps_), std::nullopt, message);
}

void RunProgress::ReportUpstream(const std::string& tool, const json& params) {
  if (!sink_) return;
  uint64_t dropped = 0;
  if (!upstream_limit_.Allow(absl::Now(), &dropped)) return;
  std::string message = UpstreamProgressMessage(tool, params);
  if (dropped > 0) absl::StrAppend(&message, " [", dropped, " earlier upstream progress not shown]");
  Report(message + "\n");
}

namespace {

// The first `max` bytes of UTF-8 `text` or fewer, not cutting a character.
}  // namespace

std::string UpstreamProgressMessage(const std::string& tool, const json& params) {
  // nlohmann::json::value() throws on a type mismatch: check each field's type.
  std::string message = tool + ": ";
  auto m = params.find("message");
  if (m != params.end() && m->is_string()) {
    const std::string& text = m->get_ref<const std::string&>();
    absl::StrAppend(&message, codemode::Utf8Prefix(text, RunProgress::kUpstreamMessageBytes));
    if (text.size() > RunProgress::kUpstreamMessageBytes) {
      absl::StrAppend(&message, "… (", text.size(), " bytes)");
    }
  } else {
    message += "progress";
  }
  auto progress = params.find("progress");
  if (progress != params.end() && progress->is_number()) {
    message += " (" + progress->dump();
    auto total = params.find("total");
    if (total != params.end() && total->is_number()) message += "/" + total->dump();
    message += ")";
  }
  return message;
}

CallableTools CallableTools::Of(const sandbox::v1::Catalog& catalog) {
  CallableTools callable;
  for (const auto& server : catalog.servers()) {
    for (const auto& tool : server.tools()) callable.pairs_.emplace(server.name(), tool.name());
  }
  return callable;
}

ToolCallRouter::ToolCallRouter(Upstreams* upstreams, CallableTools callable,
                               std::shared_ptr<codemode::CancelToken> end_run, RunProgress* progress,
                               RouterOptions options)
    : upstreams_(upstreams),
      callable_(std::move(callable)),
      end_run_(std::move(end_run)),
      progress_(progress),
      options_(std::move(options)) {}

sandbox::v1::ToolResult ToolCallRouter::Route(const sandbox::v1::ToolCall& call,
                                              std::shared_ptr<codemode::CancelToken> cancel,
                                              AnswerCharges answer) {
  const absl::Time started = absl::Now();
  CallRecord record;
  // Each call is a span of the run's trace (a trace of its own when the run has none).
  record.span = codemode::telemetry::TraceContext::ChildOf(options_.trace);
  sandbox::v1::ToolResult r;
  // An error says only why: the sandbox's ToolError names the call ("server.tool: why").
  if (!callable_.Has(call.server(), call.tool()) || !violation().empty()) {
    // The sandbox's own sandboxd refuses such a call before it gets here: whatever sent it
    // is not the sandboxd this run was given to, or not behaving as one.
    const std::string why = absl::StrCat(
        "sandboxd sent a call to server '", codemode::LogText(call.server(), 64), "' tool '",
        codemode::LogText(call.tool(), 64), "', which is not in the catalog this run's sandbox was given");
    r.set_error("this call is not in the run's catalog; the run was ended");
    {
      codemode::MutexLock lock(&mu_);
      if (violation_.empty()) violation_ = why;
    }
    if (end_run_) end_run_->Cancel(why);
  } else {
    r = Forward(call, record, std::move(cancel), std::move(answer));
  }
  r.set_call_id(call.call_id());
  const absl::Duration took = absl::Now() - started;
  Count(call, record.outcome == ToolOutcome::kOk, absl::ToInt64Milliseconds(took));
  if (options_.metrics != nullptr) {
    const bool sent = record.outcome != ToolOutcome::kRefused;
    options_.metrics->ToolCallFinished(call.server(), call.tool(), record.outcome, took, sent);
  }
  if (options_.audit != nullptr) Audit(call, record, took);
  return r;
}

void ToolCallRouter::Refused(const sandbox::v1::ToolCall& call) {
  CallRecord record;  // its outcome: refused
  record.span = codemode::telemetry::TraceContext::ChildOf(options_.trace);
  Count(call, false, 0);
  if (options_.metrics != nullptr) {
    options_.metrics->ToolCallFinished(call.server(), call.tool(), ToolOutcome::kRefused, absl::ZeroDuration(), false);
  }
  if (options_.audit != nullptr) Audit(call, record, absl::ZeroDuration());
}

// One line per call: who, from which sandbox, in which trace, what (by digest unless the
// operator opted in), how it ended. Never the result.
void ToolCallRouter::Audit(const sandbox::v1::ToolCall& call, const CallRecord& record,
                           absl::Duration took) {
  json line = {{"kind", "tool_call"},
               {"credential", options_.credential},
               {"sandbox", options_.sandbox != nullptr ? options_.sandbox->id() : ""},
               {"trace_id", record.span->trace_id()},
               {"span_id", record.span->span_id()},
               {"parent_span_id", options_.trace ? options_.trace->span_id() : ""},
               {"server", call.server()},
               {"tool", call.tool()},
               {"arguments_bytes", call.arguments_json().size()},
               {"arguments_sha256", AuditDigest(call.arguments_json())},
               {"outcome", GatewayMetrics::Name(record.outcome)},
               {"duration_ms", absl::ToInt64Milliseconds(took)}};
  if (!record.approval.empty()) line["approval"] = record.approval;
  if (options_.audit_arguments) line["arguments"] = call.arguments_json();
  options_.audit->Write(std::move(line));
}

namespace {

// A failed upstream call, for the tool-call metric.
ToolOutcome OutcomeOf(const absl::Status& status) {
  if (absl::IsDeadlineExceeded(status)) return ToolOutcome::kTimeout;
  if (absl::IsCancelled(status)) return ToolOutcome::kCancelled;
  return ToolOutcome::kError;
}

}  // namespace

sandbox::v1::ToolResult ToolCallRouter::Forward(const sandbox::v1::ToolCall& call, CallRecord& record,
                                                std::shared_ptr<codemode::CancelToken> cancel,
                                                AnswerCharges answer) {
  sandbox::v1::ToolResult r;
  const std::string name = call.server() + "." + call.tool();
  // sandboxd checked the arguments, but the gateway trusts no peer's JSON.
  absl::StatusOr<json> arguments = codemode::ParseUntrustedJson(call.arguments_json(), "arguments");
  if (!arguments.ok()) {
    r.set_error(std::string(arguments.status().message()));
    return r;
  }
  if (!arguments->is_object()) {  // MCP's tools/call takes an object
    r.set_error("the arguments must be a JSON object");
    return r;
  }
  if (options_.gate) {
    if (absl::Status s = options_.gate(call.server(), call.tool(), *arguments, cancel, &record.approval);
        !s.ok()) {
      r.set_error(std::string(s.message()));
      return r;
    }
  }
  CallOptions options;
  options.cancel = std::move(cancel);
  options.answer = std::move(answer);
  options.traceparent = record.span->Traceparent();
  // Upstream progress reaches the client as progress of this run, if it asked for any.
  if (progress_->wanted()) {
    options.on_progress = [this, name](const json& params) { progress_->ReportUpstream(name, params); };
  }
  absl::StatusOr<json> result = upstreams_->CallTool(call.server(), call.tool(), *arguments, options);
  if (!result.ok()) {
    record.outcome = OutcomeOf(result.status());
    r.set_error(std::string(result.status().message()));
    return r;
  }
  r.set_result_json(result->dump());
  auto is_error = result->find("isError");
  const bool tool_error = is_error != result->end() && is_error->is_boolean() && is_error->get<bool>();
  record.outcome = tool_error ? ToolOutcome::kToolError : ToolOutcome::kOk;
  return r;
}

void ToolCallRouter::Count(const sandbox::v1::ToolCall& call, bool ok, int64_t duration_ms) {
  codemode::MutexLock lock(&mu_);
  ++stats_.total;
  if (!ok) ++stats_.failed;
  // A run may make thousands of calls: the result lists the first few and counts all.
  if (stats_.listed.size() < kListedCalls) {
    stats_.listed.push_back(
        {{"server", call.server()}, {"tool", call.tool()}, {"ok", ok}, {"duration_ms", duration_ms}});
  }
}

ToolCallStats ToolCallRouter::stats() const {
  codemode::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace gateway
