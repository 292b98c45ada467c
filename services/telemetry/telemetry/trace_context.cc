#include "telemetry/trace_context.h"

#include <openssl/rand.h>

#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace codemode::telemetry {
namespace {

bool LowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool AllZero(absl::string_view s) { return s.find_first_not_of('0') == absl::string_view::npos; }

// `bytes` random bytes as lowercase hex, never all zero.
std::string RandomHex(size_t bytes) {
  unsigned char buf[16];
  std::string hex;
  do {
    if (RAND_bytes(buf, static_cast<int>(bytes)) != 1) abort();  // no entropy: nothing is safe
    hex = absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(buf), bytes));
  } while (AllZero(hex));
  return hex;
}

}  // namespace

std::optional<TraceContext> TraceContext::Parse(absl::string_view tp) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  if (tp.size() < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-') return std::nullopt;
  const absl::string_view version = tp.substr(0, 2), trace = tp.substr(3, 32),
                          span = tp.substr(36, 16), flags = tp.substr(53, 2);
  if (!LowerHex(version) || version == "ff" || !LowerHex(trace) || !LowerHex(span) ||
      !LowerHex(flags) || AllZero(trace) || AllZero(span)) {
    return std::nullopt;
  }
  // Version 00 is exactly 55 characters; a later version may append "-" and more.
  if (version == "00" ? tp.size() != 55 : (tp.size() > 55 && tp[55] != '-')) return std::nullopt;
  unsigned f = 0;
  std::sscanf(std::string(flags).c_str(), "%2x", &f);
  return TraceContext(std::string(trace), std::string(span), f);
}

TraceContext TraceContext::ChildOf(const std::optional<TraceContext>& parent) {
  if (!parent) return TraceContext(RandomHex(16), RandomHex(8), 1);
  return TraceContext(parent->trace_id_, RandomHex(8), parent->flags_);
}

std::string TraceContext::Traceparent() const {
  char flags[3];
  std::snprintf(flags, sizeof flags, "%02x", flags_ & 0xff);
  return absl::StrCat("00-", trace_id_, "-", span_id_, "-", flags);
}

}  // namespace codemode::telemetry
