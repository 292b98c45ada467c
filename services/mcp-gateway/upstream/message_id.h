// MessageIdScanner: the top-level "id" of a JSON-RPC message, found as the message's bytes
// stream past, in constant memory. For a message too large to keep (a stdio line over
// --max_upstream_message_bytes): the request it answered can then fail at once, with the
// reason, instead of waiting out its timeout.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace gateway {

// The longest id (its JSON text) the gateway reads from an upstream's message or echoes
// in an answer to it: ids are counters and short strings.
inline constexpr size_t kMaxMessageIdBytes = 256;

class MessageIdScanner {
 public:
  // Which ids of a batch are worth recording (the requests still waiting for an answer):
  // a batch that puts kMaxBatchIds answers to requests never made first must not hide the
  // real ones. Null: every id.
  using Filter = std::function<bool(const nlohmann::json& id)>;
  explicit MessageIdScanner(Filter wanted = nullptr) : wanted_(std::move(wanted)) {}

  // Feeds the next bytes of one message (JSON text; it need not be valid or complete).
  void Feed(const char* data, size_t size);
  // The id of the response so far: the top-level object's "id", a number or a string;
  // null when there was none (yet), or it was anything else, or longer than a sane id, or
  // the message has a "method" (a request of the server's: its id is not one of ours).
  nlohmann::json id() const;
  // Every request the message answers: id() when it is a response, or the ids of the
  // responses in a batch (a top-level array; the first kMaxBatchIds that pass the filter).
  std::vector<nlohmann::json> ids() const;
  // For the next message.
  void Reset() { *this = MessageIdScanner(std::move(wanted_)); }

 private:
  void Step(char c);
  void Capture(char c);
  void EndCapture();
  void DecodeKey();

  // Longer keys are not "id" or "method" anyway, even spelled with \uXXXX escapes.
  static constexpr size_t kMaxKeyBytes = 6 * 6;
  static constexpr size_t kMaxIdBytes = kMaxMessageIdBytes;
  static constexpr size_t kMaxBatchIds = 1024;
  // The depth of the objects whose keys count: 1, or 2 in a batch.
  int MessageDepth() const { return batch_ ? 2 : 1; }
  // The id of the message just ended, if it is an answer's.
  nlohmann::json FoundId() const;

  Filter wanted_;
  int depth_ = 0;
  bool started_ = false;     // the first '{' or '[' was seen
  bool batch_ = false;       // it was '['
  std::vector<nlohmann::json> batch_ids_;
  bool in_string_ = false;
  bool escape_ = false;
  bool expect_key_ = false;  // at MessageDepth(), the next string is a key
  bool in_key_ = false;
  std::string key_;          // the last key at MessageDepth() (raw, cut at kMaxKeyBytes + 1; decoded at its end)
  bool capturing_ = false;   // inside the value of the top-level "id"
  bool too_long_ = false;
  bool has_method_ = false;
  std::string value_;        // the raw text of that value, while capturing
  std::string found_;        // the raw text of the complete value
};

}  // namespace gateway
