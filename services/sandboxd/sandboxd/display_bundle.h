// Rich outputs (docs/architecture.md, "Displays"): the `["display", {mime: data}]` chunks of the
// runner's output frames, validated like everything else the runner sends. A bundle holds
// only the MIME types of kDisplayMimeTypes; images must be base64 of what their type
// says (PNG or JPEG signature), JSON must parse. Anything else breaks the protocol.
//
//   absl::StatusOr<DisplayBundle> b = ParseDisplayBundle(chunk[1]);
//   if (b.ok()) display_bytes += b->bytes;
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sandboxd {

inline constexpr std::array<const char*, 8> kDisplayMimeTypes = {
    "application/json", "image/jpeg", "image/png",     "image/svg+xml",
    "text/html",        "text/latex", "text/markdown", "text/plain"};

// The most display data one execution may have: a display travels in one runner frame
// (kMaxRunnerFrameBytes, 16 MiB), and JSON escaping may double text.
inline constexpr uint64_t kMaxDisplayBytes = 8u << 20;

struct DisplayBundle {
  std::vector<std::pair<std::string, std::string>> data;  // mime -> data, as sent
  uint64_t bytes = 0;  // the sum of the data sizes (what the display cap counts)
};

// INVALID_ARGUMENT ("runner protocol violation: ...") when `value` is not a valid bundle.
absl::StatusOr<DisplayBundle> ParseDisplayBundle(const nlohmann::json& value);

}  // namespace sandboxd
