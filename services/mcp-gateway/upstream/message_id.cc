// MessageIdScanner (see message_id.h): a scanner of JSON's structure only (strings and
// their escapes, nesting, the separators of the top-level object).
#include "upstream/message_id.h"

#include <cctype>

namespace gateway {

void MessageIdScanner::Feed(const char* data, size_t size) {
  for (size_t i = 0; i < size; ++i) Step(data[i]);
}

void MessageIdScanner::Capture(char c) {
  if (value_.size() < kMaxIdBytes) {
    value_.push_back(c);
  } else {
    too_long_ = true;
  }
}

void MessageIdScanner::EndCapture() {
  capturing_ = false;
  if (!too_long_) found_ = value_;
  value_.clear();
}

// A key may spell "id" or "method" with escapes ("\u0069d"), as any JSON parser reads them.
void MessageIdScanner::DecodeKey() {
  if (key_.size() > kMaxKeyBytes || key_.find('\\') == std::string::npos) return;
  nlohmann::json decoded = nlohmann::json::parse("\"" + key_ + "\"", nullptr, /*allow_exceptions=*/false);
  key_ = decoded.is_string() ? decoded.get<std::string>() : std::string();
}

void MessageIdScanner::Step(char c) {
  if (in_string_) {
    if (capturing_) Capture(c);
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      if (in_key_) {
        in_key_ = expect_key_ = false;
        DecodeKey();
        has_method_ |= key_ == "method";
      }
      return;
    }
    if (in_key_ && key_.size() <= kMaxKeyBytes) key_.push_back(c);
    return;
  }
  const int message_depth = MessageDepth();
  switch (c) {
    case '"':
      in_string_ = true;
      if (capturing_) Capture(c);
      if (depth_ == message_depth && expect_key_) {
        in_key_ = true;
        key_.clear();
      }
      return;
    case '{':
    case '[':
      if (capturing_) too_long_ = true;  // an object or array is no id
      if (depth_ == 0 && !started_) {
        started_ = true;
        batch_ = c == '[';
      }
      if (depth_ == MessageDepth() - 1 && c == '{') {  // a message begins
        expect_key_ = true;
        has_method_ = false;
        key_.clear();
        found_.clear();
      }
      ++depth_;
      return;
    case '}':
    case ']':
      if (depth_ == message_depth && capturing_) EndCapture();
      if (batch_ && depth_ == 2 && c == '}' && batch_ids_.size() < kMaxBatchIds) {
        nlohmann::json id = FoundId();
        if (!id.is_null() && (!wanted_ || wanted_(id))) batch_ids_.push_back(std::move(id));
      }
      if (depth_ > 0) --depth_;
      return;
    case ':':
      if (depth_ == message_depth && !expect_key_ && key_ == "id") {
        capturing_ = true;
        too_long_ = false;
        value_.clear();
      }
      return;
    case ',':
      if (depth_ == message_depth) {
        if (capturing_) EndCapture();
        expect_key_ = true;
      }
      return;
    default:
      if (capturing_ && !std::isspace(static_cast<unsigned char>(c))) Capture(c);
  }
}

nlohmann::json MessageIdScanner::FoundId() const {
  nlohmann::json id = nlohmann::json::parse(found_, nullptr, /*allow_exceptions=*/false);
  if (!has_method_ && (id.is_number_integer() || id.is_string())) return id;
  return nullptr;
}

nlohmann::json MessageIdScanner::id() const { return batch_ ? nullptr : FoundId(); }

std::vector<nlohmann::json> MessageIdScanner::ids() const {
  if (batch_) return batch_ids_;
  nlohmann::json id = FoundId();
  if (id.is_null()) return {};
  return {std::move(id)};
}

}  // namespace gateway
