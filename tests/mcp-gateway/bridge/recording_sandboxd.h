// A sandbox.v1 server in-process that records what it is asked (RecordingSandboxd), and
// the fixture that serves one on a unix socket for SandboxClient's tests, and more of them
// (ExtraSandboxd).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "sandbox/v1/sandbox.grpc.pb.h"

namespace gateway::testing {

class RecordingSandboxd final : public sandbox::v1::SandboxService::Service {
 public:
  grpc::Status CreateSession(grpc::ServerContext* ctx, const sandbox::v1::CreateSessionRequest* req,
                             sandbox::v1::Session* session) override {
    {
      std::lock_guard<std::mutex> lock(record_mu_);
      last_ = *req;
    }
    ++created_;
    if (create_fails != grpc::StatusCode::OK) {
      if (!create_refusal.empty()) ctx->AddTrailingMetadata("sandbox-refusal", create_refusal);
      return grpc::Status(create_fails, create_fails_message);
    }
    if (create_stalls) return Stall(ctx);
    usleep(create_delay_ms * 1000);
    auto auth = ctx->client_metadata().find("authorization");
    std::lock_guard<std::mutex> lock(record_mu_);
    last_authorization_ =
        auth == ctx->client_metadata().end() ? "" : std::string(auth->second.data(), auth->second.size());
    session->set_id("s-1");
    return grpc::Status::OK;
  }
  grpc::Status GetInfo(grpc::ServerContext* ctx, const sandbox::v1::GetInfoRequest*,
                       sandbox::v1::Info* info) override {
    ++info_asked;
    if (info_stalls) return Stall(ctx);
    usleep(info_delay_ms * 1000);
    std::lock_guard<std::mutex> lock(info_mu_);
    if (!info_) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no GetInfo");
    *info = *info_;
    return grpc::Status::OK;
  }
  // What GetInfo answers (nothing: UNIMPLEMENTED, like a sandboxd that cannot say).
  void set_info(uint32_t sessions, uint32_t max_sessions, uint32_t pool_ready, bool serving = true) {
    sandbox::v1::Info info;  // whole before GetInfo can see it
    info.set_sessions(sessions);
    info.set_max_sessions(max_sessions);
    info.set_pool_ready(pool_ready);
    info.set_serving(serving);
    std::lock_guard<std::mutex> lock(info_mu_);
    info_ = std::move(info);
  }
  // A note in GetInfo's answer (set_info first): a large one makes an oversized answer.
  void add_note(const std::string& note) {
    std::lock_guard<std::mutex> lock(info_mu_);
    info_->add_notes(note);
  }
  // GetInfo's egress policies (set_info first).
  void set_egress(const std::string& egress_default, const std::string& egress_max) {
    std::lock_guard<std::mutex> lock(info_mu_);
    info_->set_egress_default(egress_default);
    info_->set_egress_max(egress_max);
  }
  grpc::Status ListSessions(grpc::ServerContext*, const sandbox::v1::ListSessionsRequest*,
                            sandbox::v1::ListSessionsResponse*) override {
    ++listed;
    return grpc::Status::OK;
  }
  std::atomic<int> listed{0};
  std::atomic<bool> info_stalls{false};  // GetInfo answers only when cancelled
  std::atomic<int> info_asked{0};
  int created() const { return created_; }
  sandbox::v1::CreateSessionRequest last() const {
    std::lock_guard<std::mutex> lock(record_mu_);
    return last_;
  }
  std::string last_authorization() const {
    std::lock_guard<std::mutex> lock(record_mu_);
    return last_authorization_;
  }

  // `download_chunks` chunks of 1 MiB of 'x', then the file's info.
  grpc::Status DownloadFile(grpc::ServerContext* ctx, const sandbox::v1::DownloadFileRequest* req,
                            grpc::ServerWriter<sandbox::v1::FileChunk>* writer) override {
    if (req->path() == "missing") return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such file");
    if (req->path() == "stall") return Stall(ctx);
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
  grpc::Status ListFiles(grpc::ServerContext* ctx, const sandbox::v1::ListFilesRequest* req,
                         sandbox::v1::ListFilesResponse* resp) override {
    if (req->path() == "stall") return Stall(ctx);
    resp->add_files()->set_path(req->path() + "/a.txt");
    resp->set_truncated(req->max_entries() == 1);
    return grpc::Status::OK;
  }

  // Reads the whole upload, then waits like a stalled sandbox.
  grpc::Status UploadFile(grpc::ServerContext* ctx,
                          grpc::ServerReader<sandbox::v1::UploadFileRequest>* reader,
                          sandbox::v1::FileInfo*) override {
    sandbox::v1::UploadFileRequest m;
    while (reader->Read(&m)) {
    }
    return Stall(ctx);
  }

  // A call that waits on a sandbox that never answers, until its caller cancels it (or
  // 30 s pass: the call was not cancelled).
  grpc::Status Stall(grpc::ServerContext* ctx) {
    ++stalled;
    for (int i = 0; i < 3000 && !ctx->IsCancelled(); ++i) usleep(10000);
    if (!ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "never cancelled");
    ++saw_cancel;
    return grpc::Status::CANCELLED;
  }

  // The Execute stream, as the test scripts it (a runner that floods tool calls).
  using ExecuteStream =
      grpc::ServerReaderWriter<sandbox::v1::ExecuteResponse, sandbox::v1::ExecuteRequest>;
  grpc::Status Execute(grpc::ServerContext* ctx, ExecuteStream* stream) override {
    sandbox::v1::ExecuteRequest start;
    if (!stream->Read(&start)) return grpc::Status::CANCELLED;
    {
      std::lock_guard<std::mutex> lock(record_mu_);
      last_start_ = start.start();
    }
    return execute ? execute(ctx, stream) : grpc::Status::OK;
  }
  std::function<grpc::Status(grpc::ServerContext*, ExecuteStream*)> execute;
  sandbox::v1::StartExecution last_start() const {  // the last Execute's first message
    std::lock_guard<std::mutex> lock(record_mu_);
    return last_start_;
  }

  int download_chunks = 3;
  grpc::StatusCode create_fails = grpc::StatusCode::OK;  // what CreateSession answers (OK: a session)
  std::atomic<bool> create_stalls{false};  // CreateSession answers only when cancelled
  std::atomic<int> create_delay_ms{0};  // CreateSession and GetInfo answer this late (a slow link)
  std::atomic<int> info_delay_ms{0};
  std::string create_fails_message = "this endpoint cannot create";
  std::string create_refusal;  // the failed CreateSession's `sandbox-refusal` trailer, if any
  std::atomic<int> chunks_written{0};
  std::atomic<int> stalled{0};     // calls that began to wait
  std::atomic<int> saw_cancel{0};  // calls that saw their caller cancel

 private:
  // Calls run on the server's threads, several at once: what they record is guarded.
  mutable std::mutex record_mu_;
  sandbox::v1::CreateSessionRequest last_;  // guarded by record_mu_
  std::string last_authorization_;          // guarded by record_mu_
  sandbox::v1::StartExecution last_start_;  // guarded by record_mu_
  std::mutex info_mu_;  // set_info and the others race GetInfo on the server's threads
  std::optional<sandbox::v1::Info> info_;  // guarded by info_mu_
  std::atomic<int> created_{0};
};

// A fake sandboxd of its own on a unix socket (another endpoint than the fixture's).
struct ExtraSandboxd {
  explicit ExtraSandboxd(const std::string& name)
      : socket("/tmp/gw-sandbox-client-" + std::to_string(getpid()) + "-" + name + ".sock") {
    unlink(socket.c_str());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  ~ExtraSandboxd() {
    if (server) server->Shutdown();
    unlink(socket.c_str());
  }
  std::string endpoint() const { return "unix:" + socket; }
  std::string socket;
  RecordingSandboxd service;
  std::unique_ptr<grpc::Server> server;
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

}  // namespace gateway::testing
