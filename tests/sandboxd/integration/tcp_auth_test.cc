// Integration: --listen_tcp wants a token. Loopback is no boundary between the users of a
// machine, so a TCP sandboxd answers only calls with 'authorization: Bearer <token>' from
// --tcp_token_file (UNAUTHENTICATED without it or with a wrong one), refuses to start
// without a token file or with one other users can read, creates a missing one 0600, and
// its unix socket keeps working without a token (its 0700 directory is the boundary).
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "0123456789abcdef0123456789abcdef-tcp-test";

class TcpAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sandboxd-tcp-auth-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { Sh("rm -rf " + dir_); }

  std::string WriteToken(const std::string& token, mode_t mode) {
    std::string path = dir_ + "/token";
    std::ofstream(path) << token << "\n";
    chmod(path.c_str(), mode);
    return path;
  }
  // The TCP port the daemon logged ("... (port N)").
  static int TcpPort(const SandboxdProcess& d) {
    std::string log = d.Log();
    size_t at = log.find("(port ");
    return at == std::string::npos ? 0 : std::stoi(log.substr(at + 6));
  }
  static grpc::Status GetInfoOverTcp(int port, const std::string& authorization) {
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                       grpc::InsecureChannelCredentials());
    auto stub = sandbox::v1::SandboxService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    sandbox::v1::Info info;
    return stub->GetInfo(&ctx, {}, &info);
  }
  // Runs sandboxd with `args` until it exits (it should refuse to start); its output.
  std::string RunToExit(const std::string& args, int* code) {
    return Sh(absl::StrCat("timeout 60 ", SandboxdBinary(), " --socket=", dir_, "/s/sandboxd.sock",
                           " --state_dir=", dir_, "/state --pool_size=0 ", args, " 2>&1"),
              code);
  }

  std::string dir_;
};

TEST_F(TcpAuthTest, TheTcpPortServesOnlyCallsWithTheToken) {
  SandboxdProcess daemon({"--listen_tcp=127.0.0.1:0", "--tcp_token_file=" + WriteToken(kToken, 0600)});
  ASSERT_TRUE(daemon.Start());
  const int port = TcpPort(daemon);
  ASSERT_GT(port, 0) << daemon.Log();

  grpc::Status none = GetInfoOverTcp(port, "");
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  grpc::Status wrong = GetInfoOverTcp(port, absl::StrCat("Bearer ", kToken, "x"));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong.error_message();
  grpc::Status shorter = GetInfoOverTcp(port, "Bearer 0123");
  EXPECT_EQ(shorter.error_code(), grpc::StatusCode::UNAUTHENTICATED) << shorter.error_message();
  grpc::Status right = GetInfoOverTcp(port, absl::StrCat("Bearer ", kToken));
  EXPECT_TRUE(right.ok()) << right.error_message();

  // The unix socket needs no token.
  auto stub = daemon.Stub();
  grpc::ClientContext ctx;
  sandbox::v1::Info info;
  EXPECT_TRUE(stub->GetInfo(&ctx, {}, &info).ok());
  // And no log line carries the token.
  EXPECT_THAT(daemon.Log(), ::testing::Not(HasSubstr(kToken)));
}

TEST_F(TcpAuthTest, ListenTcpWithoutAUsableTokenFileDoesNotStart) {
  int code = 0;
  std::string out = RunToExit("--listen_tcp=127.0.0.1:0", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("--tcp_token_file"));

  out = RunToExit("--listen_tcp=127.0.0.1:0 --tcp_token_file=" + WriteToken(kToken, 0644), &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("other users"));

  out = RunToExit("--listen_tcp=127.0.0.1:0 --tcp_token_file=" + WriteToken("short", 0600), &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("at least 32 characters"));
}

TEST_F(TcpAuthTest, AMissingTokenFileIsCreatedPrivateAndItsTokenWorks) {
  const std::string path = dir_ + "/new-token";
  SandboxdProcess daemon({"--listen_tcp=127.0.0.1:0", "--tcp_token_file=" + path});
  ASSERT_TRUE(daemon.Start());
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string token;
  std::getline(std::ifstream(path), token);
  EXPECT_EQ(token.size(), 64u);
  const int port = TcpPort(daemon);
  EXPECT_TRUE(GetInfoOverTcp(port, "Bearer " + token).ok());
  EXPECT_EQ(GetInfoOverTcp(port, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace sandboxd::testing
