// Language: what a session runs, CreateSessionRequest.runtime ("python", the default, or
// "javascript"). Each has its runner (the zipapp for Python, the bundled script for
// Node.js), which speaks the same runner protocol (docs/runner-protocol.md), so nothing
// past the container's command line depends on the language.
//
//   absl::StatusOr<Language> language = ParseLanguage(request.runtime());   // "" -> kPython
//   if (!language.ok()) return language.status();
//   absl::Status st = CheckExecutionRuntime(start.runtime(), session_language, session_id);
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace sandboxd {

enum class Language { kPython, kJavaScript };

// "python" or "javascript": CreateSessionRequest.runtime and Session.runtime.
std::string_view LanguageName(Language language);
// The inverse of LanguageName, with "" for kPython; INVALID_ARGUMENT naming the choices
// otherwise.
absl::StatusOr<Language> ParseLanguage(std::string_view name);
// What an image must offer (its io.sandboxd.offers label) to run it: "python3" or "nodejs".
std::string_view LanguageOffer(Language language);
// Whether code its caller says is `runtime` (StartExecution.runtime) may run in session
// `session_id` of `session` language: OK when `runtime` is empty (unchecked) or names that
// language; INVALID_ARGUMENT for an unknown name; FAILED_PRECONDITION naming both otherwise.
absl::Status CheckExecutionRuntime(std::string_view runtime, Language session,
                                   std::string_view session_id);

}  // namespace sandboxd
