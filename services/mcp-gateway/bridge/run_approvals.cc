// The approval gate of a run. See run_approvals.h.
#include "bridge/run_approvals.h"

#include <openssl/sha.h>

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/log_text.h"
#include "base/utf8.h"
#include "spdlog/spdlog.h"

namespace gateway {

using nlohmann::json;

namespace {

constexpr size_t kMaxShownString = 200;

bool LooksSecret(const std::string& key) {
  const std::string k = absl::AsciiStrToLower(key);
  for (const char* word : {"token", "pass", "pwd", "secret", "key", "authorization",
                           "credential", "cookie", "auth", "bearer", "private", "pem", "session"}) {
    if (absl::StrContains(k, word)) return true;
  }
  return false;
}

// A value that is a credential whatever its key says ("Bearer ...", "Basic ...", a PEM block).
bool LooksSecretValue(const std::string& v) {
  const std::string head = absl::AsciiStrToLower(v.substr(0, 80));
  const absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(head);
  return absl::StrContains(head, "bearer ") || absl::StartsWith(trimmed, "basic ") ||
         absl::StrContains(head, "-----begin") || absl::StartsWith(trimmed, "sk-") ||
         (absl::StartsWith(trimmed, "eyj") && std::count(v.begin(), v.end(), '.') >= 2);  // a JWT
}

// What the code passed, as the person is shown it: characters that change how the text
// reads (C0/C1 controls, line and paragraph separators, bidirectional overrides and
// isolates) become "\u{XXXX}", so sandboxed code cannot fake lines of the question or
// reverse its words (attack round 18, F4). The text is JSON's (valid UTF-8); the JSON
// dump that carries it replaces anything else.
std::string Visible(const std::string& valid) {
  std::string out;
  for (size_t i = 0; i < valid.size();) {
    const unsigned char c = static_cast<unsigned char>(valid[i]);
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    n = std::min(n, valid.size() - i);
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(valid[i + k]) & 0x3F);
    const bool hidden_effect = cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
                               (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) ||
                               cp == 0x200E || cp == 0x200F || cp == 0x061C || cp == 0xFEFF ||
                               (cp >= 0x200B && cp <= 0x200D) || (cp >= 0x2060 && cp <= 0x2064) ||
                               (cp >= 0xE0000 && cp <= 0xE007F);  // zero-width, invisible, tags
    if (hidden_effect) {
      absl::StrAppend(&out, "\\u{", absl::Hex(cp, absl::kZeroPad4), "}");
    } else {
      out.append(valid, i, n);
    }
    i += n;
  }
  return out;
}

// `text` in at most about `max` bytes: its head and its tail, what a long value ends with
// shown too (F4: a tail was never seen).
std::string HeadAndTail(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  const std::string head(codemode::Utf8Prefix(text, max / 2));
  size_t from = text.size() - max / 2;
  while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
  return absl::StrCat(head, " … (", from - head.size(), " bytes) … ", text.substr(from));
}

// The arguments as shown: secrets hidden, text made visible, keys clipped to 64 bytes and
// strings to `max_string` (head and tail).
json Redacted(const json& value, int depth, size_t max_string) {
  if (depth > 8) return "…";
  if (value.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : value.items()) {
      out[HeadAndTail(Visible(k), 64)] = LooksSecret(k) ? json("[hidden]") : Redacted(v, depth + 1, max_string);
    }
    return out;
  }
  if (value.is_array()) {
    json out = json::array();
    for (const json& v : value) out.push_back(Redacted(v, depth + 1, max_string));
    return out;
  }
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (LooksSecretValue(text)) return "[hidden]";
    return HeadAndTail(Visible(text), max_string);
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
  // Shorter strings first, so that every field has its say (round 18's re-check, N1: fields
  // before the one that mattered pushed it out of the question).
  std::string text;
  for (size_t max_string : {kMaxShownString, size_t{64}, size_t{24}}) {
    text = Redacted(arguments, 0, max_string).dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() <= max_bytes) return text;
  }
  // Still too long (many fields): say plainly that the person does not see everything.
  return absl::StrCat(codemode::Utf8Prefix(text, max_bytes), " … (NOT ALL ARGUMENTS ARE SHOWN: ",
                      text.size() - codemode::Utf8Prefix(text, max_bytes).size(), " more bytes)");
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

namespace {

// The metric's fixed set of decisions, from the words the log line uses.
ApprovalDecision DecisionOf(const std::string& decision) {
  if (decision == "denied") return ApprovalDecision::kPolicyDenied;
  if (decision == "timed out") return ApprovalDecision::kTimeout;
  if (absl::StartsWith(decision, "abandoned")) return ApprovalDecision::kWithdrawn;
  if (absl::StartsWith(decision, "approved") || decision == "once" || decision == "run" ||
      decision == "sandbox") {
    return ApprovalDecision::kApproved;
  }
  return ApprovalDecision::kDeclined;  // declined, cancelled, refused
}

}  // namespace

absl::Status RunApprovals::Check(const std::string& server, const std::string& tool, const json& arguments,
                                 const std::shared_ptr<codemode::CancelToken>& cancel,
                                 std::string* decision) {
  std::string ignored;
  std::string& decided = decision ? *decision : ignored;
  auto w = std::make_shared<Waiter>();
  w->server = server;
  w->tool = tool;
  w->name = absl::StrCat(server, ".", tool);
  w->arguments = arguments;
  w->cancel = cancel;
  const Approval approval = policy_->For(server, tool, Annotations(server, tool));
  if (approval == Approval::kAllow) return absl::OkStatus();
  if (approval == Approval::kDeny) {
    decided = GatewayMetrics::Name(ApprovalDecision::kPolicyDenied);
    Record(*w, "denied", absl::StrCat("policy (", policy_->Reason(server, tool), ")"));
    return absl::PermissionDeniedError(absl::StrCat(w->name, " is denied by the gateway's operator"));
  }
  ask_mu_.Lock();
  if (Approved(w->name)) {
    const bool by_run = run_.Has(w->name);
    ask_mu_.Unlock();
    decided = GatewayMetrics::Name(ApprovalDecision::kApproved);
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
  decided = GatewayMetrics::Name(DecisionOf(w->decision.empty() ? "refused" : w->decision));
  return Outcome(*w);
}

std::vector<std::shared_ptr<RunApprovals::Waiter>> RunApprovals::TakeBatch() {
  std::vector<std::shared_ptr<Waiter>> batch;
  while (!queue_.empty() && batch.size() < options_.max_batch) {
    std::shared_ptr<Waiter> next = std::move(queue_.front());
    queue_.pop_front();
    if (next->cancel && next->cancel->cancelled()) {  // its execution ended while it queued
      next->decision = "abandoned (the run ended)";
      next->decided = true;
      Record(*next, next->decision, "nobody: the run ended");
      continue;
    }
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
    // Who decided: the person, or nobody (no answer in time, the run ended), or the reason
    // the client could not be asked (round 18's re-check, N2: all of them said "user").
    const std::string by = !why.empty() ? why
                           : decision == "timed out" ? "nobody: no answer in time"
                           : absl::StartsWith(decision, "abandoned") ? "nobody: the run ended"
                                                                     : "user";
    for (const auto& w : batch) {
      w->decision = decision;
      w->why = why;
      Record(*w, why.empty() ? decision : "refused", by);
    }
  };
  if (!ctx_->ask_client) return decide_all("", "this request has no way to ask its client");
  if (!ctx_->client_capabilities.contains("elicitation")) {
    return decide_all("", "this MCP client cannot be asked (it declared no elicitation capability)");
  }
  const std::shared_ptr<codemode::CancelToken>& cancel = batch[0]->cancel;
  // The question is withdrawn when the execution whose calls ask ends (attack round 18, F1).
  absl::StatusOr<json> answer = ctx_->ask_client("elicitation/create", Question(batch), options_.timeout, cancel);
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
  std::vector<bool> checked(batch.size(), batch.size() == 1);
  std::set<std::string> refused;  // tools with a call the person unchecked
  for (size_t i = 0; i < batch.size() && batch.size() > 1; ++i) {
    auto box = content->find(absl::StrCat("call_", i + 1));
    checked[i] = box != content->end() && box->is_boolean() && box->get<bool>();
    if (!checked[i]) refused.insert(batch[i]->name);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    // "For the rest of this run" (or sandbox) does not cover a tool one of whose calls the
    // person refused in the same answer: its checked calls go once, and its next call asks
    // again (attack round 18, F6: the refused call went through unasked when repeated).
    const std::string scope = refused.count(batch[i]->name) ? "once" : chosen;
    batch[i]->decision = checked[i] ? scope : "declined";
    Record(*batch[i], batch[i]->decision, "user");
  }
}


void RunApprovals::Record(const Waiter& w, const std::string& decision, const std::string& by) const {
  if (options_.metrics != nullptr) options_.metrics->Approval(DecisionOf(decision));
  const json line = {{"credential", ctx_->credential},
                     {"server", w.server},
                     {"tool", w.tool},
                     {"arguments_sha256", Sha256Hex(w.arguments.dump())},
                     {"decision", decision},
                     {"by", by},
                     {"trace_id", trace_id_}};
  spdlog::info("approval: {}", codemode::LogText(line.dump(-1, ' ', false, json::error_handler_t::replace)));
}

}  // namespace gateway
