// Parsing of JSON that comes from outside (runner frames, gRPC *_json fields) without
// exceptions and with a nesting cap. nlohmann::json's dump, comparison and copy recurse,
// so a hostile document of a million '[' would overflow the stack; we refuse it first.
//
//   absl::StatusOr<nlohmann::json> v = ParseUntrustedJson(text, "arguments_json");
#pragma once

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sandboxd {

inline constexpr int kMaxJsonDepth = 128;

// True when bracket nesting (outside strings) stays within kMaxJsonDepth.
bool JsonDepthWithinLimit(absl::string_view text);

// INVALID_ARGUMENT naming `what` when the text is not JSON or nests too deeply.
absl::StatusOr<nlohmann::json> ParseUntrustedJson(absl::string_view text, absl::string_view what);

}  // namespace sandboxd
