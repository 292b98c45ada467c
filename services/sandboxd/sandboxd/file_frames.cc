#include "sandboxd/file_frames.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/untrusted_json.h"
#include "sandboxd/runner_fields.h"

namespace sandboxd {
namespace {

using nlohmann::json;

absl::StatusOr<int64_t> GetMtime(const json& f) {
  auto it = f.find("mtime_ms");
  if (it == f.end()) return int64_t{0};
  if (!it->is_number_integer()) return RunnerViolation("field 'mtime_ms' is not an integer");
  return it->get<int64_t>();
}

absl::StatusOr<FileEntry> ParseEntry(const json& e) {
  if (!e.is_object()) return RunnerViolation("file_list_result entry is not an object");
  FileEntry out;
  absl::StatusOr<std::string> path = RunnerString(e, "path", kMaxWorkspacePathBytes);
  if (!path.ok()) return path.status();
  out.path = std::move(*path);
  absl::StatusOr<std::string> type = RunnerString(e, "type", 16);
  if (!type.ok()) return type.status();
  if (*type == "file") {
    out.type = FileEntry::Type::kFile;
  } else if (*type == "directory") {
    out.type = FileEntry::Type::kDirectory;
  } else if (*type == "symlink") {
    out.type = FileEntry::Type::kSymlink;
  } else if (*type == "other") {
    out.type = FileEntry::Type::kOther;
  } else {
    return RunnerViolation("file_list_result entry of an unknown type");
  }
  absl::StatusOr<uint64_t> size = RunnerUint(e, "size");
  if (!size.ok()) return size.status();
  out.size = *size;
  absl::StatusOr<int64_t> mtime = GetMtime(e);
  if (!mtime.ok()) return mtime.status();
  out.mtime_ms = *mtime;
  return out;
}

absl::Status ParseList(const json& f, FileReplyMessage* m) {
  auto entries = f.find("entries");
  if (entries == f.end() || !entries->is_array()) {
    return RunnerViolation("file_list_result without an entries array");
  }
  if (entries->size() > kMaxListEntries) return RunnerViolation("file_list_result has too many entries");
  for (const json& e : *entries) {
    absl::StatusOr<FileEntry> entry = ParseEntry(e);
    if (!entry.ok()) return entry.status();
    m->entries.push_back(std::move(*entry));
  }
  auto truncated = f.find("truncated");
  m->truncated = truncated != f.end() && truncated->is_boolean() && truncated->get<bool>();
  return absl::OkStatus();
}

absl::Status ParseByKind(const json& f, FileReplyMessage* m) {
  switch (m->kind) {
    case FileReplyMessage::Kind::kError: {
      absl::StatusOr<std::string> code = RunnerString(f, "code", 64);
      if (!code.ok()) return code.status();
      absl::StatusOr<std::string> message = RunnerString(f, "message", kMaxRunnerFrameBytes, false);
      if (!message.ok()) return message.status();
      m->code = std::move(*code);
      m->message = message->substr(0, kMaxFileErrorBytes);
      return absl::OkStatus();
    }
    case FileReplyMessage::Kind::kData: {
      absl::StatusOr<std::string> data = RunnerString(f, "data", kMaxRunnerFrameBytes);
      if (!data.ok()) return data.status();
      if (!absl::Base64Unescape(*data, &m->data)) return RunnerViolation("file_data is not base64");
      return absl::OkStatus();
    }
    case FileReplyMessage::Kind::kWritten:
    case FileReplyMessage::Kind::kRead: {
      absl::StatusOr<uint64_t> size = RunnerUint(f, "size");
      if (!size.ok()) return size.status();
      m->size = *size;
      absl::StatusOr<int64_t> mtime = GetMtime(f);
      if (!mtime.ok()) return mtime.status();
      m->mtime_ms = *mtime;
      return absl::OkStatus();
    }
    case FileReplyMessage::Kind::kList:
      return ParseList(f, m);
  }
  return RunnerViolation("unknown file reply");
}

}  // namespace

absl::StatusOr<FileReplyMessage> ParseFileReply(const json& frame) {
  const std::string& t = frame.at("type").get_ref<const std::string&>();
  FileReplyMessage m;
  if (t == "file_error") {
    m.kind = FileReplyMessage::Kind::kError;
  } else if (t == "file_written") {
    m.kind = FileReplyMessage::Kind::kWritten;
  } else if (t == "file_data") {
    m.kind = FileReplyMessage::Kind::kData;
  } else if (t == "file_read") {
    m.kind = FileReplyMessage::Kind::kRead;
  } else if (t == "file_list_result") {
    m.kind = FileReplyMessage::Kind::kList;
  } else {
    return RunnerViolation(absl::StrCat("unknown frame type '", t.substr(0, 64), "'"));
  }
  absl::StatusOr<uint64_t> id = RunnerUint(frame, "id");
  if (!id.ok()) return id.status();
  m.id = *id;
  if (absl::Status s = ParseByKind(frame, &m); !s.ok()) return s;
  return m;
}

absl::Status FileErrorStatus(const FileReplyMessage& error) {
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (error.code == "invalid_argument") code = absl::StatusCode::kInvalidArgument;
  if (error.code == "not_found") code = absl::StatusCode::kNotFound;
  if (error.code == "resource_exhausted") code = absl::StatusCode::kResourceExhausted;
  if (error.code == "failed_precondition") code = absl::StatusCode::kFailedPrecondition;
  // The text comes from the sandbox: valid UTF-8 only (the JSON parser checked it).
  return absl::Status(code, error.message.empty() ? "file operation failed" : error.message);
}

json MakeFileUploadFrame(uint64_t id, const std::string& path, uint64_t max_bytes) {
  return json{{"type", "file_upload"}, {"id", id}, {"path", path}, {"max_bytes", max_bytes}};
}
void EncodeFileChunkFrameInto(uint64_t id, std::string_view data, std::string* out) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const std::string head = absl::StrCat(R"({"type":"file_chunk","id":)", id, R"(,"data":")");
  const size_t b64 = 4 * ((data.size() + 2) / 3);
  const uint32_t n = static_cast<uint32_t>(head.size() + b64 + 2);
  out->resize(4 + n);  // within the capacity of earlier chunks: no allocation, no zeroing
  char* p = out->data();
  for (int shift = 24; shift >= 0; shift -= 8) *p++ = static_cast<char>((n >> shift) & 0xff);
  p = std::copy(head.begin(), head.end(), p);
  const auto* in = reinterpret_cast<const unsigned char*>(data.data());
  size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    const uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8) | in[i + 2];
    p[0] = kAlphabet[v >> 18];
    p[1] = kAlphabet[(v >> 12) & 63];
    p[2] = kAlphabet[(v >> 6) & 63];
    p[3] = kAlphabet[v & 63];
    p += 4;
  }
  if (const size_t rest = data.size() - i; rest > 0) {
    const uint32_t v = (uint32_t{in[i]} << 16) | (rest == 2 ? uint32_t{in[i + 1]} << 8 : 0);
    p[0] = kAlphabet[v >> 18];
    p[1] = kAlphabet[(v >> 12) & 63];
    p[2] = rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    p[3] = '=';
    p += 4;
  }
  *p++ = '"';
  *p++ = '}';
}

void EncodeBinaryFileChunkInto(uint64_t id, std::string_view data, std::string* out) {
  const uint32_t n = static_cast<uint32_t>(8 + data.size()) | kBinaryFrameBit;
  out->resize(4 + 8 + data.size());  // within the capacity of earlier chunks
  char* p = out->data();
  for (int shift = 24; shift >= 0; shift -= 8) *p++ = static_cast<char>((n >> shift) & 0xff);
  for (int shift = 56; shift >= 0; shift -= 8) *p++ = static_cast<char>((id >> shift) & 0xff);
  std::copy(data.begin(), data.end(), p);
}

std::string EncodeFileChunkFrame(uint64_t id, std::string_view data) {
  std::string out;
  EncodeFileChunkFrameInto(id, data, &out);
  return out;
}

std::optional<FileReplyMessage> ParseFileDataFrame(absl::string_view body) {
  if (!absl::ConsumePrefix(&body, R"({"type":"file_data","id":)")) return std::nullopt;
  size_t digits = 0;
  while (digits < body.size() && digits < 19 && absl::ascii_isdigit(body[digits])) ++digits;
  uint64_t id = 0;
  if (digits == 0 || (digits > 1 && body[0] == '0') ||
      !absl::SimpleAtoi(body.substr(0, digits), &id)) {
    return std::nullopt;
  }
  body.remove_prefix(digits);
  if (!absl::ConsumePrefix(&body, R"(,"data":")") || !absl::ConsumeSuffix(&body, "\"}")) {
    return std::nullopt;
  }
  // Only base64's alphabet: anything else (a quote, an escape, whitespace) is not our
  // layout, and the general parser decides.
  for (char c : body) {
    if (!absl::ascii_isalnum(c) && c != '+' && c != '/' && c != '=') return std::nullopt;
  }
  FileReplyMessage m;
  m.kind = FileReplyMessage::Kind::kData;
  m.id = id;
  if (!absl::Base64Unescape(body, &m.data)) return std::nullopt;
  return m;
}
json MakeFileCommitFrame(uint64_t id) { return json{{"type", "file_commit"}, {"id", id}}; }
json MakeFileAbortFrame(uint64_t id) { return json{{"type", "file_abort"}, {"id", id}}; }
json MakeFileDownloadFrame(uint64_t id, const std::string& path, uint64_t max_bytes) {
  return json{{"type", "file_download"}, {"id", id}, {"path", path}, {"max_bytes", max_bytes}};
}
json MakeFileListFrame(uint64_t id, const std::string& path, uint32_t max_entries) {
  return json{{"type", "file_list"}, {"id", id}, {"path", path}, {"max_entries", max_entries}};
}

absl::Status CheckWorkspacePath(std::string_view path, bool allow_empty) {
  if (path.size() > kMaxWorkspacePathBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("path is longer than ", kMaxWorkspacePathBytes, " bytes"));
  }
  if (path.find('\0') != std::string_view::npos || !codemode::IsValidUtf8(absl::string_view(path.data(), path.size()))) {
    return absl::InvalidArgumentError("path must be UTF-8 without NUL bytes");
  }
  if (!path.empty() && path[0] == '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "path '", std::string(path.substr(0, 200)), "' is absolute: paths are relative to /workspace"));
  }
  bool names_something = false;
  for (absl::string_view part : absl::StrSplit(absl::string_view(path.data(), path.size()), '/')) {
    if (part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("path '", std::string(path.substr(0, 200)), "': '..' is not allowed"));
    }
    if (!part.empty() && part != ".") names_something = true;
  }
  if (!names_something && !allow_empty) return absl::InvalidArgumentError("path names no file");
  return absl::OkStatus();
}

}  // namespace sandboxd
