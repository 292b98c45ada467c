// Sandbox handles: what a client passes back (run_python's `sandbox` argument) to run in
// the same sandbox again, on any gateway replica that shares the key.
//
// A handle names a sandboxd endpoint and session and is bound to the credential it was
// issued to and to an expiry. It is sealed with AES-256-GCM (OpenSSL): the client can
// neither read nor change it, and the credential is the cipher's associated data, so a
// handle presented by another credential fails to open exactly like a forged one. Every
// reason a handle does not open (altered, another key, another credential, expired,
// malformed) gives the same error: the caller learns nothing about which.
//
//   absl::StatusOr<HandleSealer> sealer = HandleSealer::FromKeyText(key_file_text, absl::Hours(24));
//   std::string h = sealer->Seal({"unix:/run/sandboxd.sock", "s-1a2b"}, "token 3f2a9c01b7e4");
//   absl::StatusOr<SandboxAddress> a = sealer->Open(h, "token 3f2a9c01b7e4");
//
// Format (docs/gateway.md, "Sandbox handles"): "sbx1_" then base64url without padding of
// nonce (12 bytes) || ciphertext || tag (16 bytes); the plaintext is the expiry (unix
// seconds, 8 bytes big-endian) and the endpoint and session id, each behind a 2-byte
// big-endian length. The associated data is "mcp-gateway sandbox handle v1\0" and the
// credential for a Python sandbox (every handle from before JavaScript sessions), and
// "mcp-gateway javascript sandbox handle v1\0" and the credential for a JavaScript one:
// the runtime is authenticated without a new format, and a handle opens as exactly one.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gateway {

// Where a sandbox lives: the sandboxd endpoint as configured (--sandboxd) and its session,
// and the language the session runs (sandboxd's CreateSessionRequest.runtime), so that a
// handle of a Python sandbox is never run as JavaScript nor the other way round.
struct SandboxAddress {
  std::string endpoint;
  std::string session_id;
  std::string runtime = kPythonRuntime;
  static constexpr char kPythonRuntime[] = "python";
  static constexpr char kJavaScriptRuntime[] = "javascript";
  bool operator==(const SandboxAddress& o) const {
    return endpoint == o.endpoint && session_id == o.session_id && runtime == o.runtime;
  }
};

class HandleSealer {
 public:
  using Key = std::array<unsigned char, 32>;
  // The longest handle Open() looks at; longer text is refused before any decoding.
  static constexpr size_t kMaxHandleBytes = 1024;
  // Endpoints and session ids longer than this are not sealed (Seal() returns "").
  static constexpr size_t kMaxFieldBytes = 300;
  // Keys one key file may hold (the first seals, all open: a rotation adds a new first line
  // and drops the old one after --handle_ttl).
  static constexpr size_t kMaxKeys = 4;

  // `keys` (at least one) seal and open; handles live for `ttl` from sealing. `now` is the
  // clock (tests pass their own).
  HandleSealer(std::vector<Key> keys, absl::Duration ttl,
               std::function<absl::Time()> now = [] { return absl::Now(); });

  // The keys of a key file: whitespace-separated, each 64 hex digits, the first sealing.
  // INVALID_ARGUMENT (naming no key material) for anything else.
  static absl::StatusOr<HandleSealer> FromKeyText(absl::string_view text, absl::Duration ttl);

  // The sealer of the key file at `path` (FromKeyText), which is created (mode 0600) with a
  // random key when missing and refused when others can read it (base/secret_file.h);
  // `flag` names the file's flag in messages. Messages never hold key material.
  static absl::StatusOr<HandleSealer> FromKeyFile(const std::string& path, absl::Duration ttl,
                                                  const std::string& flag);

  // A new handle for `address`, bound to `credential`, expiring ttl from now. Two seals of
  // one address differ (a fresh random nonce each). "" when the address is too long to seal
  // or names a runtime other than "python" and "javascript".
  std::string Seal(const SandboxAddress& address, absl::string_view credential) const;

  // The address in `handle` when it was sealed by one of our keys for `credential` and has
  // not expired; PERMISSION_DENIED with kInvalidHandle otherwise, whatever the reason.
  absl::StatusOr<SandboxAddress> Open(absl::string_view handle, absl::string_view credential) const;

  // The one message for every handle that does not open.
  static constexpr char kInvalidHandle[] =
      "this sandbox handle is not valid for your credential (it was altered, has expired, or "
      "was issued to someone else or by a gateway with another key); leave out `sandbox` to "
      "start a new sandbox";

  absl::Duration ttl() const { return ttl_; }

  // The requestState of a multi round-trip request (protocol 2026-07-28; adapter/pending_runs.h):
  // `state` (at most kMaxFieldBytes) sealed the same way for `credential`, expiring `ttl`
  // from now, as "rst1_" + base64url. Associated data of its own ("mcp-gateway request state
  // v1\0" and the credential), so a state never opens as a handle nor a handle as a state.
  std::string SealState(absl::string_view state, absl::string_view credential, absl::Duration ttl) const;
  // What SealState sealed, when it was sealed by one of our keys for `credential` and has
  // not expired; INVALID_ARGUMENT with kInvalidState otherwise, whatever the reason.
  absl::StatusOr<std::string> OpenState(absl::string_view sealed, absl::string_view credential) const;
  static constexpr char kInvalidState[] =
      "this requestState is not valid for your credential (it was altered, has expired, or was "
      "issued to someone else or by a gateway with another key)";

 private:
  // "prefix" + base64url(nonce || AES-256-GCM(expiry, first, second) || tag) under the first
  // key; "" when a field is too long or the library fails.
  std::string SealFields(absl::string_view prefix, absl::string_view aad, absl::string_view first,
                         absl::string_view second, absl::Duration ttl) const;
  // The fields of what SealFields made with `prefix` and `aad` under any key, unexpired.
  bool OpenFields(absl::string_view text, absl::string_view prefix, absl::string_view aad, std::string& first,
                  std::string& second) const;

  std::vector<Key> keys_;
  absl::Duration ttl_;
  std::function<absl::Time()> now_;
};

}  // namespace gateway
