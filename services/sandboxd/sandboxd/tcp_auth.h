// Authentication of sandboxd's --listen_tcp port. Loopback is no boundary between the
// users of a machine: without this, any local user could run code in, and read the files
// of, every session. The unix socket needs none (its 0700 directory is the boundary).
//
// The TCP port takes only calls that carry `authorization: Bearer <token>`, the token read
// from --tcp_token_file (created 0600 with a random token when it does not exist yet;
// refused when another user could read it), and it speaks only TLS, on loopback too: a
// client sends the token only to a peer holding the key of a certificate it trusts (the
// operator's --tls_cert_file, or sandboxd's own, tls_identity.h). With
// --tls_client_ca_file it also checks the client's certificate.
//
//   absl::StatusOr<std::string> token = LoadOrCreateTcpToken("/etc/sandboxd/tcp-token");
//   if (!token.ok()) return token.status();
//   builder.AddListeningPort("127.0.0.1:50051", TcpServerCredentials(*token, tls));
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/auth_metadata_processor.h"

namespace sandboxd {

// The token in `path`: the file must be a regular file of ours that no other user may
// read or write, holding at least 32 characters (surrounding whitespace is ignored). A
// missing file is created (O_EXCL, 0600) with 64 random hex digits, in a directory that
// must exist already (it is never chmod'ed).
absl::StatusOr<std::string> LoadOrCreateTcpToken(const std::string& path);

// Accepts a call whose metadata has `authorization: Bearer <token>` (compared in constant
// time; the header is then hidden from the handlers), UNAUTHENTICATED otherwise.
class BearerTokenProcessor : public grpc::AuthMetadataProcessor {
 public:
  explicit BearerTokenProcessor(std::string token) : expected_("Bearer " + std::move(token)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const std::string expected_;
};

// TLS for the TCP port (--tls_cert_file, --tls_key_file, --tls_client_ca_file), read.
struct TcpTls {
  std::string cert_chain;   // PEM: the server's certificate, then its intermediates
  std::string private_key;  // PEM
  std::string client_ca;    // PEM; when set, a client must present a certificate it signed
};

// Reads the TLS files given (the certificate and key go together; with neither, only the
// client CA is read, for sandboxd's own identity). The key file is a secret: a regular
// file of ours that no other user may read or write (as the token file); the
// certificates are public.
absl::StatusOr<TcpTls> LoadTcpTls(const std::string& cert_file, const std::string& key_file,
                                  const std::string& client_ca_file);

// Credentials for the TCP port: TLS with `tls` (and the client's certificate, when it
// names a client CA), always with the bearer token.
std::shared_ptr<grpc::ServerCredentials> TcpServerCredentials(const std::string& token,
                                                              const TcpTls& tls);

}  // namespace sandboxd
