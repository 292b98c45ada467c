// SandboxClient: the gateway's gRPC client of sandboxd (sandbox.v1), the production
// Sandboxes. It hides channels (one per endpoint; several sandboxd instances are supported
// and a session stays on the endpoint that created it) and runs one Execute stream per
// execution, answering the stream's tool calls through a callback that may block (on a
// worker pool that grows to ToolCallLimits::max_in_flight, so calls from asyncio.gather
// overlap end to end, and shrinks to one idle worker as they end; the calls of a
// credential and of everyone are counted across runs, so are the threads).
//
//   SandboxClient client({"unix:/run/user/1000/sandboxd/sandboxd.sock"});
//   ASSIGN_OR_RETURN(SandboxRef ref, client.CreateSession("owner", "label", catalog));
//   ExecuteHandlers h;
//   h.on_output = [](bool is_stderr, const std::string& text) { ... };
//   h.on_tool_call = [](const sandbox::v1::ToolCall& c, const auto& answer_hold) { ... };
//   absl::StatusOr<sandbox::v1::Finished> f = client.Execute(ref, code, timeout_ms, nullptr, h, cancel);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/mutex.h"
#include "bridge/sandboxes.h"
#include "bridge/tool_call_budget.h"
#include "grpcpp/grpcpp.h"
#include "sandbox/v1/sandbox.grpc.pb.h"

namespace gateway {

// Bounds on the tool calls of one execution. Calls past either bound are answered at once
// with an error, which the sandboxed code sees as a ToolError; the gateway never grows a
// thread or a queue per call without limit.
struct ToolCallLimits {
  uint32_t max_in_flight = 64;    // calls being answered at the same time
  uint32_t max_per_run = 10000;   // calls in total
  // What every run's calls share, per credential over all its runs and for everyone:
  // calls in flight (each holds a gateway thread, and a credential may run many
  // sandboxes) and bytes held (ToolCallBudget).
  ToolCallBudgetOptions shared;
  // JSON sizes of one call's arguments and of one result; larger ones become ToolErrors
  // before anything parses them (arguments) or sends them on (results).
  size_t max_argument_bytes = 4u << 20;
  size_t max_result_bytes = 8u << 20;
  // Arguments of the calls in flight together: each parsed copy costs a few times its
  // size, so this bounds what a flood of large calls can make the gateway hold.
  size_t max_argument_bytes_in_flight = 32u << 20;
  // A cancelled run's Execute stream must end within this of its `cancel` message; past
  // it (a stream backed up by code that reads none of its answers) the gRPC call is
  // cancelled instead (the gateway's --sandbox_cancel_grace).
  absl::Duration cancel_grace = absl::Seconds(5);
};

// The gateway's --isolation: "" (sandboxd's default), "container" or "gvisor";
// INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<sandbox::v1::Isolation> ParseIsolationFlag(const std::string& name);

// The token in the gateway's --sandboxd_token_file (one line; surrounding whitespace is
// ignored); FAILED_PRECONDITION when it cannot be read or is empty.
absl::StatusOr<std::string> ReadSandboxdToken(const std::string& path);

class SandboxClient : public Sandboxes {
 public:
  // Endpoints are gRPC targets: "unix:/path/to.sock" or "host:port". Every session is
  // created with `isolation` (UNSPECIFIED: sandboxd's default) and runs the image named
  // `image` among sandboxd's (empty: its default image). Calls to a TCP endpoint carry
  // `tcp_token` as 'authorization: Bearer' (sandboxd's --tcp_token_file); a unix socket
  // never gets it (its directory is the boundary).
  explicit SandboxClient(std::vector<std::string> endpoints, ToolCallLimits limits = {},
                         sandbox::v1::Isolation isolation = sandbox::v1::ISOLATION_UNSPECIFIED,
                         std::string image = "", std::string tcp_token = "");

  // Creates a session on the endpoint with the fewest sessions created by us.
  absl::StatusOr<SandboxRef> CreateSession(const std::string& owner, const std::string& label,
                                           const sandbox::v1::Catalog& catalog) override;
  absl::Status DeleteSession(const SandboxRef& ref) override;
  absl::Status ResetSession(const SandboxRef& ref) override;
  absl::Status UploadFile(const SandboxRef& ref, const std::string& path, const std::string& data,
                          std::shared_ptr<codemode::CancelToken> cancel) override;
  absl::StatusOr<sandbox::v1::ListFilesResponse> ListFiles(
      const SandboxRef& ref, const std::string& path, uint32_t max_entries,
      std::shared_ptr<codemode::CancelToken> cancel) override;
  absl::StatusOr<std::string> DownloadFile(
      const SandboxRef& ref, const std::string& path, size_t max_bytes,
      std::shared_ptr<codemode::CancelToken> cancel) override;

  // One Execute stream; cancelling the token sends `cancel` on it (see Sandboxes).
  absl::StatusOr<sandbox::v1::Finished> Execute(const SandboxRef& ref, const std::string& code,
                                                uint32_t timeout_ms,
                                                const sandbox::v1::Catalog* catalog,
                                                const ExecuteHandlers& handlers,
                                                std::shared_ptr<codemode::CancelToken> cancel) override;

  const std::string& endpoint(size_t i) const { return endpoints_[i]; }

 private:
  // Returns the stub after giving a channel in reconnect backoff up to two seconds to
  // connect, so the first call after sandboxd comes back does not fail fast.
  sandbox::v1::SandboxService::Stub& Stub(size_t i);
  absl::Status Convert(const grpc::Status& s, size_t endpoint) const;
  // A context for a call to endpoint `i`: its deadline, and the token for a TCP endpoint.
  void Prepare(grpc::ClientContext& ctx, size_t i,
               std::chrono::system_clock::time_point deadline) const;

  std::vector<std::string> endpoints_;
  const ToolCallLimits limits_;
  ToolCallBudget budget_;  // shared by every execution
  const sandbox::v1::Isolation isolation_;
  const std::string image_;
  const std::string tcp_token_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<sandbox::v1::SandboxService::Stub>> stubs_;
  codemode::Mutex mu_;
  std::vector<int> created_ ABSL_GUARDED_BY(mu_);  // sessions created per endpoint (for placement)
};

}  // namespace gateway
