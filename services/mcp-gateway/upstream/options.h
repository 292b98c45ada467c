// How the gateway connects to and calls its upstream servers: UpstreamOptions (timeouts,
// message and catalog bounds, the receive budget; the gateway's flags), CallOptions (one
// tool call), and the policy for reopening HTTP event streams.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "base/cancel.h"
#include "base/version.h"
#include "nlohmann/json.hpp"
#include "upstream/transport.h"

namespace gateway {

// How an HTTP upstream's event streams (its GET stream, a response stream it ended before
// the response) are reopened. The server's `retry:` is honoured within [min, max] (1 s
// when it gave none); while reopened streams keep ending at once, without a message, the
// delay doubles, with jitter, up to max. A stream that delivered a message or stayed open
// `lived` starts over. An upstream answering `retry: 0` cannot make us spin.
struct StreamRetryPolicy {
  absl::Duration min = absl::Milliseconds(250);
  absl::Duration max = absl::Seconds(30);
  absl::Duration lived = absl::Seconds(10);
};

// The default of UpstreamOptions::max_message_bytes (--max_upstream_message_bytes).
inline constexpr size_t kDefaultMaxUpstreamMessageBytes = 16u << 20;
// The default of UpstreamOptions::message_idle_timeout (--upstream_message_idle_timeout).
inline constexpr absl::Duration kDefaultUpstreamMessageIdleTimeout = absl::Seconds(30);
// The default of UpstreamOptions::write_timeout (--upstream_write_timeout).
inline constexpr absl::Duration kDefaultUpstreamWriteTimeout = absl::Seconds(30);

// The nice value above the gateway's of what works only for the upstream servers: a stdio
// upstream's process (its children inherit it) and the gateway's threads that read the
// upstreams' messages. Upstreams serve the sandboxes' tool calls and the gateway's own
// catalog requests, never a client's request directly: when the CPU is short, a flood of
// tool calls gives way to other clients' runs along its whole path, as
// ToolCallDispatcher's workers do (docs/gateway.md, "Tool calls and the CPU").
inline constexpr int kUpstreamNice = 10;

// The JSON values (objects, arrays, strings, numbers, ...) one upstream message may hold:
// one per 128 bytes of the byte cap (131,072 at 16 MiB). A parsed value costs ~140 bytes,
// so a 3 MiB answer of a million `{}` would have become a 200 MiB document; at this bound
// a message's document stays near the cap's size. Tool results are usually one text block
// (one value however long); a dense structuredContent needs a larger byte cap. A message
// past it is dropped with a warning, as one that is not JSON.
inline size_t UpstreamJsonValueLimit(size_t max_message_bytes) {
  return std::max<size_t>(max_message_bytes / 128, 1024);
}

struct UpstreamOptions {
  absl::Duration call_timeout = absl::Seconds(60);
  absl::Duration connect_timeout = absl::Seconds(30);
  absl::Duration retry_initial = absl::Seconds(1);
  absl::Duration retry_max = absl::Seconds(60);
  // stdio shutdown: close stdin, wait this long, SIGTERM, wait again, SIGKILL.
  absl::Duration stop_grace = absl::Seconds(2);
  // Ask stdio and Streamable HTTP upstreams with server/discover whether they serve the
  // stateless revision 2026-07-28 first, and speak it to those that do (initialize for the
  // others, as the TypeScript SDK's `auto` negotiation does). False: initialize always.
  bool discover = true;
  // How long the server/discover probe waits for an answer before initialize is tried (a
  // server that ignores requests it does not know is a 2025 server).
  absl::Duration discover_timeout = absl::Seconds(5);
  std::string client_name = "mcp-gateway";
  std::string client_version = codemode::kVersion;
  // The tool catalog of one upstream (names, descriptions and schemas as the sandbox
  // receives them, JSON-escaped) may be at most this large. A larger one is left out, with
  // the reason, so one upstream can never make run_python fail for every client.
  size_t max_catalog_bytes = 1u << 20;
  // One message from an upstream (a JSON response body, one SSE event's data, one stdio
  // line) may be at most this large; reading stops there, before it is buffered whole. A
  // larger response fails its call with an error naming the upstream and
  // --max_upstream_message_bytes; the connection stays up for other calls.
  size_t max_message_bytes = kDefaultMaxUpstreamMessageBytes;
  // A stdio line that gets no byte for this long while incomplete is abandoned: its
  // charge and buffer are released, the request it answered fails naming
  // --upstream_message_idle_timeout, and the rest of it is skipped up to its newline.
  // An event of an HTTP GET stream or legacy SSE stream that stalls as long is abandoned
  // by cutting the stream (StalledEventWatchdog), which is then reopened; a stream quiet
  // between events is never cut. (A tool call's POST response stream is bounded by the
  // call's timeout instead.) Zero: never.
  absl::Duration message_idle_timeout = kDefaultUpstreamMessageIdleTimeout;
  // One message to a stdio upstream waits at most this long for its turn and for the
  // server to read it (a server at work may not read its stdin); then it fails. A message
  // cut off part way is ended with a newline before the next one is written, so the server
  // sees one line it cannot parse instead of the next caller's request glued to it.
  absl::Duration write_timeout = kDefaultUpstreamWriteTimeout;
  StreamRetryPolicy stream_retry;
  // A flood of tools/list_changed is coalesced: one tools/list at a time per upstream, at
  // most one per this interval, and the MCP clients hear of a refresh only when the
  // catalog changed.
  absl::Duration min_tools_refresh_interval = absl::Seconds(1);
  // An upstream's notifications/message lines logged per second (bursts of as many); more
  // are counted, and the count logged with the next line that passes. 0: none logged.
  double log_messages_per_second = 10;
  // Notifications an upstream may send per second (bursts of ten times as many); past it
  // they are dropped, and a 2026-07-28 upstream's subscriptions/listen stream is closed
  // and opened again later and later (an upstream sending 450,000 a second would keep a
  // core busy). 0: no limit.
  double notifications_per_second = 100;
  // Answers being received from HTTP upstreams for requests that charge no caller's budget
  // (CallOptions::answer_hold; the gateway's own initialize and tools/list), all upstreams
  // together: charged kReceiveCopies times as they arrive; past it the request fails with
  // RESOURCE_EXHAUSTED naming the flag. Null: not bounded beyond max_message_bytes.
  std::shared_ptr<codemode::ByteBudget> receive_budget;
};

struct CallOptions {
  absl::Duration timeout = absl::ZeroDuration();  // zero: UpstreamOptions::call_timeout
  std::shared_ptr<codemode::CancelToken> cancel;            // sends notifications/cancelled upstream
  // Called with the params of each notifications/progress the upstream sends for this call.
  std::function<void(const nlohmann::json& params)> on_progress;
  // What the answer is charged to (transport.h). Without `receiving`, an answer of a
  // Streamable HTTP upstream is charged to UpstreamOptions::receive_budget as it arrives.
  AnswerCharges answer;
  // W3C traceparent sent in the request's params._meta (the call's span); empty: none.
  std::string traceparent;
};

}  // namespace gateway
