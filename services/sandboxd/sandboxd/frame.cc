#include "sandboxd/frame.h"

#include "absl/strings/str_cat.h"
#include "base/untrusted_json.h"

namespace sandboxd {
namespace {

using nlohmann::json;

#define SBX_TRY(lhs, expr)               \
  auto lhs##_or = (expr);                \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

absl::StatusOr<RunnerMessage> ParseReady(const json& f) {
  ReadyMessage m;
  auto v = f.find("runner_version");
  if (v == f.end() || !v->is_number_integer()) return RunnerViolation("ready without runner_version");
  m.runner_version = v->get<int64_t>();
  SBX_TRY(python, RunnerString(f, "python", 256, false));
  m.python = python;
  SBX_TRY(pid, RunnerUint(f, "pid", false));
  m.pid = static_cast<int64_t>(pid);
  SBX_TRY(execs, RunnerUint(f, "execs", false));
  m.execs = execs;
  SBX_TRY(token, RunnerString(f, "token", 128, false));
  m.token = token;
  return m;
}

absl::StatusOr<RunnerMessage> ParseOutput(const json& f) {
  OutputMessage m;
  SBX_TRY(id, RunnerUint(f, "id"));
  m.id = id;
  auto chunks = f.find("chunks");
  if (chunks == f.end() || !chunks->is_array()) return RunnerViolation("output without chunks array");
  for (const json& c : *chunks) {
    if (!c.is_array() || c.size() != 2 || !c[0].is_string()) {
      return RunnerViolation("output chunk is not [stream, text] or [\"display\", bundle]");
    }
    const std::string& stream = c[0].get_ref<const std::string&>();
    OutputChunk chunk;
    if (stream == "display") {
      SBX_TRY(bundle, ParseDisplayBundle(c[1]));
      chunk.stream = OutputStream::kDisplay;
      chunk.display = std::move(bundle);
      m.chunks.push_back(std::move(chunk));
      continue;
    }
    if (stream == "stdout") {
      chunk.stream = OutputStream::kStdout;
    } else if (stream == "stderr") {
      chunk.stream = OutputStream::kStderr;
    } else {
      return RunnerViolation("output chunk names an unknown stream");
    }
    if (!c[1].is_string()) return RunnerViolation("output chunk is not [stream, text]");
    chunk.text = c[1].get<std::string>();
    m.chunks.push_back(std::move(chunk));
  }
  return m;
}

absl::StatusOr<RunnerMessage> ParseToolCall(const json& f) {
  ToolCallMessage m;
  SBX_TRY(id, RunnerUint(f, "id"));
  m.id = id;
  SBX_TRY(call_id, RunnerString(f, "call_id", kMaxCallIdBytes));
  if (call_id.empty()) return RunnerViolation("empty call_id");
  m.call_id = call_id;
  SBX_TRY(server, RunnerString(f, "server", kMaxNameBytes));
  m.server = server;
  SBX_TRY(tool, RunnerString(f, "tool", kMaxNameBytes));
  m.tool = tool;
  auto args = f.find("arguments");
  if (args == f.end() || args->is_null()) {
    m.arguments = json::object();
  } else if (args->is_object()) {
    m.arguments = *args;
  } else {
    return RunnerViolation("tool_call arguments is not an object");
  }
  return m;
}

absl::StatusOr<RunnerMessage> ParseDone(const json& f) {
  DoneMessage m;
  SBX_TRY(id, RunnerUint(f, "id"));
  m.id = id;
  SBX_TRY(status, RunnerString(f, "status", 32));
  if (status == "ok") {
    m.status = DoneMessage::Status::kOk;
  } else if (status == "error") {
    m.status = DoneMessage::Status::kError;
  } else if (status == "interrupted") {
    m.status = DoneMessage::Status::kInterrupted;
  } else {
    return RunnerViolation("done with unknown status");
  }
  auto result = f.find("result");
  if (result != f.end() && !result->is_null()) {
    if (!result->is_string()) return RunnerViolation("done result is not a string");
    m.result = result->get<std::string>();
  }
  auto error = f.find("error");
  if (error != f.end() && !error->is_null()) {
    if (!error->is_object()) return RunnerViolation("done error is not an object");
    ErrorInfo e;
    SBX_TRY(type, RunnerString(*error, "type", 1024, false));
    SBX_TRY(message, RunnerString(*error, "message", kMaxRunnerFrameBytes, false));
    SBX_TRY(traceback, RunnerString(*error, "traceback", kMaxRunnerFrameBytes, false));
    e.type = type;
    e.message = message;
    e.traceback = traceback;
    m.error = std::move(e);
  }
  SBX_TRY(output_bytes, RunnerUint(f, "output_bytes", false));
  m.output_bytes = output_bytes;
  SBX_TRY(dropped_bytes, RunnerUint(f, "dropped_bytes", false));
  m.dropped_bytes = dropped_bytes;
  SBX_TRY(displays_dropped, RunnerUint(f, "displays_dropped", false));
  m.displays_dropped = displays_dropped;
  if (auto reset = f.find("namespace_reset"); reset != f.end()) {
    if (!reset->is_boolean()) return RunnerViolation("done namespace_reset is not a boolean");
    m.namespace_reset = reset->get<bool>();
  }
  SBX_TRY(out_digest, RunnerString(f, "out_digest", kMaxOutDigestBytes, false));
  m.out_digest = out_digest;
  return m;
}

absl::StatusOr<RunnerMessage> ParseAck(const json& f, AckMessage::Kind kind) {
  SBX_TRY(id, RunnerUint(f, "id"));
  AckMessage m;
  m.kind = kind;
  m.id = id;
  return m;
}

absl::StatusOr<RunnerMessage> ParseEgressOn(const json& f) {
  SBX_TRY(id, RunnerUint(f, "id"));
  AckMessage m;
  m.kind = AckMessage::Kind::kEgressOn;
  m.id = id;
  if (f.contains("error")) {
    SBX_TRY(error, RunnerString(f, "error", 1024, false));
    m.error = error.empty() ? "the runner gave no reason" : error;
  }
  if (f.contains("listener")) {
    if (!f["listener"].is_boolean()) return RunnerViolation("egress_on listener is not a boolean");
    m.listener = f["listener"].get<bool>();
  }
  return m;
}

#undef SBX_TRY

}  // namespace

std::string EncodeFrame(const json& message) {
  std::string body = message.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(body.size() + 4);
  uint32_t n = static_cast<uint32_t>(body.size());
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out += body;
  return out;
}

absl::StatusOr<std::optional<absl::string_view>> FrameDecoder::NextBody() {
  // Compact once the consumed prefix dominates, so the buffer does not grow forever (before
  // handing out a view into it, which stays valid until the next call).
  if (offset_ > 65536 && offset_ * 2 > buffer_.size()) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  if (buffered() < 4) return std::optional<absl::string_view>();
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
  size_t len = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | size_t{p[3]};
  if (len > max_frame_bytes_) {
    return RunnerViolation(absl::StrCat("frame of ", len, " bytes exceeds the cap of ", max_frame_bytes_));
  }
  if (buffered() < 4 + len) return std::optional<absl::string_view>();
  absl::string_view body(buffer_.data() + offset_ + 4, len);
  offset_ += 4 + len;
  return std::optional<absl::string_view>(body);
}

absl::StatusOr<std::optional<RunnerMessage>> FrameDecoder::NextMessage() {
  absl::StatusOr<std::optional<absl::string_view>> body = NextBody();
  if (!body.ok()) return body.status();
  if (!*body) return std::optional<RunnerMessage>();
  if (std::optional<FileReplyMessage> data = ParseFileDataFrame(**body)) {
    return std::optional<RunnerMessage>(std::move(*data));
  }
  absl::StatusOr<json> parsed = codemode::ParseUntrustedJson(**body, "frame", Limits());
  if (!parsed.ok()) return RunnerViolation(parsed.status().message());
  if (!parsed->is_object()) return RunnerViolation("frame is not a JSON object");
  absl::StatusOr<RunnerMessage> message = ParseRunnerMessage(*parsed);
  if (!message.ok()) return message.status();
  return std::optional<RunnerMessage>(std::move(*message));
}

absl::StatusOr<std::optional<json>> FrameDecoder::Next() {
  absl::StatusOr<std::optional<absl::string_view>> body = NextBody();
  if (!body.ok()) return body.status();
  if (!*body) return std::optional<json>();
  absl::StatusOr<json> parsed = codemode::ParseUntrustedJson(**body, "frame", Limits());
  if (!parsed.ok()) return RunnerViolation(parsed.status().message());
  if (!parsed->is_object()) return RunnerViolation("frame is not a JSON object");
  return std::optional<json>(std::move(*parsed));
}

absl::StatusOr<RunnerMessage> ParseRunnerMessage(const json& frame) {
  auto type = frame.find("type");
  if (type == frame.end() || !type->is_string()) return RunnerViolation("frame without a string 'type'");
  const std::string& t = type->get_ref<const std::string&>();
  if (t == "output") return ParseOutput(frame);
  if (t == "tool_call") return ParseToolCall(frame);
  if (t == "done") return ParseDone(frame);
  if (t == "ready") return ParseReady(frame);
  if (t == "pong") return ParseAck(frame, AckMessage::Kind::kPong);
  if (t == "reset_done") return ParseAck(frame, AckMessage::Kind::kResetDone);
  if (t == "catalog_set") return ParseAck(frame, AckMessage::Kind::kCatalogSet);
  if (t == "egress_on") return ParseEgressOn(frame);
  if (t.rfind("file_", 0) == 0) {
    absl::StatusOr<FileReplyMessage> reply = ParseFileReply(frame);
    if (!reply.ok()) return reply.status();
    return RunnerMessage(std::move(*reply));
  }
  return RunnerViolation(absl::StrCat("unknown frame type '", t.substr(0, 64), "'"));
}

json MakeExecFrame(uint64_t id, const std::string& code, uint64_t max_output_bytes,
                   uint64_t max_display_bytes, uint32_t max_tool_calls_in_flight) {
  return json{{"type", "exec"},
              {"id", id},
              {"code", code},
              {"max_output_bytes", max_output_bytes},
              {"max_display_bytes", max_display_bytes},
              {"max_tool_calls_in_flight", max_tool_calls_in_flight}};
}

json MakeToolResultFrame(const std::string& call_id, const json& result) {
  return json{{"type", "tool_result"}, {"call_id", call_id}, {"ok", true}, {"result", result}};
}

json MakeToolErrorFrame(const std::string& call_id, const std::string& error) {
  return json{{"type", "tool_result"}, {"call_id", call_id}, {"ok", false}, {"error", error}};
}

json MakeInterruptFrame(uint64_t id) { return json{{"type", "interrupt"}, {"id", id}}; }
json MakeResetFrame(uint64_t id) { return json{{"type", "reset"}, {"id", id}}; }
json MakeSetCatalogFrame(uint64_t id, json catalog) {
  return json{{"type", "set_catalog"}, {"id", id}, {"catalog", std::move(catalog)}};
}
json MakePingFrame(uint64_t id) { return json{{"type", "ping"}, {"id", id}}; }
json MakeEgressFrame(uint64_t id, bool listener) {
  json f{{"type", "egress"}, {"id", id}};
  if (listener) f["listener"] = true;
  return f;
}

}  // namespace sandboxd
