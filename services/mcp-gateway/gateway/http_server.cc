// HttpServer: the MCP Streamable HTTP transport (protocol 2025-11-25) on cpp-httplib.
//
// One endpoint (`path`):
//   POST    one JSON-RPC message. initialize without Mcp-Session-Id creates a session;
//           notifications and responses get 202; requests get application/json, or an SSE
//           stream (progress notifications, then the response) for tools/call when the
//           client accepts text/event-stream.
//   GET     a long-lived SSE stream for notifications that belong to no request
//           (tools/list_changed, log messages); one per session.
//   DELETE  ends the session.
// Every request first passes the Origin/Host (403), bearer (401) and MCP-Protocol-Version
// (400) checks.
//
// Streams are httplib chunked content providers fed from a per-request queue (StreamSink,
// the ReplySink McpSession writes to). The provider waits on the queue in short slices so
// it notices a vanished client (and server shutdown) quickly; a client that disconnects
// before its tools/call is answered gets the call cancelled, as if it had sent
// notifications/cancelled.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/thread.h"
#include "gateway/http_checks.h"
#include "gateway/mcp_wire.h"
#include "gateway/transports.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include "spdlog/spdlog.h"

namespace gateway {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kSessionHeader = "Mcp-Session-Id";
constexpr const char* kVersionHeader = "MCP-Protocol-Version";
// How long a stream waits for a message before checking the client and the server again.
constexpr auto kStreamPollSlice = std::chrono::milliseconds(200);
// SSE comment sent on otherwise silent streams so proxies and clients keep them open.
constexpr auto kKeepAliveEvery = std::chrono::seconds(15);
// Notifications queued for a slow stream beyond this are dropped (responses never are).
constexpr size_t kMaxQueuedMessages = 10000;

// The ReplySink behind one HTTP response: a queue drained by the response's content
// provider on an httplib thread.
class StreamSink : public ReplySink {
 public:
  enum class Next { kMessage, kIdle, kEnd };

  void Send(const json& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    if (queue_.size() >= kMaxQueuedMessages && !wire::IsResponse(message)) return;
    queue_.push_back(message);
    cv_.notify_all();
  }

  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

  // Waits up to `wait` for the next message. kEnd once closed and drained.
  Next Pop(json* out, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, wait, [&] { return !queue_.empty() || closed_; });
    if (!queue_.empty()) {
      *out = std::move(queue_.front());
      queue_.pop_front();
      return Next::kMessage;
    }
    return closed_ ? Next::kEnd : Next::kIdle;
  }

  // The response, if it has already been sent (quick methods answer synchronously).
  std::optional<json> TakeResponse() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (wire::IsResponse(*it)) {
        json response = std::move(*it);
        queue_.erase(it);
        return response;
      }
    }
    return std::nullopt;
  }

  // Whatever was sent (for notifications, only ever an error about the message itself).
  std::optional<json> TakeAny() {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) return std::nullopt;
    json message = std::move(queue_.front());
    queue_.pop_front();
    return message;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<json> queue_;
  bool closed_ = false;
};

std::string SseEvent(const json& message) {
  return "event: message\ndata: " + wire::Dump(message) + "\n\n";
}

// An HTTP error with a JSON-RPC error body without id, as the spec suggests.
void SetError(httplib::Response& res, int status, int code, const std::string& message) {
  res.status = status;
  res.set_content(wire::Dump(MakeError(nullptr, code, message)), "application/json");
}

// A request answered in one piece. An error with a null id means the message itself was
// unusable, which HTTP reports as 400.
void SetSingleResponse(httplib::Response& res, const json& response, bool as_sse) {
  const bool rejected = response.contains("error") && response["id"].is_null();
  res.status = rejected ? 400 : 200;
  if (as_sse) {
    res.set_header("Cache-Control", "no-cache");
    res.set_content(SseEvent(response), "text/event-stream");
  } else {
    res.set_content(wire::Dump(response), "application/json");
  }
}

// httplib routes are regular expressions; the endpoint path is a literal.
std::string RegexEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

bool IsSupportedVersion(const std::string& version) {
  for (const char* v : kProtocolVersions) {
    if (version == v) return true;
  }
  return false;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct StreamState {
  Clock::time_point last_write = Clock::now();
  bool greeted = false;
};

// One step of a streamed response; httplib calls it until it calls out.done() or returns
// false (which aborts the response: the client is gone or the server is stopping).
//   sse:            SSE events; otherwise only the response, as a JSON body.
//   ends_with_reply: a POST stream ends after the response; a GET stream never does.
bool PumpStream(StreamSink& sink, httplib::DataSink& out, bool sse, bool ends_with_reply,
                StreamState& state, const std::atomic<bool>& stopping) {
  if (stopping) return false;
  json message;
  switch (sink.Pop(&message, kStreamPollSlice)) {
    case StreamSink::Next::kMessage: {
      const bool is_response = wire::IsResponse(message);
      std::string text = sse ? SseEvent(message) : is_response ? wire::Dump(message) : "";
      if (!text.empty()) {
        if (!out.write(text.data(), text.size())) return false;
        state.last_write = Clock::now();
      }
      if (is_response && ends_with_reply) out.done();
      return true;
    }
    case StreamSink::Next::kEnd:
      out.done();
      return true;
    case StreamSink::Next::kIdle:
      break;
  }
  if (!out.is_writable()) return false;  // the peer closed the connection
  if (sse && Clock::now() - state.last_write >= kKeepAliveEvery) {
    static const std::string kKeepAlive = ": keepalive\n\n";
    if (!out.write(kKeepAlive.data(), kKeepAlive.size())) return false;
    state.last_write = Clock::now();
  }
  return true;
}

}  // namespace

// One MCP session as the HTTP transport sees it.
struct HttpSession {
  std::string id;
  std::shared_ptr<McpSession> mcp;
  std::shared_ptr<StreamSink> get_stream;  // the open GET stream; guarded by Impl::mu
};

struct HttpServer::Impl {
  HttpServerOptions options;
  ToolProvider* provider;
  ServerOptions server_options;

  httplib::Server server;
  std::thread listener;
  int port = -1;

  std::atomic<bool> stopping{false};
  std::mutex reaper_mu;
  std::condition_variable reaper_cv;
  std::thread reaper;

  // Lock order: Impl::mu before any McpSession lock (McpSession never calls back into us
  // while holding its own).
  mutable std::mutex mu;
  bool started = false;
  bool stopped = false;
  std::map<std::string, std::shared_ptr<HttpSession>> sessions;

  Impl(HttpServerOptions o, ToolProvider* p, ServerOptions so)
      : options(std::move(o)), provider(p), server_options(std::move(so)) {}

  void InstallRoutes();
  bool DrainBody(const httplib::ContentReader& reader);
  bool CheckHeaders(const httplib::Request& req, httplib::Response& res);
  std::shared_ptr<HttpSession> FindSession(const httplib::Request& req, httplib::Response& res);
  void HandlePost(const httplib::Request& req, httplib::Response& res,
                  const httplib::ContentReader& reader);
  void CreateSession(httplib::Response& res, const json& message,
                     const http::AcceptedTypes& accept);
  void AnswerRequest(httplib::Response& res, const std::shared_ptr<HttpSession>& session,
                     const json& message, const http::AcceptedTypes& accept);
  void StreamReply(httplib::Response& res, const std::shared_ptr<HttpSession>& session,
                   std::shared_ptr<StreamSink> sink, const json& id, bool sse);
  void HandleGet(const httplib::Request& req, httplib::Response& res);
  void DetachGetStream(HttpSession& session, const std::shared_ptr<StreamSink>& sink);
  void HandleDelete(const httplib::Request& req, httplib::Response& res);
  void CloseSession(const std::shared_ptr<HttpSession>& session);
  void ReapLoop();
  void ReapIdle();
};

void HttpServer::Impl::InstallRoutes() {
  const std::string pattern = RegexEscape(options.path);
  httplib::Server::HandlerWithContentReader post =
      [this](const httplib::Request& req, httplib::Response& res,
             const httplib::ContentReader& reader) { HandlePost(req, res, reader); };
  server.Post(pattern, post);
  server.Get(pattern,
             [this](const httplib::Request& req, httplib::Response& res) { HandleGet(req, res); });
  // DELETE, PUT and PATCH may carry bodies: with content-reader handlers we decide how
  // much of one to read (httplib would buffer a chunked body whole before a plain handler).
  httplib::Server::HandlerWithContentReader del = [this](const httplib::Request& req,
                                                         httplib::Response& res,
                                                         const httplib::ContentReader& reader) {
    if (!DrainBody(reader)) {
      SetError(res, 413, kInvalidRequest, "Payload Too Large");
      return;
    }
    HandleDelete(req, res);
  };
  server.Delete(pattern, del);
  httplib::Server::HandlerWithContentReader not_allowed =
      [this](const httplib::Request&, httplib::Response& res,
             const httplib::ContentReader& reader) {
        DrainBody(reader);
        res.set_header("Allow", "GET, POST, DELETE");
        SetError(res, 405, kInvalidRequest, "method not allowed");
      };
  server.Put(pattern, not_allowed);
  server.Patch(pattern, not_allowed);
  server.Options(pattern, [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Allow", "GET, POST, DELETE");
    SetError(res, 405, kInvalidRequest, "method not allowed");
  });
  // Handlers do not throw by design; if one does, answer without leaking what() into a
  // header (httplib's default).
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          spdlog::error("http: handler failed: {}", e.what());
        } catch (...) {
          spdlog::error("http: handler failed");
        }
        SetError(res, 500, kInternalError, "internal error");
      });
}

// Reads and discards a body we have no use for, up to max_body_bytes. False when it was
// longer (or unreadable); the connection then carries the rest, which httplib rejects.
bool HttpServer::Impl::DrainBody(const httplib::ContentReader& reader) {
  size_t total = 0;
  return reader([&](const char*, size_t size) {
    total += size;
    return total <= options.max_body_bytes;
  });
}

// Origin/Host (DNS rebinding), bearer token, protocol version. On failure fills `res`.
bool HttpServer::Impl::CheckHeaders(const httplib::Request& req, httplib::Response& res) {
  if (req.has_header("Origin") &&
      !http::OriginAllowed(req.get_header_value("Origin"), options.allowed_origins)) {
    SetError(res, 403, kInvalidRequest, "Forbidden: origin not allowed");
    return false;
  }
  if (!http::HostAllowed(req.get_header_value("Host"), options.allowed_hosts, options.host)) {
    SetError(res, 403, kInvalidRequest, "Forbidden: host not allowed");
    return false;
  }
  if (!options.bearer_token.empty() &&
      !http::BearerMatches(req.get_header_value("Authorization"), options.bearer_token)) {
    res.set_header("WWW-Authenticate", "Bearer");
    SetError(res, 401, kInvalidRequest, "Unauthorized: a valid bearer token is required");
    return false;
  }
  // Absent is fine: the spec says to assume 2025-03-26 (or what was negotiated).
  if (req.has_header(kVersionHeader) && !IsSupportedVersion(req.get_header_value(kVersionHeader))) {
    SetError(
        res, 400, kInvalidRequest,
        "Bad Request: unsupported MCP-Protocol-Version " + req.get_header_value(kVersionHeader));
    return false;
  }
  return true;
}

// The session named by Mcp-Session-Id; 400 when the header is missing, 404 when unknown.
std::shared_ptr<HttpSession> HttpServer::Impl::FindSession(const httplib::Request& req,
                                                           httplib::Response& res) {
  if (!req.has_header(kSessionHeader)) {
    SetError(res, 400, kInvalidRequest, "Bad Request: Mcp-Session-Id header required");
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = sessions.find(req.get_header_value(kSessionHeader));
    if (it != sessions.end()) return it->second;
  }
  SetError(res, 404, kInvalidRequest, "Session not found: initialize a new session");
  return nullptr;
}

void HttpServer::Impl::HandlePost(const httplib::Request& req, httplib::Response& res,
                                  const httplib::ContentReader& reader) {
  // Read the body first (bounded): answering before it is consumed would leave it in the
  // connection to be misread as the next request.
  std::string body;
  bool too_large = false;
  bool read_ok = reader([&](const char* data, size_t size) {
    if (body.size() + size > options.max_body_bytes) {
      too_large = true;
      return false;
    }
    body.append(data, size);
    return true;
  });
  if (too_large || res.status == 413) {
    SetError(
        res, 413, kInvalidRequest,
        "Payload Too Large: the limit is " + std::to_string(options.max_body_bytes) + " bytes");
    return;
  }
  if (!read_ok) {
    SetError(res, 400, kInvalidRequest, "Bad Request: cannot read the body");
    return;
  }
  if (!CheckHeaders(req, res)) return;
  const http::AcceptedTypes accept = http::ParseAccept(req.get_header_value("Accept"));
  if (!accept.json && !accept.sse) {
    SetError(res, 406, kInvalidRequest,
             "Not Acceptable: accept application/json and/or text/event-stream");
    return;
  }
  json error;
  auto message = ParseMessage(body, &error);
  if (!message.ok()) {
    res.status = 400;
    res.set_content(wire::Dump(error), "application/json");
    return;
  }
  const bool is_request = wire::LooksLikeRequest(*message);
  if (!req.has_header(kSessionHeader) && is_request && message->at("method") == "initialize") {
    CreateSession(res, *message, accept);
    return;
  }
  auto session = FindSession(req, res);
  if (!session) return;
  if (is_request) {
    AnswerRequest(res, session, *message, accept);
    return;
  }
  // Notifications and responses: accepted without a body, unless the message was invalid.
  auto sink = std::make_shared<StreamSink>();
  session->mcp->Handle(*message, sink);
  if (auto rejection = sink->TakeAny()) {
    res.status = 400;
    res.set_content(wire::Dump(*rejection), "application/json");
    return;
  }
  res.status = 202;
}

void HttpServer::Impl::CreateSession(httplib::Response& res, const json& message,
                                     const http::AcceptedTypes& accept) {
  auto too_many = [&] {
    SetError(res, 503, kInternalError,
             absl::StrCat("Service Unavailable: ", options.max_sessions,
                          " MCP sessions are open (the gateway's --max_mcp_sessions); end one "
                          "with DELETE or retry later"));
  };
  {
    std::lock_guard<std::mutex> lock(mu);
    if (sessions.size() >= options.max_sessions) return too_many();
  }
  auto session = std::make_shared<HttpSession>();
  session->id = http::NewSessionId();
  session->mcp = std::make_shared<McpSession>(session->id, provider, server_options);
  auto sink = std::make_shared<StreamSink>();
  session->mcp->Handle(message, sink);
  auto response = sink->TakeResponse();
  if (!response) {  // cannot happen: initialize is answered synchronously
    session->mcp->Close();
    SetError(res, 500, kInternalError, "initialize was not answered");
    return;
  }
  if (!response->contains("result")) {  // e.g. invalid params: no session to keep
    session->mcp->Close();
    SetSingleResponse(res, *response, !accept.json);
    return;
  }
  bool registered = false, full = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    full = sessions.size() >= options.max_sessions;  // re-checked: initializes race
    if (!stopping && !full) {
      sessions[session->id] = session;
      registered = true;
    }
  }
  if (full) {
    session->mcp->Close();
    return too_many();
  }
  if (!registered) {
    session->mcp->Close();
    SetError(res, 503, kInternalError, "server is shutting down");
    return;
  }
  spdlog::info("http: session {} created (protocol {})", session->id,
               session->mcp->protocol_version());
  res.set_header(kSessionHeader, session->id);
  SetSingleResponse(res, *response, !accept.json);
}

void HttpServer::Impl::AnswerRequest(httplib::Response& res,
                                     const std::shared_ptr<HttpSession>& session,
                                     const json& message, const http::AcceptedTypes& accept) {
  const bool tool_call = message.at("method") == "tools/call";
  auto sink = std::make_shared<StreamSink>();
  session->mcp->Handle(message, sink);
  // tools/call streams whenever the client can take SSE (progress needs it); otherwise
  // prefer JSON, and use SSE only for a client that accepts nothing else.
  const bool sse = accept.sse && (tool_call || !accept.json);
  if (!(sse && tool_call)) {
    if (auto response = sink->TakeResponse()) {
      SetSingleResponse(res, *response, sse);
      return;
    }
  }
  StreamReply(res, session, std::move(sink), message.at("id"), sse);
}

// Streams a request's answer as it is produced (SSE), or waits for it without holding up
// disconnect detection (JSON).
void HttpServer::Impl::StreamReply(httplib::Response& res,
                                   const std::shared_ptr<HttpSession>& session,
                                   std::shared_ptr<StreamSink> sink, const json& id, bool sse) {
  auto state = std::make_shared<StreamState>();
  std::shared_ptr<McpSession> mcp = session->mcp;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      sse ? "text/event-stream" : "application/json",
      [this, sink, sse, state](size_t, httplib::DataSink& out) {
        return PumpStream(*sink, out, sse, /*ends_with_reply=*/true, *state, stopping);
      },
      [sink, mcp, id](bool success) {
        sink->Close();
        if (!success) {  // the client went away before the answer: stop the work
          mcp->Handle(MakeNotification("notifications/cancelled",
                                       {{"requestId", id}, {"reason", "client disconnected"}}),
                      nullptr);
        }
      });
}

void HttpServer::Impl::HandleGet(const httplib::Request& req, httplib::Response& res) {
  if (req.method == "HEAD") {
    res.set_header("Allow", "GET, POST, DELETE");
    SetError(res, 405, kInvalidRequest, "method not allowed");
    return;
  }
  if (!CheckHeaders(req, res)) return;
  if (!http::ParseAccept(req.get_header_value("Accept")).sse_explicit) {
    res.set_header("Allow", "GET, POST, DELETE");
    SetError(res, 405, kInvalidRequest,
             "Method Not Allowed: GET opens an SSE stream and needs Accept: text/event-stream");
    return;
  }
  auto session = FindSession(req, res);
  if (!session) return;
  auto sink = std::make_shared<StreamSink>();
  {
    std::lock_guard<std::mutex> lock(mu);
    // Re-checked under the lock: a concurrent DELETE must not leave an orphan stream.
    if (sessions.count(session->id) == 0) {
      SetError(res, 404, kInvalidRequest, "Session not found: initialize a new session");
      return;
    }
    if (session->get_stream) {
      SetError(res, 409, kInvalidRequest, "Conflict: this session already has a GET stream");
      return;
    }
    session->get_stream = sink;
    session->mcp->SetNotificationSink(sink);
  }
  auto state = std::make_shared<StreamState>();
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, sink, state](size_t, httplib::DataSink& out) {
        if (!state->greeted) {
          // A comment right away: flushes the headers and tells the client the stream is
          // live (SSE parsers ignore comments).
          state->greeted = true;
          static const std::string kOpen = ": stream open\n\n";
          return out.write(kOpen.data(), kOpen.size());
        }
        return PumpStream(*sink, out, /*sse=*/true, /*ends_with_reply=*/false, *state, stopping);
      },
      [this, sink, session](bool) {
        sink->Close();
        DetachGetStream(*session, sink);
      });
}

void HttpServer::Impl::DetachGetStream(HttpSession& session,
                                       const std::shared_ptr<StreamSink>& sink) {
  std::lock_guard<std::mutex> lock(mu);
  if (session.get_stream != sink) return;
  session.get_stream.reset();
  session.mcp->SetNotificationSink(nullptr);
}

void HttpServer::Impl::HandleDelete(const httplib::Request& req, httplib::Response& res) {
  if (!CheckHeaders(req, res)) return;
  if (!req.has_header(kSessionHeader)) {
    SetError(res, 400, kInvalidRequest, "Bad Request: Mcp-Session-Id header required");
    return;
  }
  std::shared_ptr<HttpSession> session;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = sessions.find(req.get_header_value(kSessionHeader));
    if (it != sessions.end()) {
      session = it->second;
      sessions.erase(it);
    }
  }
  if (!session) {
    SetError(res, 404, kInvalidRequest, "Session not found");
    return;
  }
  spdlog::info("http: session {} deleted by the client", session->id);
  CloseSession(session);
  res.status = 200;
}

// Ends a session already removed from `sessions`: its GET stream, its calls, the provider.
void HttpServer::Impl::CloseSession(const std::shared_ptr<HttpSession>& session) {
  std::shared_ptr<StreamSink> stream;
  {
    std::lock_guard<std::mutex> lock(mu);
    stream = session->get_stream;
  }
  if (stream) stream->Close();
  session->mcp->Close();
}

void HttpServer::Impl::ReapLoop() {
  const int64_t ttl_ms = absl::ToInt64Milliseconds(options.session_idle_ttl);
  const auto period = std::chrono::milliseconds(std::clamp<int64_t>(ttl_ms / 4, 10, 1000));
  std::unique_lock<std::mutex> lock(reaper_mu);
  while (!stopping) {
    reaper_cv.wait_for(lock, period, [&] { return stopping.load(); });
    if (stopping) break;
    lock.unlock();
    ReapIdle();
    lock.lock();
  }
}

// Closes sessions with nothing in flight, no GET stream and no message for longer than
// session_idle_ttl.
void HttpServer::Impl::ReapIdle() {
  const int64_t ttl_ms = absl::ToInt64Milliseconds(options.session_idle_ttl);
  const int64_t now = NowMs();
  std::vector<std::shared_ptr<HttpSession>> expired;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = sessions.begin(); it != sessions.end();) {
      const auto& s = it->second;
      if (!s->get_stream && s->mcp->in_flight() == 0 && now - s->mcp->last_activity_ms() > ttl_ms) {
        expired.push_back(s);
        it = sessions.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& session : expired) {
    spdlog::info("http: session {} expired after being idle", session->id);
    CloseSession(session);
  }
}

// ---------------------------------------------------------------------------------------
HttpServer::HttpServer(HttpServerOptions options, ToolProvider* provider,
                       ServerOptions server_options)
    : impl_(std::make_unique<Impl>(std::move(options), provider, std::move(server_options))) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() {
  Impl& d = *impl_;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.started || d.stopped) return absl::FailedPreconditionError("HttpServer already started");
  }
  const size_t threads = static_cast<size_t>(std::max(1, d.options.threads));
  d.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  d.server.set_payload_max_length(d.options.max_body_bytes);
  // httplib's default adds SO_REUSEPORT, which would let a second gateway bind the same
  // port and silently take half the connections (and their sessions). REUSEADDR only:
  // quick restarts still work, a port in use is an error.
  // The callback runs on each candidate socket before bind; the last one is the bound one.
  socket_t listen_fd = INVALID_SOCKET;
  d.server.set_socket_options([&listen_fd](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    // Accepted sockets inherit TCP_NODELAY on Linux. Without it a response written in
    // two pieces (headers, then body) waits for the client's delayed ACK: ~40 ms a call.
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    listen_fd = sock;
  });
  d.InstallRoutes();

  if (d.options.port == 0) {
    d.port = d.server.bind_to_any_port(d.options.host);
  } else if (d.server.bind_to_port(d.options.host, d.options.port)) {
    d.port = d.options.port;
  }
  if (d.port <= 0) {
    return absl::UnavailableError("cannot listen on " + d.options.host + ":" +
                                  std::to_string(d.options.port));
  }
  // httplib (0.11) listens with a backlog of 5: a burst of clients connecting at once
  // overflows it and waits for SYN retransmits (a second or more). Listening again on
  // the bound socket raises the backlog (Linux allows this).
  if (listen_fd != INVALID_SOCKET) ::listen(listen_fd, SOMAXCONN);
  d.listener = codemode::StartThread("http listener", [&d] { d.server.listen_after_bind(); });
  // httplib's stop() is a no-op until the accept loop runs; wait for it so an early
  // Stop() cannot miss it. The socket is already listening, so this is brief.
  for (int i = 0; i < 5000 && !d.server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  d.reaper = codemode::StartThread("http reaper", [&d] { d.ReapLoop(); });
  {
    std::lock_guard<std::mutex> lock(d.mu);
    d.started = true;
  }
  spdlog::info("http: MCP endpoint http://{}:{}{}", d.options.host, d.port, d.options.path);
  return absl::OkStatus();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::Stop() {
  Impl& d = *impl_;
  bool was_started;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.stopped) return;
    d.stopped = true;
    was_started = d.started;
  }
  {
    std::lock_guard<std::mutex> lock(d.reaper_mu);
    d.stopping = true;
  }
  d.reaper_cv.notify_all();
  if (d.reaper.joinable()) d.reaper.join();

  std::map<std::string, std::shared_ptr<HttpSession>> sessions;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    sessions.swap(d.sessions);
  }
  for (auto& [id, session] : sessions) d.CloseSession(session);

  if (was_started) {
    d.server.stop();
    if (d.listener.joinable()) d.listener.join();
  }
}

void HttpServer::NotifyToolsChanged() {
  std::vector<std::shared_ptr<McpSession>> targets;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& [id, session] : impl_->sessions) targets.push_back(session->mcp);
  }
  for (auto& mcp : targets) mcp->NotifyToolsChanged();
}

size_t HttpServer::session_count() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->sessions.size();
}

}  // namespace gateway
