#include "egress/host_name.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sandboxd {
namespace egress {
namespace {

absl::Status CheckLabel(absl::string_view label) {
  if (label.empty()) return absl::InvalidArgumentError("empty label");
  if (label.size() > 63) {
    return absl::InvalidArgumentError(absl::StrCat("label of ", label.size(), " bytes (at most 63)"));
  }
  for (char c : label) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      return absl::InvalidArgumentError(
          "not ASCII: write an internationalized name in punycode (xn--...)");
    }
    if (!absl::ascii_isalnum(c) && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat("character '", absl::CEscape(std::string(1, c)),
                                                     "' is not allowed in a host name"));
    }
  }
  if (label.front() == '-' || label.back() == '-') {
    return absl::InvalidArgumentError(absl::StrCat("label \"", label, "\" starts or ends with '-'"));
  }
  return absl::OkStatus();
}

bool LooksNumeric(absl::string_view label) {
  if (absl::StartsWith(label, "0x")) return true;
  for (char c : label) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> NormalizeHostName(absl::string_view host) {
  if (absl::EndsWith(host, ".")) host.remove_suffix(1);
  if (host.empty()) return absl::InvalidArgumentError("empty host name");
  if (host.size() > kMaxHostNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("host name of ", host.size(), " bytes (at most ", kMaxHostNameBytes, ")"));
  }
  std::string lower = absl::AsciiStrToLower(host);
  std::vector<absl::string_view> labels = absl::StrSplit(lower, '.');
  for (absl::string_view label : labels) {
    if (absl::Status s = CheckLabel(label); !s.ok()) return s;
  }
  if (LooksNumeric(labels.back())) {
    return absl::InvalidArgumentError(
        "the last label is numeric: resolvers read such names as IPv4 addresses");
  }
  return lower;
}

bool IsSubdomainOf(absl::string_view host, absl::string_view suffix) {
  return host.size() > suffix.size() + 1 && absl::EndsWith(host, suffix) &&
         host[host.size() - suffix.size() - 1] == '.';
}

}  // namespace egress
}  // namespace sandboxd
