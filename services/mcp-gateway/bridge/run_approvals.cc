// The approval gate of a run. See run_approvals.h.
#include "bridge/run_approvals.h"

#include <openssl/sha.h>

#include <algorithm>

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

bool RunApprovals::Approved(const std::string& name) {
  return run_.Has(name) || (sandbox_ && sandbox_->Has(name));
}

absl::Status RunApprovals::Check(const std::string& server, const std::string& tool, const json& arguments,
                                 const std::shared_ptr<codemode::CancelToken>& cancel) {
  auto w = std::make_shared<Waiter>();
  w->server = server;
  w->tool = tool;
  w->name = absl::StrCat(server, ".", tool);
  w->arguments = arguments;
  w->cancel = cancel;
  const Approval approval = policy_->For(server, tool, Annotations(server, tool));
  if (approval == Approval::kAllow) return absl::OkStatus();
  if (approval == Approval::kDeny) {
    Record(*w, "denied", absl::StrCat("policy (", policy_->Reason(server, tool), ")"));
    return absl::PermissionDeniedError(absl::StrCat(w->name, " is denied by the gateway's operator"));
  }
  ask_mu_.Lock();
  if (Approved(w->name)) {
    const bool by_run = run_.Has(w->name);
    ask_mu_.Unlock();
    Record(*w, "approved", by_run ? "earlier answer (run)" : "earlier answer (sandbox)");
    return absl::OkStatus();
  }
  queue_.push_back(w);
  while (!w->decided) {
    if (asking_) {  // another call's question is out: wait for it, then maybe ask ours
      auto turn = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ask_mu_) { return w->decided || !asking_; };
      ask_mu_.Await(absl::Condition(&turn));
      continue;
    }
    asking_ = true;
    // The calls made with this one (asyncio.gather) join its question: it goes out once
    // none has come for `gather`, it is full, or a second has passed.
    const absl::Time latest = absl::Now() + std::max(options_.gather, absl::Seconds(1));
    while (queue_.size() < options_.max_batch && absl::Now() < latest) {
      const size_t before = queue_.size();
      auto joined = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ask_mu_) { return queue_.size() != before; };
      if (!ask_mu_.AwaitWithTimeout(absl::Condition(&joined), std::min(options_.gather, latest - absl::Now()))) break;
    }
    std::vector<std::shared_ptr<Waiter>> batch = TakeBatch();
    ask_mu_.Unlock();
    if (!batch.empty()) Ask(batch);
    ask_mu_.Lock();
    for (const auto& b : batch) {
      if (b->decision == "run" || b->decision == "sandbox") run_.Add(b->name);
      if (b->decision == "sandbox" && sandbox_) sandbox_->Add(b->name);
      b->decided = true;
    }
    asking_ = false;
  }
  ask_mu_.Unlock();
  return Outcome(*w);
}

std::vector<std::shared_ptr<RunApprovals::Waiter>> RunApprovals::TakeBatch() {
  std::vector<std::shared_ptr<Waiter>> batch;
  while (!queue_.empty() && batch.size() < options_.max_batch) {
    std::shared_ptr<Waiter> next = std::move(queue_.front());
    queue_.pop_front();
    if (Approved(next->name)) {  // a "for the rest of this run" came meanwhile
      next->decision = "approved by an earlier answer";
      next->decided = true;
      Record(*next, "approved", "earlier answer (run)");
      continue;
    }
    batch.push_back(std::move(next));
  }
  return batch;
}

absl::Status RunApprovals::Outcome(const Waiter& w) {
  const std::string& d = w.decision;
  if (!w.why.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        w.name, " needs a person's approval, and ", w.why, ". An operator can allow it with "
        "\"approval\": {\"allow\": [\"", w.tool.substr(0, 128), "\"]} in the server's mcpServers entry, "
        "or --approval_default"));
  }
  if (d == "once" || d == "run" || d == "sandbox" || d == "approved by an earlier answer") {
    return absl::OkStatus();
  }
  if (d == "timed out") {
    return absl::PermissionDeniedError(absl::StrCat(
        w.name, " was not approved: nobody answered within ", absl::FormatDuration(options_.timeout)));
  }
  if (d == "declined" || d == "cancelled") {
    return absl::PermissionDeniedError(absl::StrCat(w.name, " was ", d, " by the user"));
  }
  return absl::PermissionDeniedError(absl::StrCat(w.name, " was not approved: ", d));
}

json RunApprovals::Question(const std::vector<std::shared_ptr<Waiter>>& batch) const {
  const std::string first = batch[0]->name;
  const bool one = batch.size() == 1;
  std::string message;
  if (one) {
    message = absl::StrCat("Code running in run_python wants to call ", first, " with ",
                           SummarizeArguments(batch[0]->arguments, options_.max_summary_bytes), ". Allow it?");
  } else {
    message = absl::StrCat("Code running in run_python wants to make ", batch.size(),
                           " calls that need approval (uncheck those to refuse):");
    for (size_t i = 0; i < batch.size(); ++i) {
      absl::StrAppend(&message, "\n", i + 1, ". ", batch[i]->name, " ",
                      SummarizeArguments(batch[i]->arguments, options_.max_summary_bytes / 4));
    }
  }
  const std::string what = one ? first : "these tools";
  json properties = {{"decision",
                      {{"type", "string"},
                       {"title", one ? "Allow this call?" : "Allow the checked calls?"},
                       {"enum", {"once", "run", "sandbox"}},
                       {"enumNames", {one ? "Allow this call" : "Allow the checked calls",
                                      absl::StrCat("Allow ", what, " for the rest of this run"),
                                      absl::StrCat("Allow ", what, " in this sandbox")}}}}};
  json required = {"decision"};
  if (!one) {
    for (size_t i = 0; i < batch.size(); ++i) {
      const std::string key = absl::StrCat("call_", i + 1);
      properties[key] = {{"type", "boolean"}, {"title", absl::StrCat(i + 1, ". ", batch[i]->name)}, {"default", true}};
      required.push_back(key);
    }
  }
  json params = {{"message", std::move(message)},
                 {"requestedSchema", {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}}}};
  if (ctx_->protocol_version >= "2025-11-25") params["mode"] = "form";  // before it, form was all
  return params;
}

void RunApprovals::Ask(const std::vector<std::shared_ptr<Waiter>>& batch) {
  auto decide_all = [&](const std::string& decision, const std::string& why) {
    for (const auto& w : batch) {
      w->decision = decision;
      w->why = why;
      Record(*w, why.empty() ? decision : "refused", why.empty() ? "user" : why);
    }
  };
  if (!ctx_->ask_client) return decide_all("", "this request has no way to ask its client");
  if (!ctx_->client_capabilities.contains("elicitation")) {
    return decide_all("", "this MCP client cannot be asked (it declared no elicitation capability)");
  }
  const std::shared_ptr<codemode::CancelToken>& cancel = batch[0]->cancel;
  absl::StatusOr<json> answer = ctx_->ask_client("elicitation/create", Question(batch), options_.timeout);
  if (!answer.ok()) {
    if (absl::IsDeadlineExceeded(answer.status())) return decide_all("timed out", "");
    if (absl::IsCancelled(answer.status())) {
      return decide_all(cancel && cancel->cancelled() ? "abandoned (the run ended)" : "cancelled", "");
    }
    return decide_all("", absl::StrCat("asking the MCP client failed: ",
                                       codemode::Utf8Prefix(std::string(answer.status().message()), 200)));
  }
  auto action = answer->find("action");
  if (action == answer->end() || *action != "accept") {
    return decide_all(action != answer->end() && *action == "cancel" ? "cancelled" : "declined", "");
  }
  // Anything but one of the offered choices approves nothing.
  auto content = answer->find("content");
  if (content == answer->end() || !content->is_object()) return decide_all("declined", "");
  auto decision = content->find("decision");
  std::string chosen;
  for (const char* choice : {"once", "run", "sandbox"}) {
    if (decision != content->end() && *decision == choice) chosen = choice;
  }
  if (chosen.empty()) return decide_all("declined", "");
  for (size_t i = 0; i < batch.size(); ++i) {
    bool checked = batch.size() == 1;
    if (!checked) {
      auto box = content->find(absl::StrCat("call_", i + 1));
      checked = box != content->end() && box->is_boolean() && box->get<bool>();
    }
    batch[i]->decision = checked ? chosen : "declined";
    Record(*batch[i], batch[i]->decision, "user");
  }
}

void RunApprovals::Record(const Waiter& w, const std::string& decision, const std::string& by) const {
  const json line = {{"credential", ctx_->credential},
                     {"server", w.server},
                     {"tool", w.tool},
                     {"arguments_sha256", Sha256Hex(w.arguments.dump())},
                     {"decision", decision},
                     {"by", by}};
  spdlog::info("approval: {}", codemode::LogText(line.dump(-1, ' ', false, json::error_handler_t::replace)));
}

}  // namespace gateway
