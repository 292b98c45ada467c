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
#include "base/untrusted_json.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

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
// `message`: stateless MCP answers a request's own faults with HTTP 400 or 404.
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
  // A stateless message (2026-07-28) says its version, method and name in headers too, and
  // belongs to no session.
  const auto standard = StandardHeadersOf(message);
  for (const auto& [name, value] : standard) req.headers.emplace(name, value);
  if (!standard.empty() && wire::MethodOf(message) == "tools/call") {
    // And the arguments the tool's x-mcp-header declarations name (SEP-2243).
    const json& params = message["params"];
    codemode::MutexLock lock(&mu_);
    auto declared = params.contains("name") && params["name"].is_string()
                        ? param_headers_.find(params["name"].get<std::string>())
                        : param_headers_.end();
    if (declared != param_headers_.end()) {
      for (auto& [name, value] : ParamHeaderValues(declared->second, params.value("arguments", json::object()))) {
        req.headers.emplace(std::move(name), std::move(value));
      }
    }
  }
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

void StreamableHttpTransport::LogUnread(const json& message, const PostResult& r) const {
  spdlog::warn("upstream {}: the answer to {} was not read: {}", config_.name,
               codemode::LogText(wire::MethodOf(message)),
               r.too_large ? absl::StrCat("a message larger than ", max_message_bytes_,
                                          " bytes (--max_upstream_message_bytes)")
                           : absl::StrCat("the answers being received hold the gateway's budget (",
                                          r.busy, ")"));
}

namespace {

// An answer's bytes while it is read and parsed (kReceiveCopies times its bytes so far). A
// caller's answer may wait for room (http_transport.h); the gateway's own requests and what
// Send() posts without an exchange, which nothing could cancel, do not.
class AnswerHold {
 public:
  AnswerHold(const HttpExchange* exchange, std::shared_ptr<codemode::ByteBudget> own,
             absl::Duration idle_timeout, const std::atomic<bool>& closing)
      : exchange_(exchange != nullptr && exchange->answer_budget ? exchange : nullptr),
        closing_(closing),
        hold_(exchange_ != nullptr ? exchange_->answer_budget : std::move(own)),
        idle_timeout_(idle_timeout) {}

  // A refused charge waits at most the idle timeout from the refusal (zero: as long as it
  // takes): the answer gets no byte read meanwhile.
  const codemode::ByteBudget* GrowBy(size_t bytes) {
    if (exchange_ == nullptr) return hold_.GrowBy(bytes);
    const codemode::SteadyTime until = idle_timeout_ == absl::ZeroDuration() ? codemode::SteadyTime::max()
                                                                             : codemode::SteadyDeadline(idle_timeout_);
    return hold_.GrowOrWait(bytes, until, [this] { return closing_ || exchange_->abandoned; });
  }
  void ShrinkTo(size_t bytes) { hold_.ShrinkTo(bytes); }

 private:
  const HttpExchange* const exchange_;  // a caller's, or null
  const std::atomic<bool>& closing_;
  codemode::ByteHold hold_;
  const absl::Duration idle_timeout_;
};

// The ids of the responses in `message`, an object or a batch of them, by JsonRpcClient's
// rule (OnMessage): an object with an id and no string "method" is a response, and only an
// integer id names one of the client's requests.
std::vector<int64_t> ResponseIds(const json& message) {
  std::vector<int64_t> ids;
  auto one = [&ids](const json& m) {
    if (!m.is_object()) return;
    auto method = m.find("method");
    if (method != m.end() && method->is_string()) return;
    auto id = m.find("id");
    if (id != m.end() && id->is_number_integer()) ids.push_back(id->get<int64_t>());
  };
  if (message.is_array()) {
    for (const json& m : message) one(m);
  } else {
    one(message);
  }
  return ids;
}

// Whether `message` (an object, or a batch of them) holds the response to the request whose
// id is `id`: a response by ResponseIds()'s rule, or for the re-initialize's string id an
// object without a string "method" that carries that id.
bool Answers(const json& message, const json& id) {
  if (id.is_number_integer()) {
    const std::vector<int64_t> ids = ResponseIds(message);
    return std::find(ids.begin(), ids.end(), id.get<int64_t>()) != ids.end();
  }
  auto one = [&id](const json& m) {
    if (!m.is_object()) return false;
    auto method = m.find("method");
    auto got = m.find("id");
    return !(method != m.end() && method->is_string()) && got != m.end() && *got == id;
  };
  if (!message.is_array()) return one(message);
  return std::any_of(message.begin(), message.end(), one);
}

}  // namespace

StreamableHttpTransport::PostResult StreamableHttpTransport::PostOnce(
    const json& message, httplib::Client& client, const std::function<void(json)>& on_message,
    const HttpExchange* exchange) {
  const bool initialize = wire::MethodOf(message) == "initialize";
  PostResult result;
  httplib::Request req = NewPost(message, initialize, &result.session_used);

  bool event_stream = false;
  SseParser parser(max_message_bytes_);
  AnswerHold hold(exchange, receive_budget_, message_idle_timeout_, closing_);
  auto charge = [&](size_t size) {
    const codemode::ByteBudget* full = hold.GrowBy(kReceiveCopies * size);
    if (full == nullptr) return true;
    result.busy = full->Describe();
    std::string().swap(result.body);
    return false;
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
  // A request's stream ends for us with its response: what comes after is not read (else
  // list_changed sent on answered streams would pile up streams and threads).
  const bool request = wire::LooksLikeRequest(message);
  bool answered = false;
  auto dispatch = [&](json m) {
    if (request && Answers(m, message["id"])) answered = true;
    on_message(std::move(m));
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (event_stream) {
      if (!charge(size)) return false;
      // Each event goes out as it arrives: progress comes before the response.
      result.too_large = !parser.Feed(data, size, [&](const SseParser::Event& event) {
        // (An unusable event is logged and dropped; the stream goes on.)
        if (event.event != "message") return;
        DispatchText(config_.name, event.data, dispatch, max_message_bytes_).IgnoreError();
      });
      hold.ShrinkTo(kReceiveCopies * parser.buffered());
      return !result.too_large && !answered;
    }
    if (result.status != 200) {  // an error's text: its head is enough
      result.body.append(data, std::min(size, kMaxErrorBody - std::min(kMaxErrorBody, result.body.size())));
      return true;
    }
    // The response, JSON: reading stops at the limit (httplib drops the connection).
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
  SendWithoutSigpipe(client, req, res, result.error);
  // Closing the stream after the response is how httplib reports our own stop.
  if (answered && result.error == httplib::Error::Canceled) result.error = httplib::Error::Success;
  if (result.too_large || !result.busy.empty()) LogUnread(message, result);
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
    PostResult r = PostOnce(message, *client, on_message, exchange);
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
    // and sending it again on a new session would run it twice.
    const bool expired = r.status == 404 || (r.status == 400 && !AnswersWithError(message, r.body));
    // Only a request is sent again on a new session: an answer to a server's request or a
    // notification belonged to the session that is gone (and an answer to a ping the server
    // sent while we initialized again is posted from inside Reinitialize, whose lock a
    // second Reinitialize on the same thread would wait on forever).
    if (expired && !r.session_used.empty() && !initialize && attempt == 0 &&
        wire::LooksLikeRequest(message)) {
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
    // In stateless MCP a request's own errors come as HTTP 400/404 with a JSON-RPC
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
    } else {
      Deliver(std::move(m), nullptr);
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
  // Drop the exchanges that have finished (their threads are exchange_threads_' to join).
  workers_.remove_if([](const std::shared_ptr<HttpExchange>& e) { return e->done.load(); });
  workers_.push_back(exchange);
  absl::Status started = exchange_threads_.Schedule([this, exchange, message] {
    bool answered = false;
    auto on_message = [&](json m) {
      if (Answers(m, exchange->id)) answered = true;
      Deliver(std::move(m), exchange.get());
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
  if (!started.ok()) workers_.remove(exchange);
  return started;
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
  auto forward = [this](json m) { Deliver(std::move(m), nullptr); };
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

void StreamableHttpTransport::Deliver(json message, const HttpExchange* via) {
  // The responses that did not come on their request's stream.
  std::vector<int64_t> elsewhere = ResponseIds(message);
  if (via != nullptr && via->id.is_number_integer()) {
    elsewhere.erase(std::remove(elsewhere.begin(), elsewhere.end(), via->id.get<int64_t>()),
                    elsewhere.end());
  }
  if (callbacks_.on_message) callbacks_.on_message(std::move(message));
  if (!elsewhere.empty()) AbandonAll(std::move(elsewhere));
}

void StreamableHttpTransport::AbandonAll(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  codemode::MutexLock lock(&workers_mu_);
  for (auto& exchange : workers_) {
    if (!exchange->done && exchange->id.is_number_integer() &&
        std::binary_search(ids.begin(), ids.end(), exchange->id.get<int64_t>())) {
      exchange->abandoned = true;
      exchange->Stop();
    }
  }
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

void StreamableHttpTransport::SetParamHeaders(std::map<std::string, std::vector<ParamHeader>> by_tool) {
  codemode::MutexLock lock(&mu_);
  param_headers_ = std::move(by_tool);
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
  if (absl::Status started = exchange_threads_.Schedule([this, exchange] { RunGetStream(exchange); });
      !started.ok()) {
    spdlog::warn("upstream {}: no GET stream: {}", config_.name, codemode::LogLongText(started.message()));
    workers_.remove(exchange);
    return;
  }
  // Until the GET stream is open, a server has nowhere to put what belongs to no request
  // (and one answering a resumed call on any GET would hand it to the wrong stream): wait
  // for its first answer, briefly, before the first request goes out.
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(workers_mu_) {
    return get_stream_settled_ || closing_.load();
  };
  workers_mu_.AwaitWithTimeout(absl::Condition(&settled), absl::Seconds(5));
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
  codemode::NoSigpipeHere no_sigpipe;  // as in SendWithoutSigpipe()
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
    for (auto& exchange : workers) exchange->StopUntilDone();
    exchange_threads_.Stop();
    if (!url_.origin.empty()) DeleteSession();  // errors ignored: the server may be gone
  });
}

}  // namespace gateway
