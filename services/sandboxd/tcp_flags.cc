// The --listen_tcp port's flags (tcp_flags.h).
#include "tcp_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "paths.h"
#include "sandboxd/tls_identity.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, listen_tcp, "",
          "Also serve on this TCP address (for example 127.0.0.1:50051). Every call must carry "
          "'authorization: Bearer <token>' with the token of --tcp_token_file (required with "
          "--listen_tcp). Always TLS, on loopback too: with --tls_cert_file and --tls_key_file "
          "when given, else with sandboxd's own certificate, made in <state_dir>/tls/cert.pem "
          "(clients pin it: mcp-gateway --sandboxd_tls_ca_file, grpcurl -cacert).");
ABSL_FLAG(absl::Duration, tcp_handshake_timeout, absl::Seconds(10),
          "A --listen_tcp connection that has not finished its handshake (TLS, HTTP/2) by then "
          "is closed: a peer without the token or a certificate holds a descriptor no longer.");
ABSL_FLAG(absl::Duration, tcp_idle_timeout, absl::Seconds(60),
          "A connection with no call for this long is closed (a gateway reconnects at its next "
          "call).");
ABSL_FLAG(absl::Duration, tcp_auth_timeout, absl::Seconds(10),
          "A --listen_tcp connection without a call with the token by then is closed, whatever "
          "it sends; one whose call was refused (no token, a wrong one) is closed at once.");
ABSL_FLAG(uint32_t, tcp_max_unauthenticated, 32,
          "--listen_tcp connections open at once without a call with the token; a new one past "
          "it closes the oldest.");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain of --listen_tcp's TLS (with --tls_key_file). Default: "
          "sandboxd's own, <state_dir>/tls/cert.pem.");
ABSL_FLAG(std::string, tls_key_file, "",
          "PEM private key of --listen_tcp's TLS: a file of ours that no other user may read "
          "or write.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA certificates; a --listen_tcp client must then present a certificate one of "
          "them signed (mutual TLS), besides the token.");
ABSL_FLAG(std::string, tcp_token_file, "",
          "The --listen_tcp token: a file of ours, mode 0600, holding one token of at least 32 "
          "characters; when missing it is created (0600, a random token) in an existing "
          "directory.");

namespace {

// TLS for --listen_tcp, which never speaks plaintext: a client proves nothing by reaching
// a port, and neither does the process listening there, so the token and the code go only
// to a peer that holds the key of a certificate the client trusts. The operator's
// certificate (--tls_cert_file, --tls_key_file), else sandboxd's own identity in
// <state_dir>/tls, which clients pin.
absl::StatusOr<sandboxd::TcpTls> TcpTlsFromFlags(const std::string& state_dir) {
  const std::string cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  const std::string key_file = absl::GetFlag(FLAGS_tls_key_file);
  const std::string client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  if (!cert_file.empty() || !key_file.empty()) {
    return sandboxd::LoadTcpTls(cert_file, key_file, client_ca_file);
  }
  absl::StatusOr<sandboxd::TcpTls> tls = sandboxd::LoadTcpTls("", "", client_ca_file);
  if (!tls.ok()) return tls.status();
  absl::StatusOr<sandboxd::TlsIdentity> id = sandboxd::LoadOrCreateTlsIdentity(
      state_dir + "/tls", {sandboxd::TlsNameOfListenAddress(absl::GetFlag(FLAGS_listen_tcp))});
  if (!id.ok()) return id.status();
  if (!id->replaced.empty()) {
    spdlog::warn("--listen_tcp: sandboxd's own TLS identity in {} is replaced ({}): clients that "
                 "pinned the old certificate fail their handshakes until they pin {}",
                 state_dir + "/tls", id->replaced, id->cert_path);
  }
  spdlog::info("--listen_tcp: TLS with sandboxd's own certificate {} ({}); clients pin it: "
               "mcp-gateway --sandboxd_tls_ca_file={}, grpcurl -cacert {}",
               id->cert_path, id->created ? "made now" : "kept", id->cert_path, id->cert_path);
  tls->cert_chain = std::move(id->cert_pem);
  tls->private_key = std::move(id->key_pem);
  return tls;
}

}  // namespace

absl::Status CheckTcpPortFlags() {
  for (const auto& [flag, value] :
       {std::make_pair("--listen_tcp", absl::GetFlag(FLAGS_listen_tcp)),
        std::make_pair("--tcp_token_file", absl::GetFlag(FLAGS_tcp_token_file)),
        std::make_pair("--tls_cert_file", absl::GetFlag(FLAGS_tls_cert_file)),
        std::make_pair("--tls_key_file", absl::GetFlag(FLAGS_tls_key_file)),
        std::make_pair("--tls_client_ca_file", absl::GetFlag(FLAGS_tls_client_ca_file))}) {
    if (absl::Status s = sandboxd::CheckPlainFlag(flag, value); !s.ok()) return s;
  }
  if (absl::GetFlag(FLAGS_listen_tcp).empty()) {
    if (!absl::GetFlag(FLAGS_tls_cert_file).empty() || !absl::GetFlag(FLAGS_tls_key_file).empty() ||
        !absl::GetFlag(FLAGS_tls_client_ca_file).empty()) {
      return absl::InvalidArgumentError("--tls_cert_file and --tls_key_file secure --listen_tcp, which is not set");
    }
  } else if (absl::GetFlag(FLAGS_tcp_token_file).empty()) {
    return absl::InvalidArgumentError(
        "--listen_tcp needs --tcp_token_file: every local user can reach a loopback port");
  }
  return absl::OkStatus();
}

absl::StatusOr<TcpPortFlags> TcpPortFromFlags(const std::string& state_dir) {
  TcpPortFlags tcp;
  tcp.address = absl::GetFlag(FLAGS_listen_tcp);
  tcp.handshake_timeout = absl::GetFlag(FLAGS_tcp_handshake_timeout);
  tcp.idle_timeout = absl::GetFlag(FLAGS_tcp_idle_timeout);
  tcp.limits = {absl::GetFlag(FLAGS_tcp_max_unauthenticated), absl::GetFlag(FLAGS_tcp_auth_timeout)};
  if (tcp.address.empty()) return tcp;
  absl::StatusOr<std::string> token = sandboxd::LoadOrCreateTcpToken(absl::GetFlag(FLAGS_tcp_token_file));
  if (!token.ok()) return token.status();
  tcp.token = *std::move(token);
  absl::StatusOr<sandboxd::TcpTls> tls = TcpTlsFromFlags(state_dir);
  if (!tls.ok()) return tls.status();
  tcp.tls = *std::move(tls);
  return tcp;
}
