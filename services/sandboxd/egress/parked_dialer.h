// Private to sandboxd_egress: the host-dials-in side of a session's egress (docs/egress.md,
// "The relay inside, and which side dials"). Keeps `parked` connections open to the relay's
// unix socket in the session's socket directory; when one of them gets its first byte (the
// relay handed it to a client), passes it on to be served as an accepted connection would
// be, and dials a replacement: at once for one that carries a request, and for one the
// relay closed within a budget (a burst of `parked`, then one per 5 ms). A dial that fails
// is retried after a growing pause (100 ms, doubling to 5 s), so a relay that is not
// listening yet or any more costs little.
//
//   auto dialer = std::make_shared<ParkedDialer>(io, dir + "/egress-relay.sock", 4,
//                                                [](Socket s) { serve(std::move(s)); });
//   dialer->Start();
//   dialer->Stop();   // closes the parked connections; served ones are not its own
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

namespace sandboxd {
namespace egress {

class ParkedDialer : public std::enable_shared_from_this<ParkedDialer> {
 public:
  using Socket = boost::asio::generic::stream_protocol::socket;
  ParkedDialer(boost::asio::io_context& io, std::string path, size_t parked,
               std::function<void(Socket)> on_wake,
               std::chrono::milliseconds dial_interval = std::chrono::milliseconds(5));
  ParkedDialer(const ParkedDialer&) = delete;
  ParkedDialer& operator=(const ParkedDialer&) = delete;

  void Start();
  void Stop();

  // What a parked connection that polled readable holds, read without blocking and without
  // taking it: readiness can be spurious (asio's reactor allows it), and a read that waited
  // would hold the dialer's strand, and an io thread every session's egress shares, until
  // the relay sent something. Readable with nothing in line to peek (an out-of-band byte the
  // relay sent) is not a request: parking it again would wake it again at once, forever.
  enum class Woken { kStillParked, kRequest, kNotARequest };
  static Woken Peek(int fd);

 private:
  using Local = boost::asio::local::stream_protocol::socket;
  void Refill();
  void Later(std::chrono::milliseconds pause);
  void Dial();
  void OnDialed(std::shared_ptr<Local> socket, boost::system::error_code ec);
  void Park(std::shared_ptr<Local> socket);
  void OnWoken(std::shared_ptr<Local> socket, boost::system::error_code ec);

  boost::asio::io_context& io_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;  // all state below
  const std::string path_;
  const size_t parked_;
  const std::chrono::milliseconds dial_interval_;
  std::function<void(Socket)> on_wake_;
  boost::asio::steady_timer retry_;
  std::chrono::milliseconds pause_{100};
  size_t dialing_or_parked_ = 0;
  size_t tokens_ = parked_;  // dials allowed now (Refill)
  std::chrono::steady_clock::time_point budget_since_ = std::chrono::steady_clock::now();
  std::vector<std::weak_ptr<Local>> sockets_;
  bool stopped_ = false;
};

}  // namespace egress
}  // namespace sandboxd
