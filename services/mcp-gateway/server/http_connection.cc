#include "server/http_connection.h"

#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>

#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace http {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {

std::string StatusLine(int status) {
  const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  return absl::StrCat("HTTP/1.1 ", status, " ", absl::string_view(reason.data(), reason.size()),
                      "\r\n");
}

void AppendHeaders(std::string& head, const std::vector<std::pair<std::string, std::string>>& headers) {
  for (const auto& [name, value] : headers) absl::StrAppend(&head, name, ": ", value, "\r\n");
}

}  // namespace

Connection::Connection(asio::ip::tcp::socket socket, const Limits& limits, const Handler& handler,
                       Budgets budgets)
    : socket_(std::move(socket)),
      fd_(socket_.native_handle()),
      deadline_(socket_.get_executor()),
      keepalive_(socket_.get_executor()),
      limits_(limits),
      handler_(handler),
      reader_(limits),
      budgets_(std::move(budgets)) {}

Connection::~Connection() {
  ReleaseRequest();
  ReleaseWrites(WritesCharged());
}

void Connection::ChargeTo(Budgets budgets) {
  // Nothing is queued while a request's headers are checked (the previous response was
  // written before it was read), but move whatever is, to keep the counts exact.
  const size_t writes = WritesCharged();
  ReleaseRequest();
  ReleaseWrites(writes);
  budgets_ = std::move(budgets);
  authenticated_ = true;
  ChargeWrite(writes);
}

// Charges the request being received (its headers while they arrive, then its body) up to
// `bytes` in all; false when a budget is spent.
bool Connection::ChargeRequest(size_t bytes) {
  if (bytes <= request_charged_) return true;
  if (const codemode::ByteBudget* full = budgets_.requests->Charge(bytes - request_charged_)) {
    refused_by_ = full->Describe();
    return false;
  }
  request_charged_ = bytes;
  return true;
}

void Connection::ReleaseRequest() {
  if (request_charged_ > 0) budgets_.requests->Release(request_charged_);
  request_charged_ = 0;
}

// The overdraft first: it is the smaller budget, shared by every credential's connections.
void Connection::ReleaseWrites(size_t bytes) {
  const size_t overdrawn = std::min(bytes, overdraft_charged_);
  if (overdrawn > 0) budgets_.overdraft->Release(overdrawn);
  overdraft_charged_ -= overdrawn;
  bytes = std::min(bytes - overdrawn, write_charged_);
  if (bytes > 0) budgets_.writes->Release(bytes);
  write_charged_ -= bytes;
}

// Charges `bytes` queued for the client to the write budgets, or to the overdraft while
// little is queued (see Budgets); false when neither takes them.
bool Connection::ChargeWrite(size_t bytes) {
  if (bytes == 0) return true;
  const codemode::ByteBudget* full = budgets_.writes->Charge(bytes);
  if (full == nullptr) {
    write_charged_ += bytes;
    return true;
  }
  if (budgets_.overdraft != nullptr && WritesCharged() < kOverdraftBelowQueuedBytes) {
    const codemode::ByteBudget* overdraft_full = budgets_.overdraft->Charge(bytes);
    if (overdraft_full == nullptr) {
      overdraft_charged_ += bytes;
      return true;
    }
    spdlog::warn("http: clients that do not read hold the budget of their credential or of the "
                 "gateway ({}), and the overdraft is spent ({}); closing one with {} bytes queued",
                 full->Describe(), overdraft_full->Describe(), WritesCharged());
    return false;
  }
  spdlog::warn("http: clients that do not read hold the budget of their credential or of the "
               "gateway ({}); closing one with {} bytes queued", full->Describe(), WritesCharged());
  return false;
}

void Connection::Start() {
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->WaitForRequest(); });
}

// Idle phase: nothing of the next request has arrived yet.
void Connection::WaitForRequest() {
  if (closed_) return;
  phase_ = Phase::kIdle;
  request_ = Request();
  keep_alive_ = true;
  reader_.Reset();
  // A kept-alive connection must not keep the buffer of the largest request it read.
  if (reader_.buffer().capacity() > kKeptReadBufferBytes) reader_.buffer().shrink_to_fit();
  if (reader_.buffer().size() > 0) return ReadHeader();
  ArmDeadline(limits_.idle_timeout);
  socket_.async_wait(asio::ip::tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
    if (self->closed_) return;
    if (ec) return self->DoClose();
    self->ReadHeader();
  });
}

void Connection::ReadHeader() {
  phase_ = Phase::kHeader;
  // Beast buffers headers whole before parsing them, so a credential's connection is
  // charged for the most they may take while they arrive (released once they are in, and
  // only slow clients hold it longer than a read). Before that, a connection is one of the
  // few pre-auth ones (--max_unauthenticated_connections): bounded without a budget that
  // token holders could spend to keep everyone else from authenticating.
  if (authenticated_ && !ChargeRequest(limits_.max_header_bytes)) return RefuseBusy();
  ArmDeadline(limits_.header_timeout);
  bhttp::async_read_header(socket_, reader_.buffer(), reader_.parser(),
                           [self = shared_from_this()](error_code ec, size_t) { self->OnHeader(ec); });
}

// A failed read: the client left, or sent what a limit or the syntax refuses.
void Connection::ReadFailed(error_code ec) {
  std::optional<Refusal> refusal = reader_.Failed(ec, phase_ == Phase::kBody);
  if (!refusal) return DoClose();
  Refuse(refusal->status, refusal->message, true);
}

void Connection::OnHeader(error_code ec) {
  DisarmDeadline();
  if (closed_) return;
  if (ec) return ReadFailed(ec);
  if (std::optional<Refusal> refusal = reader_.TakeHeader(&request_)) {
    return Refuse(refusal->status, refusal->message, true);
  }
  keep_alive_ = reader_.parser().get().keep_alive();
  if (handler_.check) {
    if (std::optional<Response> refusal = handler_.check(this, request_)) {
      // The connection ends with the answer: a body that follows stays unread, and a client
      // refused (without a token, say) must not keep the connection by asking again.
      keep_alive_ = false;
      phase_ = Phase::kHandling;
      return Respond(std::move(*refusal));
    }
  }
  if (reader_.done()) return Dispatch();
  // Beast reserves a declared body at once; a chunked one is charged as it grows (OnBody).
  ReleaseRequest();  // the headers are in
  if (!ChargeRequest(reader_.parser().content_length().value_or(0))) return RefuseBusy();
  if (boost::beast::iequals(request_.Header("Expect"), "100-continue")) {
    QueueWrite("HTTP/1.1 100 Continue\r\n\r\n");
  }
  phase_ = Phase::kBody;
  ArmDeadline(limits_.body_timeout);
  ReadBody();
}

// A piece at a time, so that a chunked body is charged as it grows.
void Connection::ReadBody() {
  bhttp::async_read_some(socket_, reader_.buffer(), reader_.parser(),
                         [self = shared_from_this()](error_code ec, size_t) { self->OnBody(ec); });
}

void Connection::OnBody(error_code ec) {
  if (closed_) return;
  if (ec) {
    DisarmDeadline();
    return ReadFailed(ec);
  }
  if (!ChargeRequest(reader_.parser().get().body().capacity())) {
    DisarmDeadline();
    return RefuseBusy();
  }
  if (!reader_.done()) return ReadBody();
  DisarmDeadline();
  if (std::optional<Refusal> refusal = reader_.TakeBody(&request_)) {
    return Refuse(refusal->status, refusal->message, true);
  }
  Dispatch();
}

void Connection::RefuseBusy() {
  spdlog::warn("http: requests being received hold the budget of their credential or of the "
               "gateway ({}); refusing one", refused_by_);
  keep_alive_ = false;
  phase_ = Phase::kHandling;
  ReleaseRequest();
  Response response = handler_.error(
      503, absl::StrCat("Service Unavailable: too many request bytes are being received at once (",
                        refused_by_, "); retry shortly"));
  response.headers.emplace_back("Retry-After", "1");
  Respond(std::move(response));
}

void Connection::Dispatch() {
  phase_ = Phase::kHandling;
  // The handler owns the body now; what it holds is bounded by its own limits.
  ReleaseRequest();
  reader_.Release();
  handler_.handle(shared_from_this(), std::move(request_));
}

void Connection::Refuse(int status, const std::string& message, bool close) {
  if (close) keep_alive_ = false;
  phase_ = Phase::kHandling;
  ReleaseRequest();
  spdlog::debug("http: refused a request: {}", codemode::LogLongText(message));
  Respond(handler_.error(status, message));
}

void Connection::Respond(Response response) {
  if (handler_.on_respond) handler_.on_respond(response.status);
  asio::dispatch(socket_.get_executor(), [self = shared_from_this(), r = std::move(response)] {
    if (self->closed_ || self->phase_ != Phase::kHandling) return;
    std::string head = StatusLine(r.status);
    AppendHeaders(head, r.headers);
    if (!r.content_type.empty()) absl::StrAppend(&head, "Content-Type: ", r.content_type, "\r\n");
    absl::StrAppend(&head, "Content-Length: ", r.body.size(), "\r\n");
    if (!self->keep_alive_) head += "Connection: close\r\n";
    head += "\r\n";
    head += r.body;
    self->stream_ending_ = true;
    self->QueueWrite(std::move(head));
  });
}

void Connection::StartStream(const std::string& content_type, bool sse,
                             std::vector<std::pair<std::string, std::string>> headers,
                             StreamCallbacks callbacks) {
  asio::dispatch(socket_.get_executor(), [self = shared_from_this(), content_type, sse,
                                          headers = std::move(headers),
                                          callbacks = std::move(callbacks)]() mutable {
    if (self->closed_ || self->phase_ != Phase::kHandling) {
      if (callbacks.on_lost) callbacks.on_lost();
      return;
    }
    self->phase_ = Phase::kStreaming;
    self->stream_ = std::move(callbacks);
    self->stream_sse_ = sse;
    // HTTP/1.0 has no chunked encoding: the body then ends with the connection.
    self->stream_chunked_ = !self->request_.http10;
    if (!self->stream_chunked_) self->keep_alive_ = false;
    std::string head = StatusLine(200);
    AppendHeaders(head, headers);
    absl::StrAppend(&head, "Content-Type: ", content_type, "\r\nCache-Control: no-cache\r\n");
    if (self->stream_chunked_) head += "Transfer-Encoding: chunked\r\n";
    if (!self->keep_alive_) head += "Connection: close\r\n";
    head += "\r\n";
    self->QueueWrite(std::move(head));
    self->WatchForDisconnect();
    if (sse) self->ScheduleKeepalive();
  });
}

void Connection::Deliver(std::string bytes, bool last) {
  asio::post(socket_.get_executor(), [self = shared_from_this(), bytes = std::move(bytes), last] {
    if (self->closed_ || self->phase_ != Phase::kStreaming || self->stream_ending_) return;
    if (!bytes.empty()) {
      self->QueueWrite(self->stream_chunked_
                           ? absl::StrCat(absl::Hex(bytes.size()), "\r\n", bytes, "\r\n")
                           : bytes);
    }
    if (!last) return;
    self->stream_ending_ = true;
    if (self->stream_chunked_) {
      self->QueueWrite("0\r\n\r\n");
    } else if (!self->writing_) {
      self->FinishResponse();
    }
  });
}

void Connection::Close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->DoClose(); });
}

void Connection::CloseWhenWritten() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (!self->writing_) return self->DoClose();
    self->close_when_written_ = true;
  });
}

bool Connection::HasUnreadInput() const {
  int unread = 0;
  return ::ioctl(fd_, FIONREAD, &unread) == 0 && unread > 0;
}

void Connection::QueueWrite(std::string bytes) {
  if (closed_) return;
  out_bytes_ += bytes.size();
  if (out_bytes_ > limits_.max_pending_write_bytes) {
    spdlog::warn("http: a client does not read its stream ({} bytes queued); closing it", out_bytes_);
    return DoClose();
  }
  if (!ChargeWrite(bytes.size())) return DoClose();
  out_.push_back(std::move(bytes));
  if (!writing_) WriteNext();
}

// Writes everything queued in one go.
void Connection::WriteNext() {
  writing_buffer_.clear();
  while (!out_.empty()) {
    writing_buffer_ += out_.front();
    out_.pop_front();
  }
  out_bytes_ = 0;
  writing_ = true;
  // Reads have their own deadlines; a 100 Continue is written while the body is read.
  if (phase_ == Phase::kHandling || phase_ == Phase::kStreaming) ArmDeadline(limits_.write_timeout);
  asio::async_write(socket_, asio::buffer(writing_buffer_),
                    [self = shared_from_this()](error_code ec, size_t n) { self->OnWritten(ec, n); });
}

void Connection::OnWritten(error_code ec, size_t) {
  writing_ = false;
  ReleaseWrites(writing_buffer_.size());
  // An idle stream must not keep the capacity of the largest response it ever carried.
  if (writing_buffer_.capacity() > kKeptWriteBufferBytes) {
    std::string().swap(writing_buffer_);
  } else {
    writing_buffer_.clear();
  }
  if (closed_) return;
  if (ec) return DoClose();
  last_write_ = Clock::now();
  if (!out_.empty()) return WriteNext();
  if (close_when_written_) return DoClose();
  if (phase_ == Phase::kHandling || phase_ == Phase::kStreaming) DisarmDeadline();
  if (stream_ending_) FinishResponse();
}

// The response is written: the next request, or the end of the connection.
void Connection::FinishResponse() {
  stream_ending_ = false;
  keepalive_.cancel();
  if (auto on_done = std::move(stream_.on_done)) on_done();
  stream_ = StreamCallbacks();
  if (!keep_alive_) return LingerThenClose();
  phase_ = Phase::kIdle;
  if (watching_) {
    resume_after_watch_ = true;
    socket_.cancel();  // the watch's handler then waits for the next request
    return;
  }
  WaitForRequest();
}

// Closing a socket with unread input makes the kernel answer with a reset, which can
// destroy the response before the client reads it (a 413 for a body we refused to read).
// So: end our side, read and discard what still comes (into a small buffer) for at most a
// few seconds, then close: nginx's lingering close.
void Connection::LingerThenClose() {
  phase_ = Phase::kClosing;
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  ArmDeadline(std::chrono::seconds(5));
  Discard();
}

void Connection::Discard() {
  writing_buffer_.resize(16 << 10);
  socket_.async_read_some(asio::buffer(writing_buffer_), [self = shared_from_this()](error_code ec, size_t) {
    if (self->closed_) return;
    if (ec) return self->DoClose();  // the client closed too (or the deadline closed us)
    self->Discard();
  });
}

// While a response streams, the request is fully read: the socket turns readable only
// when the client closes it (or pipelines its next request, which then waits).
void Connection::WatchForDisconnect() {
  watching_ = true;
  socket_.async_wait(asio::ip::tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
    self->watching_ = false;
    if (self->closed_) return;
    if (self->resume_after_watch_) {
      self->resume_after_watch_ = false;
      return self->WaitForRequest();
    }
    if (ec) return self->DoClose();
    char byte;
    const ssize_t n = ::recv(self->socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return self->DoClose();
    }
    if (n < 0) self->WatchForDisconnect();
    // n > 0: a pipelined request; it stays in the socket until this response is done.
  });
}

void Connection::ScheduleKeepalive() {
  keepalive_.expires_after(limits_.keepalive_interval);
  keepalive_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->closed_ || self->phase_ != Phase::kStreaming || self->stream_ending_) return;
    if (Clock::now() - self->last_write_ >= self->limits_.keepalive_interval) {
      self->QueueWrite(self->stream_chunked_ ? "d\r\n: keepalive\n\n\r\n" : ": keepalive\n\n");
    }
    self->ScheduleKeepalive();
  });
}

void Connection::ArmDeadline(std::chrono::milliseconds after) {
  const uint64_t generation = ++deadline_generation_;
  deadline_.expires_after(after);
  deadline_.async_wait([self = shared_from_this(), generation](error_code ec) {
    if (ec || generation != self->deadline_generation_ || self->closed_) return;
    spdlog::debug("http: a connection timed out while {}",
                  self->phase_ == Phase::kIdle     ? "idle"
                  : self->phase_ == Phase::kHeader ? "reading headers"
                  : self->phase_ == Phase::kBody   ? "reading a body"
                  : self->phase_ == Phase::kClosing ? "closing"
                                                   : "writing");
    self->DoClose();
  });
}

void Connection::DisarmDeadline() {
  ++deadline_generation_;
  deadline_.cancel();
}

void Connection::DoClose() {
  if (closed_) return;
  closed_ = true;
  DisarmDeadline();
  keepalive_.cancel();
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  out_.clear();
  // What is being written stays charged until its write completes (OnWritten).
  ReleaseWrites(WritesCharged() - (writing_ ? writing_buffer_.size() : 0));
  ReleaseRequest();
  if (auto on_lost = std::move(stream_.on_lost)) on_lost();
  stream_ = StreamCallbacks();
  if (handler_.on_closed) handler_.on_closed(this);
}

}  // namespace http
}  // namespace gateway
