// Private to gateway_server: the limits of the HTTP front, the request and response as handlers
// see them, and RequestReader, the reading half of a connection (its read buffer and
// Beast's parser, configured from the limits). Connection reads through it with Asio, and
// tests/fuzz/http_request_fuzzer.cc through a synchronous stream, so the fuzzer exercises
// exactly the configuration the gateway serves with.
//
// What a peer can make one connection hold while it reads a request, and what answers it:
//   the read buffer: at most `max_header_bytes`. It holds the request line and headers,
//     one chunk-size line with its extensions, or the whole trailer, because Beast parses
//     each only once it is complete. Past it: 431.
//   header fields, trailer fields included: `max_headers`. Past it: 431.
//   chunk extensions, all the request's together: `max_header_bytes` (Beast drops them,
//     but each costs a parse). Past it: 431.
//   the body, in any encoding: `max_body_bytes` (Beast counts chunk sizes). Past it: 413.
//   anything else Beast refuses: 400.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  // How many fields named `name` it has.
  size_t Count(std::string_view name) const;
  // The first value of `name`, "" when absent.
  std::string Header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type;  // omitted when empty
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Why a request is refused by a limit or its syntax: the status and a message for the client.
struct Refusal {
  int status;
  std::string message;
};

class RequestReader {
 public:
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

  explicit RequestReader(const Limits& limits);
  // The parser keeps a pointer to our chunk-header callback.
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // A fresh parser for the next request. Buffered bytes stay (a pipelined request).
  void Reset();
  // Frees the parser once its request is taken.
  void Release() { parser_.reset(); }
  boost::beast::flat_buffer& buffer() { return buffer_; }
  Parser& parser() { return *parser_; }
  bool done() const { return parser_->is_done(); }

  // After the headers: the request line and fields into `request`; a refusal when the
  // fields are too many.
  std::optional<Refusal> TakeHeader(Request* request) const;
  // After the whole message: the body into `request`; a refusal when trailer fields took
  // the count of fields past the limit.
  std::optional<Refusal> TakeBody(Request* request);
  // A failed read (`in_body`: after the headers): the refusal that answers it, nullopt
  // when the client went away.
  std::optional<Refusal> Failed(boost::system::error_code ec, bool in_body) const;

 private:
  const Limits& limits_;
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  size_t extension_bytes_ = 0;  // chunk extensions of the current request
  bool extensions_too_large_ = false;
  std::function<void(std::uint64_t, boost::beast::string_view, boost::system::error_code&)>
      on_chunk_header_;
};

// True for the errors of a client that closed or reset its connection.
bool IsDisconnect(const boost::system::error_code& ec);

}  // namespace http
}  // namespace gateway
