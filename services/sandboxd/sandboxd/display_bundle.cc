#include "sandboxd/display_bundle.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/untrusted_json.h"
#include "sandboxd/runner_fields.h"

namespace sandboxd {
namespace {

bool KnownMime(const std::string& mime) {
  return std::any_of(kDisplayMimeTypes.begin(), kDisplayMimeTypes.end(),
                     [&](const char* m) { return mime == m; });
}

// Strict base64 (the alphabet, '=' only as the last one or two of a multiple of four)
// whose bytes start with `magic`.
absl::Status CheckImage(const std::string& mime, const std::string& data,
                        absl::string_view magic) {
  bool form = !data.empty() && data.size() % 4 == 0;
  size_t pad = 0;
  for (size_t i = 0; form && i < data.size(); ++i) {
    char c = data[i];
    if (c == '=') {
      ++pad;
      form = i + 2 >= data.size();
    } else {
      form = pad == 0 && (std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/');
    }
  }
  std::string head;
  if (form) form = absl::Base64Unescape(data.substr(0, 16), &head);
  if (!form) return RunnerViolation(absl::StrCat("display ", mime, " data is not base64"));
  if (head.compare(0, magic.size(), magic.data(), magic.size()) != 0) {
    return RunnerViolation(absl::StrCat("display ", mime, " data is not a ", mime, " image"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DisplayBundle> ParseDisplayBundle(const nlohmann::json& value) {
  if (!value.is_object() || value.empty()) {
    return RunnerViolation("display is not a non-empty {mime: data} object");
  }
  if (value.size() > kDisplayMimeTypes.size()) return RunnerViolation("display has too many types");
  DisplayBundle bundle;
  for (const auto& [mime, data] : value.items()) {
    if (!KnownMime(mime)) {
      return RunnerViolation(absl::StrCat("display type '", mime.substr(0, 64), "' is not allowed"));
    }
    if (!data.is_string()) return RunnerViolation(absl::StrCat("display ", mime, " data is not a string"));
    const std::string& text = data.get_ref<const std::string&>();
    absl::Status ok;
    if (mime == "image/png") {
      ok = CheckImage(mime, text, absl::string_view("\x89PNG\r\n\x1a\n", 8));
    } else if (mime == "image/jpeg") {
      ok = CheckImage(mime, text, absl::string_view("\xff\xd8\xff", 3));
    } else if (mime == "application/json") {
      absl::StatusOr<nlohmann::json> parsed = codemode::ParseUntrustedJson(text, "display json");
      if (!parsed.ok()) ok = RunnerViolation(parsed.status().message());
    }
    if (!ok.ok()) return ok;
    bundle.bytes += mime.size() + text.size();
    bundle.data.emplace_back(mime, text);
  }
  return bundle;
}

}  // namespace sandboxd
