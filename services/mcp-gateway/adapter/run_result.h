// What a run_python call returns: a CallToolResult with one text block the model reads
// easily (stdout, then stderr, the result, the error and notes; long parts keep their
// head and tail), a block per display, a resource_link per produced file, and
// structuredContent matching the tool's outputSchema.
#pragma once

#include <string>
#include <vector>

#include "bridge/run_report.h"
#include "nlohmann/json.hpp"
#include "sandbox/v1/sandbox.pb.h"

namespace gateway {

// The outputSchema of run_python.
nlohmann::json RunResultSchema();

// The result of a run that finished; isError unless it finished OK. The text block holds
// at most about `max_text_bytes`.
nlohmann::json FormatRunResult(const sandbox::v1::Finished& f, const RunReport& report,
                               size_t max_text_bytes);

// The result of a run that could not start (no sandbox, too many sessions, ...), with the
// report's session and sandbox.
nlohmann::json FormatRunError(const std::string& message, const RunReport& report);

}  // namespace gateway
