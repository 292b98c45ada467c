// LoadOrCreateTlsIdentity: see tls_identity.h.
#include "sandboxd/tls_identity.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/secret_file.h"

namespace sandboxd {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;

absl::Status OpenSslError(const std::string& what) {
  const unsigned long e = ERR_get_error();
  char text[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, text, sizeof(text));
  ERR_clear_error();
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", text));
}

bool IsIpAddress(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// Whether `cert` names `name` (an IP address or a DNS name) in its subjectAltName.
bool Names(X509* cert, const std::string& name) {
  const int got = IsIpAddress(name) ? X509_check_ip_asc(cert, name.c_str(), 0)
                                    : X509_check_host(cert, name.data(), name.size(), 0, nullptr);
  return got == 1;
}

Cert ParseCert(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

Key ParseKey(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

// Why the pair in `id` cannot serve on (empty: it can): the key must be the
// certificate's, every name in it, and its end not within kTlsIdentityRenewBefore.
std::string WhyNotGood(const TlsIdentity& id, const std::vector<std::string>& names) {
  Cert cert = ParseCert(id.cert_pem);
  Key key = ParseKey(id.key_pem);
  std::string why;
  if (!cert || !key || X509_check_private_key(cert.get(), key.get()) != 1) {
    why = "the certificate is not the key's";
  } else {
    for (const std::string& n : names) {
      if (why.empty() && !Names(cert.get(), n)) why = absl::StrCat("the certificate does not name ", n);
    }
    const time_t renew_at = absl::ToTimeT(absl::Now() + kTlsIdentityRenewBefore);
    if (why.empty() && X509_cmp_time(X509_get0_notAfter(cert.get()), const_cast<time_t*>(&renew_at)) <= 0) {
      why = "the certificate ends within 30 days";
    }
  }
  ERR_clear_error();
  return why;
}

std::string PemOf(int (*write)(BIO*, void*), void* object) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get(), object) != 1) return "";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : "";
}

int WriteKey(BIO* bio, void* key) {
  return PEM_write_bio_PrivateKey(bio, static_cast<EVP_PKEY*>(key), nullptr, nullptr, 0, nullptr, nullptr);
}
int WriteCert(BIO* bio, void* cert) { return PEM_write_bio_X509(bio, static_cast<X509*>(cert)); }

absl::StatusOr<TlsIdentity> Generate(const std::vector<std::string>& names) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("cannot make a TLS key");
  Cert cert(X509_new());
  if (!cert) return OpenSslError("cannot make a TLS certificate");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return OpenSslError("cannot read random bytes");
  serial[0] &= 0x7f;  // a positive serial number
  std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> bn(BN_bin2bn(serial, sizeof(serial), nullptr));
  std::string san;
  for (const std::string& n : names) {
    absl::StrAppend(&san, san.empty() ? "" : ",", IsIpAddress(n) ? "IP:" : "DNS:", n);
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>> alt(
      X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, san.c_str()));
  std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>> basic(
      X509V3_EXT_conf_nid(nullptr, &ctx, NID_basic_constraints, "critical,CA:FALSE"));
  const bool built =
      bn && alt && basic && X509_set_version(cert.get(), 2) == 1 &&
      BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())) != nullptr &&
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr &&
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), absl::ToInt64Seconds(kTlsIdentityValidity)) != nullptr &&
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("sandboxd"), -1, -1, 0) == 1 &&
      X509_set_issuer_name(cert.get(), subject) == 1 && X509_set_pubkey(cert.get(), key.get()) == 1 &&
      X509_add_ext(cert.get(), alt.get(), -1) == 1 && X509_add_ext(cert.get(), basic.get(), -1) == 1 &&
      X509_sign(cert.get(), key.get(), EVP_sha256()) > 0;
  if (!built) return OpenSslError("cannot make a TLS certificate");
  TlsIdentity id;
  id.key_pem = PemOf(WriteKey, key.get());
  id.cert_pem = PemOf(WriteCert, cert.get());
  if (id.key_pem.empty() || id.cert_pem.empty()) return OpenSslError("cannot write a TLS certificate");
  id.created = true;
  return id;
}

// Writes `contents` to dir/name (mode `mode`) under a fresh temporary name, then renames it
// into place: a reader sees the old file or the whole new one.
absl::Status WriteFileInto(const std::string& dir, const std::string& name, const std::string& contents,
                           mode_t mode) {
  const std::string path = dir + "/" + name;
  const std::string tmp = absl::StrCat(dir, "/.", name, ".", getpid(), ".tmp");
  unlink(tmp.c_str());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("cannot create ", tmp, ": ", strerror(errno)));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == contents.size() && fchmod(fd, mode) == 0 && fsync(fd) == 0;
  const int write_errno = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : write_errno;
    unlink(tmp.c_str());
    return absl::FailedPreconditionError(absl::StrCat("cannot write ", path, ": ", strerror(e)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TlsIdentity> LoadOrCreateTlsIdentity(const std::string& dir,
                                                    const std::vector<std::string>& names) {
  std::vector<std::string> all = {"127.0.0.1", "::1", "localhost"};
  for (const std::string& n : names) {
    if (!n.empty() && std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
  }
  if (absl::Status s = codemode::ClaimPrivateDirectory(dir, "sandboxd's TLS directory", "--state_dir"); !s.ok()) {
    return s;
  }
  const std::string cert_path = dir + "/cert.pem";
  const std::string key_path = dir + "/key.pem";
  struct stat st;
  std::string replaced;
  if (lstat(key_path.c_str(), &st) == 0) {
    // A key file that is not ours alone is refused, never replaced or used: say why.
    absl::StatusOr<std::string> key = codemode::ReadPrivateKeyFile(key_path, "sandboxd's TLS key");
    if (!key.ok()) return key.status();
    absl::StatusOr<std::string> cert = codemode::ReadCertificateFile(cert_path, "sandboxd's TLS certificate");
    if (!cert.ok()) {
      replaced = std::string(cert.status().message());
    } else {
      TlsIdentity kept{cert_path, *std::move(cert), *std::move(key), false, ""};
      replaced = WhyNotGood(kept, all);
      if (replaced.empty()) return kept;
    }
  }
  absl::StatusOr<TlsIdentity> made = Generate(all);
  if (!made.ok()) return made.status();
  made->cert_path = cert_path;
  made->replaced = std::move(replaced);
  if (absl::Status s = WriteFileInto(dir, "key.pem", made->key_pem, 0600); !s.ok()) return s;
  if (absl::Status s = WriteFileInto(dir, "cert.pem", made->cert_pem, 0644); !s.ok()) return s;
  return made;
}

std::string TlsNameOfListenAddress(const std::string& listen) {
  std::string host;
  if (!listen.empty() && listen.front() == '[') {
    host = listen.substr(1, listen.find(']') - 1);
  } else {
    const size_t colon = listen.rfind(':');
    host = colon == std::string::npos ? listen : listen.substr(0, colon);
  }
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "*") {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0) return "";
    return name;
  }
  return host;
}

}  // namespace sandboxd
