// The two HTTP client transports of MCP.
//
// StreamableHttpTransport (spec 2025-03-26 and later, "Streamable HTTP"): every message is
// POSTed to the one endpoint URL. A request's answer is either an application/json body or
// a text/event-stream of messages (progress, server requests, then the response), read as
// it arrives. Notifications and responses get 202. The server may hand out an
// Mcp-Session-Id at initialize, which then goes on every request; 404 (or 400) on a
// request carrying it means the session is gone, so the transport repeats initialize once
// and retries. After initialize a GET stream carries unsolicited notifications (405: the
// server has none). Close() DELETEs the session.
//
// SseTransport (spec 2024-11-05, "HTTP with SSE"): a GET opens an event stream whose
// first `endpoint` event names the URL to POST messages to; every response and
// notification then arrives as a `message` event on that stream.
//
// Requests of StreamableHttpTransport run on worker threads (one per request in flight) so
// that callers can time out or cancel while a response streams; Abandon() cuts one.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "upstream/config.h"
#include "upstream/options.h"
#include "upstream/http_util.h"
#include "upstream/transport.h"
#include "base/log_text.h"
#include "base/mutex.h"
#include "base/thread_pool.h"

namespace httplib {
class Client;
struct Request;
}

namespace gateway {

struct HttpExchange;  // one HTTP exchange on its own thread (http_transport_common.h)

// What both HTTP transports hold: the configuration, the URL and callbacks Start() sets,
// and the closing flag Close() raises.
class HttpTransportBase : public ClientTransport {
 public:
  HttpTransportBase(UpstreamConfig config, absl::Duration connect_timeout,
                    StreamRetryPolicy retry = {},
                    size_t max_message_bytes = kDefaultMaxUpstreamMessageBytes,
                    std::shared_ptr<codemode::ByteBudget> receive_budget = nullptr,
                    absl::Duration message_idle_timeout = kDefaultUpstreamMessageIdleTimeout);

 protected:
  // Start()'s first step: refuses once Close() began, parses the URL, keeps the callbacks.
  absl::Status BeginStart(TransportCallbacks callbacks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(start_mu_);
  // A client for the configured origin with this read timeout.
  std::shared_ptr<httplib::Client> NewClient(absl::Duration read_timeout) const;
  // A GET of the configured URL asking for an event stream, and the client to send it
  // with, handed to `exchange` (whose Stop() cuts the stream).
  std::shared_ptr<httplib::Client> EventStreamGet(HttpExchange* exchange,
                                                  httplib::Request* request) const;
  // Logs (rate-limited) that `stream` was cut for an event that stopped growing.
  void LogStalledEvent(const char* stream);

  const UpstreamConfig config_;
  const absl::Duration connect_timeout_;
  const StreamRetryPolicy retry_;
  // The largest message (JSON body, SSE event) read from the server; see UpstreamOptions.
  const size_t max_message_bytes_;
  // Answers being received and parsed (UpstreamOptions::receive_budget); may be null.
  const std::shared_ptr<codemode::ByteBudget> receive_budget_;
  // An event stream whose partial event gets no byte for this long is cut and reopened
  // (StalledEventWatchdog); zero: never. UpstreamOptions::message_idle_timeout.
  const absl::Duration message_idle_timeout_;
  codemode::LogRateLimit stall_log_{1, 10};
  HttpUrl url_;
  TransportCallbacks callbacks_;
  codemode::Mutex start_mu_;  // Close() waits for a Start() in progress
  std::atomic<bool> closing_{false};
  std::once_flag close_once_;
};

class StreamableHttpTransport : public HttpTransportBase {
 public:
  using HttpTransportBase::HttpTransportBase;
  ~StreamableHttpTransport() override;  // Close()s

  absl::Status Start(TransportCallbacks callbacks, absl::Duration timeout) override;
  absl::Status Send(const nlohmann::json& message) override;
  absl::Status SendRequest(const nlohmann::json& request,
                           std::shared_ptr<codemode::ByteBudget> receiving,
                           const SendLimits& limits) override;
  void Abandon(const nlohmann::json& id) override;
  void SetParamHeaders(std::map<std::string, std::vector<ParamHeader>> by_tool) override;
  void OnInitialized(const std::string& protocol_version) override;
  void Close() override;

  std::string session_id() const;

 private:
  // Where an SSE stream stood when it ended: what resuming it needs (MCP 2025-11-25,
  // "Resumability and Redelivery").
  struct StreamCursor {
    std::string last_event_id;       // "" when the stream gave no id: not resumable
    std::optional<int64_t> retry_ms; // the server's `retry:`, if it sent one
  };
  struct PostResult;
  struct GetResult;
  // Hands `message` to the client; it came on `via`'s stream (null: the GET stream's, or a
  // POST's the gateway made of its own). A response (by the client's rule, in a batch too)
  // to a request whose exchange is not `via` leaves that exchange owed nothing, and it is
  // stopped: a server that answers elsewhere would have it hold its stream, thread and the
  // call's answer budget until the idle deadline. (A server may answer on another stream
  // only when the request's own is resumed, which happens on the request's exchange.)
  void Deliver(nlohmann::json message, const HttpExchange* via);
  // Abandon() of each of `ids` in one pass over the exchanges, however many ids a batch holds.
  void AbandonAll(std::vector<int64_t> ids);
  // The POST of `message`, with the session's headers (the session id it carries goes to
  // `*session_used`).
  httplib::Request NewPost(const nlohmann::json& message, bool initialize, std::string* session_used);
  // One POST; messages from the response (JSON or SSE) go to `on_message` as they arrive.
  // A request's SSE stream is read up to its response and then closed: what a server sends
  // on it afterwards is not read (each such stream would hold a thread and a socket).
  // The answer's bytes are charged to the `exchange`'s answer_budget (a caller's), or to
  // receive_budget_ when either is null. A caller's answer that its budget refuses while no
  // other answer waits on it waits for room (ByteHold::GrowOrWait: up to
  // message_idle_timeout_ from the refusal, zero: as long as it takes, and while the
  // exchange is not abandoned nor the transport closing); the others fail.
  // Says why the answer to `message` was not read (too large, or the budget was full).
  void LogUnread(const nlohmann::json& message, const PostResult& r) const;
  PostResult PostOnce(const nlohmann::json& message, httplib::Client& client,
                      const std::function<void(nlohmann::json)>& on_message,
                      const HttpExchange* exchange = nullptr);
  // PostOnce, plus re-initialize-and-retry when the session has expired. Sets
  // `*connection_lost` when the server could not be reached at all, and `*cursor` (when
  // given) to where the response's SSE stream ended.
  absl::Status Post(const nlohmann::json& message, HttpExchange* exchange,
                    const std::function<void(nlohmann::json)>& on_message,
                    bool* connection_lost, int* final_status, StreamCursor* cursor = nullptr);
  // One GET stream, with Last-Event-ID when `cursor` holds an id; advances the cursor.
  // Reading stops once `finished()` (when given) is true: a resumed stream after its
  // response.
  GetResult GetOnce(HttpExchange* exchange, StreamCursor* cursor,
                    const std::function<void(nlohmann::json)>& on_message,
                    const std::function<void()>& on_answered = nullptr,
                    const std::function<bool()>& finished = nullptr);
  // A request's SSE stream ended before its response: GETs with Last-Event-ID, each after
  // the delay the server's `retry:` asked for (within retry_, backing off), until
  // `answered()` or kMaxResumes attempts.
  absl::Status Resume(HttpExchange* exchange, StreamCursor* cursor,
                      const std::function<void(nlohmann::json)>& on_message,
                      const std::function<bool()>& answered);
  // Waits `delay`; false when the transport closes or `exchange` is abandoned meanwhile.
  bool WaitToReconnect(absl::Duration delay, const HttpExchange* exchange);
  absl::Status Reinitialize(const std::string& stale_session);
  // Posts `message` on a worker thread. For a request, failures go to on_request_failed;
  // for a notification they are only logged.
  absl::Status StartExchange(const nlohmann::json& message,
                             std::shared_ptr<codemode::ByteBudget> answer_budget = nullptr);
  void RunGetStream(std::shared_ptr<HttpExchange> exchange);
  void DeleteSession();

  mutable codemode::Mutex mu_;
  std::string session_id_ ABSL_GUARDED_BY(mu_);
  std::string protocol_version_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<ParamHeader>> param_headers_ ABSL_GUARDED_BY(mu_);  // by tool
  nlohmann::json initialize_request_ ABSL_GUARDED_BY(mu_);  // repeated when the session expires
  bool get_stream_started_ ABSL_GUARDED_BY(mu_) = false;
  // Its first GET was answered (or failed).
  bool get_stream_settled_ ABSL_GUARDED_BY(workers_mu_) = false;

  codemode::Mutex reinit_mu_;  // one re-initialize at a time
  int reinit_count_ ABSL_GUARDED_BY(reinit_mu_) = 0;

  codemode::Mutex workers_mu_;
  // The exchanges under way (or done, until the next StartExchange drops them).
  std::list<std::shared_ptr<HttpExchange>> workers_ ABSL_GUARDED_BY(workers_mu_);
  // Their threads, one each; joined by Close() once every exchange is done, and last to go.
  codemode::ThreadPool exchange_threads_{ExchangeThreads()};
  static codemode::ThreadPoolOptions ExchangeThreads() {
    codemode::ThreadPoolOptions o;
    o.name = "upstream http";
    return o;
  }
};

class SseTransport : public HttpTransportBase {
 public:
  using HttpTransportBase::HttpTransportBase;
  ~SseTransport() override;  // Close()s

  absl::Status Start(TransportCallbacks callbacks, absl::Duration timeout) override;
  absl::Status Send(const nlohmann::json& message) override;
  bool CutForMisbehaviour() const override;
  void Close() override;

  std::string endpoint() const;

 private:
  void RunStream();
  // One event of the stream: `endpoint` sets endpoint_, `message` is dispatched.
  void OnEvent(const SseParser::Event& event);

  mutable codemode::Mutex mu_;
  std::string endpoint_ ABSL_GUARDED_BY(mu_);  // where to POST, once the endpoint event arrived
  bool stream_ended_ ABSL_GUARDED_BY(mu_) = false;
  std::string stream_error_ ABSL_GUARDED_BY(mu_);  // why the GET stream ended
  bool cut_for_misbehaviour_ ABSL_GUARDED_BY(mu_) = false;

  std::shared_ptr<HttpExchange> stream_;  // set up by Start() under start_mu_
};

}  // namespace gateway
