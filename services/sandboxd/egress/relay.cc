#include "egress/relay.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include <boost/asio/write.hpp>

#include "absl/strings/str_cat.h"

namespace sandboxd {
namespace egress {

namespace asio = boost::asio;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

Relay::Relay(Socket client, Socket upstream, const ProxyLimits& limits,
             std::vector<std::shared_ptr<ByteQuota>> quotas, Clock::time_point started,
             std::function<void(Result)> done)
    : client_(std::move(client)),
      upstream_(std::move(upstream)),
      limits_(limits),
      quotas_(std::move(quotas)),
      done_(std::move(done)),
      up_{&client_, &upstream_, &result_.bytes_up},
      down_{&upstream_, &client_, &result_.bytes_down},
      idle_(client_.get_executor()),
      total_(client_.get_executor()),
      last_activity_(Clock::now()) {
  total_.expires_at(started + limits_.max_connection_time);
}

void Relay::Start(std::string first_up, std::optional<uint64_t> more_up, uint64_t dropped) {
  auto self = shared_from_this();
  more_up_ = more_up;
  total_.async_wait([self](error_code ec) {
    if (!ec) self->Finish("max_connection_time");
  });
  ArmIdle();
  const uint64_t read = first_up.size() + dropped;
  if (read > limits_.max_bytes_per_connection) return Finish("max_bytes_per_connection");
  if (const ByteQuota* spent = ChargeAll(quotas_, read)) return Finish(spent->name());
  dropped_ = dropped;
  result_.bytes_up += first_up.size();
  auto data = std::make_shared<std::string>(std::move(first_up));
  asio::async_write(upstream_, asio::buffer(*data), [self, data](error_code ec, size_t) {
    if (self->finished_) return;
    if (ec) return self->Finish("destination closed");
    if (self->more_up_ == uint64_t{0}) self->EndUp();
    self->Read(&self->up_);
    self->Read(&self->down_);
  });
}

void Relay::Cut(const std::string& why) { Finish(why); }

void Relay::Read(Direction* d) {
  d->from->async_read_some(asio::buffer(d->buffer),
                           [self = shared_from_this(), d](error_code ec, size_t n) {
                             if (self->finished_) return;
                             if (ec) return self->OnEof(d);
                             self->OnRead(d, n);
                           });
}

// Client bytes past `more_up_` are dropped: they count towards the byte cap and the quotas.
void Relay::OnRead(Direction* d, size_t n) {
  last_activity_ = Clock::now();
  if (result_.bytes_up + result_.bytes_down + dropped_ + n > limits_.max_bytes_per_connection) {
    return Finish("max_bytes_per_connection");
  }
  const bool bounded = d == &up_ && more_up_.has_value();
  const size_t send = bounded ? static_cast<size_t>(std::min<uint64_t>(n, *more_up_)) : n;
  dropped_ += n - send;
  // Dropped bytes crossed the proxy too: the session's and owner's quotas count them.
  if (n > send) {
    if (const ByteQuota* spent = ChargeAll(quotas_, n - send)) return Finish(spent->name());
  }
  const bool grow = n == d->buffer.size() && n < kMaxBuffer;
  if (send == 0) return Sent(d, bounded, grow);
  if (const ByteQuota* spent = ChargeAll(quotas_, send)) return Finish(spent->name());
  *d->count += send;
  if (bounded) *more_up_ -= send;
  // The socket usually takes it all at once: sent here, no handler runs for it. Only what
  // it does not take waits for room. MSG_DONTWAIT: whatever the socket's own mode.
  const ssize_t now = ::send(d->to->native_handle(), d->buffer.data(), send, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (now < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return Finish("closed");
  const size_t taken = now > 0 ? static_cast<size_t>(now) : 0;
  if (taken == send) return Sent(d, bounded, grow);
  asio::async_write(*d->to, asio::buffer(d->buffer.data() + taken, send - taken),
                    [self = shared_from_this(), d, bounded, grow](error_code ec, size_t) {
                      if (self->finished_) return;
                      if (ec) return self->Finish("closed");
                      self->Sent(d, bounded, grow);
                    });
}

// All of a read was sent on (or dropped): read the next.
void Relay::Sent(Direction* d, bool bounded, bool grow) {
  last_activity_ = Clock::now();
  if (bounded && more_up_ == uint64_t{0} && !d->eof) EndUp();
  if (grow) d->buffer.resize(d->buffer.size() * 2);
  Read(d);
}

// One side finished sending (or failed): pass the end on as a half-close, and finish once
// both sides have.
void Relay::OnEof(Direction* d) {
  d->eof = true;
  error_code ignored;
  d->to->shutdown(asio::socket_base::shutdown_send, ignored);
  if (up_.eof && down_.eof) Finish("closed");
}

// The destination got all it is given: shut its sending side, and count the client's side
// as done. What the client still sends is read and dropped while the answer is relayed;
// the destination's close then ends the relay, whether or not the client has closed: a
// client that keeps its connection (a keep-alive pool) does not hold the session's
// connection slot past its one request. Bytes it sent after the answer may reset the
// connection, after the answer and its end were sent.
void Relay::EndUp() {
  up_.eof = true;
  error_code ignored;
  upstream_.shutdown(asio::socket_base::shutdown_send, ignored);
}

// Wakes at the end of the idle time since the last byte; finishes if none came since.
void Relay::ArmIdle() {
  idle_.expires_at(last_activity_ + limits_.idle_timeout);
  idle_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->finished_) return;
    if (Clock::now() - self->last_activity_ >= self->limits_.idle_timeout) {
      return self->Finish("idle_timeout");
    }
    self->ArmIdle();
  });
}

// Reports before it closes: whoever sees the close (the client, the destination) finds the
// decision already recorded.
void Relay::Finish(const std::string& end) {
  if (finished_) return;
  finished_ = true;
  result_.end = end;
  result_.bytes_dropped = dropped_;
  if (done_) std::exchange(done_, nullptr)(result_);
  error_code ignored;
  client_.close(ignored);
  upstream_.close(ignored);
  idle_.cancel();
  total_.cancel();
}

}  // namespace egress
}  // namespace sandboxd
