// Utf8Prefix: text cut to a byte length without splitting a UTF-8 sequence, for messages
// that must stay valid UTF-8 (proto3 strings, JSON for clients) once clipped.
//
//   std::string reason(codemode::Utf8Prefix(text, 1024));
#pragma once

#include <cstddef>

#include "absl/strings/string_view.h"

namespace codemode {

// The longest prefix of `text` of at most `max` bytes that ends on a character boundary
// (of valid UTF-8; bytes of invalid input are cut like any other).
inline absl::string_view Utf8Prefix(absl::string_view text, size_t max) {
  if (text.size() <= max) return text;
  while (max > 0 && (static_cast<unsigned char>(text[max]) & 0xC0) == 0x80) --max;
  return text.substr(0, max);
}

}  // namespace codemode
