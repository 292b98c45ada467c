// Header values of the stateless revision (2026-07-28; header_value.h).
#include "jsonrpc/header_value.h"

#include <cctype>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gateway {

namespace {
constexpr absl::string_view kOpen = "=?base64?";
constexpr absl::string_view kClose = "?=";
}  // namespace

std::string EncodeHeaderValue(const std::string& value) {
  bool plain = !value.empty() && value.front() != ' ' && value.back() != ' ' && !absl::StartsWith(value, "=?");
  for (unsigned char c : value) plain = plain && c >= 0x20 && c <= 0x7e;
  return plain ? value : absl::StrCat(kOpen, absl::Base64Escape(value), kClose);
}

bool DecodeHeaderValue(std::string value, std::string* out) {
  const size_t begin = value.find_first_not_of(" \t");
  const size_t end = value.find_last_not_of(" \t");
  value = begin == std::string::npos ? "" : value.substr(begin, end - begin + 1);
  if (!absl::StartsWith(value, kOpen) || !absl::EndsWith(value, kClose) ||
      value.size() < kOpen.size() + kClose.size()) {
    *out = std::move(value);
    return true;
  }
  const std::string encoded = value.substr(kOpen.size(), value.size() - kOpen.size() - kClose.size());
  if (encoded.size() % 4 != 0) return false;
  for (size_t i = 0; i < encoded.size(); ++i) {
    const char c = encoded[i];
    const bool padding = c == '=' && i + 2 >= encoded.size() &&
                         (i + 1 == encoded.size() || encoded[i + 1] == '=');
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && !padding) return false;
  }
  return absl::Base64Unescape(encoded, out);
}

}  // namespace gateway
