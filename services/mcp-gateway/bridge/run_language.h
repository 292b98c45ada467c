// The languages the run core runs code in, Python and JavaScript: for each, the runtime
// of its sandboxd sessions, the name of an MCP session's main sandbox of that language, and
// the name its runs go by (its run tool's: metrics, audit lines, the stdout spill path and
// errors say it). How the MCP adapter offers them as tools (titles, descriptions, schemas,
// the --tools list) is adapter/run_tools.h.
//
//   const LanguageSpec& spec = Spec(RunLanguage::kJavaScript);  // spec.runtime == "javascript"
//   absl::Status name = CheckSessionName(spec, "default");      // run_python's: INVALID_ARGUMENT
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gateway {

enum class RunLanguage { kPython, kJavaScript };

// Every language, in the order the tools are listed by default.
constexpr RunLanguage kRunLanguages[] = {RunLanguage::kPython, RunLanguage::kJavaScript};

struct LanguageSpec {
  const char* tool;     // the name its runs go by: the MCP tool's name
  const char* runtime;  // sandboxd's CreateSessionRequest.runtime
  // The name of an MCP session's main sandbox of this language (RunArguments::session
  // when the call names none). Names are shared by the languages, so they differ.
  const char* default_session;
};

const LanguageSpec& Spec(RunLanguage language);

// Whether `language`'s tool may name its session `session`: the main sandbox names of the
// other languages are theirs (run_javascript with session "default" would take
// run_python's main sandbox, and every plain run_python would then fail).
// INVALID_ARGUMENT saying whose name it is.
absl::Status CheckSessionName(const LanguageSpec& language, const std::string& session);

}  // namespace gateway
