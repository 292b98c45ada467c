#include "metrics_flags.h"

#include <string>

#include "absl/flags/flag.h"
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

std::shared_ptr<gateway::GatewayMetrics> MetricsFromFlags() {
  if (absl::GetFlag(FLAGS_metrics_listen).empty()) return nullptr;
  return std::make_shared<gateway::GatewayMetrics>(absl::GetFlag(FLAGS_metrics_max_tool_labels));
}

absl::StatusOr<std::unique_ptr<codemode::telemetry::MetricsServer>> ServeMetrics(
    gateway::GatewayMetrics* metrics_or_null, const gateway::UpstreamManager& upstreams,
    gateway::ServerTransport& transport, gateway::RunPythonTool& tool) {
  if (metrics_or_null == nullptr) return nullptr;
  gateway::GatewayMetrics& metrics = *metrics_or_null;
  const std::string listen = absl::GetFlag(FLAGS_metrics_listen);
  ScrapeGauges& gauges = metrics.gauges();
  AddUpstreamGauges(gauges, upstreams);
  auto* http = dynamic_cast<gateway::HttpServer*>(&transport);
  gauges.Add("codemode_gateway_mcp_sessions", "MCP sessions held (the 2025 era; stdio: 1).",
             [http] { return http ? double(http->session_count()) : 1.0; });
  gauges.Add("codemode_gateway_http_connections", "Open HTTP connections.",
             [http] { return http ? double(http->connection_count()) : 0.0; });
  gauges.Add("codemode_gateway_sandboxes_held",
             "Sandboxes this gateway holds for clients (MCP sessions' and opened handles').",
             [&tool] { return double(tool.sandboxes_held()); });
  codemode::telemetry::AddBuildInfo(*metrics.registry(), "mcp-gateway", GATEWAY_VERSION);
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
