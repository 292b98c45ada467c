// The languages of the run tools. See run_language.h.
#include "bridge/run_language.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/utf8.h"
#include "bridge/run_catalog.h"

namespace gateway {
namespace {

constexpr LanguageSpec kPython = {
    "run_python", "Run Python", "python", "default",
    "Python 3.11 source. Top-level await works; the value of the last expression is returned; "
    "variables persist between calls.",
    &DescribeRunPython};

constexpr LanguageSpec kJavaScript = {
    "run_javascript", "Run JavaScript", "javascript", "default-javascript",
    "JavaScript (Node.js) source. Top-level await works; the value of the last expression is "
    "returned (util.inspect); const/let/function/class declarations persist between calls.",
    &DescribeRunJavaScript};

}  // namespace

const LanguageSpec& Spec(RunLanguage language) {
  return language == RunLanguage::kJavaScript ? kJavaScript : kPython;
}

std::optional<RunLanguage> LanguageOfTool(const std::string& tool) {
  for (RunLanguage language : {RunLanguage::kPython, RunLanguage::kJavaScript}) {
    if (tool == Spec(language).tool) return language;
  }
  return std::nullopt;
}

absl::Status CheckSessionName(const LanguageSpec& language, const std::string& session) {
  for (RunLanguage other : {RunLanguage::kPython, RunLanguage::kJavaScript}) {
    const LanguageSpec& spec = Spec(other);
    if (&spec == &language || session != spec.default_session) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "session '", session, "' is the name of ", spec.tool, "'s main sandbox; give this run another "
        "`session` name, or leave `session` out to run in ", language.tool, "'s own main sandbox ('",
        language.default_session, "'); nothing ran"));
  }
  return absl::OkStatus();
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
