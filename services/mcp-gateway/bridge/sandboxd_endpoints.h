// SandboxdEndpoints: every sandboxd endpoint a SandboxClient has dialled, each with its
// channels and what placement remembers of it. Append-only: an index is a SandboxRef's
// endpoint for the client's whole life, so an endpoint that left the placement set (an
// address gone from DNS) keeps serving the sandboxes and handles that name it. Its channels
// are another matter: those of an endpoint outside the placement set that no call has used
// for a while are released (Release), and dialled again by the next call that names it, so
// addresses that come and go (pods replaced, a DNS name that churns) cost a small record
// each, not two channels and a descriptor. An endpoint that served a sandbox's call (not
// only placement's GetInfo) keeps its channels, and is listed (Serving), for the idle
// timeout after that call; listings themselves never count as a use, or a client listing
// often would keep every address it ever saw dialled and asked.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "absl/time/time.h"
#include "base/mutex.h"
#include "bridge/sandbox_client.h"
#include "grpcpp/grpcpp.h"
#include "sandbox/v1/sandbox.grpc.pb.h"

namespace gateway {

class SandboxdEndpoints {
 public:
  // TCP endpoints speak TLS with `tls` (its server_name, when set, is what the certificate
  // must carry) and carry `tcp_token` (sandboxd's --tcp_token_file) with every call.
  // A channel with no call for `idle_timeout` goes idle (no connection, no reconnects,
  // no pings) until its next call.
  static constexpr std::chrono::milliseconds kIdleTimeout{60000};
  // The largest answer taken from an endpoint (a file's chunk, a run's output) ...
  static constexpr int kMaxReceiveBytes = 64 << 20;
  // ... and from its GetInfo, which placement asks every 250 ms while sandboxes are made
  // (a real one is under 1 KiB): a larger one fails there, and the endpoint reads as
  // not answering, instead of the gateway taking and parsing megabytes four times a second.
  static constexpr int kMaxInfoBytes = 1 << 20;
  SandboxdEndpoints(const SandboxdTls& tls, std::string tcp_token,
                    std::chrono::milliseconds idle_timeout = kIdleTimeout);

  // The index of `name`, dialled now when new (a channel, connecting at its first call).
  size_t Add(const std::string& name);
  std::optional<size_t> Find(const std::string& name) const;
  size_t size() const;
  std::string Name(size_t i) const;

  // A stub keeps its endpoint's channels: hold it for as long as a call made with it (a
  // stream, an asynchronous call) lasts. The endpoint is dialled again if they were released.
  using StubPtr = std::shared_ptr<sandbox::v1::SandboxService::Stub>;
  // Endpoint i's stub after giving a channel in reconnect backoff up to two seconds to
  // connect, so the first call after sandboxd comes back does not fail fast.
  StubPtr Stub(size_t i);
  // Endpoint i's stub as it is (for calls that wait on their own, or must not).
  StubPtr StubNow(size_t i);
  // Endpoint i's stub for GetInfo: a channel of its own, taking at most kMaxInfoBytes.
  StubPtr InfoStub(size_t i);
  // Endpoint i's stub for a listing: dialled if released, and not a use at all.
  StubPtr ListStub(size_t i);
  // Starts connecting endpoint i's GetInfo channel now when it is TCP, so that placement's
  // first GetInfo there does not pay the TLS handshake inside its deadline; not a use, and
  // no call (nothing, the token included, goes to a peer before a call).
  void ConnectForPlacement(size_t i);
  // Endpoint i answered a sandbox's call just now (its status came from the host, whatever
  // it says): it is Serving for the idle timeout. Taking a stub is not enough: a call to a
  // host that died never reaches it.
  void Answered(size_t i);
  // The endpoints that answered a sandbox's call within the idle timeout, in index order:
  // those a listing asks beside the placement set.
  std::vector<size_t> Serving() const;
  // Whether endpoint i's main channel is dialled and not idle (a call within its idle
  // timeout), without dialling it.
  bool InUse(size_t i) const;
  // Whether endpoint i has channels now (tests).
  bool dialled(size_t i) const;

  // Releases the channels of every endpoint not in `members` that no call holds, none has
  // taken a stub of for `unused`, and that is not Serving (the next call dials again).
  // Returns how many were released.
  size_t Release(const std::vector<size_t>& members, absl::Duration unused);
  // A context for a call to endpoint `i`: its deadline, and the token for a TCP endpoint.
  void Prepare(grpc::ClientContext& ctx, size_t i, std::chrono::system_clock::time_point deadline) const;

  // Sessions created there by this client; when a create there last failed for its own
  // reasons. Failed records one at `now` and says whether to warn of it: true for the first
  // failure, and then once per kFailedCreatePenalty while the endpoint keeps failing (each
  // failure restarts its penalty, so the penalty's start cannot tell).
  int created(size_t i) const;
  void Created(size_t i);
  absl::Time failed_at(size_t i) const;
  bool Failed(size_t i, absl::Time now = absl::Now());
  // When its GetInfo last went unanswered within its deadline, or with an answer too large
  // to take (InfoStub), which costs what silence does and is paused as silence is
  // (InfinitePast: it answered last time). Heard takes how a GetInfo ended and logs, at
  // debug, each change of how the endpoint answers (answers, fails with a code and message,
  // silent).
  absl::Time silent_at(size_t i) const;
  void Heard(size_t i, const grpc::Status& status);

 private:
  // An endpoint's channels, shared by the calls that use them.
  struct Dial {
    std::shared_ptr<grpc::Channel> channel;
    sandbox::v1::SandboxService::Stub stub;
    std::shared_ptr<grpc::Channel> info_channel;  // InfoStub's, a channel of its own
    sandbox::v1::SandboxService::Stub info_stub;
  };
  struct Endpoint {
    std::string name;
    bool tcp = false;
    std::shared_ptr<Dial> dial;  // null: released (or never dialled)
    absl::Time used_at = absl::InfinitePast();    // when a stub was last taken, ListStub's aside
    absl::Time served_at = absl::InfinitePast();  // when it last Answered a sandbox's call
    int created = 0;
    absl::Time failed_at = absl::InfinitePast();
    absl::Time warned_at = absl::InfinitePast();  // the last failure Failed said to warn of
    absl::Time silent_at = absl::InfinitePast();
    int heard = -1;  // the status code its last GetInfo ended with, -1 before the first
  };
  Endpoint& At(size_t i) const;
  enum class Use { kCall, kList };
  // Endpoint i's channels, dialled now if released; recorded as `use`.
  std::shared_ptr<Dial> DialOf(size_t i, Use use);

  const SandboxdTls tls_;
  const std::string tcp_token_;
  const std::chrono::milliseconds idle_timeout_;
  mutable codemode::Mutex mu_;
  // Pointers, so that an Endpoint stays where it is while others are added.
  std::vector<std::unique_ptr<Endpoint>> endpoints_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, size_t> index_ ABSL_GUARDED_BY(mu_);  // name -> index
  // The endpoints with channels now: what Release and Serving look at, however many
  // addresses were ever recorded.
  std::set<size_t> dialled_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gateway
