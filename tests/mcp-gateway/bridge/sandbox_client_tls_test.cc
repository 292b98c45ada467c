// SandboxClient's TCP endpoints: the token goes only over TLS that checked sandboxd's
// certificate, never to a peer that cannot prove it is sandboxd (plaintext, or another
// certificate), and never to a unix socket.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "bridge/sandbox_client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "gtest/gtest.h"
#include "recording_sandboxd.h"

namespace gateway {
namespace {

using ::testing::HasSubstr;
using testing::RecordingSandboxd;
using testing::SandboxClientTest;

// Refuses calls without the bearer token, as sandboxd's --listen_tcp does.
class RequireToken : public grpc::AuthMetadataProcessor {
 public:
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& md, grpc::AuthContext*, OutputMetadata*,
                       OutputMetadata*) override {
    auto it = md.find("authorization");
    if (it == md.end() || it->second != "Bearer secret-token-0123456789") {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token");
    }
    return grpc::Status::OK;
  }
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A fake sandboxd's TCP port on loopback, refusing calls without the token.
struct TcpSandboxd {
  explicit TcpSandboxd(std::shared_ptr<grpc::ServerCredentials> creds) {
    creds->SetAuthMetadataProcessor(std::make_shared<RequireToken>());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", creds, &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    endpoint = "127.0.0.1:" + std::to_string(port);
  }
  ~TcpSandboxd() {
    if (server) server->Shutdown();
  }
  RecordingSandboxd service;
  int port = 0;
  std::string endpoint;
  std::unique_ptr<grpc::Server> server;
};

// The test CA's material (tests/common/make_test_certs.sh) in a fresh directory.
std::string MakeCerts(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name + "-" + std::to_string(getpid());
  EXPECT_EQ(std::system((std::string(PROJECT_SOURCE_DIR) + "/tests/common/make_test_certs.sh " + dir).c_str()), 0);
  return dir;
}

// A TCP endpoint gets the token of --sandboxd_token_file with every call, over TLS that
// checked its certificate; a unix socket never sees it.
TEST_F(SandboxClientTest, TcpEndpointsGetTheTokenOverTlsAndUnixSocketsDoNot) {
  const std::string certs = MakeCerts("tcp-token");
  grpc::SslServerCredentialsOptions server_tls;
  server_tls.pem_key_cert_pairs.push_back({ReadAll(certs + "/server-key.pem"), ReadAll(certs + "/server.pem")});
  TcpSandboxd tcp(grpc::SslServerCredentials(server_tls));
  ASSERT_GT(tcp.port, 0);
  SandboxdTls tls;
  tls.ca = ReadAll(certs + "/ca.pem");

  // The unix socket's sandboxd is full, so placement takes the TCP endpoint however long
  // its TLS handshake takes (a slow sanitizer build's can outlast the placement's wait).
  service_.set_info(/*sessions=*/64, /*max_sessions=*/64, /*pool_ready=*/0);
  tcp.service.set_info(0, 64, 1);
  SandboxClient with_token({tcp.endpoint, "unix:" + socket_}, {}, sandbox::v1::ISOLATION_UNSPECIFIED, "",
                           "secret-token-0123456789", tls);
  absl::StatusOr<SandboxRef> ref = with_token.CreateSession("owner", "label", {}, {}, "python", "");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(tcp.service.last_authorization(), "Bearer secret-token-0123456789");
  SandboxClient unix_only({"unix:" + socket_}, {}, sandbox::v1::ISOLATION_UNSPECIFIED, "",
                          "secret-token-0123456789");
  ASSERT_TRUE(unix_only.CreateSession("owner", "label", {}, {}, "python", "").ok());
  EXPECT_EQ(service_.last_authorization(), "");

  SandboxClient without({tcp.endpoint}, {}, sandbox::v1::ISOLATION_UNSPECIFIED, "", "", tls);
  EXPECT_EQ(without.CreateSession("owner", "label", {}, {}, "python", "").status().code(),
            absl::StatusCode::kUnauthenticated);
}

// Whoever listens on a TCP endpoint's port (another local user, while sandboxd is down)
// proves nothing by being there: a peer that speaks plaintext, or TLS with a certificate
// the gateway's CA did not sign, never gets a request, so neither the token nor any code.
TEST_F(SandboxClientTest, APeerThatCannotProveItIsSandboxdGetsNothing) {
  const std::string certs = MakeCerts("tcp-unproven");
  SandboxdTls tls;
  tls.ca = ReadAll(certs + "/other-ca.pem");  // not the CA of server.pem
  grpc::SslServerCredentialsOptions server_tls;
  server_tls.pem_key_cert_pairs.push_back({ReadAll(certs + "/server-key.pem"), ReadAll(certs + "/server.pem")});
  TcpSandboxd plaintext(grpc::experimental::LocalServerCredentials(LOCAL_TCP));
  TcpSandboxd wrong_cert(grpc::SslServerCredentials(server_tls));
  for (TcpSandboxd* peer : {&plaintext, &wrong_cert}) {
    ASSERT_GT(peer->port, 0);
    SandboxClient client({peer->endpoint}, {}, sandbox::v1::ISOLATION_UNSPECIFIED, "", "secret-token-0123456789",
                         tls);
    absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
    EXPECT_FALSE(ref.ok());
    EXPECT_EQ(peer->service.created(), 0) << peer->endpoint;
    EXPECT_EQ(peer->service.last_authorization(), "") << "the token went to " << peer->endpoint;
  }
}

}  // namespace
}  // namespace gateway
