// Unit tests of tls_identity.h: sandboxd's own key pair and certificate for --listen_tcp,
// made once, kept while they serve, made anew when they no longer do, and refused when the
// key is not ours alone.
#include "sandboxd/tls_identity.h"

#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandboxd {
namespace {

using ::testing::HasSubstr;

class TlsIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sandboxd-tls-identity-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/tls";
  }
  void TearDown() override { (void)!std::system(("rm -rf '" + root_ + "'").c_str()); }

  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Whether the PEM certificate names `name` (an IP address or a DNS name).
  static bool Names(const std::string& pem, const std::string& name, bool ip) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                  &BIO_free);
    std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr),
                                                     &X509_free);
    if (!cert) return false;
    return ip ? X509_check_ip_asc(cert.get(), name.c_str(), 0) == 1
              : X509_check_host(cert.get(), name.data(), name.size(), 0, nullptr) == 1;
  }

  std::string root_;
  std::string dir_;
};

TEST_F(TlsIdentityTest, MadeOncePrivateAndKeptWhileItServes) {
  absl::StatusOr<TlsIdentity> first = LoadOrCreateTlsIdentity(dir_, {"10.1.2.3"});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->cert_path, dir_ + "/cert.pem");
  EXPECT_EQ(ReadAll(dir_ + "/cert.pem"), first->cert_pem);
  EXPECT_EQ(ReadAll(dir_ + "/key.pem"), first->key_pem);
  struct stat st;
  ASSERT_EQ(lstat((dir_ + "/key.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(lstat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u) << "the directory is closed to others";
  for (const char* ip : {"127.0.0.1", "::1", "10.1.2.3"}) EXPECT_TRUE(Names(first->cert_pem, ip, true)) << ip;
  EXPECT_TRUE(Names(first->cert_pem, "localhost", false));
  EXPECT_FALSE(Names(first->cert_pem, "10.1.2.4", true));

  absl::StatusOr<TlsIdentity> again = LoadOrCreateTlsIdentity(dir_, {"10.1.2.3"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->cert_pem, first->cert_pem) << "what clients pinned still serves";
  EXPECT_EQ(again->key_pem, first->key_pem);
}

TEST_F(TlsIdentityTest, ANewNameOrABrokenPairMakesANewOne) {
  absl::StatusOr<TlsIdentity> first = LoadOrCreateTlsIdentity(dir_, {});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<TlsIdentity> renamed = LoadOrCreateTlsIdentity(dir_, {"sandboxd.example"});
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_TRUE(renamed->created);
  EXPECT_EQ(renamed->replaced, "the certificate does not name sandboxd.example") << "the log says why";
  EXPECT_TRUE(Names(renamed->cert_pem, "sandboxd.example", false));
  EXPECT_NE(renamed->cert_pem, first->cert_pem);

  // A certificate that is not the key's (a half-written pair, a copied file) is replaced.
  std::ofstream(dir_ + "/cert.pem", std::ios::trunc) << first->cert_pem;
  absl::StatusOr<TlsIdentity> repaired = LoadOrCreateTlsIdentity(dir_, {"sandboxd.example"});
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_TRUE(repaired->created);
  EXPECT_EQ(repaired->replaced, "the certificate is not the key's");
  ASSERT_EQ(unlink((dir_ + "/cert.pem").c_str()), 0);
  absl::StatusOr<TlsIdentity> lost = LoadOrCreateTlsIdentity(dir_, {"sandboxd.example"});
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_THAT(lost->replaced, HasSubstr("cert.pem")) << "a missing certificate is named, not made silently";
  absl::StatusOr<TlsIdentity> fresh = LoadOrCreateTlsIdentity(root_ + "/fresh", {});
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->replaced, "") << "nothing was there";
}

TEST_F(TlsIdentityTest, AKeyOthersCanReadIsRefusedNotUsed) {
  ASSERT_TRUE(LoadOrCreateTlsIdentity(dir_, {}).ok());
  ASSERT_EQ(chmod((dir_ + "/key.pem").c_str(), 0644), 0);
  absl::StatusOr<TlsIdentity> shared = LoadOrCreateTlsIdentity(dir_, {});
  ASSERT_FALSE(shared.ok());
  EXPECT_THAT(std::string(shared.status().message()), HasSubstr("other users"));
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(chmod((dir_ + "/key.pem").c_str(), 0600), 0);
  absl::StatusOr<TlsIdentity> open_dir = LoadOrCreateTlsIdentity(dir_, {});
  EXPECT_FALSE(open_dir.ok()) << "a directory others may enter is not claimed";
}

TEST(TlsNameOfListenAddressTest, TheHostOrThisMachinesName) {
  EXPECT_EQ(TlsNameOfListenAddress("127.0.0.1:50051"), "127.0.0.1");
  EXPECT_EQ(TlsNameOfListenAddress("[fd00::2]:1"), "fd00::2");
  EXPECT_EQ(TlsNameOfListenAddress("node-3.internal:50051"), "node-3.internal");
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_EQ(TlsNameOfListenAddress("0.0.0.0:50051"), host);
  EXPECT_EQ(TlsNameOfListenAddress("[::]:50051"), host);
}

}  // namespace
}  // namespace sandboxd
