// Authentication of sandboxd's --listen_tcp port. Loopback is no boundary between the
// users of a machine: without this, any local user could run code in, and read the files
// of, every session. The unix socket needs none (its 0700 directory is the boundary).
//
// The TCP port takes only calls that carry `authorization: Bearer <token>`, the token read
// from --tcp_token_file (created 0600 with a random token when it does not exist yet;
// refused when another user could read it). Without TLS it takes only loopback peers
// (gRPC's local credentials); with TLS (--tls_cert_file, --tls_key_file) peers on other
// machines, whose certificate it also checks with --tls_client_ca_file.
//
//   absl::StatusOr<std::string> token = LoadOrCreateTcpToken("/etc/sandboxd/tcp-token");
//   if (!token.ok()) return token.status();
//   builder.AddListeningPort("127.0.0.1:50051", TcpServerCredentials(*token));
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

// Reads the TLS files. The key file is a secret: a regular file of ours that no other
// user may read or write (as the token file); the certificates are public.
absl::StatusOr<TcpTls> LoadTcpTls(const std::string& cert_file, const std::string& key_file,
                                  const std::string& client_ca_file);

// Credentials for the TCP port, always with the bearer token: with `tls`, TLS to peers on
// any address (and their certificate, when it names a client CA); without it, plaintext
// from loopback peers only.
std::shared_ptr<grpc::ServerCredentials> TcpServerCredentials(const std::string& token,
                                                              const TcpTls* tls = nullptr);

}  // namespace sandboxd
