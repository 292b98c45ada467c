// Private to mcp_core: one accepted TCP connection of the MCP HTTP endpoint. HTTP/1.1 is
// parsed by Boost.Beast; the connection runs on an Asio strand, so an idle keep-alive
// connection or an open SSE stream costs a socket and a few hundred bytes, never a thread
// (docs/architecture.md, "The HTTP front").
//
// Every request passes, in this order and before any handler sees it:
//   the idle timeout (waiting for its first byte), the header timeout, the request-line and
//   header size limit (431), the header count limit (431), `Handler::check` (the caller's
//   Origin/Host/token checks, run before the body is read), the body size limit (413),
//   the chunk-line, trailer and chunk-extension limits (431; http_request.h) and the body
//   timeout. A request refused by a check or a limit closes the connection after its
//   answer: a client without a token cannot keep a connection by sending request after
//   request.
//
//   auto conn = std::make_shared<Connection>(std::move(socket), limits, handler);
//   conn->Start();
//   // in handler.handle: conn->Respond({200, "application/json", body});
//   //               or: conn->StartStream("text/event-stream", {}, callbacks);
//   //                   conn->Deliver(chunk, /*last=*/false) from any thread
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/byte_budget.h"
#include "server/http_request.h"

namespace gateway {
namespace http {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  struct Handler {
    // Runs once the headers are in, before the body is read: a response refuses the
    // request (and closes the connection once it is written).
    std::function<std::optional<Response>(Connection*, const Request&)> check;
    // Runs with the whole request; must answer with Respond() or StartStream(), now or
    // later, from any thread.
    std::function<void(const std::shared_ptr<Connection>&, Request)> handle;
    // The response for a request refused by a limit (431, 413, 400 for bad syntax).
    std::function<Response(int status, const std::string& message)> error;
    // The connection closed (once, on its strand).
    std::function<void(Connection*)> on_closed;
    // A response in one piece is being written, with this status (metrics); may be empty.
    std::function<void(int status)> on_respond;
  };
  struct StreamCallbacks {
    // The connection closed before the last chunk was written (the client went away, a
    // write timed out, the server stopped). Runs on the connection's strand.
    std::function<void()> on_lost;
    // The last chunk was written.
    std::function<void()> on_done;
  };

  // What a connection's bytes are charged to: the request it is receiving (headers, then
  // body), and what is queued for its client and not yet taken. Past either, the request
  // gets 503 or the connection closes (a client that does not read), like past the
  // per-connection limits.
  //
  // A write the budgets refuse is charged to `overdraft` instead when the connection has less
  // than kOverdraftBelowQueuedBytes queued: a client that reads is not closed because others
  // (other credentials' tool calls, mostly) filled --max_buffered_bytes. The overdraft lies
  // outside the ceiling and is small (--max_write_overdraft_bytes[_per_credential]); only
  // past it is the writing connection closed. Not one of the holders': the bytes that fill the
  // ceiling are mostly tool calls in flight, which no connection's close would free.
  struct Budgets {
    std::shared_ptr<codemode::ByteBudget> requests;
    std::shared_ptr<codemode::ByteBudget> writes;
    std::shared_ptr<codemode::ByteBudget> overdraft;  // may be null: none
  };
  static constexpr size_t kOverdraftBelowQueuedBytes = 64 << 10;

  // `budgets` until a request passes the checks (the overall ones: a client without a
  // token gets no body read, and only short refusals written).
  Connection(boost::asio::ip::tcp::socket socket, const Limits& limits, const Handler& handler,
             Budgets budgets);
  ~Connection();

  void Start();
  // Answers the current request in one piece. Any thread.
  void Respond(Response response);
  // Answers the current request with a body written in chunks by Deliver(). Must be called
  // from the handler (it runs on the strand). `sse` enables keep-alive comments.
  void StartStream(const std::string& content_type, bool sse,
                   std::vector<std::pair<std::string, std::string>> headers,
                   StreamCallbacks callbacks);
  // Appends to the stream; `last` ends the response. Any thread; calls keep their order.
  void Deliver(std::string bytes, bool last);
  // Closes the connection at once (any thread); what is queued is dropped, and its bytes
  // leave the budgets they were charged to. Idempotent.
  void Close();
  // Closes it once what is queued has been written (any thread), which the write deadline
  // bounds: at shutdown, a stream's last answer reaches its client.
  void CloseWhenWritten();
  // From now on, charge `budgets` (the credential a request passed the checks with). Only
  // from Handler::check, which runs on the connection's strand.
  void ChargeTo(Budgets budgets);
  // Whether the client sent bytes not read yet (any thread; a hint: the answer may be
  // stale, or about another socket once this one closed and its number was reused).
  bool HasUnreadInput() const;

 private:
  enum class Phase { kIdle, kHeader, kBody, kHandling, kStreaming, kClosing };

  void WaitForRequest();
  void ReadHeader();
  void OnHeader(boost::system::error_code ec);
  void ReadBody();
  void OnBody(boost::system::error_code ec);
  void RefuseBusy();
  bool ChargeRequest(size_t bytes);
  void ReleaseRequest();
  void ReleaseWrites(size_t bytes);
  bool ChargeWrite(size_t bytes);
  size_t WritesCharged() const { return write_charged_ + overdraft_charged_; }
  void Dispatch();
  void ReadFailed(boost::system::error_code ec);
  void Refuse(int status, const std::string& message, bool close);
  void QueueWrite(std::string bytes);
  void WriteNext();
  void OnWritten(boost::system::error_code ec, size_t bytes);
  void FinishResponse();
  void LingerThenClose();
  void Discard();
  void WatchForDisconnect();
  void ScheduleKeepalive();
  void ArmDeadline(std::chrono::milliseconds after);
  void DisarmDeadline();
  void DoClose();

  // A write buffer larger than this is freed once written, not kept for the next write;
  // a read buffer larger than this is shrunk before the next request.
  static constexpr size_t kKeptWriteBufferBytes = 64 << 10;
  static constexpr size_t kKeptReadBufferBytes = 4 << 10;

  boost::asio::ip::tcp::socket socket_;
  const int fd_;  // socket_'s descriptor, for HasUnreadInput off the strand
  boost::asio::steady_timer deadline_;
  boost::asio::steady_timer keepalive_;
  const Limits& limits_;
  const Handler& handler_;

  // All below only on the strand.
  RequestReader reader_;
  Request request_;
  Phase phase_ = Phase::kIdle;
  bool keep_alive_ = true;
  bool closed_ = false;
  bool stream_sse_ = false;
  bool stream_chunked_ = true;
  bool stream_ending_ = false;  // the last chunk is queued
  bool watching_ = false;       // a disconnect watch is pending
  bool resume_after_watch_ = false;
  StreamCallbacks stream_;
  std::deque<std::string> out_;
  size_t out_bytes_ = 0;
  Budgets budgets_;
  bool authenticated_ = false;  // budgets_ are a credential's
  size_t request_charged_ = 0;  // to budgets_.requests: the request being received
  std::string refused_by_;      // the budget that refused it, for RefuseBusy ("--flag=N")
  size_t write_charged_ = 0;  // to budgets_.writes: out_ and writing_buffer_
  size_t overdraft_charged_ = 0;  // the rest of them, to budgets_.overdraft
  bool writing_ = false;
  bool close_when_written_ = false;  // CloseWhenWritten() came while writing
  std::string writing_buffer_;
  std::chrono::steady_clock::time_point last_write_;
  uint64_t deadline_generation_ = 0;
};

}  // namespace http
}  // namespace gateway
