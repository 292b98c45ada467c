// SandboxEgress: the egress policy of the sandboxes the gateway creates (docs/egress.md,
// docs/gateway.md "Egress"). --sandbox_egress applies to every credential; a credential's
// own "sandbox_egress" in the --credential_settings file replaces it. The policy is sent
// as CreateSessionRequest.egress_policy; sandboxd parses it, holds it to its --egress_max
// and refuses it naming the entry, which the run then reports.
//
//   SandboxEgress egress{"pypi.org, *.pythonhosted.org", {{"token 3f2a9c01b7e4", "#"}}};
//   egress.Sent("token 3f2a9c01b7e4");  // "#": no egress for that credential
//   PolicyEntries(egress.Shown("stdio"));  // {"pypi.org", "*.pythonhosted.org"}
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sandbox/v1/sandbox.pb.h"

namespace gateway {

struct SandboxEgress {
  // --sandbox_egress; empty: nothing is sent, so sandboxd's --egress_default applies.
  std::string all;
  // Each credential's own policy ("token 3f2a9c01b7e4", "stdio", "anonymous"), when it has
  // one; an empty one sends nothing, as an empty `all` does.
  std::map<std::string, std::string> by_credential;
  // sandboxd's --egress_default (its GetInfo), when every endpoint that answered at start
  // says the same: what a sandbox gets when nothing is sent. Shown, never sent.
  std::string sandboxd_default;

  // The policy sent for `credential`'s sandboxes: its own when it has one, else `all`.
  const std::string& Sent(const std::string& credential) const;
  // The policy its sandboxes run with, as far as the gateway knows: Sent(), else
  // sandboxd_default. What its tools' descriptions name.
  const std::string& Shown(const std::string& credential) const;
};

// A policy's entries in the order written (docs/egress.md, "Policy syntax": separated by
// commas, spaces or new lines, '#' starting a comment to the end of its line). The
// entries are not checked: sandboxd is the judge of what they allow.
std::vector<std::string> PolicyEntries(const std::string& policy);

// INVALID_ARGUMENT, saying where (`what`), unless `policy` holds only printable ASCII and
// whitespace and at most 64 KiB: sandboxd refuses anything else, and the entries go into
// tool descriptions.
absl::Status CheckPolicyText(const std::string& policy, const std::string& what);

// The per-credential settings file (--credential_settings), JSON:
//   {"credentials": {"token 3f2a9c01b7e4": {"sandbox_egress": "pypi.org, *.pythonhosted.org"},
//                    "stdio": {"sandbox_egress": ""}}}
// Returns each credential's sandbox_egress. INVALID_ARGUMENT naming the credential or key
// for anything else: an unknown key, a value of the wrong type, a policy CheckPolicyText
// refuses.
absl::StatusOr<std::map<std::string, std::string>> ParseCredentialSettings(const std::string& text);

// One line for each credential `egress` has settings for that is not in `known` (the
// credentials this gateway serves: its tokens', "stdio" or "anonymous"): a typo, or a
// token no longer given, whose settings apply to no client.
std::vector<std::string> UnservedCredentials(const SandboxEgress& egress, const std::vector<std::string>& known);

// What sandboxd's GetInfo says of the policies, at start.
struct EgressCheck {
  // One line each, for the log: an endpoint that gives no egress (its --egress_max is
  // empty) while a policy is set, endpoints whose --egress_default differ. Whether each entry lies within --egress_max is sandboxd's to
  // judge, when a sandbox is created (the refusal names the entry).
  std::vector<std::string> problems;
  // The endpoints' --egress_default when every one that answered says the same (the
  // SandboxEgress::sandboxd_default to show); empty otherwise.
  std::string sandboxd_default;
};
// `infos`: each endpoint's name and GetInfo (nullopt: it did not answer).
EgressCheck CheckEgress(const SandboxEgress& egress,
                        const std::vector<std::pair<std::string, std::optional<sandbox::v1::Info>>>& infos);

}  // namespace gateway
