// StreamableHttpTransport, its GET side (see http_transport.h): the stream of messages
// that belong to no request, reopened with Last-Event-ID and backoff, and the resumption
// of a request's stream that ended before its response. The POST side is in
// http_transport.cc.
#include "upstream/http_transport.h"
#include "upstream/http_transport_common.h"
#include "upstream/stalled_event_watchdog.h"
#include "jsonrpc/jsonrpc.h"
#include "base/thread.h"

#include <httplib.h>

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/deadline.h"
#include "base/log_text.h"
#include "spdlog/spdlog.h"
#include "base/mutex.h"

namespace gateway {

using nlohmann::json;

struct StreamableHttpTransport::GetResult {
  httplib::Error error = httplib::Error::Success;
  int status = 0;
  bool got_event = false;
  bool too_large = false;  // an event over max_message_bytes_: the stream was cut there
  std::string busy;        // the receive budget that was full ("--flag=N"): the stream was cut
  bool stalled = false;    // an event got no byte for message_idle_timeout_: the stream was cut
  bool mid_event = false;  // the stream ended (or was cut) in the middle of an event
};

StreamableHttpTransport::GetResult StreamableHttpTransport::GetOnce(
    HttpExchange* exchange, StreamCursor* cursor, const std::function<void(json)>& on_message,
    const std::function<void()>& on_answered, const std::function<bool()>& finished) {
  httplib::Request req;
  auto client = EventStreamGet(exchange, &req);
  if (!cursor->last_event_id.empty()) req.headers.emplace("Last-Event-ID", cursor->last_event_id);
  {
    codemode::MutexLock lock(&mu_);
    if (!session_id_.empty()) req.headers.emplace("Mcp-Session-Id", session_id_);
    if (!protocol_version_.empty()) req.headers.emplace("MCP-Protocol-Version", protocol_version_);
  }
  GetResult result;
  bool event_stream = false;
  SseParser parser(max_message_bytes_);
  req.response_handler = [&](const httplib::Response& res) {
    result.status = res.status;
    event_stream = res.status == 200 && IsEventStream(res.get_header_value("Content-Type"));
    if (on_answered) on_answered();
    return event_stream;  // anything else: do not read the body
  };
  // What belongs to no request (or resumes one) is charged to the receive budget while it
  // is buffered and dispatched, so that messages of every kind add up to that budget.
  codemode::ByteHold hold(receive_budget_);
  // Declared after `hold`: its thread is joined before the hold is released.
  StalledEventWatchdog watchdog(message_idle_timeout_, [exchange] { exchange->Stop(); });
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (watchdog.fired()) return false;
    if (const codemode::ByteBudget* full = hold.GrowBy(kReceiveCopies * size)) {
      result.busy = full->Describe();
      return false;
    }
    result.too_large = !parser.Feed(data, size, [&](const SseParser::Event& event) {
      result.got_event = true;
      if (event.event == "message") {
        DispatchText(config_.name, event.data, on_message, max_message_bytes_).IgnoreError();
      }
    });
    hold.ShrinkTo(kReceiveCopies * parser.buffered());
    watchdog.Received(parser.mid_event());
    return !result.too_large && !(finished && finished());
  };
  httplib::Response res;
  SendWithoutSigpipe(*client, req, res, result.error);
  result.stalled = watchdog.fired();
  result.mid_event = parser.mid_event();
  if (result.stalled) LogStalledEvent(on_answered ? "GET stream" : "resumed response stream");
  if (result.too_large) {
    spdlog::warn("upstream {}: an event larger than {} bytes (--max_upstream_message_bytes) "
                 "on a GET stream; the stream was cut", config_.name, max_message_bytes_);
  } else if (!result.busy.empty()) {
    spdlog::warn("upstream {}: the gateway is receiving too many bytes from upstreams ({}); "
                 "a GET stream was cut", config_.name, result.busy);
  }
  if (event_stream) {
    // A stream that set no id leaves the old one: resuming from it is still right.
    if (!parser.last_event_id().empty()) cursor->last_event_id = parser.last_event_id();
    if (parser.retry_ms()) cursor->retry_ms = parser.retry_ms();
  }
  return result;
}

bool StreamableHttpTransport::WaitToReconnect(absl::Duration delay, const HttpExchange* exchange) {
  const auto until = codemode::SteadyDeadline(delay);
  codemode::MutexLock lock(&workers_mu_);
  // Close() and Abandon() change these under workers_mu_, so their unlock wakes us.
  auto stop = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(workers_mu_) {
    return closing_.load() || (exchange != nullptr && exchange->abandoned);
  };
  while (!stop()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return true;
    workers_mu_.AwaitWithTimeout(absl::Condition(&stop), absl::FromChrono(until - now));
  }
  return false;
}

absl::Status StreamableHttpTransport::Resume(HttpExchange* exchange, StreamCursor* cursor,
                                             const std::function<void(json)>& on_message,
                                             const std::function<bool()>& answered) {
  for (int attempt = 1; attempt <= kMaxResumes; ++attempt) {
    if (!WaitToReconnect(ReconnectDelay(cursor->retry_ms, attempt - 1, retry_), exchange)) {
      return absl::CancelledError("closing");
    }
    spdlog::debug("upstream {}: resuming a response stream after event {} (attempt {})",
                  config_.name, codemode::LogText(cursor->last_event_id), attempt);
    GetResult r = GetOnce(exchange, cursor, on_message, nullptr, answered);
    if (answered()) return absl::OkStatus();
    if (closing_ || exchange->abandoned) return absl::CancelledError("closing");
    // Resuming again would only have the server send the same event again.
    if (r.too_large) return MessageTooLargeError(max_message_bytes_);
    if (r.stalled) {
      return absl::UnavailableError(absl::StrCat(
          "the upstream began an event of the resumed response stream and sent nothing more "
          "of it for ", absl::FormatDuration(message_idle_timeout_),
          " (--upstream_message_idle_timeout)"));
    }
    if (!r.busy.empty()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the answer was not read: the gateway is receiving too many bytes from upstreams "
          "now (its ", r.busy, "); retry later"));
    }
    // (A refused GET reads no body, so httplib reports it as cancelled: look at the status.)
    if (r.status != 0 && r.status != 200) {
      return absl::UnavailableError(absl::StrCat(
          "the response stream ended before the response, and resuming it failed: HTTP ",
          r.status));
    }
  }
  return absl::UnavailableError(absl::StrCat(
      "the response stream ended before the response, also after resuming it ", kMaxResumes,
      " times"));
}

// The stream of messages that belong to no request. Reopened whenever it ends, from the
// last event id it gave (Last-Event-ID), after the server's `retry:` (1 s without one),
// never sooner than retry_.min, backing off while streams keep ending at once (see
// StreamRetryPolicy): a server answering every GET with `retry: 0` and closing made
// ~3,000 GETs a second.
void StreamableHttpTransport::RunGetStream(std::shared_ptr<HttpExchange> exchange) {
  int failures = 0;  // streams in a row that ended at once without a message
  StreamCursor cursor;
  auto forward = [this](json m) { Deliver(std::move(m), nullptr); };
  auto settle = [this] {
    codemode::MutexLock lock(&workers_mu_);
    if (get_stream_settled_) return;
    get_stream_settled_ = true;
  };
  while (!closing_) {
    const absl::Time opened = absl::Now();
    GetResult r = GetOnce(exchange.get(), &cursor, forward, settle);
    settle();  // also when it failed before any answer
    if (closing_) break;
    if (r.status == 405) {
      spdlog::debug("upstream {}: no GET stream (HTTP 405)", config_.name);
      break;
    }
    if (IsConnectError(r.error)) {
      // The server is gone: say so now rather than at the next call.
      if (callbacks_.on_closed) callbacks_.on_closed(DescribeConnectFailure(url_, kProbeTimeout));
      break;
    }
    // A stream cut for an oversized or stalled event, or one that ends in the middle of an
    // event, is a failure however much it delivered first: an upstream that keeps doing it
    // must not have us reopen at the floor rate.
    const bool faulty = r.too_large || !r.busy.empty() || r.stalled || r.mid_event;
    if (!faulty && (r.got_event || absl::Now() - opened >= retry_.lived)) failures = 0;
    const absl::Duration delay = ReconnectDelay(cursor.retry_ms, failures, retry_);
    spdlog::debug("upstream {}: GET stream ended (HTTP {}, {}); reopening in {}", config_.name,
                  r.status, httplib::to_string(r.error), absl::FormatDuration(delay));
    if (!WaitToReconnect(delay, nullptr)) break;
    ++failures;
  }
  settle();
  exchange->done = true;
}

}  // namespace gateway
