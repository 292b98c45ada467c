// How the gateway reaches sandboxd: its endpoints, the token of TCP endpoints and TLS to
// them (--sandboxd, --sandboxd_token_file, --sandboxd_tls_*). Defined in sandboxd_flags.cc,
// read once by main().
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bridge/sandbox_client.h"
#include "bridge/sandbox_egress.h"

struct SandboxdFlags {
  std::vector<std::string> endpoints;
  std::string tcp_token;  // empty: no --sandboxd_token_file
  gateway::SandboxdTls tls;
  absl::Duration resolve_interval;  // --sandboxd_resolve_interval
};

// The flags, with their environment fallbacks ($MCP_GATEWAY_SANDBOXD,
// $MCP_GATEWAY_SANDBOXD_TOKEN_FILE) and sandboxd's default socket; the files read and
// checked. INVALID_ARGUMENT or FAILED_PRECONDITION naming the flag at fault, also for a
// TCP endpoint beyond this machine without TLS.
absl::StatusOr<SandboxdFlags> SandboxdFromFlags();

// What sandboxd's GetInfo says of the egress policies (gateway::CheckEgress), at start:
// each problem logged as an error; the gateway goes on, and the run of a sandbox sandboxd
// refuses says why. Returns sandboxd's --egress_default, for the tools' descriptions.
std::string CheckSandboxEgress(gateway::SandboxClient& sandboxes, const gateway::SandboxEgress& egress);
