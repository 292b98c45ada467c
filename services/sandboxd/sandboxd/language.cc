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

}  // namespace sandboxd
