#include "egress/parked_dialer.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

namespace sandboxd {
namespace egress {

namespace asio = boost::asio;
using boost::system::error_code;

ParkedDialer::ParkedDialer(asio::io_context& io, std::string path, size_t parked,
                           std::function<void(Socket)> on_wake,
                           std::chrono::milliseconds dial_interval)
    : io_(io),
      strand_(asio::make_strand(io)),
      path_(std::move(path)),
      parked_(parked),
      dial_interval_(dial_interval),
      on_wake_(std::move(on_wake)),
      retry_(strand_) {}

void ParkedDialer::Start() {
  asio::dispatch(strand_, [self = shared_from_this()] { self->Refill(); });
}

// On the strand: dials until `parked_` are parked or dialing, within the dial budget: a
// burst of `parked_`, then one per dial_interval_, so a relay that closes every parked
// connection at once (code in the sandbox can) cannot make the host dial in a loop.
void ParkedDialer::Refill() {
  const auto now = std::chrono::steady_clock::now();
  const auto earned = (now - budget_since_) / dial_interval_;
  if (earned > 0) {
    tokens_ = std::min<size_t>(parked_, tokens_ + static_cast<size_t>(earned));
    budget_since_ += earned * dial_interval_;
  }
  while (!stopped_ && dialing_or_parked_ < parked_) {
    if (tokens_ == 0) return Later(dial_interval_);
    --tokens_;
    Dial();
  }
}

void ParkedDialer::Later(std::chrono::milliseconds pause) {
  retry_.expires_after(pause);
  retry_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->stopped_) return;
    self->Refill();
  });
}

void ParkedDialer::Stop() {
  asio::dispatch(strand_, [self = shared_from_this()] {
    self->stopped_ = true;
    self->retry_.cancel();
    for (const auto& weak : self->sockets_) {
      if (auto socket = weak.lock()) {
        asio::post(socket->get_executor(), [socket] {
          error_code ignored;
          socket->close(ignored);
        });
      }
    }
    self->sockets_.clear();
  });
}

// On the strand.
void ParkedDialer::Dial() {
  ++dialing_or_parked_;
  auto socket = std::make_shared<Local>(asio::make_strand(io_));
  sockets_.erase(std::remove_if(sockets_.begin(), sockets_.end(),
                                [](const auto& w) { return w.expired(); }),
                 sockets_.end());
  sockets_.push_back(socket);
  socket->async_connect(asio::local::stream_protocol::endpoint(path_),
                        [self = shared_from_this(), socket](error_code ec) {
                          asio::dispatch(self->strand_, [self, socket, ec] {
                            self->OnDialed(socket, ec);
                          });
                        });
}

void ParkedDialer::OnDialed(std::shared_ptr<Local> socket, error_code ec) {
  if (stopped_) return;
  if (!ec) {
    pause_ = std::chrono::milliseconds(100);
    return Park(std::move(socket));
  }
  --dialing_or_parked_;
  const std::chrono::milliseconds pause = pause_;
  pause_ = std::min<std::chrono::milliseconds>(pause_ * 2, std::chrono::seconds(5));
  Later(pause);
}

void ParkedDialer::Park(std::shared_ptr<Local> socket) {
  socket->async_wait(asio::socket_base::wait_read,
                     [self = shared_from_this(), socket](error_code ec) {
                       asio::dispatch(self->strand_, [self, socket, ec] {
                         self->OnWoken(socket, ec);
                       });
                     });
}

ParkedDialer::Woken ParkedDialer::Peek(int fd) {
  char first;
  const ssize_t n = recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 1) return Woken::kRequest;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    pollfd readable{fd, POLLIN, 0};
    if (poll(&readable, 1, 0) == 0) return Woken::kStillParked;
  }
  return Woken::kNotARequest;  // the end of the stream, an error, or nothing in line
}

// A parked connection is readable: the relay sent the first bytes of a request (or closed
// it, which the served connection reads as a client that left). Either way it is no longer
// parked: hand it on and dial its replacement. A spurious readiness leaves it parked.
void ParkedDialer::OnWoken(std::shared_ptr<Local> socket, error_code ec) {
  if (stopped_ || ec) {
    --dialing_or_parked_;
    return;
  }
  const Woken woken = Peek(socket->native_handle());
  if (woken == Woken::kStillParked) return Park(std::move(socket));
  --dialing_or_parked_;
  // A request pays for its replacement at once (it takes a slot and is served like any
  // accepted connection), so back-to-back requests never wait for the dial budget; a
  // parked connection that was closed, or held no request, spends a token instead.
  if (woken == Woken::kRequest && tokens_ < parked_) ++tokens_;
  asio::post(socket->get_executor(), [self = shared_from_this(), socket] {
    self->on_wake_(Socket(std::move(*socket)));
  });
  Refill();
}

}  // namespace egress
}  // namespace sandboxd
