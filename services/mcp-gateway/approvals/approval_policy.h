// ApprovalPolicy: whether a tool call that sandboxed code makes goes to its upstream at
// once (allow), only after a person approves it (ask), or never (deny).
//
// The operator names tools per upstream in its mcpServers entry, by name or glob (`*` any
// run of characters, `?` one character):
//
//   "github": {"url": "...", "approval": {"ask": ["create_*", "delete_*"], "deny": ["drop_database"],
//                                         "allow": ["get_*"], "hide": ["api_key"]}}
//
// A tool named by several lists gets the strictest of them (deny, then ask, then allow). A
// tool no list names gets the gateway-wide default (--approval_default), and when that is
// "annotations" (the default), its MCP annotations decide: `destructiveHint: true` asks,
// anything else (`readOnlyHint: true`, no annotations) is allowed. Annotations come from
// the upstream, which the operator chose to trust; a rule always wins over them.
//
// `hide` lists argument names (exact, not globs) whose values a question about this
// server's tools does not show (approval_question.h); the tool's inputSchema hides more.
//
//   ApprovalPolicy policy({{"github", rules}}, std::nullopt);
//   Approval a = policy.For("github", "delete_repo", tool_annotations);  // kAsk
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gateway {

enum class Approval { kAllow, kAsk, kDeny };

// "allow", "ask", "deny".
const char* ApprovalName(Approval a);

// One upstream's lists of tool names and globs, and the argument names its questions hide.
struct ApprovalRules {
  std::vector<std::string> allow, ask, deny;
  std::vector<std::string> hide;  // exact argument names
  bool empty() const { return allow.empty() && ask.empty() && deny.empty() && hide.empty(); }
};

// At most this many patterns per list, each at most kMaxPatternBytes.
inline constexpr size_t kMaxPatterns = 1000;
inline constexpr size_t kMaxPatternBytes = 256;

// The `approval` value of an mcpServers entry: an object of up to four arrays of
// non-empty strings (allow, ask, deny, hide). INVALID_ARGUMENT saying what is wrong (the caller adds where).
absl::StatusOr<ApprovalRules> ParseApprovalRules(const nlohmann::json& value);

// The gateway-wide default: "annotations" (nullopt), "allow", "ask" or "deny".
absl::StatusOr<std::optional<Approval>> ParseApprovalDefault(const std::string& text);

// Whether `name` matches `pattern` (`*` and `?`; every other character as itself).
bool GlobMatches(const std::string& pattern, const std::string& name);

class ApprovalPolicy {
 public:
  ApprovalPolicy() = default;
  ApprovalPolicy(std::map<std::string, ApprovalRules> per_server, std::optional<Approval> fallback)
      : per_server_(std::move(per_server)), fallback_(fallback) {}

  // `annotations`: the tool's MCP annotations object (anything else counts as none).
  Approval For(const std::string& server, const std::string& tool, const nlohmann::json& annotations) const;
  // Why, for the record: "rule" (a list named it), "default", or "annotations".
  std::string Reason(const std::string& server, const std::string& tool) const;
  // The argument names the questions about `server`'s tools hide (its `approval.hide`).
  const std::vector<std::string>& Hidden(const std::string& server) const;

 private:
  std::optional<Approval> ByRule(const std::string& server, const std::string& tool) const;

  std::map<std::string, ApprovalRules> per_server_;
  std::optional<Approval> fallback_;
};

}  // namespace gateway
