// run_python's results. See run_result.h.
#include "adapter/run_result.h"

#include <algorithm>

#include "absl/strings/escaping.h"
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

// The error type is a class name; anything longer is cut.
constexpr size_t kMaxErrorTypeBytes = 256;

// The parts of a run that sandboxd does not bound to a size the model should read (the
// result's repr, the error's message and traceback: code can raise a multi-MB message),
// each clipped to a quarter of the text budget with a visible marker, the same in the
// text block and in structuredContent.
struct ClippedParts {
  std::string result, error_type, error_message, traceback;
};

ClippedParts ClipParts(const Finished& f, size_t max) {
  return {Clip(f.result_repr(), max / 4), Clip(f.error().type(), kMaxErrorTypeBytes),
          Clip(f.error().message(), max / 4), Clip(f.error().traceback(), max / 4)};
}

// Appends `line` on a line of its own.
void AddLine(std::string& text, const std::string& line) {
  if (!text.empty() && text.back() != '\n') text += "\n";
  text += line + "\n";
}

// The URI of a produced file: by the session's name when the run was addressed by one (as
// before handles), else by the run's sandbox handle (readable from any MCP session and
// replica of its credential).
std::string FileUri(const RunReport& report, const std::string& path) {
  return report.session.empty() ? OutFileUriOfHandle(report.sandbox, path)
                                : OutFileUri(report.session, path);
}

std::string ModelText(const Finished& f, const std::vector<std::string>& notes,
                      const std::string& sandbox, size_t max) {
  const ClippedParts parts = ClipParts(f, max);
  std::string text;
  if (!f.stdout().empty()) text += Clip(f.stdout(), max / 2);
  if (!f.stderr().empty()) {
    if (!text.empty() && text.back() != '\n') text += "\n";
    text += "[stderr]\n" + Clip(f.stderr(), max / 4);
  }
  if (!f.result_repr().empty()) AddLine(text, "[result] " + parts.result);
  if (HasError(f)) {
    AddLine(text, absl::StrCat("[", StatusWord(f.status()), "] ", parts.error_type, ": ",
                               parts.error_message));
    if (!f.error().traceback().empty()) text += parts.traceback;
  }
  if (f.output_truncated()) AddLine(text, "[note] output was truncated");
  for (const auto& n : notes) AddLine(text, "[note] " + n);
  if (text.empty()) text = "(no output)";
  if (!sandbox.empty()) AddLine(text, "[sandbox] " + sandbox);
  return text;
}

// The MIME type a display is shown to the model as: an image when there is one, else the
// richest text (markdown reads best, then HTML, JSON, LaTeX, the repr).
const char* ShownAs(const sandbox::v1::Display& d) {
  static const char* const kOrder[] = {"image/png",        "image/jpeg", "image/svg+xml",
                                       "text/markdown",    "text/html",  "application/json",
                                       "text/latex",       "text/plain"};
  for (const char* mime : kOrder) {
    if (d.data().count(mime)) return mime;
  }
  return nullptr;
}

// One MCP content block per display, in order: images as `image` blocks (base64 with their
// mimeType; SVG is base64-encoded text), everything else as a text block.
json DisplayBlocks(const Finished& f, size_t max_text_bytes) {
  json blocks = json::array();
  for (const sandbox::v1::Display& d : f.displays()) {
    const char* mime = ShownAs(d);
    if (mime == nullptr) continue;
    const std::string& data = d.data().at(mime);
    const std::string type(mime);
    if (type == "image/svg+xml") {
      blocks.push_back({{"type", "image"}, {"data", absl::Base64Escape(data)}, {"mimeType", type}});
    } else if (type.rfind("image/", 0) == 0) {
      blocks.push_back({{"type", "image"}, {"data", data}, {"mimeType", type}});
    } else {
      blocks.push_back({{"type", "text"}, {"text", Clip(data, max_text_bytes / 2)}});
    }
  }
  return blocks;
}

// Produced files beyond this many are counted in a note, not linked one by one.
constexpr size_t kMaxFileLinks = 100;

// One resource_link block per produced file (the first kMaxFileLinks).
json FileBlocks(const RunReport& report) {
  json blocks = json::array();
  for (size_t i = 0; i < report.files.size() && i < kMaxFileLinks; ++i) {
    const OutFile& file = report.files[i];
    blocks.push_back({{"type", "resource_link"},
                      {"uri", FileUri(report, file.path)},
                      {"name", file.path},
                      {"mimeType", MimeTypeForPath(file.path)},
                      {"size", file.size}});
  }
  return blocks;
}

json FileSummaries(const RunReport& report) {
  json out = json::array();
  for (size_t i = 0; i < report.files.size() && i < kMaxFileLinks; ++i) {
    const OutFile& file = report.files[i];
    out.push_back({{"path", absl::StrCat("/workspace/", kOutDir, "/", file.path)},
                   {"uri", FileUri(report, file.path)},
                   {"mime_type", MimeTypeForPath(file.path)},
                   {"size", file.size}});
  }
  return out;
}

// The note that tells the model which files the run produced (clients show resource
// links to people, not always to the model). Without resource_link support it also
// carries the URIs.
std::string FilesNote(const RunReport& report) {
  std::vector<std::string> names;
  const size_t named = report.resource_links ? 10 : kMaxFileLinks;
  for (size_t i = 0; i < report.files.size() && i < named; ++i) {
    const OutFile& f = report.files[i];
    names.push_back(report.resource_links
                        ? f.path
                        : absl::StrCat(f.path, " (", FileUri(report, f.path), ")"));
  }
  std::string note = absl::StrCat(report.files.size(), " file(s) created or changed under "
                                  "/workspace/out/, readable as MCP resources: ",
                                  absl::StrJoin(names, ", "));
  if (report.files.size() > names.size()) absl::StrAppend(&note, ", ...");
  return note;
}

json DisplaySummaries(const Finished& f) {
  json out = json::array();
  for (const sandbox::v1::Display& d : f.displays()) {
    std::vector<std::string> mimes;
    for (const auto& [mime, data] : d.data()) mimes.push_back(mime);
    std::sort(mimes.begin(), mimes.end());
    const char* shown = ShownAs(d);
    out.push_back({{"mime_types", mimes}, {"shown_as", shown ? json(shown) : json(nullptr)}});
  }
  return out;
}

json StructuredContent(const Finished& f, const RunReport& report,
                       const std::vector<std::string>& notes, size_t max_text_bytes) {
  ClippedParts parts = ClipParts(f, max_text_bytes);
  return {{"status", StatusWord(f.status())},
          {"stdout", f.stdout()},
          {"stderr", f.stderr()},
          {"result", f.result_repr().empty() ? json(nullptr) : json(std::move(parts.result))},
          {"error", HasError(f) ? json{{"type", std::move(parts.error_type)},
                                       {"message", std::move(parts.error_message)},
                                       {"traceback", std::move(parts.traceback)}}
                                : json(nullptr)},
          {"duration_ms", f.duration_ms()},
          {"tool_calls", report.calls.listed},
          {"tool_calls_total", report.calls.total},
          {"tool_calls_failed", report.calls.failed},
          {"session", report.session},
          {"sandbox", report.sandbox.empty() ? json(nullptr) : json(report.sandbox)},
          {"output_truncated", f.output_truncated()},
          {"session_reset", report.session_reset},
          {"stdout_file", report.stdout_file.empty() ? json(nullptr) : json(report.stdout_file)},
          {"displays", DisplaySummaries(f)},
          {"displays_dropped", f.displays_dropped()},
          {"files", FileSummaries(report)},
          {"files_produced", report.files.size()},
          {"note", notes.empty() ? json(nullptr) : json(absl::StrJoin(notes, "; "))}};
}

}  // namespace

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
  props["sandbox"] = {{"type", {"string", "null"}},
                      {"description", "the handle of the sandbox this ran in: pass it back as "
                                      "`sandbox` to run there again, with these variables"}};
  props["output_truncated"] = {{"type", "boolean"}};
  props["session_reset"] = {{"type", "boolean"}};
  json display_props;
  display_props["mime_types"] = {{"type", "array"}, {"items", {{"type", "string"}}}};
  display_props["shown_as"] = nullable_string;
  props["displays"] = {{"type", "array"},
                       {"description", "rich outputs (display(), charts), in the order of the "
                                       "content blocks after the first"},
                       {"items", {{"type", "object"}, {"properties", display_props}}}};
  props["displays_dropped"] = {{"type", "integer"}};
  props["stdout_file"] = {{"type", {"string", "null"}},
                          {"description", "where the whole stdout is when it was too long to "
                                          "return (stdout then holds its head and tail)"}};
  json file_props;
  file_props["path"] = {{"type", "string"}};
  file_props["uri"] = {{"type", "string"}};
  file_props["mime_type"] = {{"type", "string"}};
  file_props["size"] = {{"type", "integer"}};
  props["files"] = {{"type", "array"},
                    {"description", "files the run created or changed under /workspace/out/ (the "
                                    "first 100), each readable with resources/read at its uri"},
                    {"items", {{"type", "object"}, {"properties", file_props}}}};
  props["files_produced"] = {{"type", "integer"}};
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
  if (f.displays_dropped() > 0) {
    notes.push_back(absl::StrCat(f.displays_dropped(), " display(s) dropped: over sandboxd's "
                                 "display cap for one run"));
  }
  if (!report.files.empty()) notes.push_back(FilesNote(report));
  json content = json::array({{{"type", "text"}, {"text", ModelText(f, notes, report.sandbox_in_text ? report.sandbox : "", max_text_bytes)}}});
  for (json& block : DisplayBlocks(f, max_text_bytes)) content.push_back(std::move(block));
  if (report.resource_links) {
    for (json& block : FileBlocks(report)) content.push_back(std::move(block));
  }
  return {{"content", std::move(content)},
          {"structuredContent", StructuredContent(f, report, notes, max_text_bytes)},
          {"isError", f.status() != Finished::OK}};
}

json FormatRunError(const std::string& message, const RunReport& report) {
  const std::string& sandbox = report.sandbox;
  json structured = {{"status", "error"}, {"stdout", ""}, {"stderr", ""}, {"result", nullptr},
                     {"error", {{"type", "SandboxUnavailable"}, {"message", message}, {"traceback", ""}}},
                     {"duration_ms", 0}, {"tool_calls", json::array()}, {"tool_calls_total", 0},
                     {"tool_calls_failed", 0}, {"session", report.session},
                     {"sandbox", sandbox.empty() ? json(nullptr) : json(sandbox)},
                     {"output_truncated", false}, {"session_reset", false},
                     {"displays", json::array()}, {"displays_dropped", 0},
                     {"files", json::array()}, {"files_produced", 0},
                     {"stdout_file", nullptr}, {"note", nullptr}};
  std::string text = "[error] " + message;
  if (!sandbox.empty() && report.sandbox_in_text) AddLine(text, "[sandbox] " + sandbox);
  return {{"content", {{{"type", "text"}, {"text", text}}}},
          {"structuredContent", structured},
          {"isError", true}};
}

}  // namespace gateway
