// The run_python and run_javascript tools: MCP in, the run core, MCP out. See run_code.h.
#include "adapter/run_code.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "adapter/client_asker.h"
#include "adapter/run_result.h"
#include "metrics/stage_times.h"

namespace gateway {
namespace {

using nlohmann::json;

PendingRunsOptions PendingOptions(const RunCodeOptions& options) {
  PendingRunsOptions pending = options.pending;
  pending.keep = std::max(pending.keep, options.approval.timeout);
  return pending;
}

}  // namespace

RunCodeTool::RunCodeTool(Sandboxes* sandboxes, Upstreams* upstreams, RunCodeOptions options)
    : options_(options),
      service_(sandboxes, upstreams, options),
      resources_(&service_),
      pending_(service_.handles(), PendingOptions(options)) {}

RunCodeTool::~RunCodeTool() = default;

json RunCodeTool::ListTools(const std::string& credential) {
  const std::string& egress = options_.egress.Shown(credential);
  const uint64_t version = service_.catalog_version();
  {
    codemode::MutexLock lock(&listed_mu_);
    if (listed_version_ == version) {
      if (auto it = listed_.find(egress); it != listed_.end()) return it->second;
    }
  }
  // Built outside the lock; labelled with the version read before the view, so a change
  // while building only makes the next request build again.
  json tools = BuildToolList(egress);
  codemode::MutexLock lock(&listed_mu_);
  if (listed_version_ != version) listed_.clear();
  listed_version_ = version;
  listed_[egress] = tools;
  return tools;
}

json RunCodeTool::BuildToolList(const std::string& egress) {
  const std::vector<UpstreamStatus> view = service_.View();
  json tools = json::array();
  for (RunLanguage l : options_.languages) {
    const RunTool& tool = ToolOf(l);
    tools.push_back(
        {{"name", Spec(l).tool},
         {"title", tool.title},
         {"description", tool.describe(view, options_.max_description_bytes, egress)},
         {"inputSchema", InputSchema(tool, options_.max_timeout_seconds)},
         {"outputSchema", RunResultSchema()},
         {"annotations", {{"readOnlyHint", false}, {"destructiveHint", true}, {"openWorldHint", true}}}});
  }
  return tools;
}

const LanguageSpec* RunCodeTool::Offered(const std::string& tool) const {
  std::optional<RunLanguage> language = LanguageOfTool(tool);
  if (!language || std::find(options_.languages.begin(), options_.languages.end(), *language) ==
                       options_.languages.end()) {
    return nullptr;
  }
  return &Spec(*language);
}

absl::StatusOr<json> RunCodeTool::CallTool(const std::string& name, const json& arguments,
                                           ToolCallContext& ctx) {
  const LanguageSpec* language = Offered(name);
  if (language == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown tool '", name, "'"));
  // A stateless request: a run that may ask for an approval goes on a thread of its own, so
  // that it can outlive this request while it waits, and the client's retry picks it up
  // (pending_runs.h).
  if (ctx.stateless && !ctx.request_state.empty()) return pending_.Resume(name, arguments, ctx);
  if (!ctx.stateless || !service_.MayAsk()) return CallToolNow(*language, arguments, ctx);
  return pending_.Start(
      [this, language, arguments](ToolCallContext& own) { return CallToolNow(*language, arguments, own); },
      name, arguments, ctx);
}

absl::StatusOr<json> RunCodeTool::CallToolNow(const LanguageSpec& language, const json& arguments,
                                              ToolCallContext& ctx) {
  ClientAsker asker(&ctx);
  absl::StatusOr<FinishedRun> run = service_.Run({&language, arguments, ctx.credential, ctx.mcp_session,
                                                  ctx.trace_parent, ctx.cancel, ctx.progress, &asker,
                                                  ctx.resources_changed});
  if (!run.ok()) return run.status();
  // resource_link blocks came with protocol 2025-06-18; older clients get the links as text.
  run->report.resource_links = ctx.protocol_version >= "2025-06-18";
  if (!run->finished.ok()) return FormatRunError(std::string(run->finished.status().message()), run->report);
  json result = FormatRunResult(*run->finished, run->report, options_.max_text_bytes);
  StageTimes::Mark(Stage::kResultBuilt);
  return result;
}

}  // namespace gateway
