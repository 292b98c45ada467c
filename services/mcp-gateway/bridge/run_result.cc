// run_python's results. See run_result.h.
#include "bridge/run_result.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gateway {
namespace {

using nlohmann::json;
using sandbox::v1::Finished;

const char* StatusWord(Finished::Status s) {
  switch (s) {
    case Finished::OK: return "ok";
    case Finished::ERROR: return "error";
    case Finished::TIMEOUT: return "timeout";
    case Finished::CANCELLED: return "cancelled";
    case Finished::SESSION_LOST: return "session_lost";
    default: return "error";
  }
}

bool HasError(const Finished& f) { return f.has_error() && !f.error().type().empty(); }

// Appends `line` on a line of its own.
void AddLine(std::string& text, const std::string& line) {
  if (!text.empty() && text.back() != '\n') text += "\n";
  text += line + "\n";
}

std::string ModelText(const Finished& f, const std::vector<std::string>& notes, size_t max) {
  std::string text;
  if (!f.stdout().empty()) text += Clip(f.stdout(), max / 2);
  if (!f.stderr().empty()) {
    if (!text.empty() && text.back() != '\n') text += "\n";
    text += "[stderr]\n" + Clip(f.stderr(), max / 4);
  }
  if (!f.result_repr().empty()) AddLine(text, "[result] " + Clip(f.result_repr(), max / 4));
  if (HasError(f)) {
    AddLine(text, absl::StrCat("[", StatusWord(f.status()), "] ", f.error().type(), ": ",
                               f.error().message()));
    if (!f.error().traceback().empty()) text += Clip(f.error().traceback(), max / 4);
  }
  if (f.output_truncated()) AddLine(text, "[note] output was truncated");
  for (const auto& n : notes) AddLine(text, "[note] " + n);
  return text.empty() ? "(no output)" : text;
}

json StructuredContent(const Finished& f, const RunReport& report,
                       const std::vector<std::string>& notes) {
  return {{"status", StatusWord(f.status())},
          {"stdout", f.stdout()},
          {"stderr", f.stderr()},
          {"result", f.result_repr().empty() ? json(nullptr) : json(f.result_repr())},
          {"error", HasError(f) ? json{{"type", f.error().type()},
                                       {"message", f.error().message()},
                                       {"traceback", f.error().traceback()}}
                                : json(nullptr)},
          {"duration_ms", f.duration_ms()},
          {"tool_calls", report.calls.listed},
          {"tool_calls_total", report.calls.total},
          {"tool_calls_failed", report.calls.failed},
          {"session", report.session},
          {"output_truncated", f.output_truncated()},
          {"session_reset", report.session_reset},
          {"note", notes.empty() ? json(nullptr) : json(absl::StrJoin(notes, "; "))}};
}

}  // namespace

std::string Clip(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t head = max * 2 / 3, tail = max - head;
  return absl::StrCat(text.substr(0, head), "\n[... ", text.size() - head - tail,
                      " bytes omitted ...]\n", text.substr(text.size() - tail));
}

json RunResultSchema() {
  json nullable_string = {{"type", {"string", "null"}}};
  json props;
  props["status"] = {{"type", "string"},
                     {"enum", {"ok", "error", "timeout", "cancelled", "session_lost"}}};
  props["stdout"] = {{"type", "string"}};
  props["stderr"] = {{"type", "string"}};
  props["result"] = nullable_string;
  props["error"] = {{"type", {"object", "null"}},
                    {"properties",
                     {{"type", {{"type", "string"}}},
                      {"message", {{"type", "string"}}},
                      {"traceback", {{"type", "string"}}}}}};
  props["duration_ms"] = {{"type", "integer"}};
  json call_props;
  call_props["server"] = {{"type", "string"}};
  call_props["tool"] = {{"type", "string"}};
  call_props["ok"] = {{"type", "boolean"}};
  call_props["duration_ms"] = {{"type", "integer"}};
  props["tool_calls"] = {{"type", "array"},
                         {"description", "the run's first tool calls (at most 100)"},
                         {"items", {{"type", "object"}, {"properties", call_props}}}};
  props["tool_calls_total"] = {{"type", "integer"}};
  props["tool_calls_failed"] = {{"type", "integer"}};
  props["session"] = {{"type", "string"}};
  props["output_truncated"] = {{"type", "boolean"}};
  props["session_reset"] = {{"type", "boolean"}};
  props["note"] = nullable_string;
  return {{"type", "object"},
          {"properties", props},
          {"required", {"status", "stdout", "stderr", "result", "error", "duration_ms", "tool_calls"}}};
}

json FormatRunResult(const Finished& f, const RunReport& report, size_t max_text_bytes) {
  std::vector<std::string> notes = report.notes;
  if (report.calls.total > report.calls.listed.size()) {
    notes.push_back(absl::StrCat(report.calls.total, " tool calls (", report.calls.failed,
                                 " failed); tool_calls lists the first ",
                                 report.calls.listed.size()));
  }
  return {{"content", {{{"type", "text"}, {"text", ModelText(f, notes, max_text_bytes)}}}},
          {"structuredContent", StructuredContent(f, report, notes)},
          {"isError", f.status() != Finished::OK}};
}

json FormatRunError(const std::string& message, const std::string& session) {
  json structured = {{"status", "error"}, {"stdout", ""}, {"stderr", ""}, {"result", nullptr},
                     {"error", {{"type", "SandboxUnavailable"}, {"message", message}, {"traceback", ""}}},
                     {"duration_ms", 0}, {"tool_calls", json::array()}, {"tool_calls_total", 0},
                     {"tool_calls_failed", 0}, {"session", session},
                     {"output_truncated", false}, {"session_reset", false}, {"note", nullptr}};
  return {{"content", {{{"type", "text"}, {"text", "[error] " + message}}}},
          {"structuredContent", structured},
          {"isError", true}};
}

}  // namespace gateway
