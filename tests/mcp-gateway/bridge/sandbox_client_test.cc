// SandboxClient against an in-process sandbox.v1 server that records what it is asked:
// the gateway's --isolation reaches every CreateSession, and bad flag values are refused.
#include "bridge/sandbox_client.h"

#include <unistd.h>

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using ::testing::HasSubstr;

class RecordingSandboxd final : public sandbox::v1::SandboxService::Service {
 public:
  grpc::Status CreateSession(grpc::ServerContext*, const sandbox::v1::CreateSessionRequest* req,
                             sandbox::v1::Session* session) override {
    last_ = *req;
    session->set_id("s-1");
    return grpc::Status::OK;
  }
  const sandbox::v1::CreateSessionRequest& last() const { return last_; }

 private:
  sandbox::v1::CreateSessionRequest last_;
};

class SandboxClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = "/tmp/gw-sandbox-client-" + std::to_string(getpid()) + ".sock";
    unlink(socket_.c_str());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    unlink(socket_.c_str());
  }

  RecordingSandboxd service_;
  std::unique_ptr<grpc::Server> server_;
  std::string socket_;
};

TEST_F(SandboxClientTest, SessionsAskForTheConfiguredIsolation) {
  SandboxClient gvisor({"unix:" + socket_}, {}, sandbox::v1::ISOLATION_GVISOR);
  absl::StatusOr<SandboxRef> ref = gvisor.CreateSession("owner", "label", {});
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(service_.last().isolation(), sandbox::v1::ISOLATION_GVISOR);
  EXPECT_EQ(service_.last().owner(), "owner");

  SandboxClient plain({"unix:" + socket_});
  ASSERT_TRUE(plain.CreateSession("owner", "label", {}).ok());
  EXPECT_EQ(service_.last().isolation(), sandbox::v1::ISOLATION_UNSPECIFIED);
}

TEST(ParseIsolationFlagTest, NamesTheChoices) {
  EXPECT_EQ(*ParseIsolationFlag(""), sandbox::v1::ISOLATION_UNSPECIFIED);
  EXPECT_EQ(*ParseIsolationFlag("container"), sandbox::v1::ISOLATION_CONTAINER);
  EXPECT_EQ(*ParseIsolationFlag("gvisor"), sandbox::v1::ISOLATION_GVISOR);
  absl::StatusOr<sandbox::v1::Isolation> bad = ParseIsolationFlag("kvm");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("container or gvisor"));
}

}  // namespace
}  // namespace gateway
