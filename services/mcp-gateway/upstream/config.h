// UpstreamConfig: one configured upstream MCP server, read from mcpServers JSON (the format
// of Claude Desktop, Claude Code's .mcp.json and Cursor).
//
//   auto configs = LoadUpstreamConfig({"~/.config/mcp-gateway/servers.json"}, {}, self);
//   if (!configs.ok()) return configs.status();
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "approvals/approval_policy.h"

namespace gateway {

struct UpstreamConfig {
  enum class Type { kStdio, kStreamableHttp, kSse };
  std::string name;
  Type type = Type::kStdio;
  // stdio
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;  // added to a minimal environment (PATH, HOME, ...)
  std::string cwd;
  // http / sse
  std::string url;
  std::map<std::string, std::string> headers;
  bool disabled = false;
  // Which of its tools need approval: "approval": {"allow": [...], "ask": [...], "deny": [...]}.
  ApprovalRules approval;
};

// Reads mcpServers configs from files and from directories of *.json (sorted; later
// entries override earlier ones by name). `${VAR}` and `${VAR:-default}` are expanded from
// the environment in every string. `type` is "stdio" (or absent with `command`), "http" /
// "streamable-http" (or absent with `url`), or "sse". Disabled entries are dropped, and so
// is an entry that would launch the gateway itself (its command resolves to `self_exe`).
// Missing files are an error; a missing directory is not. INVALID_ARGUMENT names the file
// and entry on bad input.
absl::StatusOr<std::vector<UpstreamConfig>> LoadUpstreamConfig(
    const std::vector<std::string>& files, const std::vector<std::string>& dirs,
    const std::string& self_exe);

}  // namespace gateway
