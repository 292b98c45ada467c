// The bottom of the runner boundary: the frame cap and the field readers every parser of a
// runner frame uses (frame.cc, file_frames.cc, display_bundle.cc). Everything the runner
// sends is untrusted (user code shares its process), so a reader never throws and refuses
// a wrong type or an oversized string with a status. It includes no other sandboxd
// header, so the parsers above it do not include each other back.
//
//   absl::StatusOr<uint64_t> id = RunnerUint(frame, "id");
//   if (!id.ok()) return id.status();   // "runner protocol violation: missing field 'id'"
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace sandboxd {

// Largest frame either side accepts.
inline constexpr size_t kMaxRunnerFrameBytes = 16u << 20;
// Largest first frame of a connection (the runner's `ready`, well under 1 KiB): code of a
// session answering sandboxd's reconnection after a restart gets no large parse out of it.
inline constexpr size_t kMaxGreetingFrameBytes = 64u << 10;

// INVALID_ARGUMENT "runner protocol violation: <what>".
absl::Status RunnerViolation(absl::string_view what);
// A non-negative integer field; absent reads 0 when not `required`.
absl::StatusOr<uint64_t> RunnerUint(const nlohmann::json& obj, const char* key,
                                    bool required = true);
// A string field of at most `max_bytes`; absent or null reads "" when not `required`.
absl::StatusOr<std::string> RunnerString(const nlohmann::json& obj, const char* key,
                                         size_t max_bytes, bool required = true);

}  // namespace sandboxd
