// What a run_python call returns: a CallToolResult with one text block the model reads
// easily (stdout, then stderr, the result, the error and notes; long parts keep their
// head and tail), a block per display, a resource_link per produced file, and
// structuredContent matching the tool's outputSchema.
#pragma once

#include <string>
#include <vector>

#include "bridge/produced_files.h"
#include "bridge/tool_call_router.h"
#include "nlohmann/json.hpp"
#include "sandbox/v1/sandbox.pb.h"

namespace gateway {

// What the gateway adds to sandboxd's Finished message.
struct RunReport {
  std::string session;  // the session name the run used
  std::string sandbox;  // the handle of the sandbox it ran in, once one was chosen
  // The text block names the handle too (for models that see only text): when the run
  // came by handle or from a client without an MCP session, which needs it to come back.
  bool sandbox_in_text = false;
  bool session_reset = false;  // it ran in a new session because the old one was lost
  std::vector<std::string> notes;
  ToolCallStats calls;
  std::string stdout_file;  // where the whole stdout went when it was too long, or empty
  std::vector<OutFile> files;  // created or changed under /workspace/out/ by the run
  bool resource_links = true;  // the client understands resource_link content blocks
};

// The outputSchema of run_python.
nlohmann::json RunResultSchema();

// The result of a run that finished; isError unless it finished OK. The text block holds
// at most about `max_text_bytes`.
nlohmann::json FormatRunResult(const sandbox::v1::Finished& f, const RunReport& report,
                               size_t max_text_bytes);

// The result of a run that could not start (no sandbox, too many sessions, ...), with the
// report's session and sandbox.
nlohmann::json FormatRunError(const std::string& message, const RunReport& report);

// `text` if it fits in `max` bytes, else its head and tail around a marker.
std::string Clip(const std::string& text, size_t max);

}  // namespace gateway
