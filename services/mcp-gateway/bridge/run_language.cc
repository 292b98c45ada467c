// The languages the run core runs code in. See run_language.h.
#include "bridge/run_language.h"

#include "absl/strings/str_cat.h"

namespace gateway {
namespace {

constexpr LanguageSpec kPython = {"run_python", "python", "default"};
constexpr LanguageSpec kJavaScript = {"run_javascript", "javascript", "default-javascript"};

}  // namespace

const LanguageSpec& Spec(RunLanguage language) {
  return language == RunLanguage::kJavaScript ? kJavaScript : kPython;
}

absl::Status CheckSessionName(const LanguageSpec& language, const std::string& session) {
  for (RunLanguage other : kRunLanguages) {
    const LanguageSpec& spec = Spec(other);
    if (&spec == &language || session != spec.default_session) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "session '", session, "' is the name of ", spec.tool, "'s main sandbox; give this run another "
        "`session` name, or leave `session` out to run in ", language.tool, "'s own main sandbox ('",
        language.default_session, "'); nothing ran"));
  }
  return absl::OkStatus();
}

}  // namespace gateway
