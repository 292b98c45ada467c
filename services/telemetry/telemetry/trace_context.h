// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` a client
// sends (MCP's params._meta.traceparent, SEP-414, or the HTTP header) names a trace and
// the client's span; each run and each tool call gets a span of its own in that trace, and
// what the gateway sends on (upstream tool calls' _meta, sandboxd's gRPC metadata) names
// it as the parent. Logs and audit lines carry the trace id, so one run can be followed
// across both daemons and the upstreams. (Debian 12 packages no OpenTelemetry C++ SDK;
// there is no span export here, only propagation and correlation: docs/observability.md.)
//
//   TraceContext run = TraceContext::ChildOf(TraceContext::Parse(header));  // or a new trace
//   run.trace_id();       // 32 lowercase hex digits
//   run.Traceparent();    // "00-<trace id>-<span id>-<flags>", what the next hop gets
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace codemode::telemetry {

class TraceContext {
 public:
  // The context a valid `traceparent` names (version 00, or a later version's first four
  // fields as the spec says to read them); nullopt for anything else: wrong length or
  // characters, upper-case hex, an all-zero trace or span id, version ff.
  static std::optional<TraceContext> Parse(absl::string_view traceparent);
  // A new span in `parent`'s trace (a new trace, sampled, when there is no parent).
  static TraceContext ChildOf(const std::optional<TraceContext>& parent);

  const std::string& trace_id() const { return trace_id_; }
  const std::string& span_id() const { return span_id_; }
  bool sampled() const { return (flags_ & 1) != 0; }
  std::string Traceparent() const;

 private:
  TraceContext(std::string trace_id, std::string span_id, unsigned flags)
      : trace_id_(std::move(trace_id)), span_id_(std::move(span_id)), flags_(flags) {}

  std::string trace_id_;  // 32 lowercase hex digits, not all zero
  std::string span_id_;   // 16 lowercase hex digits, not all zero
  unsigned flags_ = 1;
};

}  // namespace codemode::telemetry
