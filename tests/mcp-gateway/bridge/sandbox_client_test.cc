// SandboxClient against an in-process sandbox.v1 server that records what it is asked:
// the gateway's --isolation reaches every CreateSession, bad flag values are refused, and
// downloads stop at the caller's cap without draining the stream.
#include "bridge/sandbox_client.h"

#include <unistd.h>

#include <atomic>
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

  // `download_chunks` chunks of 1 MiB of 'x', then the file's info.
  grpc::Status DownloadFile(grpc::ServerContext* ctx, const sandbox::v1::DownloadFileRequest* req,
                            grpc::ServerWriter<sandbox::v1::FileChunk>* writer) override {
    if (req->path() == "missing") return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such file");
    sandbox::v1::FileChunk chunk;
    chunk.set_data(std::string(1 << 20, 'x'));
    for (int i = 0; i < download_chunks && !ctx->IsCancelled(); ++i) {
      if (!writer->Write(chunk)) break;
      ++chunks_written;
    }
    sandbox::v1::FileChunk last;
    last.mutable_info()->set_path(req->path());
    writer->Write(last);
    return grpc::Status::OK;
  }
  grpc::Status ListFiles(grpc::ServerContext*, const sandbox::v1::ListFilesRequest* req,
                         sandbox::v1::ListFilesResponse* resp) override {
    resp->add_files()->set_path(req->path() + "/a.txt");
    resp->set_truncated(req->max_entries() == 1);
    return grpc::Status::OK;
  }

  int download_chunks = 3;
  std::atomic<int> chunks_written{0};

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

TEST_F(SandboxClientTest, DownloadsReturnTheBytesWithinTheCap) {
  SandboxClient client({"unix:" + socket_});
  absl::StatusOr<std::string> data = client.DownloadFile({0, "s-1"}, "out/a.bin", 8u << 20);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(*data, std::string(3u << 20, 'x'));
  EXPECT_TRUE(absl::IsNotFound(client.DownloadFile({0, "s-1"}, "missing", 1 << 20).status()));
}

TEST_F(SandboxClientTest, ADownloadOverTheCapStopsEarly) {
  service_.download_chunks = 512;  // 512 MiB, were it all sent
  SandboxClient client({"unix:" + socket_});
  absl::StatusOr<std::string> data = client.DownloadFile({0, "s-1"}, "out/big.bin", 2u << 20);
  EXPECT_TRUE(absl::IsResourceExhausted(data.status())) << data.status();
  EXPECT_LT(service_.chunks_written.load(), 64) << "the stream was cancelled, not drained";
}

TEST_F(SandboxClientTest, ListFilesPassesThePathAndTheBound) {
  SandboxClient client({"unix:" + socket_});
  absl::StatusOr<sandbox::v1::ListFilesResponse> list = client.ListFiles({0, "s-1"}, "out", 1);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->files_size(), 1);
  EXPECT_EQ(list->files(0).path(), "out/a.txt");
  EXPECT_TRUE(list->truncated());
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
