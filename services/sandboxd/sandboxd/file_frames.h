// The runner's file frames (docs/runner-protocol.md, "Files"): what sandboxd sends to move
// files in and out of a session's workspace, and the runner's replies, validated like
// every other runner message (the runner shares its process with user code).
//
//   conn->Send(MakeFileUploadFrame(7, "data/in.csv", max_bytes));
//   EncodeFileChunkFrameInto(7, bytes, &buffer);  conn->SendBulk(buffer);
//   conn->Send(MakeFileCommitFrame(7));      // the runner answers file_written or file_error
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sandboxd {

// Limits on what a file reply may hold (beyond the frame cap).
inline constexpr size_t kMaxWorkspacePathBytes = 4096;
inline constexpr size_t kMaxFileErrorBytes = 4096;
inline constexpr uint32_t kMaxListEntries = 10000;

struct FileEntry {
  enum class Type { kFile, kDirectory, kSymlink, kOther };
  std::string path;  // relative to the workspace
  Type type = Type::kOther;
  uint64_t size = 0;
  int64_t mtime_ms = 0;
};

// file_error, file_written, file_data, file_read and file_list_result.
struct FileReplyMessage {
  enum class Kind { kError, kWritten, kData, kRead, kList };
  Kind kind = Kind::kError;
  uint64_t id = 0;
  std::string code;     // kError: invalid_argument, not_found, resource_exhausted, ...
  std::string message;  // kError
  std::string data;     // kData: the decoded bytes
  uint64_t size = 0;    // kWritten, kRead
  int64_t mtime_ms = 0; // kRead
  std::vector<FileEntry> entries;  // kList
  bool truncated = false;          // kList
};

// Validates a runner -> sandboxd frame whose type starts with "file_". INVALID_ARGUMENT
// (a protocol violation: the session is dropped) says what is wrong.
absl::StatusOr<FileReplyMessage> ParseFileReply(const nlohmann::json& frame);

// The status a file_error stands for: its code mapped to a status code (unknown codes
// become INTERNAL), its message (cut to kMaxFileErrorBytes) as the text.
absl::Status FileErrorStatus(const FileReplyMessage& error);

// sandboxd -> runner file frames.
nlohmann::json MakeFileUploadFrame(uint64_t id, const std::string& path, uint64_t max_bytes);
// file_chunk frames carry a megabyte of base64 each: built as text, length prefix
// included, without a JSON DOM (which would copy the string several times). The same
// frame as EncodeFrame of {"type":"file_chunk","id":id,"data":base64(data)}.
std::string EncodeFileChunkFrame(uint64_t id, std::string_view data);
// The same into `out`, whose capacity is reused: an upload encodes every chunk into one
// buffer instead of faulting in a fresh megabyte per chunk.
void EncodeFileChunkFrameInto(uint64_t id, std::string_view data, std::string* out);
// The binary form of the same frame, for runners of version 2 and later: the length's top
// bit set (kBinaryFrameBit), an 8-byte big-endian id, then the raw bytes. A third fewer
// bytes than base64 and nothing for the runner to decode. Only sandboxd sends binary
// frames: its decoder refuses them from a runner like any frame over the size cap.
inline constexpr uint32_t kBinaryFrameBit = 0x80000000u;
inline constexpr int64_t kBinaryChunksSinceRunner = 2;
void EncodeBinaryFileChunkInto(uint64_t id, std::string_view data, std::string* out);

// The runner's file_data frame in its exact layout, {"type":"file_data","id":N,"data":"..."}
// (the frame body, after the length), decoded without a JSON DOM; nullopt when the body
// has any other form or invalid base64, and the caller parses it the general way.
std::optional<FileReplyMessage> ParseFileDataFrame(absl::string_view body);
nlohmann::json MakeFileCommitFrame(uint64_t id);
nlohmann::json MakeFileAbortFrame(uint64_t id);
nlohmann::json MakeFileDownloadFrame(uint64_t id, const std::string& path, uint64_t max_bytes);
nlohmann::json MakeFileListFrame(uint64_t id, const std::string& path, uint32_t max_entries);

// A path a client gave, checked before it reaches the runner: relative to the workspace,
// no `..`, no NUL, at most kMaxWorkspacePathBytes, valid UTF-8. `allow_empty` for
// listings (the workspace itself). INVALID_ARGUMENT says why. (The runner checks again,
// and also refuses symlinks on the way, which only it can see.)
absl::Status CheckWorkspacePath(std::string_view path, bool allow_empty);

}  // namespace sandboxd
