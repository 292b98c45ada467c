// Small pieces of HTTP plumbing for the upstream HTTP transports: a Server-Sent Events
// parser, URL splitting and resolution, and readable connection errors.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace gateway {

// Incremental text/event-stream parser (WHATWG "server-sent events", the parts MCP uses:
// event, data, id, retry; comments are ignored). Multi-line data is joined with "\n".
// Events whose data is empty are skipped: MCP servers send such "priming" events (an id
// to resume from) before the real messages; their id still counts (last_event_id()).
// Bounds, besides `max_event_bytes`: an event whose `event:` name is over
// kMaxEventNameBytes is dropped (its name is not kept), and an `id:` over kMaxEventIdBytes
// is ignored (it would be copied into every event and sent back as Last-Event-ID).
class SseParser {
 public:
  struct Event {
    std::string event = "message";
    std::string data;
    std::string id;
  };
  using Handler = std::function<void(const Event&)>;
  static constexpr size_t kMaxEventNameBytes = 64;  // MCP uses "message" and "endpoint"
  static constexpr size_t kMaxEventIdBytes = 1024;

  // `max_event_bytes` bounds one line and one event's joined data alike.
  explicit SseParser(size_t max_event_bytes = 16u << 20) : max_bytes_(max_event_bytes) {}

  // Feeds bytes as they arrive; complete events are passed to `handler`. Returns false
  // (and drops what it holds) when a line or an event's data exceeds the size limit;
  // the stream should then be abandoned.
  bool Feed(const char* data, size_t size, const Handler& handler);

  // The last event id the stream set ("" when none, or when an empty `id:` reset it): what
  // a client sends as Last-Event-ID to resume. An id containing NUL is ignored (WHATWG).
  const std::string& last_event_id() const { return last_id_; }
  // The reconnection delay the server asked for with `retry:` (digits only), if any.
  std::optional<int64_t> retry_ms() const { return retry_ms_; }
  // Bytes held for the line and the event still incomplete.
  size_t buffered() const {
    return buffer_.size() + current_.data.size() + (in_event_ ? current_.event.size() : 0);
  }
  // A line or an event has begun and not ended: a field line (event, data, id, retry)
  // opens an event, the blank line ends it. A stream that ends or stalls here is cut off
  // in the middle of an event.
  bool mid_event() const { return in_event_ || !buffer_.empty(); }

 private:
  void ProcessLine(const std::string& line, const Handler& handler);

  const size_t max_bytes_;
  bool overflow_ = false;  // an event's data outgrew max_bytes_
  std::string buffer_;
  bool skip_lf_ = false;  // the previous chunk ended with '\r' (of a "\r\n")
  Event current_;
  bool has_data_ = false;
  bool in_event_ = false;   // a field line came since the last blank line
  bool bad_name_ = false;   // the event's name was over kMaxEventNameBytes: drop it
  std::string last_id_;
  std::optional<int64_t> retry_ms_;
};

// "https://host:8443/mcp?x=1" -> origin "https://host:8443", target "/mcp?x=1".
struct HttpUrl {
  std::string origin;  // scheme://host[:port], what httplib::Client takes
  std::string target;  // path and query, at least "/"
  std::string host;    // without brackets
  int port = 0;
};
absl::StatusOr<HttpUrl> ParseHttpUrl(const std::string& url);

// Resolves a reference (the legacy SSE `endpoint` event: usually "/messages?sessionId=..")
// against the URL it came from, as `new URL(ref, base)` would for these cases.
std::string ResolveUrl(const std::string& base, const std::string& ref);

// Describes a failed connection: "connect: Connection refused", "resolve host: ..." —
// httplib only says "Connection", so this retries the TCP connect once to learn why.
std::string DescribeConnectFailure(const HttpUrl& url, absl::Duration timeout);

// The standard headers of a stateless message (2026-07-28; one whose params._meta names a
// protocol version): MCP-Protocol-Version, Mcp-Method, and Mcp-Name for tools/call and
// prompts/get (params.name) and resources/read (params.uri). Empty for any other message.
// A value that is not plain printable ASCII without spaces at its ends is sent as
// "=?base64?<base64 of its UTF-8>?=", as the specification says.
std::vector<std::pair<std::string, std::string>> StandardHeadersOf(const nlohmann::json& message);

}  // namespace gateway
