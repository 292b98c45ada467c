// sandboxd's own TLS identity for --listen_tcp when the operator brings no certificate: a
// key pair and a self-signed certificate kept in a private directory (<state_dir>/tls),
// which clients pin (mcp-gateway --sandboxd_tls_ca_file, grpcurl -cacert). A peer on the
// TCP port then proves it is this sandboxd before anyone sends it the token or code: a
// process of another user listening on the port while sandboxd is down has no key.
//
//   absl::StatusOr<TlsIdentity> id = LoadOrCreateTlsIdentity(state_dir + "/tls", {"127.0.0.1"});
//   if (!id.ok()) return id.status();
//   TcpTls tls{id->cert_pem, id->key_pem, ""};   // clients pin id->cert_path
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sandboxd {

struct TlsIdentity {
  std::string cert_path;  // <dir>/cert.pem, what clients pin
  std::string cert_pem;
  std::string key_pem;
  bool created = false;  // made now (clients that pinned an earlier one must pin this one)
  // Why an identity that was there is replaced (empty: none was, or it was kept).
  std::string replaced;
};

// How long a created certificate is valid. Pinned, not issued by anyone: its end is when a
// client that pinned it stops trusting it, and a start within kTlsIdentityRenewBefore of
// that end (or after it) makes a new one.
inline constexpr absl::Duration kTlsIdentityValidity = absl::Hours(24 * 365 * 5);
inline constexpr absl::Duration kTlsIdentityRenewBefore = absl::Hours(24 * 30);

// The identity in `dir` (cert.pem, and key.pem: a regular file of ours no other user may
// read), when its key is the certificate's, the certificate names every one of `names`
// (IP addresses or DNS names) and is not about to end; otherwise a new one (an ECDSA P-256
// key, a certificate naming `names` plus 127.0.0.1, ::1 and localhost), written under
// temporary names and renamed into place. `dir` must have been claimed by the caller
// (ClaimPrivateDirectory); it is created 0700 when missing. FAILED_PRECONDITION with the
// reason when the files cannot be read or written.
absl::StatusOr<TlsIdentity> LoadOrCreateTlsIdentity(const std::string& dir,
                                                    const std::vector<std::string>& names);

// The name a certificate for the TCP address `listen` ("host:port", "[v6]:port") must
// carry: its host, or this machine's host name when the host is a wildcard (0.0.0.0, ::,
// empty); empty when none can be told.
std::string TlsNameOfListenAddress(const std::string& listen);

}  // namespace sandboxd
