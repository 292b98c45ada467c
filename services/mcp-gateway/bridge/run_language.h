// The languages the gateway runs code in, each offered as an MCP tool of its own
// (run_python, run_javascript) by one RunCodeTool: what differs between them is only
// the tool's name, title and description, the `code` argument's description, the runtime
// sandboxd's session runs, and the name of an MCP session's main sandbox of that language.
//
//   absl::StatusOr<std::vector<RunLanguage>> offered = ParseRunTools("run_python,run_javascript");
//   const LanguageSpec& spec = Spec(RunLanguage::kJavaScript);  // spec.tool == "run_javascript"
//   std::optional<RunLanguage> language = LanguageOfTool("run_python");
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "upstream/manager.h"

namespace gateway {

enum class RunLanguage { kPython, kJavaScript };

struct LanguageSpec {
  const char* tool;     // the MCP tool's name
  const char* title;    // its title
  const char* runtime;  // sandboxd's CreateSessionRequest.runtime
  // The name of an MCP session's main sandbox of this language (RunArguments::session
  // when the call names none). Names are shared by the languages, so they differ.
  const char* default_session;
  const char* code_description;  // the `code` argument's description
  // The tool's description for these upstreams, at most `max_bytes`.
  std::string (*describe)(const std::vector<UpstreamStatus>& upstreams, size_t max_bytes);
};

const LanguageSpec& Spec(RunLanguage language);

// The language whose tool is `tool`; nullopt for any other name.
std::optional<RunLanguage> LanguageOfTool(const std::string& tool);

// Whether `language`'s tool may name its session `session`: the main sandbox names of the
// other languages are theirs (run_javascript with session "default" would take
// run_python's main sandbox, and every plain run_python would then fail).
// INVALID_ARGUMENT saying whose name it is.
absl::Status CheckSessionName(const LanguageSpec& language, const std::string& session);

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
