// The sandbox.v1 gRPC adapter: converts messages, maps absl::Status to grpc::Status and
// drives the Execute bidi stream with a callback reactor. All policy lives in
// SessionManager.
//
//   SandboxServiceImpl service(&manager);
//   builder.RegisterService(&service);
#pragma once

#include "grpcpp/grpcpp.h"
#include "sandbox/v1/sandbox.grpc.pb.h"
#include "sandboxd/session_manager.h"

namespace sandboxd {

grpc::Status ToGrpcStatus(const absl::Status& status);

// Unary rpcs are synchronous (they may wait on podman); Execute uses the callback API
// and never blocks a reactor callback.
class SandboxServiceImpl final
    : public sandbox::v1::SandboxService::WithCallbackMethod_Execute<
          sandbox::v1::SandboxService::Service> {
 public:
  // `max_stream_buffer_bytes`: what one Execute stream may hold for a client that does not
  // read it (--max_stream_buffer_bytes); past it that stream ends RESOURCE_EXHAUSTED and
  // its execution is cancelled (the session stays).
  static constexpr size_t kDefaultStreamBufferBytes = 16u << 20;
  explicit SandboxServiceImpl(SessionManager* manager,
                              size_t max_stream_buffer_bytes = kDefaultStreamBufferBytes)
      : manager_(manager), max_stream_buffer_bytes_(max_stream_buffer_bytes) {}

  grpc::Status CreateSession(grpc::ServerContext*, const sandbox::v1::CreateSessionRequest*,
                             sandbox::v1::Session*) override;
  grpc::Status GetSession(grpc::ServerContext*, const sandbox::v1::GetSessionRequest*,
                          sandbox::v1::Session*) override;
  grpc::Status ListSessions(grpc::ServerContext*, const sandbox::v1::ListSessionsRequest*,
                            sandbox::v1::ListSessionsResponse*) override;
  grpc::Status GetSessionStats(grpc::ServerContext*, const sandbox::v1::GetSessionStatsRequest*,
                               sandbox::v1::SessionStats*) override;
  grpc::Status DeleteSession(grpc::ServerContext*, const sandbox::v1::DeleteSessionRequest*,
                             sandbox::v1::DeleteSessionResponse*) override;
  grpc::Status ResetSession(grpc::ServerContext*, const sandbox::v1::ResetSessionRequest*,
                            sandbox::v1::Session*) override;
  grpc::Status SetEgressPolicy(grpc::ServerContext*, const sandbox::v1::SetEgressPolicyRequest*,
                               sandbox::v1::Session*) override;
  grpc::Status Run(grpc::ServerContext*, const sandbox::v1::RunRequest*,
                   sandbox::v1::Finished*) override;
  grpc::Status GetInfo(grpc::ServerContext*, const sandbox::v1::GetInfoRequest*,
                       sandbox::v1::Info*) override;
  grpc::ServerBidiReactor<sandbox::v1::ExecuteRequest, sandbox::v1::ExecuteResponse>* Execute(
      grpc::CallbackServerContext* context) override;
  // grpc_files.cc
  grpc::Status UploadFile(grpc::ServerContext*, grpc::ServerReader<sandbox::v1::UploadFileRequest>*,
                          sandbox::v1::FileInfo*) override;
  grpc::Status DownloadFile(grpc::ServerContext*, const sandbox::v1::DownloadFileRequest*,
                            grpc::ServerWriter<sandbox::v1::FileChunk>*) override;
  grpc::Status ListFiles(grpc::ServerContext*, const sandbox::v1::ListFilesRequest*,
                         sandbox::v1::ListFilesResponse*) override;

 private:
  SessionManager* const manager_;
  const size_t max_stream_buffer_bytes_;
};

}  // namespace sandboxd
