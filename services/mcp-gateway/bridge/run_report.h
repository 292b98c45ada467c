// What the gateway adds to sandboxd's Finished message about one run: where it ran, the
// notes for the model, its tool calls, and the files it left. The run core fills it in
// (run_service.h); the MCP adapter turns it into a CallToolResult (adapter/run_result.h).
#pragma once

#include <string>
#include <vector>

#include "bridge/produced_files.h"
#include "bridge/tool_call_router.h"

namespace gateway {

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

// `text` if it fits in `max` bytes, else its head and tail around a marker.
std::string Clip(const std::string& text, size_t max);

}  // namespace gateway
