// GatewayMetrics: what the gateway counts for Prometheus (docs/observability.md, the
// mcp-gateway table). Every method is cheap and thread-safe; a null GatewayMetrics* means
// "not counted" wherever one is optional.
//
//   auto metrics = std::make_shared<GatewayMetrics>(/*max_tool_labels=*/500);
//   metrics->RunFinished("run_python", RunOutcome::kOk, absl::Milliseconds(12), /*tool_calls=*/3);
//   metrics->ToolCallFinished("github", "search_issues", ToolOutcome::kOk, d);
//   metrics->gauges().Add(...);   // states read at scrape time, wired by main.cc
//   MetricsServer::Start(listen, {metrics->registry(), metrics->gauges_collectable()});
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "telemetry/metrics.h"

namespace gateway {

// How a run_python or run_javascript call ended.
enum class RunOutcome {
  kOk,         // the code finished
  kError,      // the code raised
  kTimeout,    // the code ran out of time
  kCancelled,  // the client cancelled
  kRefused,    // bad arguments or a bound: nothing ran
  kFailed,     // the gateway or sandboxd failed it (sandbox lost, unavailable)
  kCount
};

// How one tool call made by sandboxed code ended.
enum class ToolOutcome {
  kOk,         // the upstream answered
  kToolError,  // the upstream answered with isError: true
  kError,      // the call failed (upstream down, protocol error)
  kTimeout,    // --call_timeout passed
  kCancelled,  // the run was cancelled or ended
  kRefused,    // not allowed, bad arguments, denied or not approved: never sent
  kCount
};

// What the policy or a person decided about a call that needs approval.
enum class ApprovalDecision { kApproved, kDeclined, kTimeout, kWithdrawn, kPolicyDenied, kCount };

// A request refused by one of the gateway's bounds.
enum class LimitKind { kBodyTooLarge, kHeadersTooLarge, kOverloaded, kToolCallCap, kCount };

class GatewayMetrics {
 public:
  // `max_tool_labels`: distinct (server, tool) pairs counted under their own labels
  // (--metrics_max_tool_labels); later ones are counted as ("_other", "_other").
  explicit GatewayMetrics(size_t max_tool_labels);

  // `tool`: run_python or run_javascript (kRunTools; anything else counts as run_python).
  void RunFinished(const std::string& tool, RunOutcome outcome, absl::Duration duration,
                   uint64_t tool_calls);
  // The `tool` label's values of runs_total.
  static constexpr const char* kRunTools[] = {"run_python", "run_javascript"};
  // `reached_upstream`: the call was sent (its duration is the upstream's latency).
  void ToolCallFinished(const std::string& server, const std::string& tool, ToolOutcome outcome,
                        absl::Duration duration, bool reached_upstream);
  void Approval(ApprovalDecision decision);
  // How long a new sandbox's placement took: choosing among the --sandboxd endpoints, up to
  // sending the first CreateSession (nothing to choose with one endpoint).
  void SandboxPlaced(absl::Duration duration);
  void LimitHit(LimitKind kind);

  // Everything above, and build info.
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  // States read at scrape time; main.cc adds them before serving.
  codemode::telemetry::ScrapeGauges& gauges() { return *gauges_; }
  std::shared_ptr<prometheus::Collectable> gauges_collectable() const { return gauges_; }

  static const char* Name(RunOutcome o);
  static const char* Name(ToolOutcome o);
  static const char* Name(ApprovalDecision d);
  static const char* Name(LimitKind k);

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::shared_ptr<codemode::telemetry::ScrapeGauges> gauges_;
  codemode::telemetry::LabelFold tool_labels_;

  // By tool (kRunTools), then outcome.
  std::array<std::array<prometheus::Counter*, static_cast<size_t>(RunOutcome::kCount)>, 2> runs_{};
  prometheus::Histogram* run_duration_ = nullptr;
  prometheus::Histogram* calls_per_run_ = nullptr;
  prometheus::Histogram* placement_ = nullptr;
  prometheus::Family<prometheus::Counter>* tool_calls_ = nullptr;
  prometheus::Family<prometheus::Histogram>* tool_call_duration_ = nullptr;
  // Series resolved once: Family::Add builds a metric and a label map before it finds the
  // existing one. Bounded like the series themselves (LabelFold admits at most
  // --metrics_max_tool_labels pairs; everything else is "_other").
  codemode::Mutex series_mu_;
  absl::flat_hash_map<std::string, prometheus::Histogram*> server_durations_
      ABSL_GUARDED_BY(series_mu_);
  // Key: server label "\n" tool label; value: one counter per ToolOutcome, made on first use.
  absl::flat_hash_map<std::string,
                      std::array<prometheus::Counter*, static_cast<size_t>(ToolOutcome::kCount)>>
      tool_call_series_ ABSL_GUARDED_BY(series_mu_);
  std::array<prometheus::Counter*, static_cast<size_t>(ApprovalDecision::kCount)> approvals_{};
  std::array<prometheus::Counter*, static_cast<size_t>(LimitKind::kCount)> limits_{};
};

}  // namespace gateway
