#include "server/http_request.h"

#include <boost/asio/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

#include "absl/strings/str_cat.h"

namespace gateway {
namespace http {

namespace bhttp = boost::beast::http;
using boost::system::error_code;

bool Request::Has(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (boost::beast::iequals(key, name)) return true;
  }
  return false;
}

size_t Request::Count(std::string_view name) const {
  size_t n = 0;
  for (const auto& [key, value] : headers) n += boost::beast::iequals(key, name);
  return n;
}

std::string Request::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (boost::beast::iequals(key, name)) return value;
  }
  return "";
}

bool IsDisconnect(const error_code& ec) {
  namespace asio = boost::asio;
  return ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
         ec == asio::error::bad_descriptor || ec == bhttp::error::partial_message;
}

// Beast parses a header, a chunk-size line or a trailer only once all of it is buffered,
// and keeps reading until it is: the buffer's maximum is what bounds them (Beast 1.81
// bounds the headers and the body, not chunk extensions or trailers).
RequestReader::RequestReader(const Limits& limits)
    : limits_(limits), buffer_(limits.max_header_bytes) {
  on_chunk_header_ = [this](std::uint64_t, boost::beast::string_view extensions, error_code& ec) {
    extension_bytes_ += extensions.size();
    if (extension_bytes_ > limits_.max_header_bytes) {
      extensions_too_large_ = true;
      ec = bhttp::error::bad_chunk_extension;
    }
  };
}

void RequestReader::Reset() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  parser_->body_limit(limits_.max_body_bytes);
  parser_->on_chunk_header(on_chunk_header_);
  extension_bytes_ = 0;
  extensions_too_large_ = false;
}

std::optional<Refusal> RequestReader::TakeHeader(Request* request) const {
  const auto& message = parser_->get();
  request->method = std::string(message.method_string());
  std::string_view target(message.target().data(), message.target().size());
  request->path = std::string(target.substr(0, target.find('?')));
  request->http10 = message.version() < 11;
  request->headers.clear();
  for (const auto& field : message) {
    if (request->headers.size() == limits_.max_headers) {
      return Refusal{431, absl::StrCat("Request Header Fields Too Large: at most ",
                                       limits_.max_headers, " header fields")};
    }
    request->headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  return std::nullopt;
}

std::optional<Refusal> RequestReader::TakeBody(Request* request) {
  // Beast adds trailer fields to the message's fields.
  const auto& message = parser_->get();
  if (static_cast<size_t>(std::distance(message.begin(), message.end())) > limits_.max_headers) {
    return Refusal{431, absl::StrCat("Request Header Fields Too Large: at most ",
                                     limits_.max_headers, " header and trailer fields")};
  }
  request->body = std::move(parser_->get().body());
  return std::nullopt;
}

std::optional<Refusal> RequestReader::Failed(error_code ec, bool in_body) const {
  if (ec == bhttp::error::header_limit || (ec == bhttp::error::buffer_overflow && !in_body)) {
    return Refusal{431, absl::StrCat("Request Header Fields Too Large: at most ",
                                     limits_.max_header_bytes, " bytes of request line and headers")};
  }
  if (ec == bhttp::error::buffer_overflow) {
    return Refusal{431, absl::StrCat("Request Header Fields Too Large: a chunk-size line with its "
                                     "extensions, or the trailer, exceeds ",
                                     limits_.max_header_bytes, " bytes")};
  }
  if (extensions_too_large_) {
    return Refusal{431, absl::StrCat("Request Header Fields Too Large: at most ",
                                     limits_.max_header_bytes, " bytes of chunk extensions")};
  }
  if (ec == bhttp::error::body_limit) {  // from Content-Length, or the chunks so far
    return Refusal{413, absl::StrCat("Payload Too Large: the limit is ", limits_.max_body_bytes,
                                     " bytes")};
  }
  if (IsDisconnect(ec)) return std::nullopt;
  return Refusal{400, "Bad Request: " + ec.message()};
}

}  // namespace http
}  // namespace gateway
