#include "metrics/gateway_metrics.h"

#include "absl/strings/str_cat.h"

namespace gateway {

using codemode::telemetry::CountBuckets;
using codemode::telemetry::LatencyBuckets;

const char* GatewayMetrics::Name(RunOutcome o) {
  static constexpr const char* kNames[] = {"ok", "error", "timeout", "cancelled", "refused",
                                           "failed"};
  return kNames[static_cast<size_t>(o)];
}

const char* GatewayMetrics::Name(ToolOutcome o) {
  static constexpr const char* kNames[] = {"ok",      "tool_error", "error",
                                           "timeout", "cancelled",  "refused"};
  return kNames[static_cast<size_t>(o)];
}

const char* GatewayMetrics::Name(ApprovalDecision d) {
  static constexpr const char* kNames[] = {"approved", "declined", "timeout", "withdrawn",
                                           "policy_denied"};
  return kNames[static_cast<size_t>(d)];
}

const char* GatewayMetrics::Name(LimitKind k) {
  static constexpr const char* kNames[] = {"body_too_large", "headers_too_large", "overloaded",
                                           "tool_call_cap"};
  return kNames[static_cast<size_t>(k)];
}

GatewayMetrics::GatewayMetrics(size_t max_tool_labels)
    : registry_(std::make_shared<prometheus::Registry>()),
      gauges_(std::make_shared<codemode::telemetry::ScrapeGauges>()),
      tool_labels_(max_tool_labels) {
  auto& runs = prometheus::BuildCounter()
                   .Name("codemode_gateway_runs_total")
                   .Help("run_python and run_javascript calls by tool and how they ended.")
                   .Register(*registry_);
  for (size_t t = 0; t < runs_.size(); ++t) {
    for (size_t i = 0; i < runs_[t].size(); ++i) {
      runs_[t][i] = &runs.Add({{"tool", kRunTools[t]}, {"outcome", Name(static_cast<RunOutcome>(i))}});
    }
  }
  run_duration_ = &prometheus::BuildHistogram()
                       .Name("codemode_gateway_run_duration_seconds")
                       .Help("run_python and run_javascript wall time, from the request to its result.")
                       .Register(*registry_)
                       .Add({}, LatencyBuckets());
  calls_per_run_ = &prometheus::BuildHistogram()
                        .Name("codemode_gateway_tool_calls_per_run")
                        .Help("Tool calls made by one run_python or run_javascript call.")
                        .Register(*registry_)
                        .Add({}, CountBuckets());
  // Placement is one round of GetInfo at most: sub-millisecond buckets tell its cost apart.
  placement_ = &prometheus::BuildHistogram()
                    .Name("codemode_gateway_sandbox_placement_seconds")
                    .Help("Time a new sandbox spent on choosing its sandboxd endpoint.")
                    .Register(*registry_)
                    .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                                     0.005, 0.01, 0.025, 0.1, 0.5, 1});
  tool_calls_ = &prometheus::BuildCounter()
                     .Name("codemode_gateway_tool_calls_total")
                     .Help("Tool calls made by sandboxed code, by server, tool and outcome "
                           "(pairs past --metrics_max_tool_labels count as _other).")
                     .Register(*registry_);
  tool_call_duration_ = &prometheus::BuildHistogram()
                             .Name("codemode_gateway_tool_call_duration_seconds")
                             .Help("Latency of tool calls sent to an upstream, by server.")
                             .Register(*registry_);
  auto& approvals = prometheus::BuildCounter()
                        .Name("codemode_gateway_approvals_total")
                        .Help("Decisions on tool calls that need approval.")
                        .Register(*registry_);
  for (size_t i = 0; i < approvals_.size(); ++i) {
    approvals_[i] = &approvals.Add({{"decision", Name(static_cast<ApprovalDecision>(i))}});
  }
  auto& limits = prometheus::BuildCounter()
                     .Name("codemode_gateway_limits_hit_total")
                     .Help("Requests and calls refused by one of the gateway's bounds.")
                     .Register(*registry_);
  for (size_t i = 0; i < limits_.size(); ++i) {
    limits_[i] = &limits.Add({{"kind", Name(static_cast<LimitKind>(i))}});
  }
}

void GatewayMetrics::RunFinished(const std::string& tool, RunOutcome outcome,
                                 absl::Duration duration, uint64_t tool_calls) {
  // Two tools: the label set stays bounded whatever name a caller passes.
  const size_t t = tool == kRunTools[1] ? 1 : 0;
  runs_[t][static_cast<size_t>(outcome)]->Increment();
  run_duration_->Observe(absl::ToDoubleSeconds(duration));
  calls_per_run_->Observe(static_cast<double>(tool_calls));
}

void GatewayMetrics::SandboxPlaced(absl::Duration duration) {
  placement_->Observe(absl::ToDoubleSeconds(duration));
}

void GatewayMetrics::ToolCallFinished(const std::string& server, const std::string& tool,
                                      ToolOutcome outcome, absl::Duration duration,
                                      bool reached_upstream) {
  std::string server_label = codemode::telemetry::LabelFold::Clean(server);
  std::string tool_label = codemode::telemetry::LabelFold::Clean(tool);
  std::string pair = absl::StrCat(server_label, "\n", tool_label);
  // One bound for the pair: series stay within (max + 1) x outcomes whatever names the
  // sandboxed code or an upstream makes up.
  if (!tool_labels_.Admit(pair)) {
    server_label = tool_label = std::string(codemode::telemetry::kOtherLabel);
    pair = absl::StrCat(server_label, "\n", tool_label);
  }
  prometheus::Counter* counter;
  prometheus::Histogram* histogram = nullptr;
  {
    codemode::MutexLock lock(&series_mu_);
    prometheus::Counter*& c = tool_call_series_[pair][static_cast<size_t>(outcome)];
    if (c == nullptr) {
      c = &tool_calls_->Add({{"server", server_label}, {"tool", tool_label}, {"outcome", Name(outcome)}});
    }
    counter = c;
    if (reached_upstream) {
      prometheus::Histogram*& h = server_durations_[server_label];
      if (h == nullptr) h = &tool_call_duration_->Add({{"server", server_label}}, LatencyBuckets());
      histogram = h;
    }
  }
  counter->Increment();
  if (histogram != nullptr) histogram->Observe(absl::ToDoubleSeconds(duration));
}

void GatewayMetrics::Approval(ApprovalDecision decision) {
  approvals_[static_cast<size_t>(decision)]->Increment();
}

void GatewayMetrics::LimitHit(LimitKind kind) { limits_[static_cast<size_t>(kind)]->Increment(); }

}  // namespace gateway
