// StreamableHttpTransport (see http_transport.h), on cpp-httplib; SseTransport is in
// sse_transport.cc.
//
// httplib::Client is not meant for concurrent requests, so every exchange gets its own
// client (connections are cheap next to a tool call), and the only cross-thread call made
// on a client is stop(), which shuts its socket down to end a blocked read.
#include "upstream/http_transport.h"
#include "upstream/http_transport_common.h"
#include "upstream/stalled_event_watchdog.h"
#include "jsonrpc/jsonrpc.h"
#include "base/thread.h"
#include "base/untrusted_json.h"

#include <httplib.h>

#include <chrono>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/deadline.h"
#include "base/log_text.h"
#include "spdlog/spdlog.h"
#include "base/mutex.h"

namespace gateway {

using nlohmann::json;

namespace {

// Whether `body` (an error status's, at most kMaxErrorBody) is a JSON-RPC error answering
// `message`: the 2026-07-28 era answers a request's own faults with HTTP 400 or 404.
bool AnswersWithError(const json& message, const std::string& body) {
  if (!wire::LooksLikeRequest(message)) return false;
  const json parsed = json::parse(body, nullptr, false);
  return parsed.is_object() && parsed.contains("error") && parsed.contains("id") &&
         parsed["id"] == message["id"];
}

}  // namespace

// ---- StreamableHttpTransport ------------------------------------------------------------

struct StreamableHttpTransport::PostResult {
  httplib::Error error = httplib::Error::Success;
  int status = 0;
  std::string body;          // of a non-SSE response (error text or the JSON response)
  std::string session_used;  // the Mcp-Session-Id the request carried
  StreamCursor cursor;       // where its SSE stream ended (empty id for a JSON response)
  bool too_large = false;    // a message over max_message_bytes_: reading stopped there
  std::string busy;          // the receive budget that was full ("--flag=N"): reading stopped
  absl::Status unusable;     // why a JSON response could not be parsed
};

struct StreamableHttpTransport::GetResult {
  httplib::Error error = httplib::Error::Success;
  int status = 0;
  bool got_event = false;
  bool too_large = false;  // an event over max_message_bytes_: the stream was cut there
  std::string busy;        // the receive budget that was full ("--flag=N"): the stream was cut
  bool stalled = false;    // an event got no byte for message_idle_timeout_: the stream was cut
  bool mid_event = false;  // the stream ended (or was cut) in the middle of an event
};

StreamableHttpTransport::~StreamableHttpTransport() { Close(); }

std::string StreamableHttpTransport::session_id() const {
  codemode::MutexLock lock(&mu_);
  return session_id_;
}

absl::Status StreamableHttpTransport::Start(TransportCallbacks callbacks, absl::Duration) {
  codemode::MutexLock start_lock(&start_mu_);
  return BeginStart(std::move(callbacks));  // nothing to open: initialize is the first contact
}

httplib::Request StreamableHttpTransport::NewPost(const json& message, bool initialize,
                                                 std::string* session_used) {
  httplib::Request req;
  req.method = "POST";
  req.path = url_.target;
  req.headers = ConfiguredHeaders(config_);
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "application/json, text/event-stream");
  // A message of the 2026-07-28 era says its version, method and name in headers too, and
  // belongs to no session.
  const auto standard = StandardHeadersOf(message);
  for (const auto& [name, value] : standard) req.headers.emplace(name, value);
  if (standard.empty()) {
    codemode::MutexLock lock(&mu_);
    *session_used = session_id_;
    if (!session_id_.empty()) req.headers.emplace("Mcp-Session-Id", session_id_);
    if (!initialize && !protocol_version_.empty()) {
      req.headers.emplace("MCP-Protocol-Version", protocol_version_);
    }
  }
  req.body = wire::Dump(message);
  return req;
}

StreamableHttpTransport::PostResult StreamableHttpTransport::PostOnce(
    const json& message, httplib::Client& client, const std::function<void(json)>& on_message,
    const std::shared_ptr<codemode::ByteBudget>& answer_budget) {
  const bool initialize = wire::MethodOf(message) == "initialize";
  PostResult result;
  httplib::Request req = NewPost(message, initialize, &result.session_used);

  bool event_stream = false;
  SseParser parser(max_message_bytes_);
  // The answer's bytes while it is read and parsed, kReceiveCopies times.
  codemode::ByteHold hold(answer_budget ? answer_budget : receive_budget_);
  auto charge = [&](size_t size) {
    if (const codemode::ByteBudget* full = hold.GrowBy(kReceiveCopies * size)) {
      result.busy = full->Describe();
      std::string().swap(result.body);
      return false;
    }
    return true;
  };
  req.response_handler = [&](const httplib::Response& res) {
    result.status = res.status;
    event_stream = res.status == 200 && IsEventStream(res.get_header_value("Content-Type"));
    if (initialize && res.status == 200 && res.has_header("Mcp-Session-Id")) {
      codemode::MutexLock lock(&mu_);
      session_id_ = res.get_header_value("Mcp-Session-Id");
    }
    // A JSON body that says it is too large is not read at all.
    if (res.status == 200 && !event_stream &&
        res.get_header_value<uint64_t>("Content-Length") > max_message_bytes_) {
      result.too_large = true;
      return false;
    }
    return true;
  };
  // A request's stream ends for us with its response: a server that keeps it open and
  // sends list_changed on it would otherwise have every refresh hold one more stream, its
  // thread and its socket (attack round 15, F2). (Its notifications before the response
  // belong to the request, and are read.)
  const bool request = wire::LooksLikeRequest(message);
  bool answered = false;
  auto dispatch = [&](json m) {
    if (request && wire::IsResponse(m) && m["id"] == message["id"]) answered = true;
    on_message(std::move(m));
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (event_stream) {
      if (!charge(size)) return false;
      // Dispatch each event as it arrives: progress must reach the caller before the
      // response ends the stream.
      result.too_large = !parser.Feed(data, size, [&](const SseParser::Event& event) {
        if (event.event == "message") {
          // An unusable event is logged and dropped; the stream goes on.
          DispatchText(config_.name, event.data, dispatch, max_message_bytes_).IgnoreError();
        }
      });
      hold.ShrinkTo(kReceiveCopies * parser.buffered());
      return !result.too_large && !answered;
    }
    if (result.status != 200) {  // an error's text: its head is enough
      result.body.append(data, std::min(size, kMaxErrorBody - std::min(kMaxErrorBody, result.body.size())));
      return true;
    }
    // The response, JSON: stop reading (httplib drops the connection) at the limit rather
    // than hold a body of any size the server chooses.
    if (size > max_message_bytes_ - std::min(max_message_bytes_, result.body.size())) {
      result.too_large = true;
      std::string().swap(result.body);
      return false;
    }
    if (!charge(size)) return false;
    result.body.append(data, size);
    return true;
  };
  httplib::Response res;
  client.send(req, res, result.error);
  // Closing the stream after the response is how httplib reports our own stop.
  if (answered && result.error == httplib::Error::Canceled) result.error = httplib::Error::Success;
  if (result.too_large || !result.busy.empty()) {
    spdlog::warn("upstream {}: the answer to {} was not read: {}", config_.name,
                 codemode::LogText(wire::MethodOf(message)),
                 result.too_large ? absl::StrCat("a message larger than ", max_message_bytes_,
                                                 " bytes (--max_upstream_message_bytes)")
                                  : absl::StrCat("the answers being received hold the gateway's "
                                                 "budget (", result.busy, ")"));
  }
  if (result.error == httplib::Error::Success && result.status == 200 && !event_stream &&
      !result.body.empty()) {
    result.unusable = DispatchText(config_.name, result.body, on_message, max_message_bytes_);
  }
  if (event_stream) result.cursor = {parser.last_event_id(), parser.retry_ms()};
  return result;
}

absl::Status StreamableHttpTransport::Post(const json& message, HttpExchange* exchange,
                                           const std::function<void(json)>& on_message,
                                           bool* connection_lost, int* final_status,
                                           StreamCursor* cursor) {
  *connection_lost = false;
  *final_status = 0;
  const bool initialize = wire::MethodOf(message) == "initialize";
  for (int attempt = 0;; ++attempt) {
    auto client = NewClient(wire::LooksLikeRequest(message) ? kStreamReadTimeout : connect_timeout_);
    if (exchange != nullptr) {
      exchange->SetClient(client);
      if (exchange->abandoned) return absl::CancelledError("abandoned");
    }
    PostResult r = PostOnce(message, *client, on_message,
                            exchange != nullptr ? exchange->answer_budget : nullptr);
    if (closing_ || (exchange != nullptr && exchange->abandoned)) {
      return absl::CancelledError("abandoned");
    }
    if (r.too_large) return MessageTooLargeError(max_message_bytes_);
    if (!r.busy.empty()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the answer was not read: receiving it (charged ", kReceiveCopies,
          " times its bytes as they arrive) would pass the gateway's ", r.busy,
          "; retry when fewer calls are in flight"));
    }
    // A JSON answer that could not be used: say why rather than "no response".
    if (!r.unusable.ok()) return absl::InvalidArgumentError(r.unusable.message());
    if (r.error != httplib::Error::Success) {
      if (IsConnectError(r.error)) {
        *connection_lost = true;
        return absl::UnavailableError(DescribeConnectFailure(url_, kProbeTimeout));
      }
      return absl::UnavailableError(
          absl::StrCat("HTTP request failed: ", httplib::to_string(r.error)));
    }
    *final_status = r.status;
    // 404 is how a 2025 server says the session is gone; 400 also, unless its body is a
    // JSON-RPC error that answers this very request: the server has refused the request,
    // and sending it again on a new session would run it twice (attack round 15, F1).
    const bool expired = r.status == 404 || (r.status == 400 && !AnswersWithError(message, r.body));
    if (expired && !r.session_used.empty() && !initialize && attempt == 0) {
      spdlog::info("upstream {}: session expired (HTTP {}); initializing again", config_.name,
                   r.status);
      absl::Status s = Reinitialize(r.session_used);
      if (!s.ok()) {
        return absl::UnavailableError(
            absl::StrCat("session expired; initializing again failed: ", s.message()));
      }
      continue;
    }
    if (cursor != nullptr) *cursor = r.cursor;
    if (r.status == 200 || r.status == 202) return absl::OkStatus();
    // In the 2026-07-28 era a request's own errors come as HTTP 400/404 with a JSON-RPC
    // error that names it: that is its answer.
    if (AnswersWithError(message, r.body) &&
        DispatchText(config_.name, r.body, on_message, max_message_bytes_).ok()) {
      return absl::OkStatus();
    }
    return HttpStatusError(r.status, r.body);
  }
}

absl::Status StreamableHttpTransport::Reinitialize(const std::string& stale_session) {
  codemode::MutexLock reinit_lock(&reinit_mu_);
  json init;
  {
    codemode::MutexLock lock(&mu_);
    if (session_id_ != stale_session) return absl::OkStatus();  // another thread did it
    session_id_.clear();
    init = initialize_request_;
  }
  if (init.is_null()) return absl::FailedPreconditionError("no initialize request to repeat");
  // A string id cannot collide with JsonRpcClient's integer ids; the answer is ours.
  init["id"] = absl::StrCat("mcp-gateway-reinitialize-", ++reinit_count_);
  json response;
  auto capture = [&](json m) {
    if (wire::IsResponse(m) && m["id"] == init["id"]) {
      response = std::move(m);
    } else if (callbacks_.on_message) {
      callbacks_.on_message(std::move(m));
    }
  };
  auto client = NewClient(connect_timeout_);
  PostResult r = PostOnce(init, *client, capture);
  if (r.error != httplib::Error::Success) {
    return absl::UnavailableError(absl::StrCat("initialize: ", httplib::to_string(r.error)));
  }
  if (r.status != 200) return HttpStatusError(r.status, r.body);
  if (!response.contains("result")) {
    return absl::UnavailableError(absl::StrCat(
        "initialize failed: ", response.contains("error") ? wire::Dump(response["error"]) : "no answer"));
  }
  json initialized = MakeNotification("notifications/initialized", nullptr);
  auto client2 = NewClient(connect_timeout_);
  PostResult n = PostOnce(initialized, *client2, capture);
  if (n.error != httplib::Error::Success || (n.status != 202 && n.status != 200)) {
    return absl::UnavailableError("notifications/initialized was not accepted");
  }
  spdlog::info("upstream {}: new session {}", config_.name, codemode::LogText(session_id()));
  return absl::OkStatus();
}

absl::Status StreamableHttpTransport::StartExchange(
    const json& message, std::shared_ptr<codemode::ByteBudget> answer_budget) {
  auto exchange = std::make_shared<HttpExchange>();
  exchange->id = message.value("id", json());  // null for a notification
  exchange->answer_budget = std::move(answer_budget);
  codemode::MutexLock lock(&workers_mu_);
  if (closing_) return absl::UnavailableError("connection closed");
  // Join the workers that have finished (their last act was setting `done`).
  for (auto it = workers_.begin(); it != workers_.end();) {
    if ((*it)->done && (*it)->thread.joinable() &&
        (*it)->thread.get_id() != std::this_thread::get_id()) {
      (*it)->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  workers_.push_back(exchange);
  exchange->thread = codemode::StartThread("upstream http post", [this, exchange, message] {
    bool answered = false;
    auto on_message = [&](json m) {
      if (wire::IsResponse(m) && m["id"] == exchange->id) {
        answered = true;
      }
      if (callbacks_.on_message) callbacks_.on_message(std::move(m));
    };
    bool connection_lost = false;
    int status = 0;
    StreamCursor cursor;
    absl::Status s = Post(message, exchange.get(), on_message, &connection_lost, &status, &cursor);
    // The response stream ended without the response but gave an event id: the server
    // means us to come back for the rest (it may close streams to poll, SEP-1699).
    if (s.ok() && wire::LooksLikeRequest(message) && !answered && !cursor.last_event_id.empty()) {
      s = Resume(exchange.get(), &cursor, on_message, [&] { return answered; });
      if (absl::IsCancelled(s)) s = absl::OkStatus();  // closing or abandoned: said elsewhere
      status = 200;
    }
    if (!wire::LooksLikeRequest(message)) {
      if (!s.ok()) {
        spdlog::debug("upstream {}: {} not delivered: {}", config_.name,
                      codemode::LogText(wire::MethodOf(message)),
                      codemode::LogLongText(s.message()));
      }
    } else if (!closing_ && !exchange->abandoned) {
      if (connection_lost) {
        if (callbacks_.on_closed) callbacks_.on_closed(std::string(s.message()));
      } else if (!s.ok()) {
        if (callbacks_.on_request_failed) callbacks_.on_request_failed(exchange->id, s);
      } else if (!answered && status == 200 && callbacks_.on_request_failed) {
        callbacks_.on_request_failed(
            exchange->id, absl::UnavailableError("the response stream ended without a response"));
      }
    }
    exchange->done = true;
  });
  return absl::OkStatus();
}

absl::Status StreamableHttpTransport::Send(const json& message) {
  if (closing_) return absl::UnavailableError("connection closed");
  if (wire::MethodOf(message) == "initialize") {
    codemode::MutexLock lock(&mu_);
    initialize_request_ = message;
  }
  if (wire::LooksLikeRequest(message)) return StartExchange(message);
  // notifications/cancelled comes from a caller that has given up already: do not make it
  // wait for a server that may be hung.
  if (wire::MethodOf(message) == "notifications/cancelled") return StartExchange(message);
  // Other notifications and our answers to server requests: short exchanges answered with
  // 202, sent in order (notifications/initialized must precede the next request).
  bool connection_lost = false;
  int status = 0;
  auto forward = [this](json m) {
    if (callbacks_.on_message) callbacks_.on_message(std::move(m));
  };
  absl::Status s = Post(message, nullptr, forward, &connection_lost, &status);
  if (connection_lost && !closing_ && callbacks_.on_closed) {
    callbacks_.on_closed(std::string(s.message()));
  }
  return s;
}

absl::Status StreamableHttpTransport::SendRequest(
    const json& request, std::shared_ptr<codemode::ByteBudget> receiving, const SendLimits&) {
  if (!receiving || !wire::LooksLikeRequest(request) ||
      wire::MethodOf(request) == "initialize") {
    return Send(request);
  }
  if (closing_) return absl::UnavailableError("connection closed");
  return StartExchange(request, std::move(receiving));
}

void StreamableHttpTransport::Abandon(const json& id) {
  codemode::MutexLock lock(&workers_mu_);
  for (auto& exchange : workers_) {
    if (exchange->id == id && !exchange->done) {
      exchange->abandoned = true;
      exchange->Stop();
    }
  }
}

void StreamableHttpTransport::OnInitialized(const std::string& protocol_version) {
  codemode::MutexLock workers_lock(&workers_mu_);
  {
    codemode::MutexLock lock(&mu_);
    protocol_version_ = protocol_version;
    if (get_stream_started_) return;
    get_stream_started_ = true;
  }
  if (closing_) return;
  auto exchange = std::make_shared<HttpExchange>();
  workers_.push_back(exchange);
  exchange->thread = codemode::StartThread("upstream http get", [this, exchange] { RunGetStream(exchange); });
  // Until the GET stream is open, a server has nowhere to put what belongs to no request
  // (and one answering a resumed call on any GET would hand it to the wrong stream): wait
  // for its first answer, briefly, before the first request goes out.
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(workers_mu_) {
    return get_stream_settled_ || closing_.load();
  };
  workers_mu_.AwaitWithTimeout(absl::Condition(&settled), absl::Seconds(5));
}

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
  // is buffered and dispatched (attack round 7, F11).
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
  client->send(req, res, result.error);
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
  auto forward = [this](json m) {
    if (callbacks_.on_message) callbacks_.on_message(std::move(m));
  };
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
    // must not have us reopen at the floor rate (attack round 11 re-check).
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

void StreamableHttpTransport::DeleteSession() {
  httplib::Headers headers = ConfiguredHeaders(config_);
  {
    codemode::MutexLock lock(&mu_);
    if (session_id_.empty()) return;
    headers.emplace("Mcp-Session-Id", session_id_);
    if (!protocol_version_.empty()) headers.emplace("MCP-Protocol-Version", protocol_version_);
  }
  auto client = MakeClient(url_.origin, std::min(connect_timeout_, kDeleteTimeout), kDeleteTimeout);
  auto res = client->Delete(url_.target, headers);
  spdlog::debug("upstream {}: DELETE session: {}", config_.name,
                res ? std::to_string(res->status) : httplib::to_string(res.error()));
}

void StreamableHttpTransport::Close() {
  std::call_once(close_once_, [this] {
    std::list<std::shared_ptr<HttpExchange>> workers;
    closing_ = true;
    { codemode::MutexLock start_lock(&start_mu_); }
    {
      codemode::MutexLock lock(&workers_mu_);  // its unlock wakes waits on closing_
      workers.swap(workers_);
    }
    for (auto& exchange : workers) exchange->StopAndJoin();
    if (!url_.origin.empty()) DeleteSession();  // errors ignored: the server may be gone
  });
}

}  // namespace gateway
