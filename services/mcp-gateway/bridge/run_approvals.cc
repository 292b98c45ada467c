// The approval gate of a run. See run_approvals.h.
#include "bridge/run_approvals.h"

#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "base/utf8.h"
#include "spdlog/spdlog.h"

namespace gateway {

using nlohmann::json;

namespace {

constexpr size_t kMaxShownString = 200;

bool LooksSecret(const std::string& key) {
  const std::string k = absl::AsciiStrToLower(key);
  for (const char* word : {"token", "password", "passwd", "secret", "key", "authorization", "credential",
                           "cookie", "auth"}) {
    if (absl::StrContains(k, word)) return true;
  }
  return false;
}

json Redacted(const json& value, int depth) {
  if (depth > 8) return "…";
  if (value.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : value.items()) out[k] = LooksSecret(k) ? json("[hidden]") : Redacted(v, depth + 1);
    return out;
  }
  if (value.is_array()) {
    json out = json::array();
    for (const json& v : value) out.push_back(Redacted(v, depth + 1));
    return out;
  }
  if (value.is_string() && value.get_ref<const std::string&>().size() > kMaxShownString) {
    return absl::StrCat(codemode::Utf8Prefix(value.get_ref<const std::string&>(), kMaxShownString), "…");
  }
  return value;
}

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

// The form the person answers: allow once, for the run, for the sandbox (decline and
// cancel are the client's own buttons).
json DecisionSchema(const std::string& name) {
  return {{"type", "object"},
          {"properties",
           {{"decision",
             {{"type", "string"},
              {"title", "Allow this call?"},
              {"enum", {"once", "run", "sandbox"}},
              {"enumNames", {"Allow this call", absl::StrCat("Allow ", name, " for the rest of this run"),
                             absl::StrCat("Allow ", name, " in this sandbox")}}}}}},
          {"required", {"decision"}}};
}

}  // namespace

std::string SummarizeArguments(const json& arguments, size_t max_bytes) {
  std::string text = Redacted(arguments, 0).dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() <= max_bytes) return text;
  return absl::StrCat(codemode::Utf8Prefix(text, max_bytes), "… (clipped)");
}

std::vector<UpstreamStatus> ApplyApprovalPolicy(std::vector<UpstreamStatus> view, const ApprovalPolicy& policy) {
  for (UpstreamStatus& server : view) {
    std::vector<UpstreamTool> kept;
    for (UpstreamTool& tool : server.tools) {
      const Approval a = policy.For(server.name, tool.name, tool.annotations);
      if (a == Approval::kDeny) continue;
      if (a == Approval::kAsk) tool.description = "[needs approval] " + tool.description;
      kept.push_back(std::move(tool));
    }
    server.tools = std::move(kept);
  }
  return view;
}

RunApprovals::RunApprovals(const ApprovalPolicy* policy, const std::vector<UpstreamStatus>* view,
                           const ToolCallContext* ctx, ApprovalOptions options)
    : policy_(policy), view_(view), ctx_(ctx), options_(options) {}

json RunApprovals::Annotations(const std::string& server, const std::string& tool) const {
  for (const UpstreamStatus& s : *view_) {
    if (s.name != server) continue;
    for (const UpstreamTool& t : s.tools) {
      if (t.name == tool) return t.annotations;
    }
  }
  return json::object();
}

absl::Status RunApprovals::Check(const std::string& server, const std::string& tool, const json& arguments,
                                 const std::shared_ptr<codemode::CancelToken>& cancel) {
  const std::string name = absl::StrCat(server, ".", tool);
  const Approval approval = policy_->For(server, tool, Annotations(server, tool));
  if (approval == Approval::kAllow) return absl::OkStatus();
  if (approval == Approval::kDeny) {
    Record(server, tool, arguments, "denied", absl::StrCat("policy (", policy_->Reason(server, tool), ")"));
    return absl::PermissionDeniedError(absl::StrCat(name, " is denied by the gateway's operator"));
  }
  // One question at a time: a "for the rest of this run" answers those waiting here.
  codemode::MutexLock lock(&ask_mu_);
  if (run_.Has(name) || (sandbox_ && sandbox_->Has(name))) {
    Record(server, tool, arguments, "approved", run_.Has(name) ? "earlier answer (run)" : "earlier answer (sandbox)");
    return absl::OkStatus();
  }
  if (cancel && cancel->cancelled()) return absl::CancelledError("the run ended before it was approved");
  std::string why;
  const std::string decision = Ask(server, tool, arguments, cancel, why);
  if (!why.empty()) {
    Record(server, tool, arguments, "refused", why);
    return absl::PermissionDeniedError(absl::StrCat(
        name, " needs a person's approval, and ", why, ". An operator can allow it with "
        "\"approval\": {\"allow\": [\"", tool.substr(0, 128), "\"]} in the server's mcpServers entry, "
        "or --approval_default"));
  }
  Record(server, tool, arguments, decision, "user");
  if (decision == "once") return absl::OkStatus();
  if (decision == "run") {
    run_.Add(name);
    return absl::OkStatus();
  }
  if (decision == "sandbox") {
    run_.Add(name);
    if (sandbox_) sandbox_->Add(name);
    return absl::OkStatus();
  }
  if (decision == "timed out") {
    return absl::PermissionDeniedError(absl::StrCat(
        name, " was not approved: nobody answered within ", absl::FormatDuration(options_.timeout)));
  }
  if (decision == "declined" || decision == "cancelled") {
    return absl::PermissionDeniedError(absl::StrCat(name, " was ", decision, " by the user"));
  }
  return absl::PermissionDeniedError(absl::StrCat(name, " was not approved: ", decision));
}

std::string RunApprovals::Ask(const std::string& server, const std::string& tool, const json& arguments,
                              const std::shared_ptr<codemode::CancelToken>& cancel, std::string& why) {
  if (!ctx_->ask_client) {
    why = "this request (protocol 2026-07-28) cannot be asked yet";
    return "";
  }
  if (!ctx_->client_capabilities.contains("elicitation")) {
    why = "this MCP client cannot be asked (it declared no elicitation capability)";
    return "";
  }
  const std::string name = absl::StrCat(server, ".", tool);
  json params = {
      {"message", absl::StrCat("Code running in run_python wants to call ", name, " with ",
                               SummarizeArguments(arguments, options_.max_summary_bytes), ". Allow it?")},
      {"requestedSchema", DecisionSchema(name)}};
  if (ctx_->protocol_version >= "2025-11-25") params["mode"] = "form";  // before it, form was all
  absl::StatusOr<json> answer = ctx_->ask_client("elicitation/create", std::move(params), options_.timeout);
  if (!answer.ok()) {
    if (absl::IsDeadlineExceeded(answer.status())) return "timed out";
    if (absl::IsCancelled(answer.status())) {
      return cancel && cancel->cancelled() ? "abandoned (the run ended)" : "cancelled";
    }
    why = absl::StrCat("asking the MCP client failed: ", codemode::Utf8Prefix(std::string(answer.status().message()), 200));
    return "";
  }
  auto action = answer->find("action");
  if (action == answer->end() || *action != "accept") {
    return action != answer->end() && *action == "cancel" ? "cancelled" : "declined";
  }
  // Anything but one of the offered choices approves nothing.
  auto content = answer->find("content");
  if (content == answer->end() || !content->is_object()) return "declined";
  auto decision = content->find("decision");
  if (decision == content->end() || !decision->is_string()) return "declined";
  for (const char* choice : {"once", "run", "sandbox"}) {
    if (*decision == choice) return choice;
  }
  return "declined";
}

void RunApprovals::Record(const std::string& server, const std::string& tool, const json& arguments,
                          const std::string& decision, const std::string& by) const {
  const json line = {{"credential", ctx_->credential},
                     {"server", server},
                     {"tool", tool},
                     {"arguments_sha256", Sha256Hex(arguments.dump())},
                     {"decision", decision},
                     {"by", by}};
  spdlog::info("approval: {}", codemode::LogText(line.dump(-1, ' ', false, json::error_handler_t::replace)));
}

}  // namespace gateway
