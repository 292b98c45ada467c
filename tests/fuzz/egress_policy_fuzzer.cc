// libFuzzer target: an egress policy as an operator or a client writes it
// (services/sandboxd/egress/policy.h). Whatever Policy::Parse accepts must print as a
// canonical text that parses back to the same text, be within itself, and match each of
// its name entries on a port the entry allows.
#include <cstddef>
#include <cstdint>
#include <string>

#include "egress/policy.h"

using sandboxd::egress::Policy;
using sandboxd::egress::PolicyEntry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Policy> policy = Policy::Parse(text);
  if (!policy.ok()) return 0;
  const std::string canonical = policy->ToString();
  absl::StatusOr<Policy> again = Policy::Parse(canonical);
  if (!again.ok() || again->ToString() != canonical) __builtin_trap();
  if (!policy->WithinMaximum(*again).ok() || !again->WithinMaximum(*policy).ok()) __builtin_trap();
  for (const PolicyEntry& e : policy->entries()) {
    if (!e.Within(e)) __builtin_trap();
    const uint16_t port = e.ports.kind == sandboxd::egress::PortSet::Kind::kOne ? e.ports.port : 443;
    if (e.kind == PolicyEntry::Kind::kHost && policy->MatchName(e.host, port) == nullptr) {
      __builtin_trap();
    }
    if (e.kind == PolicyEntry::Kind::kSubdomains &&
        policy->MatchName("a." + e.host, port) == nullptr) {
      __builtin_trap();
    }
  }
  return 0;
}
