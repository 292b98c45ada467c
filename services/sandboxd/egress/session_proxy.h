// The egress proxy of one session (docs/egress.md, "The proxy"): listens on a unix socket
// in the session's socket directory (or, for tests, on a loopback TCP port), and serves
// each connection with the session's policy (proxy_connection.h), within the session's and
// its owner's connection caps. Runs on the caller's io_context; owns no thread.
//
//   SessionProxy proxy(io, {.session = "s1", .owner = "alice", .policy = *Policy::Parse(...),
//                           .owner_slots = alice_slots, .resolver = &resolver, .sink = &audit});
//   proxy.ListenUnix(socket_dir + "/egress.sock");      // the sandbox dials, or
//   proxy.Adopt(std::move(runner_listener));            // the sandbox's clients dial, or
//   proxy.DialUnix(socket_dir + "/egress-relay.sock", 4);   // the host dials in
//   proxy.Narrow(*Policy::Parse("pypi.org"));   // PermissionDenied if wider than now
//
// Safe for concurrent use. Destroying it stops it: the listeners close and open
// connections are cut.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/process.h"  // UniqueFd
#include "egress/policy.h"
#include "egress/proxy_seams.h"

namespace sandboxd {
namespace egress {

class SessionProxy {
 public:
  struct Options {
    std::string session;
    std::string owner;
    Policy policy;
    ProxyLimits limits;
    std::shared_ptr<ConnectionSlots> owner_slots;  // null: no cap per owner
    std::shared_ptr<ByteQuota> owner_bytes;        // null: no byte quota per owner
    // What the session's byte quota starts from (ByteQuota::Restore): the count a restarted
    // daemon found in the session's record. Not added to owner_bytes.
    uint64_t bytes_used = 0;
    // Both outlive the proxy's connections, which end on the io_context after Stop: keep
    // them as long as the io_context runs.
    Resolver* resolver = nullptr;
    DecisionSink* sink = nullptr;  // may be null
  };

  SessionProxy(boost::asio::io_context& io, Options options);
  ~SessionProxy();
  SessionProxy(const SessionProxy&) = delete;
  SessionProxy& operator=(const SessionProxy&) = delete;

  // Listens on a new unix socket at `path` (an existing file is an error).
  absl::Status ListenUnix(const std::string& path);
  // Listens on 127.0.0.1 on a free port; returns the port.
  absl::StatusOr<uint16_t> ListenLoopback();
  // Accepts on `listener`, a listening TCP socket on a loopback address made elsewhere (a
  // runner's in its own network namespace, handed over), and takes it over.
  // INVALID_ARGUMENT saying what it is when it is not one.
  absl::Status Adopt(codemode::UniqueFd listener);
  // The host dials in instead (parked_dialer.h): keeps `parked` connections open to the
  // relay's unix socket at `path` and serves each one the relay wakes.
  absl::Status DialUnix(const std::string& path, size_t parked);

  // Replaces the policy with `narrower` if it is within the current one (PermissionDenied
  // naming the first wider entry otherwise), and cuts open connections it no longer allows.
  absl::Status Narrow(const Policy& narrower);
  Policy policy() const;
  // Connections open now (the session's slots taken).
  size_t open_connections() const;
  // The bytes the session's quota has counted (Options::bytes_used included).
  uint64_t bytes_used() const;

  // Closes the listeners and cuts every open connection. Idempotent.
  void Stop();

 private:
  class State;
  std::shared_ptr<State> state_;
};

}  // namespace egress
}  // namespace sandboxd
