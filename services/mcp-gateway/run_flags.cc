// run_python's flags. See run_flags.h; docs/operating.md lists them.
#include "run_flags.h"

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "adapter/run_tools.h"
#include "base/secret_file.h"
#include "observability_flags.h"

ABSL_FLAG(uint32_t, default_timeout_seconds, 30, "run_python timeout when none is given.");
ABSL_FLAG(uint32_t, max_timeout_seconds, 300, "Largest run_python timeout a client may ask for.");
ABSL_FLAG(uint64_t, max_code_bytes, 1 << 20,
          "Largest run_python code accepted, refused before it waits for its sandbox; keep it "
          "equal to sandboxd's --max_code_bytes (which refuses more anyway).");
ABSL_FLAG(uint64_t, spill_stdout_bytes, 32 * 1024,
          "A run_python stdout longer than this is kept whole in the session's workspace "
          "(out/run_python/stdout-N.txt) and the model gets its head, tail and path; 0: never.");
ABSL_FLAG(uint64_t, max_resource_bytes, 8 << 20,
          "Largest produced file (under /workspace/out/) that resources/read returns; at most "
          "48 MiB. Larger files are an error that says to work with them from code.");
ABSL_FLAG(uint32_t, max_sandboxes_per_credential, 16,
          "Sandbox sessions one credential (bearer token; stdio is one) may hold over all its "
          "MCP sessions; keep it well below sandboxd's --max_sessions, which everyone shares.");
ABSL_FLAG(std::string, sandbox_egress, "",
          "Hosts the code of this gateway's sandboxes may reach ('pypi.org, *.pythonhosted.org', "
          "sandboxd's policy syntax: docs/egress.md), unless a credential has its own in "
          "--credential_settings; empty sends none, so sandboxd's --egress_default applies. "
          "sandboxd refuses one wider than its --egress_max, and the run says so.");
ABSL_FLAG(std::string, credential_settings, "",
          "JSON file of settings per credential (docs/gateway.md, \"Egress\"), read at start: "
          "{\"credentials\": {\"token 3f2a9c01b7e4\": {\"sandbox_egress\": \"pypi.org\"}}}, "
          "a token's credential being 'token ' and the first 12 hex digits of its SHA-256.");
ABSL_FLAG(uint32_t, max_out_path_bytes, 1024,
          "Longest path under /workspace/out/ the gateway keeps from the walk after a run; "
          "longer ones are skipped (the sandbox answers the listings, so it is untrusted).");
ABSL_FLAG(uint64_t, max_out_bytes, 256 << 10,
          "Bytes of paths one walk of /workspace/out/ keeps per sandbox session (files and "
          "directories still to list); past it the walk stops and says so.");
ABSL_FLAG(uint32_t, resources_page_size, 500,
          "Resources per resources/list page; more are paged with nextCursor.");
ABSL_FLAG(std::string, handle_key_file, "",
          "File holding the key that seals sandbox handles (run_python's `sandbox`): 64 hex "
          "digits; several, whitespace-separated, to rotate keys (the first seals, all open). "
          "Created (mode 0600) with a random key at the first start; refused when other users "
          "can read it. Gateway replicas share one. Default: "
          "$XDG_STATE_HOME/mcp-gateway/handle_key (~/.local/state/mcp-gateway/handle_key).");
ABSL_FLAG(absl::Duration, handle_ttl, absl::Hours(24),
          "How long a sandbox handle stays valid after the run that returned it (each run "
          "returns a fresh one); the sandbox itself ends at sandboxd's --idle_ttl.");

ABSL_FLAG(absl::Duration, resources_poll_interval, absl::Seconds(10),
          "How often a credential's sandboxes are looked at (sandboxd ListSessions, a walk of "
          "each out/) while one of its subscriptions/listen streams waits for "
          "resources/list_changed: catches changes through other replicas and expiry. Runs "
          "through this gateway are announced at once. 0: only those; at least 100ms.");

ABSL_FLAG(absl::Duration, resources_look_timeout, absl::Seconds(5),
          "A look at a credential's sandboxes for resources/list_changed is given up after "
          "this and counts as no change (sandboxed code answers its own listings and may "
          "stall them; one thread looks for every credential). At least 100ms.");

ABSL_FLAG(absl::Duration, resources_list_timeout, absl::Seconds(5),
          "A resources/list of a 2026-07-28 request (every sandbox of the credential) ends "
          "within this, each sandbox's walk of out/ within a quarter of it; sandboxes not "
          "walked in time are left out and logged (sandboxed code answers its own listings "
          "and may stall them while the request holds a read slot). At least 100ms.");
ABSL_FLAG(absl::Duration, resources_read_timeout, absl::Seconds(30),
          "A resources/read whose sandbox has not sent the file within this ends with an "
          "error (sandboxed code answers its own reads and may stall them while the request "
          "holds a read slot). At least 1s.");

ABSL_FLAG(std::string, approval_default, "annotations",
          "Whether a tool call of sandboxed code that no \"approval\" rule of its server's "
          "mcpServers entry names needs a person's approval: annotations (the tool's MCP "
          "annotations decide: destructiveHint true asks, anything else is allowed), allow, "
          "ask or deny.");
ABSL_FLAG(absl::Duration, approval_timeout, absl::Minutes(5),
          "An approval the MCP client's user has not answered within this is declined (the "
          "run's own timeout keeps counting).");

ABSL_FLAG(uint64_t, max_kept_result_bytes_per_credential, 16 << 20,
          "Bytes of run results (as JSON) kept for a protocol 2026-07-28 client's retry after "
          "it stopped waiting (an approval question it did not come back for), per credential, "
          "within its share of --max_buffered_bytes. A result past it is dropped and the retry "
          "is told so; a kept result is dropped when collected or once --approval_timeout "
          "(at least 5m) passes.");

ABSL_FLAG(absl::Duration, approval_gather, absl::Milliseconds(10),
          "Calls of one run that need approval and come within this of each other (asyncio.gather "
          "of many writes) are asked about in one question; a lone call waits this long before it "
          "is asked. 0 to 1s.");

ABSL_FLAG(std::string, tools, "run_python,run_javascript",
          "The tools offered, comma-separated, in tools/list order: run_python (Python "
          "sandboxes), run_javascript (Node.js sandboxes; sandboxd's image must offer nodejs), "
          "or both.");

std::string ServerInstructions(const std::vector<gateway::RunLanguage>& languages) {
  std::string tools, how;
  for (gateway::RunLanguage l : languages) {
    const bool js = l == gateway::RunLanguage::kJavaScript;
    tools += (tools.empty() ? "" : " or ") + std::string(gateway::Spec(l).tool);
    how += (how.empty() ? "" : " or ") + std::string(js ? "JavaScript" : "Python");
  }
  return "Use " + tools + " to call the available MCP tools from " + how +
         ": loop, filter and join results in code and print only what you need.";
}

namespace {

// The settings file's text, at most 1 MiB.
absl::StatusOr<std::string> ReadSettings(const std::string& path) {
  constexpr size_t kMaxBytes = 1 << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::FailedPreconditionError(absl::StrCat("--credential_settings ", path, ": cannot be read"));
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--credential_settings ", path, ": larger than 1 MiB"));
  }
  return text;
}

// --sandbox_egress and each credential's own (--credential_settings).
absl::StatusOr<gateway::SandboxEgress> EgressFromFlags() {
  gateway::SandboxEgress egress;
  egress.all = absl::GetFlag(FLAGS_sandbox_egress);
  if (absl::Status s = gateway::CheckPolicyText(egress.all, "--sandbox_egress"); !s.ok()) return s;
  const std::string path = absl::GetFlag(FLAGS_credential_settings);
  if (path.empty()) return egress;
  absl::StatusOr<std::string> text = ReadSettings(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::map<std::string, std::string>> by_credential = gateway::ParseCredentialSettings(*text);
  if (!by_credential.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--credential_settings ", path, ": ", by_credential.status().message()));
  }
  egress.by_credential = *std::move(by_credential);
  return egress;
}

}  // namespace

absl::StatusOr<gateway::RunCodeOptions> RunOptionsFromFlags(const std::vector<gateway::UpstreamConfig>& configs) {
  gateway::RunCodeOptions o;
  absl::StatusOr<std::vector<gateway::RunLanguage>> languages = gateway::ParseRunTools(absl::GetFlag(FLAGS_tools));
  if (!languages.ok()) return absl::InvalidArgumentError(absl::StrCat("--tools: ", languages.status().message()));
  o.languages = *std::move(languages);
  o.default_timeout_seconds = absl::GetFlag(FLAGS_default_timeout_seconds);
  o.max_timeout_seconds = absl::GetFlag(FLAGS_max_timeout_seconds);
  o.max_code_bytes = absl::GetFlag(FLAGS_max_code_bytes);
  o.spill_stdout_bytes = absl::GetFlag(FLAGS_spill_stdout_bytes);
  o.resources.max_read_bytes = absl::GetFlag(FLAGS_max_resource_bytes);
  o.max_sandboxes_per_credential = absl::GetFlag(FLAGS_max_sandboxes_per_credential);
  absl::StatusOr<gateway::SandboxEgress> egress = EgressFromFlags();
  if (!egress.ok()) return egress.status();
  o.egress = *std::move(egress);
  o.resources.limits.max_path_bytes = absl::GetFlag(FLAGS_max_out_path_bytes);
  o.resources.limits.max_bytes = absl::GetFlag(FLAGS_max_out_bytes);
  o.resources.list_page_size = absl::GetFlag(FLAGS_resources_page_size);
  absl::StatusOr<std::optional<gateway::Approval>> fallback =
      gateway::ParseApprovalDefault(absl::GetFlag(FLAGS_approval_default));
  if (!fallback.ok()) return fallback.status();
  std::map<std::string, gateway::ApprovalRules> rules;
  for (const gateway::UpstreamConfig& c : configs) {
    if (!c.approval.empty()) rules[c.name] = c.approval;
  }
  o.approvals = std::make_shared<const gateway::ApprovalPolicy>(std::move(rules), *fallback);
  o.approval.timeout = absl::GetFlag(FLAGS_approval_timeout);
  if (o.approval.timeout < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--approval_timeout must be at least 1s");
  }
  o.pending.max_kept_bytes_per_credential = absl::GetFlag(FLAGS_max_kept_result_bytes_per_credential);
  o.approval.gather = absl::GetFlag(FLAGS_approval_gather);
  if (o.approval.gather < absl::ZeroDuration() || o.approval.gather > absl::Seconds(1)) {
    return absl::InvalidArgumentError("--approval_gather must be between 0 and 1s");
  }
  o.resources_poll_interval = absl::GetFlag(FLAGS_resources_poll_interval);
  if (o.resources_poll_interval < absl::ZeroDuration() ||
      (o.resources_poll_interval > absl::ZeroDuration() && o.resources_poll_interval < absl::Milliseconds(100))) {
    return absl::InvalidArgumentError("--resources_poll_interval must be 0 or at least 100ms");
  }
  o.resources_look_timeout = absl::GetFlag(FLAGS_resources_look_timeout);
  if (o.resources_look_timeout < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("--resources_look_timeout must be at least 100ms");
  }
  o.resources.list_timeout = absl::GetFlag(FLAGS_resources_list_timeout);
  if (o.resources.list_timeout < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("--resources_list_timeout must be at least 100ms");
  }
  o.resources.read_timeout = absl::GetFlag(FLAGS_resources_read_timeout);
  if (o.resources.read_timeout < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--resources_read_timeout must be at least 1s");
  }
  if (o.resources.max_read_bytes > (48u << 20)) {
    return absl::InvalidArgumentError("--max_resource_bytes must be at most 48 MiB (50331648)");
  }
  std::string key_file = absl::GetFlag(FLAGS_handle_key_file);
  if (key_file.empty()) key_file = codemode::DefaultStateFile("mcp-gateway", "handle_key");
  absl::StatusOr<gateway::HandleSealer> sealer =
      gateway::HandleSealer::FromKeyFile(key_file, absl::GetFlag(FLAGS_handle_ttl), "--handle_key_file");
  if (!sealer.ok()) return sealer.status();
  o.handles = std::make_shared<const gateway::HandleSealer>(*std::move(sealer));
  absl::StatusOr<std::shared_ptr<gateway::AuditLog>> audit = AuditFromFlags();
  if (!audit.ok()) return audit.status();
  o.audit = *std::move(audit);
  o.audit_arguments = AuditArgumentsFromFlags();
  return o;
}

