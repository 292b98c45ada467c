// The runner frame protocol (docs/runner-protocol.md): 4-byte big-endian length +
// UTF-8 JSON object. This file holds the codec and the validation of every message the
// runner can send. Everything the runner sends is untrusted (user code shares its
// process), so parsing never throws and every field is type- and size-checked.
//
//   FrameDecoder dec(kMaxRunnerFrameBytes);
//   dec.Append(buf, n);
//   while (true) {
//     auto frame = dec.Next();          // error: the stream is broken, drop the session
//     if (!frame.ok() || !*frame) break;
//     absl::StatusOr<RunnerMessage> msg = ParseRunnerMessage(**frame);
//   }
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "base/untrusted_json.h"
#include "nlohmann/json.hpp"
#include "sandboxd/display_bundle.h"
#include "sandboxd/file_frames.h"
#include "sandboxd/runner_fields.h"

namespace sandboxd {

// Serialises one frame. The object must hold valid UTF-8 (nlohmann::json enforces it).
std::string EncodeFrame(const nlohmann::json& message);

enum class OutputStream { kStdout, kStderr, kDisplay };

struct ReadyMessage {
  int64_t runner_version = 0;
  std::string python;
  int64_t pid = 0;
  uint64_t execs = 0;
  // The session's runner token, where the runtime gave it one (the wasm tier): what sets
  // the runner apart from code of the session that answers on its socket.
  std::string token;
};

// One chunk of an `output` frame: text of stdout or stderr, or a display.
struct OutputChunk {
  OutputStream stream = OutputStream::kStdout;
  std::string text;       // kStdout, kStderr
  DisplayBundle display;  // kDisplay
};

struct OutputMessage {
  uint64_t id = 0;
  std::vector<OutputChunk> chunks;
};

struct ToolCallMessage {
  uint64_t id = 0;
  std::string call_id;
  std::string server;
  std::string tool;
  nlohmann::json arguments;  // always an object
};

struct ErrorInfo {
  std::string type;
  std::string message;
  std::string traceback;
};

struct DoneMessage {
  enum class Status { kOk, kError, kInterrupted };
  uint64_t id = 0;
  Status status = Status::kOk;
  std::optional<std::string> result;
  std::optional<ErrorInfo> error;
  uint64_t output_bytes = 0;
  uint64_t dropped_bytes = 0;
  uint64_t displays_dropped = 0;  // over the exec's max_display_bytes, in the runner
  bool namespace_reset = false;   // the runner replaced the namespace (JavaScript)
  std::string out_digest;         // Finished.out_digest; empty when the runner sent none
};

// reset_done, catalog_set, pong and egress_on: replies that carry the request id (and
// egress_on, when the relay could not be turned on, why).
struct AckMessage {
  enum class Kind { kResetDone, kCatalogSet, kPong, kEgressOn };
  Kind kind = Kind::kPong;
  uint64_t id = 0;
  std::string error;  // kEgressOn: empty when the relay listens
  // kEgressOn: the runner handed its loopback listener over with the frame (SCM_RIGHTS)
  // instead of relaying (docs/runner-protocol.md, "Egress relay").
  bool listener = false;
};

using RunnerMessage = std::variant<ReadyMessage, OutputMessage, ToolCallMessage, DoneMessage,
                                   AckMessage, FileReplyMessage>;

// The JSON values (objects, arrays, strings, numbers, ...) a frame of at most
// `max_frame_bytes` may hold: one per 128 bytes (131,072 at 16 MiB), at least 1,024. A
// parsed value costs ~100 bytes, so a 3 MiB frame of a million `{}` would become a
// document of ~100 MiB in the daemon, in every session sending them; at this bound a
// frame's document stays near the frame's own cap. Output and displays are a few long
// strings; the runners refuse a tool call whose arguments hold more (MAX_ARGUMENT_VALUES),
// so only a runner that breaks the protocol sends a denser frame.
inline size_t MaxFrameValues(size_t max_frame_bytes) {
  return std::max<size_t>(max_frame_bytes / 128, 1024);
}

// Incremental frame splitter. Not thread-safe.
class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

  void Append(const char* data, size_t n) { buffer_.append(data, n); }
  // Frames from now on may be at most this long (a runner's `ready` is small: the first
  // frame of a connection is held to kMaxGreetingFrameBytes).
  void set_max_frame_bytes(size_t max_frame_bytes) { max_frame_bytes_ = max_frame_bytes; }

  // The next complete frame, parsed; nullopt when more bytes are needed; an
  // INVALID_ARGUMENT error when the stream is broken (oversized frame, bad JSON, more
  // values than MaxFrameValues, not an object). After an error the decoder must not be
  // used again.
  absl::StatusOr<std::optional<nlohmann::json>> Next();

  // The next complete frame as a validated message (ParseRunnerMessage). The runner's
  // file_data frames, megabytes of base64 each, are decoded without a JSON DOM when they
  // have its exact layout (ParseFileDataFrame). Errors as Next()'s, or the message's.
  absl::StatusOr<std::optional<RunnerMessage>> NextMessage();

  size_t buffered() const { return buffer_.size() - offset_; }

 private:
  // The next complete frame's body, consumed; nullopt when more bytes are needed.
  absl::StatusOr<std::optional<absl::string_view>> NextBody();
  codemode::JsonLimits Limits() const {
    codemode::JsonLimits limits;
    limits.max_values = MaxFrameValues(max_frame_bytes_);
    return limits;
  }

  size_t max_frame_bytes_;
  std::string buffer_;
  size_t offset_ = 0;
};


// Limits on fields inside a runner frame (beyond the frame cap).
inline constexpr size_t kMaxCallIdBytes = 128;
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kMaxOutDigestBytes = 64;  // done.out_digest

// Validates one runner -> sandboxd message. INVALID_ARGUMENT says what is wrong.
absl::StatusOr<RunnerMessage> ParseRunnerMessage(const nlohmann::json& frame);

// sandboxd -> runner messages.
nlohmann::json MakeExecFrame(uint64_t id, const std::string& code, uint64_t max_output_bytes,
                             uint64_t max_display_bytes, uint32_t max_tool_calls_in_flight);
nlohmann::json MakeToolResultFrame(const std::string& call_id, const nlohmann::json& result);
nlohmann::json MakeToolErrorFrame(const std::string& call_id, const std::string& error);
nlohmann::json MakeInterruptFrame(uint64_t id);
nlohmann::json MakeResetFrame(uint64_t id);
nlohmann::json MakeSetCatalogFrame(uint64_t id, nlohmann::json catalog);
nlohmann::json MakePingFrame(uint64_t id);
// Turns the session's egress relay on (docs/runner-protocol.md, "Egress relay"); with
// `listener`, asks for the relay's loopback listener instead.
nlohmann::json MakeEgressFrame(uint64_t id, bool listener = false);

}  // namespace sandboxd
