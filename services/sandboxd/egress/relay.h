// Private to sandboxd_egress: the byte pump of one allowed proxy connection. Copies bytes
// both ways between the client and the destination until both sides are done, or a cap
// cuts it: the byte cap (both ways together), the idle timeout (no byte either way) or the
// connection's total time. Runs on the executor of its sockets (one strand), never a thread
// of its own.
//
//   auto relay = std::make_shared<Relay>(std::move(client), std::move(upstream), limits,
//                                        [](Relay::Result r) { report(r); });
//   relay->Start(first_bytes_for_upstream);
//   relay->Cut("policy narrowed");   // on the sockets' executor
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>

#include "egress/proxy_seams.h"

namespace sandboxd {
namespace egress {

class Relay : public std::enable_shared_from_this<Relay> {
 public:
  using Socket = boost::asio::generic::stream_protocol::socket;
  struct Result {
    uint64_t bytes_up = 0;
    uint64_t bytes_down = 0;
    uint64_t bytes_dropped = 0;  // the client's, past a request's body: read, not sent
    std::string end;  // "closed", or the cap that cut it
  };

  // `started` is when the connection was accepted: max_connection_time counts from there.
  // Every byte is also charged to `quotas` (the session's and its owner's); one that is
  // spent ends the relay with its name.
  Relay(Socket client, Socket upstream, const ProxyLimits& limits,
        std::vector<std::shared_ptr<ByteQuota>> quotas,
        std::chrono::steady_clock::time_point started, std::function<void(Result)> done);
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // Sends `first_up` to the destination, then relays. Call once. With `more_up`, at most
  // that many more of the client's bytes go to the destination (the rest of one request's
  // body); then the destination's sending side is shut and what the client sends is read
  // and dropped (still within the byte cap and the quotas), while the answer is relayed to
  // the end. `dropped` counts client bytes read before the relay and not sent (those past
  // a request's body that came with its head): they are charged like the relay's own.
  void Start(std::string first_up, std::optional<uint64_t> more_up = std::nullopt,
             uint64_t dropped = 0);
  // Ends the relay now with `why` as its end; the done callback runs once.
  void Cut(const std::string& why);

 private:
  // Each direction reads into a buffer that starts at kMinBuffer and doubles, up to
  // kMaxBuffer, after a read that filled it: a bulk transfer then moves in a few large
  // reads and writes (the copy's cost is in its system calls, not its bytes), while the
  // many small connections a session may hold keep small buffers. At most 2 x 256 KiB per
  // connection, within the session's and owner's connection caps.
  static constexpr size_t kMinBuffer = 16 << 10;
  static constexpr size_t kMaxBuffer = 256 << 10;
  struct Direction {
    Socket* from;
    Socket* to;
    uint64_t* count;
    std::vector<char> buffer = std::vector<char>(kMinBuffer);
    bool eof = false;
  };
  void Read(Direction* d);
  void OnRead(Direction* d, size_t n);
  void Sent(Direction* d, bool bounded, bool grow);
  void OnEof(Direction* d);
  void EndUp();
  void ArmIdle();
  void Finish(const std::string& end);

  Socket client_;
  Socket upstream_;
  const ProxyLimits limits_;
  const std::vector<std::shared_ptr<ByteQuota>> quotas_;
  std::function<void(Result)> done_;
  Result result_;
  Direction up_;
  Direction down_;
  boost::asio::steady_timer idle_;
  boost::asio::steady_timer total_;
  std::chrono::steady_clock::time_point last_activity_;
  std::optional<uint64_t> more_up_;  // what the destination still gets of the client's bytes
  uint64_t dropped_ = 0;             // client bytes read after that and not sent
  bool finished_ = false;
};

}  // namespace egress
}  // namespace sandboxd
