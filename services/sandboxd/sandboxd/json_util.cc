#include "sandboxd/json_util.h"

#include "absl/strings/str_cat.h"

namespace sandboxd {

bool JsonDepthWithinLimit(absl::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

absl::StatusOr<nlohmann::json> ParseUntrustedJson(absl::string_view text, absl::string_view what) {
  if (!JsonDepthWithinLimit(text)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " nests deeper than ", kMaxJsonDepth, " levels"));
  }
  nlohmann::json v = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (v.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON"));
  }
  return v;
}

}  // namespace sandboxd
