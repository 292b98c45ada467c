// SandboxClient: the gateway's gRPC client of sandboxd (sandbox.v1), the production
// Sandboxes, in a target of its own (gateway_sandbox_client) so that only the main links
// gRPC. It hides channels (one per endpoint, SandboxdEndpoints; several sandboxd instances
// are supported, found by DNS too (Membership), and a session stays on the endpoint that
// created it) and runs one Execute stream per
// execution, handing the stream's tool calls to a ToolCallDispatcher
// (bridge/tool_call_dispatcher.h: admission and the worker pool) that writes the answers
// back on the stream.
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
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/mutex.h"
#include "bridge/load_watch.h"
#include "bridge/sandboxd_membership.h"
#include "bridge/sandboxes.h"
#include "bridge/tool_call_budget.h"
#include "bridge/tool_call_dispatcher.h"  // ToolCallLimits
#include "grpcpp/grpcpp.h"
#include "sandbox/v1/sandbox.grpc.pb.h"

namespace gateway {

// The gateway's --isolation: "" (sandboxd's default), "container" or "gvisor";
// INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<sandbox::v1::Isolation> ParseIsolationFlag(const std::string& name);

// The token in the gateway's --sandboxd_token_file (its first line; surrounding whitespace
// is ignored): a regular file of ours that no other user may read or write, at most 4 KiB.
// FAILED_PRECONDITION when it cannot be read, fails those checks or is empty.
absl::StatusOr<std::string> ReadSandboxdToken(const std::string& path);

// TLS to sandboxd's TCP endpoints (its --tls_cert_file port), read from the gateway's
// --sandboxd_tls_* files. No `ca`: plaintext, which sandboxd takes from loopback only.
struct SandboxdTls {
  std::string ca;           // PEM roots that signed sandboxd's certificate
  std::string cert_chain;   // PEM client certificate, for sandboxd's --tls_client_ca_file
  std::string private_key;  // its key
  std::string server_name;  // verified instead of the endpoint's host, when set
};

// Reads the files (the key under the secret-file checks: ours, 0600). Empty paths are
// absent parts; a client certificate needs its key and a CA.
absl::StatusOr<SandboxdTls> LoadSandboxdTls(const std::string& ca_file, const std::string& cert_file,
                                            const std::string& key_file, const std::string& server_name);

// Whether a gRPC target names a Unix socket ("unix:", "unix-abstract:").
bool IsUnixEndpoint(const std::string& endpoint);

// OK unless an endpoint would reach a peer that has not proved it is sandboxd. A DNS target
// (dns:///NAME:PORT, ParseDnsEndpoint) resolves to TCP addresses, which a certificate names
// no more than it names pods that come and go: it needs --sandboxd_tls_server_name too. A TCP
// endpoint needs a CA to check sandboxd's certificate with: SandboxClient speaks TLS to
// every TCP endpoint (on loopback too, where any local user can listen while sandboxd is
// down), and without --sandboxd_tls_ca_file only a certificate of the system's trust store
// would do, which sandboxd's own is not. A unix endpoint must be a path (an abstract name
// is anyone's to bind) whose directory only we or root can change (ClaimPrivateDirectory:
// made 0700 when missing) and whose socket, when there, is ours or root's.
// INVALID_ARGUMENT or FAILED_PRECONDITION saying what to use instead.
absl::Status CheckEndpoints(const std::vector<std::string>& endpoints, const SandboxdTls& tls);

// What placement knows of one sandboxd endpoint: its GetInfo, when it answered one.
struct EndpointLoad {
  bool answered = false;  // GetInfo succeeded; the rest is from it
  bool serving = false;
  uint32_t sessions = 0;
  uint32_t max_sessions = 0;
  uint32_t pool_ready = 0;  // warm containers of the runtime asked for
  // Why it says it cannot run that runtime (PoolInfo.unavailable: no runner for it, an image
  // that does not offer it); empty when it can or does not say.
  std::string runtime_unavailable;
  int created = 0;  // sessions this client created there (all it knows without GetInfo)
  bool failed_recently = false;  // a create failed there for its own reasons, lately
  bool stuck = false;  // its creates hang while its GetInfo answers (LoadWatch::Stuck)
};

// Fills `load` from an endpoint's GetInfo, for a session of `runtime` ("" is python): its
// counts, and the warm pool and availability of that runtime (Info.pools; a sandboxd from
// before them reports Python's pool_ready alone).
void ReadLoad(const sandbox::v1::Info& info, const std::string& runtime, EndpointLoad* load);

// Whether a failed CreateSession says the endpoint cannot make sandboxes now (down, slow,
// broken) rather than something of the request or its owner (a bad argument, the owner's
// limit): then the next endpoint is tried, and this one placed after the others for a while.
bool EndpointAtFault(grpc::StatusCode code);
// Whether a failed CreateSession was refused for the daemon's room alone (RESOURCE_EXHAUSTED
// with the trailing metadata `sandbox-refusal: daemon-full`, docs/api.md): the next endpoint
// is tried, and this one is not held at fault.
bool DaemonWasFull(const grpc::Status& status, const grpc::ClientContext& ctx);
// How long an endpoint whose create failed for its own reasons goes after the silent ones.
inline constexpr absl::Duration kFailedCreatePenalty = absl::Seconds(30);

// Shuts a call-local completion queue down and takes what is left on it, as gRPC requires
// before the queue is destroyed.
void ShutdownAndDrain(grpc::CompletionQueue& cq);

// The endpoints in the order a new session tries them: those serving with room, least
// loaded first (live sessions over max_sessions; then more warm containers ready; then
// fewer created by us); then those whose creates hang (LoadWatch::Stuck), so that new
// sandboxes go elsewhere instead of each waiting out its try there, yet still before
// those that did not answer (they may be back); then those whose create failed lately;
// then full ones; those that answered they cannot start
// containers, or cannot run the session's runtime, last.
std::vector<size_t> PlacementOrder(const std::vector<EndpointLoad>& loads);

// What placement read of one endpoint, for the debug log of a placement: "not answered",
// or its sessions, warm containers and what ranks it behind (full, stuck, failed lately).
std::string DescribeLoad(const EndpointLoad& load);

class SandboxdEndpoints;


class SandboxClient : public Sandboxes {
 public:
  // Endpoints are gRPC targets: "unix:/path/to.sock" or "host:port". Every session is
  // created with `isolation` (UNSPECIFIED: sandboxd's default) and runs the image named
  // `image` among sandboxd's (empty: its default image). Calls to a TCP endpoint carry
  // `tcp_token` as 'authorization: Bearer' (sandboxd's --tcp_token_file); a unix socket
  // never gets it (its directory is the boundary). TCP endpoints speak TLS with `tls`
  // when it has a CA. "dns:///NAME:PORT" endpoints are resolved by the system's resolver
  // (Membership with its default options, started here).
  explicit SandboxClient(std::vector<std::string> endpoints, ToolCallLimits limits = {},
                         sandbox::v1::Isolation isolation = sandbox::v1::ISOLATION_UNSPECIFIED,
                         std::string image = "", std::string tcp_token = "", const SandboxdTls& tls = {});
  // New sandboxes go to `membership`'s Current() endpoints.
  SandboxClient(std::unique_ptr<Membership> membership, ToolCallLimits limits, sandbox::v1::Isolation isolation,
                std::string image, std::string tcp_token, const SandboxdTls& tls);
  // ... and a channel without calls for `idle_timeout` goes idle (SandboxdEndpoints;
  // SandboxdEndpoints::kIdleTimeout above).
  SandboxClient(std::unique_ptr<Membership> membership, ToolCallLimits limits, sandbox::v1::Isolation isolation,
                std::string image, std::string tcp_token, const SandboxdTls& tls,
                std::chrono::milliseconds idle_timeout);
  ~SandboxClient() override;

  // Endpoints are numbered as first dialled: every fixed one and resolved address, and every
  // address of a handle that Membership::MayDial; an index never changes.
  std::string EndpointName(size_t endpoint) const override;
  // Whether endpoint i's channel is in use: not idle (SandboxdEndpoints::kIdleTimeout).
  bool EndpointInUse(size_t endpoint) const;
  // Whether the gateway holds endpoint i's channels now: not once they are released (an
  // address outside the placement set that no call used for a while; a call dials again).
  bool EndpointDialled(size_t endpoint) const;
  std::optional<size_t> FindEndpoint(const std::string& name) const override;

  // Creates a session on the least loaded endpoint of the placement set (PlacementOrder over
  // the GetInfo of Membership::Current()'s endpoints: LoadWatch's, at most a second old, or
  // asked at once with a short deadline),
  // trying the next one while an endpoint is unavailable; a create failed for an endpoint's
  // own reasons asks Membership to resolve again soon.
  absl::StatusOr<SandboxRef> CreateSession(const std::string& owner, const std::string& label,
                                           const sandbox::v1::Catalog& catalog,
                                           const Room& room, const std::string& runtime,
                                           const std::string& egress_policy) override;
  absl::Status DeleteSession(const SandboxRef& ref) override;
  absl::Status ResetSession(const SandboxRef& ref) override;
  absl::Status UploadFile(const SandboxRef& ref, const std::string& path, const std::string& data,
                          std::shared_ptr<codemode::CancelToken> cancel) override;
  // Asks the placement set and the endpoints Serving (gone from DNS, a handle used there
  // within the idle timeout: their sandboxes live on).
  Owned ListOwned(const std::string& owner, absl::Time deadline,
                  std::shared_ptr<codemode::CancelToken> cancel) override;
  absl::StatusOr<sandbox::v1::ListFilesResponse> ListFiles(
      const SandboxRef& ref, const std::string& path, uint32_t max_entries, absl::Time deadline,
      std::shared_ptr<codemode::CancelToken> cancel) override;
  absl::StatusOr<std::string> DownloadFile(
      const SandboxRef& ref, const std::string& path, size_t max_bytes, absl::Time deadline,
      std::shared_ptr<codemode::CancelToken> cancel) override;

  // One Execute stream; cancelling the token sends `cancel` on it (see Sandboxes).
  absl::StatusOr<sandbox::v1::Finished> Execute(const SandboxRef& ref, const std::string& code,
                                                uint32_t timeout_ms,
                                                const sandbox::v1::Catalog* catalog,
                                                const ExecuteHandlers& handlers,
                                                std::shared_ptr<codemode::CancelToken> cancel) override;

  // Why sessions of `runtime` cannot run anywhere: set when every endpoint of the placement
  // set answered GetInfo
  // and each said it cannot run them (PoolInfo.unavailable), as "ENDPOINT: REASON" per
  // endpoint. nullopt when one can, or may (it did not answer, or does not say).
  std::optional<std::string> RuntimeUnavailable(const std::string& runtime);

  // The GetInfo of every endpoint of the placement set, by name, asked concurrently; nullopt
  // for one that does not answer within half a second.
  std::vector<std::pair<std::string, std::optional<sandbox::v1::Info>>> Infos();

 private:
  absl::Status Convert(const grpc::Status& s, size_t endpoint) const;
  // Convert for a sandbox's call: an endpoint whose host answered it is Serving
  // (SandboxdEndpoints::Answered), so listings ask it while its handles are used.
  absl::Status CallEnded(const grpc::Status& s, size_t endpoint);
  // The placement set's endpoints (Membership::Current()), dialled when new.
  std::vector<size_t> Members();
  // The GetInfo of each of `members`, asked at once. With `skip_silent`, those that left
  // their last GetInfo unanswered less than kSilentPause ago are not asked (no answer).
  std::vector<std::optional<sandbox::v1::Info>> InfosOf(const std::vector<size_t>& members,
                                                        bool skip_silent = false);
  // CreateSession on endpoint i with its GetInfo asked beside it: placement's view of the
  // endpoint may be up to a second old, so the create is given up (UNAVAILABLE, the endpoint
  // heard from as silent) when the GetInfo's half second passes first; a cut-off host then
  // costs a new sandbox that half second, not the create's deadline.
  grpc::Status CreateWhileAnswering(size_t i, grpc::ClientContext& ctx,
                                    const sandbox::v1::CreateSessionRequest& req,
                                    sandbox::v1::Session* session);
  // Each of `members`' load from its GetInfo (LoadWatch: a recent answer, or asked now); one
  // that did not answer counts as not answered.
  std::vector<EndpointLoad> Loads(const std::vector<size_t>& members, const std::string& runtime);

  const std::unique_ptr<Membership> membership_;
  const std::unique_ptr<SandboxdEndpoints> endpoints_;
  // Placement's view of the endpoints' GetInfo (asks through InfosOf, so goes first).
  const std::unique_ptr<LoadWatch> loads_;
  const ToolCallLimits limits_;
  ToolCallBudget budget_;  // shared by every execution
  const sandbox::v1::Isolation isolation_;
  const std::string image_;
};

}  // namespace gateway
