// Private to mcp_core: one accepted TCP connection of the MCP HTTP endpoint. HTTP/1.1 is
// parsed by Boost.Beast; the connection runs on an Asio strand, so an idle keep-alive
// connection or an open SSE stream costs a socket and a few hundred bytes, never a thread
// (docs/architecture.md, "The HTTP front").
//
// Every request passes, in this order and before any handler sees it:
//   the idle timeout (waiting for its first byte), the header timeout, the request-line and
//   header size limit (431), the header count limit (431), `Handler::check` (the caller's
//   Origin/Host/token checks, run before the body is read), the body size limit (413) and
//   the body timeout. A refused request with a body still unread closes the connection.
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
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

namespace gateway {
namespace http {

struct Limits {
  size_t max_header_bytes = 60 << 10;  // request line + headers (Envoy's default); 431
  size_t max_headers = 100;            // header fields (Envoy's default); 431
  size_t max_body_bytes = 4 << 20;     // 413
  // Waiting for the first byte of a request (a new or a kept-alive connection).
  std::chrono::milliseconds idle_timeout{60'000};
  // From the first byte of a request to the end of its headers (slow-header clients).
  std::chrono::milliseconds header_timeout{10'000};
  // From the end of the headers to the end of the body.
  std::chrono::milliseconds body_timeout{60'000};
  // A write the client does not take in this time closes the connection.
  std::chrono::milliseconds write_timeout{30'000};
  // Bytes queued for a client that does not read; past it the connection closes.
  size_t max_pending_write_bytes = 64 << 20;
  // SSE comment sent on a silent stream so proxies and clients keep it open.
  std::chrono::milliseconds keepalive_interval{15'000};
};

// A request as the handlers see it. Header names are matched case-insensitively.
struct Request {
  std::string method;  // as sent: "GET", "POST", ...
  std::string path;    // the target without its query
  bool http10 = false;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  bool Has(std::string_view name) const;
  // The first value of `name`, "" when absent.
  std::string Header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type;  // omitted when empty
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  struct Handler {
    // Runs once the headers are in, before the body is read: a response refuses the request.
    std::function<std::optional<Response>(const Request&)> check;
    // Runs with the whole request; must answer with Respond() or StartStream(), now or
    // later, from any thread.
    std::function<void(const std::shared_ptr<Connection>&, Request)> handle;
    // The response for a request refused by a limit (431, 413, 400 for bad syntax).
    std::function<Response(int status, const std::string& message)> error;
    // The connection closed (once, on its strand).
    std::function<void(Connection*)> on_closed;
  };
  struct StreamCallbacks {
    // The connection closed before the last chunk was written (the client went away, a
    // write timed out, the server stopped). Runs on the connection's strand.
    std::function<void()> on_lost;
    // The last chunk was written.
    std::function<void()> on_done;
  };

  Connection(boost::asio::ip::tcp::socket socket, const Limits& limits, const Handler& handler);
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
  // Closes the connection (any thread). Idempotent.
  void Close();

 private:
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;
  enum class Phase { kIdle, kHeader, kBody, kHandling, kStreaming, kClosing };

  void WaitForRequest();
  void ReadHeader();
  void OnHeader(boost::system::error_code ec);
  void ReadBody();
  void OnBody(boost::system::error_code ec);
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

  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer deadline_;
  boost::asio::steady_timer keepalive_;
  const Limits& limits_;
  const Handler& handler_;

  // All below only on the strand.
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
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
  bool writing_ = false;
  std::string writing_buffer_;
  std::chrono::steady_clock::time_point last_write_;
  uint64_t deadline_generation_ = 0;
};

}  // namespace http
}  // namespace gateway
