#include "sandboxd/language.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/log_text.h"

namespace sandboxd {

std::string_view LanguageName(Language language) {
  return language == Language::kJavaScript ? "javascript" : "python";
}

absl::StatusOr<Language> ParseLanguage(std::string_view name) {
  if (name.empty() || name == "python") return Language::kPython;
  if (name == "javascript") return Language::kJavaScript;
  return absl::InvalidArgumentError(absl::StrCat("unknown runtime '",
                                                 codemode::LogText(std::string(name.substr(0, 64))),
                                                 "': \"python\" (the default) or \"javascript\""));
}

std::string_view LanguageOffer(Language language) {
  return language == Language::kJavaScript ? "nodejs" : "python3";
}

absl::Status CheckExecutionRuntime(std::string_view runtime, Language session,
                                   std::string_view session_id) {
  if (runtime.empty()) return absl::OkStatus();
  absl::StatusOr<Language> asked = ParseLanguage(runtime);
  if (!asked.ok()) return asked.status();
  if (*asked == session) return absl::OkStatus();
  const std::string code(LanguageName(*asked)), runs(LanguageName(session));
  return absl::FailedPreconditionError(absl::StrCat(
      "this code is ", code, " (runtime \"", code, "\") but session ",
      codemode::LogText(std::string(session_id.substr(0, 100))), " runs ", runs,
      ": nothing was run; run it in a session created with runtime \"", code, "\""));
}

}  // namespace sandboxd
