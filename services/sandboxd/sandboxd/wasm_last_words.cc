#include "sandboxd/wasm_last_words.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace sandboxd {
namespace {

bool IsHex(char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); }

// A path starts at the start of the text or after one of these (a frame's "(", a quote,
// "file:", "key=").
bool StartsAPath(const std::string& text, size_t at) {
  return text[at] == '/' && (at == 0 || absl::StrContains(" \t('\"=,[<:", text[at - 1]));
}

// Where the path at `at` ends: at a space, or at what follows a path in a message
// (":line:column", a closing bracket or quote, a comma).
size_t PathEnd(const std::string& text, size_t at) {
  while (at < text.size() && !absl::ascii_isspace(static_cast<unsigned char>(text[at])) &&
         !absl::StrContains(")'\",:]>", text[at])) {
    at++;
  }
  return at;
}

}  // namespace

std::string RedactWasmLastWords(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    size_t digits = 0;
    while (text.compare(i, 2, "0x") == 0 && i + 2 + digits < text.size() && IsHex(text[i + 2 + digits])) digits++;
    if (digits >= 8) {
      out += "0x\u2026";
      i += 2 + digits;
    } else if (StartsAPath(text, i)) {
      const size_t end = PathEnd(text, i);
      const std::string path = text.substr(i, end - i);
      const size_t slash = path.find_last_of('/');
      out += slash + 1 < path.size() ? path.substr(slash + 1) : "\u2026";
      i = end;
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::string WasmLastWords(const std::string& log_path) {
  std::ifstream in(log_path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - 16384));
  std::string line, words;
  while (std::getline(in, line)) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || absl::StartsWith(l, "wasm-jail: layers:") ||
        absl::StartsWith(l, "[wasm-jail: stderr over") || absl::StrContains(l, "Warning:") ||
        absl::StartsWith(l, "(Use `node --trace") || absl::StartsWith(l, "at ") || l == "#" ||
        (l[0] >= '0' && l[0] <= '9' && absl::StrContains(l, ": 0x"))) {
      continue;
    }
    if (!words.empty()) words += " | ";
    words.append(l.data(), l.size());
  }
  words = RedactWasmLastWords(words);
  return words.size() > 600 ? words.substr(words.size() - 600) : words;
}

}  // namespace sandboxd
