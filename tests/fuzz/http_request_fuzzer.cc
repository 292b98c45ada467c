// libFuzzer target: the HTTP front's request reading (server/http_request.h), with the
// gateway's own RequestReader (its read buffer, parser limits and chunk-extension count)
// and Beast's synchronous read loop over a stream that hands out the input a few bytes at
// a time, as a socket would. Requests are read one after the other (pipelining, chunked
// bodies, trailers) the way Connection reads them, until one is refused or the input ends.
//
// The first byte picks the limits (the gateway's defaults, or small ones that the
// input reaches quickly) and the size of each read. What must hold for every input: the
// read buffer never holds more than the header limit, a body never passes the body limit,
// no request has more fields than allowed, and every failure is a disconnect or a 4xx.
#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/http/read.hpp>

#include "server/http_request.h"

namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;

// A SyncReadStream over the fuzz input, `step` bytes per read at most.
class InputStream {
 public:
  InputStream(const uint8_t* data, size_t size, size_t step) : data_(data), size_(size), step_(step) {}

  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers, boost::system::error_code& ec) {
    ec = {};
    if (offset_ == size_) {
      ec = net::error::eof;
      return 0;
    }
    size_t n = std::min(step_, size_ - offset_);
    n = net::buffer_copy(buffers, net::buffer(data_ + offset_, n));
    offset_ += n;
    return n;
  }
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers) {
    boost::system::error_code ec;
    size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t step_;
  size_t offset_ = 0;
};

gateway::http::Limits LimitsFor(uint8_t choice) {
  gateway::http::Limits limits;  // the gateway's defaults
  if (choice & 1) {
    limits.max_header_bytes = 256;
    limits.max_headers = 8;
    limits.max_body_bytes = 1024;
  }
  return limits;
}

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

// False once the connection would end (a refusal, a disconnect).
bool ReadOne(InputStream& stream, gateway::http::RequestReader& reader, const gateway::http::Limits& limits) {
  reader.Reset();
  boost::system::error_code ec;
  bhttp::read_header(stream, reader.buffer(), reader.parser(), ec);
  Check(reader.buffer().size() <= limits.max_header_bytes);
  gateway::http::Request request;
  if (ec) {
    auto refusal = reader.Failed(ec, false);
    Check(!refusal || (refusal->status >= 400 && refusal->status < 500));
    return false;
  }
  if (reader.TakeHeader(&request)) return false;
  Check(request.headers.size() <= limits.max_headers);
  if (!reader.done()) {
    bhttp::read(stream, reader.buffer(), reader.parser(), ec);
    Check(reader.buffer().size() <= limits.max_header_bytes);
    Check(reader.parser().get().body().size() <= limits.max_body_bytes);
    if (ec) {
      auto refusal = reader.Failed(ec, true);
      Check(!refusal || (refusal->status >= 400 && refusal->status < 500));
      return false;
    }
  }
  if (reader.TakeBody(&request)) return false;
  Check(request.body.size() <= limits.max_body_bytes);
  reader.Release();
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const gateway::http::Limits limits = LimitsFor(data[0]);
  InputStream stream(data + 1, size - 1, 1 + (data[0] >> 1) % 64);
  gateway::http::RequestReader reader(limits);
  for (int i = 0; i < 64 && ReadOne(stream, reader, limits); ++i) {
  }
  return 0;
}
