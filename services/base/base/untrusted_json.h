// Parsing JSON that comes from outside the process (MCP clients on stdio and HTTP, upstream
// servers, tool-call arguments and results, runner frames) without exceptions and within a
// budget. nlohmann::json parses iteratively but copies, compares and dump()s recursively:
// a hostile document of a million '[' overflows the stack on the first copy. Every
// untrusted edge parses through here, so a value that got in is at most `max_depth` deep
// and anything may be done with it.
//
//   absl::StatusOr<nlohmann::json> v = codemode::ParseUntrustedJson(line, "message");
//   if (!v.ok()) return ParseError(v.status());   // INVALID_ARGUMENT, names "message"
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace codemode {

inline constexpr int kMaxJsonDepth = 128;

struct JsonLimits {
  int max_depth = kMaxJsonDepth;
  // Larger texts are refused before parsing; 0 means no size limit (the caller bounded
  // the text already, as a frame decoder does).
  size_t max_bytes = 0;
  // Values (objects, arrays, strings, numbers, ...) a document may hold. Memory is what
  // the budget is for: a DOM costs tens of bytes per value, so 16 MiB of "[0,0,0,..."
  // would become hundreds of MiB without it.
  size_t max_values = 1u << 20;
  // Accept // and /* */ comments (configuration files written by people).
  bool allow_comments = false;
};

// INVALID_ARGUMENT naming `what` when the text is too large, nests too deeply or is not
// JSON. Never throws. `Json` is nlohmann::json or nlohmann::ordered_json.
template <typename Json = nlohmann::json>
absl::StatusOr<Json> ParseUntrustedJson(absl::string_view text, absl::string_view what,
                                        const JsonLimits& limits = {});
extern template absl::StatusOr<nlohmann::json> ParseUntrustedJson(absl::string_view,
                                                                  absl::string_view,
                                                                  const JsonLimits&);
extern template absl::StatusOr<nlohmann::ordered_json> ParseUntrustedJson(absl::string_view,
                                                                          absl::string_view,
                                                                          const JsonLimits&);

// Type-checked reads of untrusted objects: nullopt when `object` is not an object, lacks
// `key`, or holds another type there. nlohmann's value() and get<>() throw instead.
std::optional<std::string> StringField(const nlohmann::json& object, const char* key);
const nlohmann::json* ObjectField(const nlohmann::json& object, const char* key);
const nlohmann::json* ArrayField(const nlohmann::json& object, const char* key);

// About how many bytes a parsed JSON value holds (strings, keys and a node each), without
// serializing it. Bounded depth: ParseUntrustedJson refuses deep documents.
uint64_t ApproxJsonBytes(const nlohmann::json& value);

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF), so it can go into a JSON string as it is.
bool IsValidUtf8(absl::string_view s);

}  // namespace codemode
