// SandboxClient's configuration: the isolation flag, the token file, TLS material and the
// rules that a TCP endpoint is reached over TLS with a certificate the operator chose and a
// unix endpoint is a socket only we or root could have made. See sandbox_client.h.
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/secret_file.h"
#include "bridge/sandbox_client.h"

namespace gateway {

absl::StatusOr<sandbox::v1::Isolation> ParseIsolationFlag(const std::string& name) {
  if (name.empty()) return sandbox::v1::ISOLATION_UNSPECIFIED;
  if (name == "container") return sandbox::v1::ISOLATION_CONTAINER;
  if (name == "gvisor") return sandbox::v1::ISOLATION_GVISOR;
  if (name == "wasm") return sandbox::v1::ISOLATION_WASM;
  return absl::InvalidArgumentError(absl::StrCat(
      "--isolation=", name, ": expected container, gvisor or wasm (or empty for sandboxd's default)"));
}

absl::StatusOr<std::string> ReadSandboxdToken(const std::string& path) {
  // A secret, read as sandboxd reads its own copy: a regular file of ours that no other
  // user may read or write, of a bounded size: neither /dev/zero (read without end), a
  // FIFO (the start hangs) nor another user's writable file is a token.
  absl::StatusOr<std::string> contents =
      codemode::ReadPrivateFile(path, {"--sandboxd_token_file", "token", "--sandboxd_token_file"}, 4096);
  if (!contents.ok()) return contents.status();
  const std::string token(absl::StripAsciiWhitespace(contents->substr(0, contents->find('\n'))));
  if (token.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("--sandboxd_token_file ", path, " is empty"));
  }
  return token;
}

namespace {

// Whether the PEM private key belongs to the first certificate of the PEM chain.
bool KeyMatchesCertificate(const std::string& cert_pem, const std::string& key_pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())),
                                                     &BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())),
                                                    &BIO_free);
  if (!cert_bio || !key_bio) return false;
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr),
                                                   &X509_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  const bool match = cert && key && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  return match;
}

}  // namespace

absl::StatusOr<SandboxdTls> LoadSandboxdTls(const std::string& ca_file, const std::string& cert_file,
                                            const std::string& key_file, const std::string& server_name) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError("--sandboxd_tls_cert_file and --sandboxd_tls_key_file go together");
  }
  if (ca_file.empty() && (!cert_file.empty() || !server_name.empty())) {
    return absl::InvalidArgumentError(
        "--sandboxd_tls_cert_file, --sandboxd_tls_key_file and --sandboxd_tls_server_name need "
        "--sandboxd_tls_ca_file");
  }
  SandboxdTls tls;
  tls.server_name = server_name;
  if (ca_file.empty()) return tls;
  absl::StatusOr<std::string> ca = codemode::ReadCertificateFile(ca_file, "--sandboxd_tls_ca_file");
  if (!ca.ok()) return ca.status();
  tls.ca = *std::move(ca);
  if (cert_file.empty()) return tls;
  absl::StatusOr<std::string> cert = codemode::ReadCertificateFile(cert_file, "--sandboxd_tls_cert_file");
  if (!cert.ok()) return cert.status();
  tls.cert_chain = *std::move(cert);
  absl::StatusOr<std::string> key = codemode::ReadPrivateKeyFile(key_file, "--sandboxd_tls_key_file");
  if (!key.ok()) return key.status();
  tls.private_key = *std::move(key);
  // Said here, at the start: gRPC would only say "empty address list" at every call.
  if (!KeyMatchesCertificate(tls.cert_chain, tls.private_key)) {
    return absl::InvalidArgumentError(absl::StrCat("--sandboxd_tls_key_file ", key_file,
                                                   " is not the key of --sandboxd_tls_cert_file ", cert_file));
  }
  return tls;
}

bool IsUnixEndpoint(const std::string& endpoint) {
  return absl::StartsWith(endpoint, "unix:") || absl::StartsWith(endpoint, "unix-abstract:");
}

namespace {

// A unix endpoint's socket path ("unix:PATH", "unix://ABSOLUTE").
std::string SocketPathOf(const std::string& endpoint) {
  return absl::StartsWith(endpoint, "unix://") ? endpoint.substr(7) : endpoint.substr(5);
}

// Whoever can create or replace the socket at a unix endpoint's path gets the code and
// answers for sandboxd: only we (sandboxd runs as us) or root may. The directory is
// claimed as sandboxd claims it (made 0700 when missing, so a daemon starting later finds
// it ours); an existing socket must be ours or root's.
absl::Status CheckUnixEndpoint(const std::string& endpoint) {
  if (absl::StartsWith(endpoint, "unix-abstract:")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sandboxd endpoint ", endpoint, ": any local user can bind an abstract socket name, and "
        "the gateway could not tell sandboxd from it; use unix:PATH (sandboxd's --socket)"));
  }
  const std::string path = SocketPathOf(endpoint);
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (path.empty() || parent.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sandboxd endpoint ", endpoint, " names no socket path (unix:/absolute/path)"));
  }
  if (absl::Status s = codemode::ClaimPrivateDirectory(parent.string(), "the directory of sandboxd's socket",
                                                        "--sandboxd");
      !s.ok()) {
    return s;
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();  // sandboxd makes it; nobody else can
  if (!S_ISSOCK(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--sandboxd endpoint ", endpoint, " is ", S_ISSOCK(st.st_mode) ? "a socket of uid " : "not a socket (uid ",
        st.st_uid, S_ISSOCK(st.st_mode) ? "" : ")", ", not ours or root's: whoever made it would get the code"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckEndpoints(const std::vector<std::string>& endpoints, const SandboxdTls& tls) {
  for (const std::string& e : endpoints) {
    if (absl::StartsWith(e, "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sandboxd endpoint ", e, ": a unix socket is written unix:", e));
    }
    if (IsUnixEndpoint(e)) {
      if (absl::Status s = CheckUnixEndpoint(e); !s.ok()) return s;
      continue;
    }
    if (IsDnsEndpoint(e)) {
      absl::StatusOr<DnsTarget> target = ParseDnsEndpoint(e);
      if (!target.ok()) return target.status();
      if (!tls.ca.empty() && tls.server_name.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--sandboxd endpoint ", e, " resolves to addresses, and sandboxd's certificate is checked "
            "against the name it must carry: give --sandboxd_tls_server_name (e.g. ", target->name,
            ", when its certificate names that)"));
      }
    }
    if (!tls.ca.empty()) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "--sandboxd endpoint ", e, " is a TCP address, which the gateway reaches only over TLS, "
        "checking sandboxd's certificate before the token or any code goes there (on loopback "
        "too: any local user can listen on a port while sandboxd is not there). Pin sandboxd's "
        "certificate with --sandboxd_tls_ca_file (its own is <state_dir>/tls/cert.pem, by "
        "default ~/.local/state/sandboxd/tls/cert.pem, or its --tls_cert_file's CA), or reach "
        "sandboxd over its unix socket (--sandboxd=unix:PATH)"));
  }
  return absl::OkStatus();
}

}  // namespace gateway
