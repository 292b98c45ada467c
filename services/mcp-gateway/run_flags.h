// The run tools' flags (which tools, timeouts, code and file caps, sandbox caps, produced
// files, the sandbox handle key): defined in run_flags.cc, read once by main().
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "adapter/run_code.h"
#include "upstream/config.h"

// RunCodeOptions from the flags, with the sealer of sandbox handles: the key file of
// --handle_key_file (created at the first start) and --handle_ttl. INVALID_ARGUMENT or
// FAILED_PRECONDITION naming the flag at fault.
absl::StatusOr<gateway::RunCodeOptions> RunOptionsFromFlags(const std::vector<gateway::UpstreamConfig>& configs);

// The MCP server's instructions for the tools offered (--tools).
std::string ServerInstructions(const std::vector<gateway::RunLanguage>& languages);
