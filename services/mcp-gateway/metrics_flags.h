// The gateway's --metrics_* flags and the /metrics endpoint they start
// (docs/observability.md).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "bridge/run_python.h"
#include "metrics/gateway_metrics.h"
#include "server/server_transport.h"
#include "telemetry/metrics_server.h"
#include "upstream/manager.h"

// A GatewayMetrics sized by --metrics_max_tool_labels when --metrics_listen is set; null
// (nothing counted) when it is not, which is also the benchmark's baseline.
std::shared_ptr<gateway::GatewayMetrics> MetricsFromFlags();

// Registers the states read at scrape time (upstreams, sessions, connections, sandboxes)
// and serves `metrics` on --metrics_listen; null when `metrics` is. Everything passed must
// outlive the returned server.
absl::StatusOr<std::unique_ptr<codemode::telemetry::MetricsServer>> ServeMetrics(
    gateway::GatewayMetrics* metrics, const gateway::UpstreamManager& upstreams,
    gateway::ServerTransport& transport, gateway::RunPythonTool& tool);
