#include "sandboxd/tcp_auth.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/secret_file.h"

namespace sandboxd {
namespace {

constexpr size_t kMinTokenChars = 32;
constexpr size_t kMaxTokenFileBytes = 4096;

absl::StatusOr<std::string> CreateTokenFile(const std::string& path) {
  unsigned char random[32];
  if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
    return absl::InternalError(absl::StrCat("getrandom: ", strerror(errno)));
  }
  std::string token = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(random), sizeof random));
  // O_EXCL: a file someone else planted there first is never written to (nor trusted).
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("cannot create --tcp_token_file ", path, ": ", strerror(errno)));
  std::string line = token + "\n";
  bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!written) return absl::InternalError(absl::StrCat("cannot write --tcp_token_file ", path));
  return token;
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateTcpToken(const std::string& path) {
  // O_NONBLOCK: a FIFO planted there must not hang the start (it is then refused).
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return CreateTokenFile(path);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot open --tcp_token_file ", path, ": ", strerror(errno)));
  }
  struct stat st;
  std::string why;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "is not a regular file";
  } else if (st.st_uid != geteuid()) {
    why = "is not owned by the user sandboxd runs as";
  } else if ((st.st_mode & 077) != 0) {
    why = "may be read or written by other users (chmod 600 it)";
  } else if (st.st_size > static_cast<off_t>(kMaxTokenFileBytes)) {
    why = "is too large for a token";
  }
  std::string contents(kMaxTokenFileBytes, '\0');
  ssize_t n = why.empty() ? read(fd, contents.data(), contents.size()) : 0;
  close(fd);
  if (!why.empty()) return absl::FailedPreconditionError(absl::StrCat("--tcp_token_file ", path, " ", why));
  if (n < 0) return absl::FailedPreconditionError(absl::StrCat("cannot read --tcp_token_file ", path));
  contents.resize(static_cast<size_t>(n));
  std::string token(absl::StripAsciiWhitespace(contents));
  if (token.size() < kMinTokenChars || token.find_first_of(" \t\r\n") != std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--tcp_token_file ", path, " must hold one token of at least ", kMinTokenChars, " characters"));
  }
  return token;
}

grpc::Status BearerTokenProcessor::Process(const InputMetadata& auth_metadata, grpc::AuthContext*,
                                           OutputMetadata* consumed_auth_metadata,
                                           OutputMetadata*) {
  auto it = auth_metadata.find("authorization");
  if (it == auth_metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "sandboxd's TCP port needs 'authorization: Bearer <token>' (--tcp_token_file)");
  }
  const grpc::string_ref& got = it->second;
  // Constant time in the token's bytes: the comparison does not stop at the first miss.
  unsigned char diff = got.size() == expected_.size() ? 0 : 1;
  for (size_t i = 0; i < got.size(); ++i) {
    diff |= static_cast<unsigned char>(got.data()[i] ^ expected_[i % expected_.size()]);
  }
  if (diff != 0) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong token for sandboxd's TCP port");
  }
  consumed_auth_metadata->insert(std::make_pair(std::string(it->first.data(), it->first.size()),
                                                std::string(got.data(), got.size())));
  return grpc::Status::OK;
}

absl::StatusOr<TcpTls> LoadTcpTls(const std::string& cert_file, const std::string& key_file,
                                  const std::string& client_ca_file) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert_file and --tls_key_file go together");
  }
  TcpTls tls;
  if (!key_file.empty()) {
    absl::StatusOr<std::string> key = codemode::ReadPrivateKeyFile(key_file, "--tls_key_file");
    if (!key.ok()) return key.status();
    tls.private_key = *std::move(key);
  }
  for (auto [path, flag, out] : {std::make_tuple(cert_file, "--tls_cert_file", &tls.cert_chain),
                                 std::make_tuple(client_ca_file, "--tls_client_ca_file", &tls.client_ca)}) {
    if (path.empty()) continue;
    absl::StatusOr<std::string> pem = codemode::ReadCertificateFile(path, flag);
    if (!pem.ok()) return pem.status();
    *out = *std::move(pem);
  }
  return tls;
}

std::shared_ptr<grpc::ServerCredentials> TcpServerCredentials(const std::string& token,
                                                              const TcpTls& tls) {
  grpc::SslServerCredentialsOptions options(tls.client_ca.empty()
                                                ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls.client_ca;
  options.pem_key_cert_pairs.push_back({tls.private_key, tls.cert_chain});
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::SslServerCredentials(options);
  creds->SetAuthMetadataProcessor(std::make_shared<BearerTokenProcessor>(token));
  return creds;
}

}  // namespace sandboxd
