#include "observability_flags.h"

#include <algorithm>
#include <string>

#include "absl/flags/flag.h"
#include "base/secret_file.h"
#include "base/version.h"
#include "metrics/stage_times.h"
#include "server/http_server.h"
#include "spdlog/spdlog.h"
#include "telemetry/metrics.h"

ABSL_FLAG(std::string, metrics_listen, "",
          "Serve Prometheus metrics on http://<this>/metrics (IPv4:port or [IPv6]:port, 0 picks "
          "a port). Off when empty; the shipped systemd unit sets 127.0.0.1:9465. "
          "Unauthenticated: keep it on loopback (docs/observability.md).");
ABSL_FLAG(uint32_t, metrics_max_tool_labels, 500,
          "Distinct (server, tool) pairs counted under their own labels; later ones count as "
          "_other, so the series stay bounded whatever tools upstreams list.");

ABSL_FLAG(std::string, audit_log, "",
          "Append one JSON line per run_python and per tool call here (0600, rotated by size; "
          "docs/observability.md), in a directory of ours that no other user may enter (0700, "
          "on a path only we or root can change; refused otherwise). Default: "
          "$XDG_STATE_HOME/mcp-gateway/audit.jsonl "
          "(~/.local/state/mcp-gateway/audit.jsonl); \"off\": no audit log.");
ABSL_FLAG(uint64_t, audit_max_bytes, 64 << 20, "Rotate the audit log past this size.");
ABSL_FLAG(uint32_t, audit_keep, 5, "Rotated audit logs kept (audit.jsonl.1 ... .N).");
ABSL_FLAG(absl::Duration, audit_drain_timeout, absl::Seconds(5),
          "At shutdown, write the queued audit lines for at most this long; the rest are "
          "dropped, counted and logged. Keep it well under the service manager's stop timeout "
          "(the shipped unit's TimeoutStopSec=20).");
ABSL_FLAG(bool, stage_times, false,
          "Log one line per response (stdio, HTTP) with the microseconds each stage of the request "
          "took inside the gateway (metrics/stage_times.h): for the benchmark's breakdown "
          "(bench/gateway_bench.mjs --only stages), with one request at a time.");
ABSL_FLAG(bool, audit_arguments, false,
          "Write each tool call's arguments into its audit line (default: their SHA-256 and "
          "size only). They may hold what your upstreams' users would call secrets.");

namespace {

using codemode::telemetry::LabelFold;
using codemode::telemetry::ScrapeGauges;

// Upstream states, one series per configured server (bounded by the configuration).
void AddUpstreamGauges(ScrapeGauges& gauges, const gateway::UpstreamManager& upstreams) {
  auto read = [&upstreams](auto field) {
    return [&upstreams, field] {
      ScrapeGauges::Samples samples;
      for (const gateway::UpstreamHealth& h : upstreams.Health()) {
        samples.emplace_back(LabelFold::Clean(h.name), field(h));
      }
      return samples;
    };
  };
  gauges.AddLabelled("codemode_gateway_upstream_up", "1 while the upstream is connected.",
                     "server", read([](const gateway::UpstreamHealth& h) { return h.connected ? 1.0 : 0.0; }));
  gauges.AddLabelled("codemode_gateway_upstream_tools", "Tools the upstream lists.", "server",
                     read([](const gateway::UpstreamHealth& h) { return double(h.tools); }));
  gauges.AddLabelledCounter(
      "codemode_gateway_upstream_reconnects_total", "Connections to the upstream after the first.",
      "server", read([](const gateway::UpstreamHealth& h) { return double(h.reconnects); }));
}

}  // namespace

absl::StatusOr<std::shared_ptr<gateway::AuditLog>> AuditFromFlags() {
  std::string path = absl::GetFlag(FLAGS_audit_log);
  if (path == "off") return nullptr;
  // Its directory is claimed by AuditLog::Open (created 0700 when missing).
  if (path.empty()) path = codemode::DefaultStateFile("mcp-gateway", "audit.jsonl");
  gateway::AuditOptions options;
  options.path = path;
  options.max_file_bytes = std::max<uint64_t>(4096, absl::GetFlag(FLAGS_audit_max_bytes));
  options.keep = std::max<uint32_t>(1, absl::GetFlag(FLAGS_audit_keep));
  options.drain_timeout = std::max(absl::ZeroDuration(), absl::GetFlag(FLAGS_audit_drain_timeout));
  absl::StatusOr<std::unique_ptr<gateway::AuditLog>> audit = gateway::AuditLog::Open(options);
  if (!audit.ok()) return audit.status();
  spdlog::info("audit log: {}", path);
  return std::shared_ptr<gateway::AuditLog>(*std::move(audit));
}

bool AuditArgumentsFromFlags() { return absl::GetFlag(FLAGS_audit_arguments); }

void StageTimesFromFlags() { gateway::StageTimes::Enable(absl::GetFlag(FLAGS_stage_times)); }

std::shared_ptr<gateway::GatewayMetrics> MetricsFromFlags() {
  if (absl::GetFlag(FLAGS_metrics_listen).empty()) return nullptr;
  return std::make_shared<gateway::GatewayMetrics>(absl::GetFlag(FLAGS_metrics_max_tool_labels));
}

absl::StatusOr<std::unique_ptr<codemode::telemetry::MetricsServer>> ServeMetrics(
    gateway::GatewayMetrics* metrics_or_null, const gateway::UpstreamManager& upstreams,
    gateway::ServerTransport& transport, gateway::RunCodeTool& tool, const gateway::AuditLog* audit) {
  if (metrics_or_null == nullptr) return nullptr;
  gateway::GatewayMetrics& metrics = *metrics_or_null;
  const std::string listen = absl::GetFlag(FLAGS_metrics_listen);
  ScrapeGauges& gauges = metrics.gauges();
  AddUpstreamGauges(gauges, upstreams);
  auto* http = dynamic_cast<gateway::HttpServer*>(&transport);
  gauges.Add("codemode_gateway_mcp_sessions", "MCP sessions held (the 2025 revisions; stdio: 1).",
             [http] { return http ? double(http->session_count()) : 1.0; });
  gauges.Add("codemode_gateway_http_connections", "Open HTTP connections.",
             [http] { return http ? double(http->connection_count()) : 0.0; });
  gauges.Add("codemode_gateway_sandboxes_held",
             "Sandboxes this gateway holds for clients (MCP sessions' and opened handles').",
             [&tool] { return double(tool.sandboxes_held()); });
  if (audit != nullptr) {
    gauges.AddLabelledCounter("codemode_gateway_audit_lines_total",
                              "Audit lines by what became of them (dropped: queue full or the file refused).",
                              "result", [audit] {
                                return ScrapeGauges::Samples{{"written", double(audit->written())},
                                                             {"dropped", double(audit->dropped())}};
                              });
    gauges.AddLabelledCounter("codemode_gateway_audit_rotations_total",
                              "Audit log rotations (refused: a kept name such as audit.jsonl.1 "
                              "held a directory or another non-file, or a rename failed).",
                              "result", [audit] {
                                return ScrapeGauges::Samples{{"done", double(audit->rotations())},
                                                             {"refused", double(audit->rotation_failures())}};
                              });
  }
  codemode::telemetry::AddBuildInfo(*metrics.registry(), "mcp-gateway", codemode::kVersion);
  absl::StatusOr<std::unique_ptr<codemode::telemetry::MetricsServer>> server =
      codemode::telemetry::MetricsServer::Start(listen, {metrics.registry(), metrics.gauges_collectable()});
  if (!server.ok()) return server.status();
  if (!codemode::telemetry::MetricsServer::IsLoopback(listen)) {
    spdlog::warn("--metrics_listen {} is not loopback: anyone who can connect reads the metrics "
                 "(counts, server and tool names)", listen);
  }
  spdlog::info("metrics on http://{}:{}/metrics", listen.substr(0, listen.rfind(':')),
               (*server)->port());
  return server;
}
