// The MCP tools of the run core's languages. See run_tools.h.
#include "adapter/run_tools.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "adapter/run_descriptions.h"
#include "base/utf8.h"
#include "bridge/run_arguments.h"

namespace gateway {
namespace {

using nlohmann::json;

constexpr RunTool kPython = {
    "Run Python",
    "Python 3.11 source. Top-level await works; the value of the last expression is returned; "
    "variables persist between calls.",
    &DescribeRunPython};

constexpr RunTool kJavaScript = {
    "Run JavaScript",
    "JavaScript (Node.js) source. Top-level await works; the value of the last expression is "
    "returned (util.inspect); const/let/function/class declarations persist between calls.",
    &DescribeRunJavaScript};

}  // namespace

const RunTool& ToolOf(RunLanguage language) {
  return language == RunLanguage::kJavaScript ? kJavaScript : kPython;
}

json InputSchema(const RunTool& tool, uint32_t max_timeout_seconds) {
  json props;
  props["code"] = {{"type", "string"}, {"description", tool.code_description}};
  props["timeout_seconds"] = {
      {"type", "number"},
      {"minimum", kMinTimeoutSeconds},
      {"maximum", max_timeout_seconds},
      {"description", "Execution timeout (the code is interrupted and its variables are kept; "
                      "JavaScript stuck in a synchronous loop is stopped by resetting its "
                      "namespace)."}};
  props["session"] = {
      {"type", "string"},
      {"pattern", absl::StrCat("^[A-Za-z0-9_-]{1,", kMaxSessionName, "}$")},
      {"description", "Name of an extra, independent session (default: your main one)."}};
  props["sandbox"] = {
      {"type", "string"},
      {"maxLength", kMaxSandboxHandle},
      {"description",
       "The `sandbox` value of an earlier result: run in that sandbox again, with its "
       "variables and files. Pass it back on every call to keep your state (without it you "
       "get your session's main sandbox, or a new one)."}};
  props["reset"] = {{"type", "boolean"}, {"description", "Start from an empty namespace first."}};
  json base64_file = {{"type", "object"},
                      {"properties", {{"base64", {{"type", "string"}}}}},
                      {"required", {"base64"}},
                      {"additionalProperties", false}};
  json file_value = {{"oneOf", json::array({json{{"type", "string"}}, base64_file})}};
  props["files"] = {
      {"type", "object"},
      {"additionalProperties", file_value},
      {"description",
       "Files to write into the workspace (the code's working directory) before it runs: "
       "relative path -> text, or {\"base64\": ...} for binary."}};
  props["servers"] = {{"type", "array"},
                      {"items", {{"type", "string"}}},
                      {"description", "Only these upstream servers may be called in this run."}};
  return {{"type", "object"},
          {"properties", props},
          {"required", {"code"}},
          {"additionalProperties", false}};
}

std::optional<RunLanguage> LanguageOfTool(const std::string& tool) {
  for (RunLanguage language : kRunLanguages) {
    if (tool == Spec(language).tool) return language;
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<RunLanguage>> ParseRunTools(const std::string& list) {
  std::vector<RunLanguage> languages;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    const std::string name(absl::StripAsciiWhitespace(part));
    std::optional<RunLanguage> language = LanguageOfTool(name);
    if (!language) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown tool '", codemode::Utf8Prefix(name, 64), "': the tools are run_python and run_javascript"));
    }
    if (std::find(languages.begin(), languages.end(), *language) != languages.end()) {
      return absl::InvalidArgumentError(absl::StrCat("'", name, "' is named twice"));
    }
    languages.push_back(*language);
  }
  if (languages.empty()) {
    return absl::InvalidArgumentError("name at least one tool: run_python, run_javascript");
  }
  return languages;
}

std::vector<RunLanguage> RunnableLanguages(const std::vector<RunLanguage>& offered,
                                           const RuntimeUnavailableFn& unavailable,
                                           std::vector<std::string>* dropped) {
  std::vector<RunLanguage> runnable;
  std::vector<std::pair<const LanguageSpec*, std::string>> cannot;
  for (RunLanguage language : offered) {
    const LanguageSpec& spec = Spec(language);
    if (std::optional<std::string> reason = unavailable(spec.runtime)) {
      cannot.emplace_back(&spec, *std::move(reason));
    } else {
      runnable.push_back(language);
    }
  }
  const bool keep_all = runnable.empty();
  for (const auto& [spec, reason] : cannot) {
    dropped->push_back(absl::StrCat(spec->tool, keep_all ? " is offered although" : " is not offered:",
                                    " sandboxd cannot run ", spec->runtime, " sessions (", reason,
                                    "); restart mcp-gateway once it can"));
  }
  return keep_all ? offered : runnable;
}

}  // namespace gateway
