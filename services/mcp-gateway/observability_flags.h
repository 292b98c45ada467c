// The gateway's --metrics_* and --audit_* flags: the /metrics endpoint and the audit log
// (docs/observability.md).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "audit/audit_log.h"
#include "adapter/run_code.h"
#include "metrics/gateway_metrics.h"
#include "server/server_transport.h"
#include "telemetry/metrics_server.h"
#include "upstream/manager.h"

// A GatewayMetrics sized by --metrics_max_tool_labels when --metrics_listen is set; null
// (nothing counted) when it is not, which is also the benchmark's baseline.
std::shared_ptr<gateway::GatewayMetrics> MetricsFromFlags();

// The audit log --audit_log names (default: the state directory's audit.jsonl; "off": none),
// with --audit_max_bytes, --audit_keep and --audit_drain_timeout; null when off. An error when it cannot be opened.
absl::StatusOr<std::shared_ptr<gateway::AuditLog>> AuditFromFlags();
// --audit_arguments: tool-call lines hold the arguments, not only their digest.
bool AuditArgumentsFromFlags();
// --stage_times: the per-stage log lines of the benchmark (metrics/stage_times.h).
void StageTimesFromFlags();

// Registers the states read at scrape time (upstreams, sessions, connections, sandboxes)
// and serves `metrics` on --metrics_listen; null when `metrics` is. Everything passed must
// outlive the returned server.
absl::StatusOr<std::unique_ptr<codemode::telemetry::MetricsServer>> ServeMetrics(
    gateway::GatewayMetrics* metrics, const gateway::UpstreamManager& upstreams,
    gateway::ServerTransport& transport, gateway::RunCodeTool& tool, const gateway::AuditLog* audit);
