#include "base/log_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/utf8.h"
#include "spdlog/spdlog.h"

namespace codemode {
namespace {

// The escaped form of the character at text[i]; `*len` gets its length in `text`.
std::string EscapeOne(absl::string_view text, size_t i, size_t* len) {
  const auto c = static_cast<unsigned char>(text[i]);
  *len = 1;
  if (c < 0x80) {
    switch (c) {
      case '\n': return "\\n";
      case '\r': return "\\r";
      case '\t': return "\\t";
      case '\\': return "\\\\";
      default:
        if (c < 0x20 || c == 0x7F) return absl::StrFormat("\\x%02x", c);
        return std::string(1, static_cast<char>(c));
    }
  }
  uint32_t cp = 0;
  const size_t n = DecodeUtf8(text, i, &cp);
  if (n == 0) return absl::StrFormat("\\x%02x", c);
  *len = n;
  if (IsHostileCodePoint(cp)) return absl::StrFormat("\\u{%04x}", cp);
  return std::string(text.substr(i, n));
}

}  // namespace

std::string LogText(absl::string_view text, size_t max) {
  std::string out;
  out.reserve(std::min(text.size(), max));
  for (size_t i = 0; i < text.size();) {
    size_t len;
    std::string piece = EscapeOne(text, i, &len);
    if (out.size() + piece.size() > max) {
      absl::StrAppend(&out, "\u2026 (", text.size(), " bytes)");
      return out;
    }
    out += piece;
    i += len;
  }
  return out;
}

std::string LogQuoted(absl::string_view text, size_t max) {
  return absl::StrReplaceAll(LogText(text, max), {{"'", "\\'"}});
}

void LogLibraryLine(absl::string_view library, bool error, absl::string_view text) {
  // Never destroyed: a library's thread may log while static destructors run.
  static LogRateLimit* const limit = new LogRateLimit(10, 20);
  // A line that would not be written spends nothing of the rate.
  if (!error && !spdlog::should_log(spdlog::level::debug)) return;
  uint64_t dropped = 0;
  if (!limit->Allow(absl::Now(), &dropped)) return;
  // The libraries share the rate, so the count is of all their lines.
  const std::string more = dropped ? absl::StrCat(" (", dropped, " more library lines dropped)") : "";
  if (error) {
    spdlog::warn("{}: {}{}", std::string(library), LogLongText(text), more);
  } else {
    spdlog::debug("{}: {}{}", std::string(library), LogLongText(text), more);
  }
}

LogRateLimit::LogRateLimit(double per_second, double burst)
    : per_second_(std::max(0.0, per_second)),
      burst_(per_second <= 0 ? 0.0 : burst > 0 ? std::max(1.0, burst) : std::max(1.0, per_second)),
      tokens_(burst_) {}

bool LogRateLimit::Allow(absl::Time now, uint64_t* dropped) {
  MutexLock lock(&mu_);
  if (last_ != absl::InfinitePast() && now > last_) {
    tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * per_second_);
  }
  if (last_ == absl::InfinitePast() || now > last_) last_ = now;
  if (tokens_ < 1.0) {
    ++dropped_;
    return false;
  }
  tokens_ -= 1.0;
  *dropped = dropped_;
  dropped_ = 0;
  return true;
}

}  // namespace codemode
