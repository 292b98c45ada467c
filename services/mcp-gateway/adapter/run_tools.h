// The MCP tools of the run core's languages (bridge/run_language.h), run_python and
// run_javascript: each one's title, description (run_descriptions.h), inputSchema and the
// `code` argument's description, which of them the operator offers (--tools) and which of
// those sandboxd can run. The run core knows a language by its runtime and main sandbox;
// everything a client is shown of its tool is here.
//
//   absl::StatusOr<std::vector<RunLanguage>> offered = ParseRunTools("run_python,run_javascript");
//   const RunTool& tool = ToolOf(RunLanguage::kJavaScript);  // tool.title == "Run JavaScript"
//   nlohmann::json schema = InputSchema(tool, /*max_timeout_seconds=*/300);
//   std::optional<RunLanguage> language = LanguageOfTool("run_python");
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bridge/run_language.h"
#include "nlohmann/json.hpp"
#include "upstream/manager.h"

namespace gateway {

// The MCP tool of a language; its name is the language's (LanguageSpec::tool).
struct RunTool {
  const char* title;
  const char* code_description;  // the `code` argument's description
  // The tool's description for these upstreams and egress policy (run_descriptions.h), at
  // most `max_bytes`.
  std::string (*describe)(const std::vector<UpstreamStatus>& upstreams, size_t max_bytes,
                          const std::string& egress);
};

const RunTool& ToolOf(RunLanguage language);

// The tool's inputSchema: the arguments bridge/run_arguments.h parses, with their bounds.
nlohmann::json InputSchema(const RunTool& tool, uint32_t max_timeout_seconds);

// The language whose tool is `tool`; nullopt for any other name.
std::optional<RunLanguage> LanguageOfTool(const std::string& tool);

// The languages a comma-separated list of tool names offers (--tools), in the order
// given. INVALID_ARGUMENT for an empty list, an unknown name or one named twice.
absl::StatusOr<std::vector<RunLanguage>> ParseRunTools(const std::string& list);

// Why sessions of a runtime ("python", "javascript") cannot run; nullopt when they can or
// may (SandboxClient::RuntimeUnavailable: sandboxd's GetInfo).
using RuntimeUnavailableFn = std::function<std::optional<std::string>(const std::string& runtime)>;

// The languages of `offered` whose tools to offer: a language sandboxd says it cannot run
// is dropped, with a line in `dropped` naming its tool and why, so clients never see a tool
// every call of which fails. When every one would be dropped, all stay (each call then
// says why) and `dropped` still says so.
std::vector<RunLanguage> RunnableLanguages(const std::vector<RunLanguage>& offered,
                                           const RuntimeUnavailableFn& unavailable,
                                           std::vector<std::string>* dropped);

}  // namespace gateway
