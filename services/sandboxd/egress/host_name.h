// Host names as egress policies and proxy requests carry them (docs/egress.md, "Names"):
// one canonical form, so that a policy entry and a request compare as strings.
//
//   NormalizeHostName("API.Example.COM.")  // "api.example.com"
//   NormalizeHostName("bücher.de")         // error: write it in punycode (xn--bcher-kva.de)
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandboxd {
namespace egress {

constexpr size_t kMaxHostNameBytes = 253;

// Lower case, one trailing dot dropped. Refused, with the reason: empty names and labels,
// labels over 63 bytes or names over 253, bytes other than letters, digits and inner
// hyphens (internationalized names are written in punycode), and names whose last label
// is numeric ("127.1", "0x7f.1": resolvers read them as IPv4 addresses).
absl::StatusOr<std::string> NormalizeHostName(absl::string_view host);

// Whether `host` (canonical) is `suffix` (canonical) under one or more more labels.
bool IsSubdomainOf(absl::string_view host, absl::string_view suffix);

}  // namespace egress
}  // namespace sandboxd
