// UTF-8 helpers for text a peer controls. Utf8Prefix: text cut to a byte length without
// splitting a UTF-8 sequence, for messages that must stay valid UTF-8 (proto3 strings,
// JSON for clients) once clipped. DecodeUtf8 and IsHostileCodePoint: for escaping
// such text one character at a time (log lines, generated TypeScript). IsPlainLine: for
// names refused unless they show as themselves on one line (paths sandboxd runs).
//
//   std::string reason(codemode::Utf8Prefix(text, 1024));
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace codemode {

// The longest prefix of `text` of at most `max` bytes that ends on a character boundary
// (of valid UTF-8; bytes of invalid input are cut like any other).
inline absl::string_view Utf8Prefix(absl::string_view text, size_t max) {
  if (text.size() <= max) return text;
  while (max > 0 && (static_cast<unsigned char>(text[max]) & 0xC0) == 0x80) --max;
  return text.substr(0, max);
}

// Length of the well-formed UTF-8 sequence at text[i] (a lead byte >= 0x80) and its code
// point, or 0: overlong forms, surrogates, values past U+10FFFF and truncated sequences
// are not UTF-8 (RFC 3629).
inline size_t DecodeUtf8(absl::string_view text, size_t i, uint32_t* cp) {
  const auto lead = static_cast<unsigned char>(text[i]);
  size_t len;
  uint32_t min;
  if (lead >= 0xC2 && lead <= 0xDF) {
    len = 2, min = 0x80, *cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    len = 3, min = 0x800, *cp = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    len = 4, min = 0x10000, *cp = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() - i < len) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(text[i + k]);
    if ((c & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (c & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return len;
}

// Code points past ASCII that end or reorder a line on a terminal or in a log viewer, or
// hide text: LogText escapes them. Variation selectors stay: they change how the
// character before them looks (an emoji's, an ideograph's), and names hold them.
inline bool IsHostileCodePoint(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) ||       // C1 controls (U+0085 is NEXT LINE)
         cp == 0x00AD || cp == 0x034F ||     // soft hyphen, combining grapheme joiner
         (cp >= 0x0600 && cp <= 0x0605) ||   // Arabic number signs (prepended marks)
         cp == 0x061C || cp == 0x06DD ||     // Arabic letter mark, end of ayah
         cp == 0x070F || cp == 0x0890 || cp == 0x0891 || cp == 0x08E2 ||  // prepended marks
         cp == 0x115F || cp == 0x1160 ||     // Hangul fillers
         cp == 0x17B4 || cp == 0x17B5 ||     // Khmer invisible vowels
         cp == 0x180E ||                     // Mongolian vowel separator
         (cp >= 0x200B && cp <= 0x200F) ||   // zero-width characters, LRM, RLM
         cp == 0x2028 || cp == 0x2029 ||     // line and paragraph separators
         (cp >= 0x202A && cp <= 0x202E) ||   // bidi embeddings and overrides
         (cp >= 0x2060 && cp <= 0x206F) ||   // word joiner, invisible operators, isolates
         cp == 0x2800 ||                     // braille pattern blank
         cp == 0x3164 || cp == 0xFFA0 ||     // Hangul fillers
         cp == 0xFEFF ||                     // zero-width no-break space (byte order mark)
         (cp >= 0xFFF0 && cp <= 0xFFFB) ||   // unassigned specials, interlinear annotations
         cp == 0x110BD || cp == 0x110CD ||   // Kaithi number signs
         (cp >= 0x13430 && cp <= 0x1343F) || // Egyptian hieroglyph format controls
         (cp >= 0x1BCA0 && cp <= 0x1BCA3) || // shorthand format controls
         (cp >= 0x1D173 && cp <= 0x1D17A) || // musical format controls
         (cp >= 0xE0000 && cp <= 0xE00FF) || // tags: invisible text a reader cannot see
         (cp >= 0xE01F0 && cp <= 0xE0FFF);   // reserved, default-ignorable: shown as nothing
}

// What a text that is not a plain line holds (for messages): "holds " + this.
inline constexpr char kNotPlainLine[] =
    "a control character, a line or paragraph separator, a bidi mark or an invisible character";

// True when `text` is valid UTF-8 without a C0 control, DEL or hostile code point: it
// shows as itself on one line.
inline bool IsPlainLine(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) return false;
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t n = DecodeUtf8(text, i, &cp);
    if (n == 0 || IsHostileCodePoint(cp)) return false;
    i += n;
  }
  return true;
}

}  // namespace codemode
