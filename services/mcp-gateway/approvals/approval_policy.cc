// Which tool calls need a person's approval. See approval_policy.h.
#include "approvals/approval_policy.h"

#include "absl/strings/str_cat.h"

namespace gateway {

using nlohmann::json;

const char* ApprovalName(Approval a) {
  switch (a) {
    case Approval::kAllow: return "allow";
    case Approval::kAsk: return "ask";
    case Approval::kDeny: return "deny";
  }
  return "deny";
}

absl::StatusOr<ApprovalRules> ParseApprovalRules(const json& value) {
  if (!value.is_object()) return absl::InvalidArgumentError("approval must be an object");
  ApprovalRules rules;
  for (const auto& [key, list] : value.items()) {
    std::vector<std::string>* into = key == "allow" ? &rules.allow
                                     : key == "ask" ? &rules.ask
                                     : key == "deny" ? &rules.deny
                                     : key == "hide" ? &rules.hide
                                                     : nullptr;
    if (into == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("approval has an unknown key \"", key.substr(0, 64), "\" (allow, ask, deny, hide)"));
    }
    if (!list.is_array()) return absl::InvalidArgumentError(absl::StrCat("approval.", key, " must be an array"));
    if (list.size() > kMaxPatterns) {
      return absl::InvalidArgumentError(absl::StrCat("approval.", key, " has more than ", kMaxPatterns, " entries"));
    }
    for (const json& pattern : list) {
      if (!pattern.is_string() || pattern.get_ref<const std::string&>().empty() ||
          pattern.get_ref<const std::string&>().size() > kMaxPatternBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "approval.", key, " must hold ", into == &rules.hide ? "argument names" : "tool names or globs",
            ": non-empty strings of at most ", kMaxPatternBytes, " bytes"));
      }
      into->push_back(pattern.get<std::string>());
    }
  }
  return rules;
}

absl::StatusOr<std::optional<Approval>> ParseApprovalDefault(const std::string& text) {
  if (text == "annotations") return std::optional<Approval>();
  if (text == "allow") return std::optional<Approval>(Approval::kAllow);
  if (text == "ask") return std::optional<Approval>(Approval::kAsk);
  if (text == "deny") return std::optional<Approval>(Approval::kDeny);
  return absl::InvalidArgumentError(
      absl::StrCat("--approval_default must be annotations, allow, ask or deny (got \"", text.substr(0, 64), "\")"));
}

bool GlobMatches(const std::string& pattern, const std::string& name) {
  // The linear wildcard match: on a mismatch, go back to just after the last `*` and let
  // it take one more character. No recursion, no backtracking blow-up.
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::optional<Approval> ApprovalPolicy::ByRule(const std::string& server, const std::string& tool) const {
  auto it = per_server_.find(server);
  if (it == per_server_.end()) return std::nullopt;
  auto named = [&](const std::vector<std::string>& list) {
    for (const std::string& pattern : list) {
      if (GlobMatches(pattern, tool)) return true;
    }
    return false;
  };
  if (named(it->second.deny)) return Approval::kDeny;
  if (named(it->second.ask)) return Approval::kAsk;
  if (named(it->second.allow)) return Approval::kAllow;
  return std::nullopt;
}

Approval ApprovalPolicy::For(const std::string& server, const std::string& tool, const json& annotations) const {
  if (std::optional<Approval> rule = ByRule(server, tool)) return *rule;
  if (fallback_) return *fallback_;
  if (annotations.is_object()) {
    auto destructive = annotations.find("destructiveHint");
    if (destructive != annotations.end() && destructive->is_boolean() && destructive->get<bool>()) {
      return Approval::kAsk;
    }
  }
  return Approval::kAllow;
}

std::string ApprovalPolicy::Reason(const std::string& server, const std::string& tool) const {
  if (ByRule(server, tool)) return "rule";
  if (fallback_) return "default";
  return "annotations";
}

const std::vector<std::string>& ApprovalPolicy::Hidden(const std::string& server) const {
  static const std::vector<std::string> kNone;
  auto it = per_server_.find(server);
  return it == per_server_.end() ? kNone : it->second.hide;
}

}  // namespace gateway
