// HttpServer: the MCP Streamable HTTP transport (protocol 2025-11-25) on Boost.Beast/Asio.
//
// One endpoint (`path`):
//   POST    one JSON-RPC message. initialize without Mcp-Session-Id creates a session;
//           notifications and responses get 202; requests get application/json, or an SSE
//           stream (progress notifications, then the response) for tools/call when the
//           client accepts text/event-stream.
//   GET     a long-lived SSE stream for notifications that belong to no request
//           (tools/list_changed, log messages); one per session. With Last-Event-ID it
//           resumes the stream that id came from instead, replaying what came after it.
//   DELETE  ends the session.
//
// Connections (http_connection.h) apply the size limits and timeouts, then the checks
// below run before any body is read: the path and method (404/405), Origin/Host (403),
// bearer token (401) and MCP-Protocol-Version (400). A few event-loop threads serve every
// connection; nothing here blocks on a client. The one handler that may take a while
// (DELETE waits for the session's calls to end) runs on a thread of its own.
//
// Replies go to EventStreams (http_stream.h) that outlive their connection: a tools/call
// whose SSE connection drops keeps running for `resume_grace`, and a GET with the
// Last-Event-ID of one of its events picks up the rest; otherwise it is cancelled, as if
// the client had sent notifications/cancelled.
#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "absl/strings/str_cat.h"
#include "base/thread.h"
#include "server/http_checks.h"
#include "server/http_connection.h"
#include "server/http_stream.h"
#include "jsonrpc/jsonrpc.h"
#include "server/transports.h"
#include "spdlog/spdlog.h"
#include "base/mutex.h"

namespace gateway {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr const char* kSessionHeader = "Mcp-Session-Id";
constexpr const char* kVersionHeader = "MCP-Protocol-Version";
constexpr const char* kLastEventHeader = "Last-Event-ID";
constexpr const char* kAllow = "GET, POST, DELETE";
// Events a session's GET stream keeps for a client that reconnects with Last-Event-ID.
constexpr size_t kGetStreamReplayEvents = 100;

// An HTTP error with a JSON-RPC error body without id, as the spec suggests.
http::Response Error(int status, int code, const std::string& message) {
  return {status, "application/json", wire::Dump(MakeError(nullptr, code, message)), {}};
}

// A request answered in one piece. An error with a null id means the message itself was
// unusable, which HTTP reports as 400.
http::Response SingleResponse(const json& response, bool as_sse) {
  const bool rejected = response.contains("error") && response["id"].is_null();
  http::Response res{rejected ? 400 : 200, "application/json", wire::Dump(response), {}};
  if (as_sse) {
    res.content_type = "text/event-stream";
    res.body = "event: message\ndata: " + res.body + "\n\n";
    res.headers.emplace_back("Cache-Control", "no-cache");
  }
  return res;
}

// Clients of 2025-11-25 expect a priming event (an id, empty data) first; older ones might
// try to parse its empty data as JSON.
bool ExpectsPriming(const std::string& protocol) { return protocol >= "2025-11-25"; }

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::chrono::milliseconds Ms(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

// A stream for a reply that is one JSON body (initialize, notifications).
std::shared_ptr<http::EventStream> JsonReply() {
  http::EventStream::Options options;
  options.sse = false;
  return std::make_shared<http::EventStream>(options);
}

// An EventStream consumer that writes to an HTTP response.
class ConnectionConsumer : public http::EventStream::Consumer {
 public:
  explicit ConnectionConsumer(std::shared_ptr<http::Connection> conn) : conn_(std::move(conn)) {}
  void Deliver(std::string bytes, bool last) override { conn_->Deliver(std::move(bytes), last); }

 private:
  std::shared_ptr<http::Connection> conn_;
};

}  // namespace

// One MCP session as the HTTP transport sees it.
struct HttpSession {
  std::string id;
  std::string credential;  // which bearer token created it
  std::shared_ptr<McpSession> mcp;
  // Guarded by Impl::mu.
  struct Call {
    std::shared_ptr<http::EventStream> stream;
    json request_id;
  };
  uint64_t next_stream = 1;
  std::map<uint64_t, Call> calls;  // request streams that may still be carried or resumed
  std::shared_ptr<http::EventStream> get_stream;
};

struct HttpServer::Impl {
  HttpServerOptions options;
  ToolProvider* provider;
  ServerOptions server_options;
  http::Limits limits;
  http::Connection::Handler handler;

  // Open connections (for Stop and max_connections). Declared before the io_context: its
  // destruction destroys pending handlers, whose connections then unregister here.
  codemode::Mutex conns_mu;
  std::map<http::Connection*, std::weak_ptr<http::Connection>> conns ABSL_GUARDED_BY(conns_mu);

  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{ioc};
  asio::steady_timer accept_retry{ioc};
  std::vector<std::thread> threads;
  int port = -1;

  std::atomic<bool> stopping{false};  // set under reaper_mu, so that its unlock wakes the reaper
  codemode::Mutex reaper_mu;
  std::thread reaper;
  bool Stopping() const { return stopping.load(); }

  // Lock order: Impl::mu before any McpSession or EventStream lock (neither calls back into
  // us while holding its own).
  mutable codemode::Mutex mu;
  bool started ABSL_GUARDED_BY(mu) = false;
  bool stopped ABSL_GUARDED_BY(mu) = false;
  std::map<std::string, std::shared_ptr<HttpSession>> sessions ABSL_GUARDED_BY(mu);

  Impl(HttpServerOptions o, ToolProvider* p, ServerOptions so);

  void Accept();
  std::optional<http::Response> Check(const http::Request& req) const;
  std::string Credential(const http::Request& req) const;
  void Handle(const std::shared_ptr<http::Connection>& conn, http::Request req);
  std::shared_ptr<HttpSession> FindSession(const http::Request& req, http::Response* error);
  void HandlePost(const std::shared_ptr<http::Connection>& conn, const http::Request& req);
  void CreateSession(const std::shared_ptr<http::Connection>& conn, const json& message,
                     const http::AcceptedTypes& accept, const std::string& credential);
  void AnswerRequest(const std::shared_ptr<http::Connection>& conn,
                     const std::shared_ptr<HttpSession>& session, const json& message,
                     const http::AcceptedTypes& accept);
  void CarryCall(const std::shared_ptr<http::Connection>& conn,
                 const std::shared_ptr<HttpSession>& session, uint64_t number,
                 std::optional<uint64_t> after_seq);
  void HandleGet(const std::shared_ptr<http::Connection>& conn, const http::Request& req);
  void CarryGetStream(const std::shared_ptr<http::Connection>& conn,
                      const std::shared_ptr<HttpSession>& session, std::optional<uint64_t> after_seq);
  void HandleDelete(const std::shared_ptr<http::Connection>& conn, const http::Request& req);
  void CancelCall(const std::shared_ptr<HttpSession>& session, const json& id, const char* why);
  void CloseSession(const std::shared_ptr<HttpSession>& session);
  void ReapLoop();
  void ReapIdle();
};

HttpServer::Impl::Impl(HttpServerOptions o, ToolProvider* p, ServerOptions so)
    : options(std::move(o)), provider(p), server_options(std::move(so)) {
  limits.max_header_bytes = options.max_header_bytes;
  limits.max_headers = options.max_headers;
  limits.max_body_bytes = options.max_body_bytes;
  limits.idle_timeout = Ms(options.idle_timeout);
  limits.header_timeout = Ms(options.header_timeout);
  limits.body_timeout = Ms(options.body_timeout);
  limits.write_timeout = Ms(options.write_timeout);
  handler.check = [this](const http::Request& req) { return Check(req); };
  handler.handle = [this](const std::shared_ptr<http::Connection>& conn, http::Request req) {
    const bool ok = codemode::RunContained("http handler", [&] { Handle(conn, std::move(req)); });
    if (!ok) conn->Respond(Error(500, kInternalError, "internal error"));
  };
  handler.error = [](int status, const std::string& message) {
    return Error(status, kInvalidRequest, message);
  };
  handler.on_closed = [this](http::Connection* conn) {
    codemode::MutexLock lock(&conns_mu);
    conns.erase(conn);
  };
}

void HttpServer::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
    if (stopping || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of file descriptors, most likely: try again shortly rather than spin.
      spdlog::warn("http: accept failed: {}", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(100));
      accept_retry.async_wait([this](boost::system::error_code e) {
        if (!e) Accept();
      });
      return;
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::shared_ptr<http::Connection> conn;
    {
      codemode::MutexLock lock(&conns_mu);
      if (conns.size() < options.max_connections) {
        conn = std::make_shared<http::Connection>(std::move(socket), limits, handler);
        conns[conn.get()] = conn;
      }
    }
    if (conn) {
      conn->Start();
    } else {
      spdlog::warn("http: {} connections are open (--max_http_connections); refusing one",
                   options.max_connections);
      socket.close(ignored);
    }
    Accept();
  });
}

// Runs on the headers alone, before any body is read.
std::optional<http::Response> HttpServer::Impl::Check(const http::Request& req) const {
  if (req.path != options.path) return Error(404, kInvalidRequest, "Not Found");
  if (req.method != "GET" && req.method != "POST" && req.method != "DELETE") {
    http::Response res = Error(405, kInvalidRequest, "method not allowed");
    res.headers.emplace_back("Allow", kAllow);
    return res;
  }
  if (req.Has("Origin") && !http::OriginAllowed(req.Header("Origin"), options.allowed_origins)) {
    return Error(403, kInvalidRequest, "Forbidden: origin not allowed");
  }
  if (!http::HostAllowed(req.Header("Host"), options.allowed_hosts, options.host)) {
    return Error(403, kInvalidRequest, "Forbidden: host not allowed");
  }
  if (!options.bearer_tokens.empty() && Credential(req).empty()) {
    http::Response res =
        Error(401, kInvalidRequest, "Unauthorized: a valid bearer token is required");
    res.headers.emplace_back("WWW-Authenticate", "Bearer");
    return res;
  }
  // Absent is fine: the spec says to assume 2025-03-26 (or what was negotiated).
  if (req.Has(kVersionHeader) && !IsServedVersion(req.Header(kVersionHeader))) {
    return Error(400, kInvalidRequest,
                 "Bad Request: unsupported MCP-Protocol-Version " + req.Header(kVersionHeader));
  }
  return std::nullopt;
}

// The credential a request authenticated with ("token <n>"), "anonymous" without auth, ""
// when no token matches.
std::string HttpServer::Impl::Credential(const http::Request& req) const {
  if (options.bearer_tokens.empty()) return "anonymous";
  const std::string authorization = req.Header("Authorization");
  for (size_t i = 0; i < options.bearer_tokens.size(); ++i) {
    if (http::BearerMatches(authorization, options.bearer_tokens[i])) return absl::StrCat("token ", i);
  }
  return "";
}

void HttpServer::Impl::Handle(const std::shared_ptr<http::Connection>& conn, http::Request req) {
  if (req.method == "POST") return HandlePost(conn, req);
  if (req.method == "GET") return HandleGet(conn, req);
  HandleDelete(conn, req);
}

// The session named by Mcp-Session-Id; 400 when the header is missing, 404 when unknown.
std::shared_ptr<HttpSession> HttpServer::Impl::FindSession(const http::Request& req,
                                                           http::Response* error) {
  if (!req.Has(kSessionHeader)) {
    *error = Error(400, kInvalidRequest, "Bad Request: Mcp-Session-Id header required");
    return nullptr;
  }
  {
    codemode::MutexLock lock(&mu);
    auto it = sessions.find(req.Header(kSessionHeader));
    if (it != sessions.end()) return it->second;
  }
  *error = Error(404, kInvalidRequest, "Session not found: initialize a new session");
  return nullptr;
}

void HttpServer::Impl::HandlePost(const std::shared_ptr<http::Connection>& conn,
                                  const http::Request& req) {
  const http::AcceptedTypes accept = http::ParseAccept(req.Header("Accept"));
  if (!accept.json && !accept.sse) {
    return conn->Respond(Error(406, kInvalidRequest,
                               "Not Acceptable: accept application/json and/or text/event-stream"));
  }
  json error;
  auto message = ParseMessage(req.body, &error);
  if (!message.ok()) return conn->Respond({400, "application/json", wire::Dump(error), {}});
  const bool is_request = wire::LooksLikeRequest(*message);
  if (!req.Has(kSessionHeader) && is_request && message->at("method") == "initialize") {
    return CreateSession(conn, *message, accept, Credential(req));
  }
  http::Response not_found;
  auto session = FindSession(req, &not_found);
  if (!session) return conn->Respond(std::move(not_found));
  if (is_request) return AnswerRequest(conn, session, *message, accept);
  // Notifications and responses: accepted without a body, unless the message was invalid.
  auto sink = JsonReply();
  session->mcp->Handle(*message, sink);
  if (auto rejection = sink->TakeResponse()) {
    return conn->Respond({400, "application/json", wire::Dump(*rejection), {}});
  }
  conn->Respond({202, "", "", {}});
}

void HttpServer::Impl::CreateSession(const std::shared_ptr<http::Connection>& conn,
                                     const json& message, const http::AcceptedTypes& accept,
                                     const std::string& credential) {
  // Under `mu`: why a new session cannot be held, or "".
  auto refusal = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) -> std::string {
    if (stopping) return "the server is shutting down";
    if (sessions.size() >= options.max_sessions) {
      return absl::StrCat(options.max_sessions, " MCP sessions are open (--max_mcp_sessions)");
    }
    const size_t mine = std::count_if(sessions.begin(), sessions.end(),
                                      [&](const auto& s) { return s.second->credential == credential; });
    if (mine >= options.max_sessions_per_credential) {
      return absl::StrCat(mine, " MCP sessions are open with this credential "
                                "(--max_mcp_sessions_per_credential)");
    }
    return "";
  };
  auto unavailable = [&](const std::string& why) {
    conn->Respond(Error(503, kInternalError,
                        absl::StrCat("Service Unavailable: ", why, "; end one with DELETE or retry later")));
  };
  {
    codemode::MutexLock lock(&mu);
    if (std::string why = refusal(); !why.empty()) return unavailable(why);
  }
  auto session = std::make_shared<HttpSession>();
  session->id = http::NewSessionId();
  session->credential = credential;
  session->mcp = std::make_shared<McpSession>(session->id, provider, server_options);
  auto sink = JsonReply();
  session->mcp->Handle(message, sink);
  auto response = sink->TakeResponse();  // initialize is answered synchronously
  if (!response || !response->contains("result")) {  // e.g. invalid params: nothing to keep
    session->mcp->Close();
    if (!response) return conn->Respond(Error(500, kInternalError, "initialize was not answered"));
    return conn->Respond(SingleResponse(*response, !accept.json));
  }
  std::string why;
  {
    codemode::MutexLock lock(&mu);
    why = refusal();  // again: initializes race
    if (why.empty()) sessions[session->id] = session;
  }
  if (!why.empty()) {
    session->mcp->Close();
    return unavailable(why);
  }
  spdlog::info("http: session {} created (protocol {})", session->id,
               session->mcp->protocol_version());
  http::Response res = SingleResponse(*response, !accept.json);
  res.headers.emplace_back(kSessionHeader, session->id);
  conn->Respond(std::move(res));
}

void HttpServer::Impl::AnswerRequest(const std::shared_ptr<http::Connection>& conn,
                                     const std::shared_ptr<HttpSession>& session,
                                     const json& message, const http::AcceptedTypes& accept) {
  const bool tool_call = message.at("method") == "tools/call";
  // tools/call streams whenever the client can take SSE (progress needs it); otherwise
  // prefer JSON, and use SSE only for a client that accepts nothing else.
  const bool sse = accept.sse && (tool_call || !accept.json);
  uint64_t number;
  std::shared_ptr<http::EventStream> stream;
  {
    codemode::MutexLock lock(&mu);
    number = session->next_stream++;
    http::EventStream::Options stream_options;
    stream_options.number = number;
    stream_options.sse = sse;
    stream = std::make_shared<http::EventStream>(stream_options);
    session->calls[number] = {stream, message.at("id")};
  }
  if (sse && tool_call && ExpectsPriming(session->mcp->protocol_version())) stream->Prime();
  session->mcp->Handle(message, stream);
  if (!(sse && tool_call)) {
    if (auto response = stream->TakeResponse()) {
      {
        codemode::MutexLock lock(&mu);
        session->calls.erase(number);
      }
      return conn->Respond(SingleResponse(*response, sse));
    }
  }
  CarryCall(conn, session, number, std::nullopt);
}

// Streams call `number` of `session` on `conn`: the events after `after_seq` (all for
// nullopt), then the rest as it comes.
void HttpServer::Impl::CarryCall(const std::shared_ptr<http::Connection>& conn,
                                 const std::shared_ptr<HttpSession>& session, uint64_t number,
                                 std::optional<uint64_t> after_seq) {
  HttpSession::Call call;
  {
    codemode::MutexLock lock(&mu);
    auto it = session->calls.find(number);
    // A resuming client (after_seq) takes the stream over; nobody else may.
    if (it == session->calls.end() || (!after_seq && it->second.stream->attached())) {
      return conn->Respond(Error(409, kInvalidRequest,
                                 "Conflict: that stream has ended or is being read elsewhere"));
    }
    call = it->second;
  }
  auto consumer = std::make_shared<ConnectionConsumer>(conn);
  std::weak_ptr<HttpSession> weak = session;
  http::Connection::StreamCallbacks callbacks;
  callbacks.on_lost = [this, weak, call, c = consumer.get()] {
    call.stream->Detach(c, Clock::now());
    auto s = weak.lock();
    // A client without an event id of this stream cannot come back for it.
    if (s && !call.stream->closed() && !call.stream->resumable()) {
      CancelCall(s, call.request_id, "client disconnected");
    }
  };
  callbacks.on_done = [this, weak, call, number, c = consumer.get()] {
    call.stream->Delivered(c);
    auto s = weak.lock();
    if (s && call.stream->done()) {
      codemode::MutexLock lock(&mu);
      s->calls.erase(number);
    }
  };
  // A JSON body has no events to resume from: the response, when it comes, is the body.
  conn->StartStream(call.stream->sse() ? "text/event-stream" : "application/json",
                    call.stream->sse(), {}, std::move(callbacks));
  call.stream->Attach(std::move(consumer), after_seq);
}

void HttpServer::Impl::HandleGet(const std::shared_ptr<http::Connection>& conn,
                                 const http::Request& req) {
  if (!http::ParseAccept(req.Header("Accept")).sse_explicit) {
    http::Response res = Error(
        405, kInvalidRequest,
        "Method Not Allowed: GET opens an SSE stream and needs Accept: text/event-stream");
    res.headers.emplace_back("Allow", kAllow);
    return conn->Respond(std::move(res));
  }
  http::Response not_found;
  auto session = FindSession(req, &not_found);
  if (!session) return conn->Respond(std::move(not_found));
  if (req.Has(kLastEventHeader)) {
    auto id = http::EventStream::ParseEventId(req.Header(kLastEventHeader));
    bool is_call = false, is_get_stream = false;
    if (id) {
      codemode::MutexLock lock(&mu);
      is_call = session->calls.count(id->first) > 0;
      is_get_stream = session->get_stream && session->get_stream->number() == id->first;
    }
    if (is_call) return CarryCall(conn, session, id->first, id->second);
    if (is_get_stream) return CarryGetStream(conn, session, id->second);
    // An id we no longer know (its call ended and was delivered): a plain GET stream.
  }
  CarryGetStream(conn, session, std::nullopt);
}

// The session's stream of notifications that belong to no request. It lives as long as the
// session; while no GET carries it, it keeps the newest events for a client that resumes.
void HttpServer::Impl::CarryGetStream(const std::shared_ptr<http::Connection>& conn,
                                      const std::shared_ptr<HttpSession>& session,
                                      std::optional<uint64_t> after_seq) {
  std::shared_ptr<http::EventStream> stream;
  {
    codemode::MutexLock lock(&mu);
    // Re-checked under the lock: a concurrent DELETE must not leave an orphan stream.
    if (sessions.count(session->id) == 0) {
      return conn->Respond(Error(404, kInvalidRequest, "Session not found: initialize a new session"));
    }
    if (!after_seq && session->get_stream && session->get_stream->attached()) {
      return conn->Respond(
          Error(409, kInvalidRequest, "Conflict: this session already has a GET stream"));
    }
    if (!session->get_stream) {
      http::EventStream::Options get_options;
      get_options.number = session->next_stream++;
      get_options.ends_with_reply = false;
      get_options.max_events = kGetStreamReplayEvents;
      session->get_stream = std::make_shared<http::EventStream>(get_options);
      session->mcp->SetNotificationSink(session->get_stream);
    }
    stream = session->get_stream;
  }
  auto consumer = std::make_shared<ConnectionConsumer>(conn);
  http::Connection::StreamCallbacks callbacks;
  callbacks.on_lost = [stream, c = consumer.get()] { stream->Detach(c, Clock::now()); };
  callbacks.on_done = [stream, c = consumer.get()] { stream->Delivered(c); };
  conn->StartStream("text/event-stream", true, {}, std::move(callbacks));
  if (after_seq) return stream->Attach(std::move(consumer), after_seq);
  stream->AttachLive(consumer);
  // Something right away: flushes the headers and tells the client the stream is live.
  if (ExpectsPriming(session->mcp->protocol_version())) {
    stream->Prime();
  } else {
    consumer->Deliver(": stream open\n\n", false);  // SSE parsers ignore comments
  }
}

void HttpServer::Impl::HandleDelete(const std::shared_ptr<http::Connection>& conn,
                                    const http::Request& req) {
  if (!req.Has(kSessionHeader)) {
    return conn->Respond(Error(400, kInvalidRequest, "Bad Request: Mcp-Session-Id header required"));
  }
  std::shared_ptr<HttpSession> session;
  {
    codemode::MutexLock lock(&mu);
    auto it = sessions.find(req.Header(kSessionHeader));
    if (it != sessions.end()) {
      session = it->second;
      sessions.erase(it);
    }
  }
  if (!session) return conn->Respond(Error(404, kInvalidRequest, "Session not found"));
  spdlog::info("http: session {} deleted by the client", session->id);
  // Closing waits for the session's calls to end and its sandboxes to go: not on an
  // event-loop thread.
  codemode::StartThread("http delete", [this, conn, session] {
    CloseSession(session);
    conn->Respond({200, "", "", {}});
  }).detach();
}

void HttpServer::Impl::CancelCall(const std::shared_ptr<HttpSession>& session, const json& id,
                                  const char* why) {
  session->mcp->Handle(
      MakeNotification("notifications/cancelled", {{"requestId", id}, {"reason", why}}), nullptr);
}

// Ends a session already removed from `sessions`: its calls, its streams, the provider.
void HttpServer::Impl::CloseSession(const std::shared_ptr<HttpSession>& session) {
  session->mcp->Close();  // cancels the calls; their streams end with their answers
  std::shared_ptr<http::EventStream> get_stream;
  std::map<uint64_t, HttpSession::Call> calls;
  {
    codemode::MutexLock lock(&mu);
    get_stream = session->get_stream;
    calls.swap(session->calls);
  }
  if (get_stream) get_stream->Close();
  for (auto& [number, call] : calls) call.stream->Close();
}

void HttpServer::Impl::ReapLoop() {
  const int64_t ttl_ms = absl::ToInt64Milliseconds(std::min(options.session_idle_ttl, options.resume_grace));
  const auto period = std::chrono::milliseconds(std::clamp<int64_t>(ttl_ms / 4, 10, 1000));
  while (true) {
    {
      codemode::MutexLock lock(&reaper_mu);
      if (reaper_mu.AwaitWithTimeout(absl::Condition(this, &Impl::Stopping),
                                     absl::FromChrono(period))) {
        return;
      }
    }
    ReapIdle();
  }
}

// Cancels calls whose stream nobody resumed within resume_grace, forgets delivered ones,
// and closes sessions with nothing in flight, no GET stream and no message for longer than
// session_idle_ttl.
void HttpServer::Impl::ReapIdle() {
  const int64_t ttl_ms = absl::ToInt64Milliseconds(options.session_idle_ttl);
  const int64_t now_ms = NowMs();
  const auto now = Clock::now();
  const auto grace = Ms(options.resume_grace);
  std::vector<std::shared_ptr<HttpSession>> expired;
  std::vector<std::pair<std::shared_ptr<HttpSession>, json>> abandoned;
  {
    codemode::MutexLock lock(&mu);
    for (auto it = sessions.begin(); it != sessions.end();) {
      const auto& s = it->second;
      for (auto c = s->calls.begin(); c != s->calls.end();) {
        const auto& stream = c->second.stream;
        auto orphaned = stream->orphaned_since();
        if (stream->done() || (orphaned && !stream->attached() && now - *orphaned > grace)) {
          if (!stream->done() && !stream->closed()) abandoned.emplace_back(s, c->second.request_id);
          c = s->calls.erase(c);
        } else {
          ++c;
        }
      }
      const bool streaming = s->get_stream && s->get_stream->attached();
      if (!streaming && s->mcp->in_flight() == 0 && now_ms - s->mcp->last_activity_ms() > ttl_ms) {
        expired.push_back(s);
        it = sessions.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [session, id] : abandoned) {
    spdlog::info("http: session {}: nobody resumed the stream of request {}; cancelling it",
                 session->id, id.dump());
    CancelCall(session, id, "client disconnected and did not resume");
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
    codemode::MutexLock lock(&d.mu);
    if (d.started || d.stopped) return absl::FailedPreconditionError("HttpServer already started");
  }
  auto fail = [&](const boost::system::error_code& ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", d.options.host, ":", d.options.port, ": ", ec.message()));
  };
  boost::system::error_code ec;
  tcp::resolver resolver(d.ioc);
  auto endpoints = resolver.resolve(d.options.host, std::to_string(d.options.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) return fail(ec);
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  // SO_REUSEADDR only (quick restarts), never SO_REUSEPORT: a second gateway on the same
  // port would silently take half the connections and their sessions.
  d.acceptor.open(endpoint.protocol(), ec);
  if (!ec) d.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) d.acceptor.bind(endpoint, ec);
  if (!ec) d.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(ec);
  d.port = d.acceptor.local_endpoint().port();
  d.work.emplace(d.ioc.get_executor());
  d.Accept();
  for (int i = 0; i < std::max(1, d.options.threads); ++i) {
    d.threads.push_back(codemode::StartThread("http io", [&d] {
      // A handler that throws ends only itself; the loop goes on for everyone else.
      while (!codemode::RunContained("http event loop", [&d] { d.ioc.run(); })) {
      }
    }));
  }
  d.reaper = codemode::StartThread("http reaper", [&d] { d.ReapLoop(); });
  {
    codemode::MutexLock lock(&d.mu);
    d.started = true;
  }
  spdlog::info("http: MCP endpoint http://{}:{}{}", d.options.host, d.port, d.options.path);
  return absl::OkStatus();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::Stop() {
  Impl& d = *impl_;
  {
    codemode::MutexLock lock(&d.mu);
    if (d.stopped) return;
    d.stopped = true;
  }
  {
    codemode::MutexLock lock(&d.reaper_mu);
    d.stopping = true;
  }
  if (d.reaper.joinable()) d.reaper.join();
  asio::post(d.ioc, [&d] {
    boost::system::error_code ignored;
    d.acceptor.close(ignored);
    d.accept_retry.cancel();
  });

  // Sessions first, while the event loop still runs: their streams end on the wire.
  std::map<std::string, std::shared_ptr<HttpSession>> sessions;
  {
    codemode::MutexLock lock(&d.mu);
    sessions.swap(d.sessions);
  }
  for (auto& [id, session] : sessions) d.CloseSession(session);

  std::vector<std::shared_ptr<http::Connection>> open;
  {
    codemode::MutexLock lock(&d.conns_mu);
    for (auto& [ptr, weak] : d.conns) {
      if (auto conn = weak.lock()) open.push_back(std::move(conn));
    }
  }
  for (auto& conn : open) conn->Close();
  open.clear();
  d.work.reset();
  // Closed connections finish their handlers; give that a moment, then stop the loop.
  for (int i = 0; i < 200; ++i) {
    {
      codemode::MutexLock lock(&d.conns_mu);
      if (d.conns.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  d.ioc.stop();
  for (auto& t : d.threads) {
    if (t.joinable()) t.join();
  }
}

void HttpServer::NotifyToolsChanged() {
  std::vector<std::shared_ptr<McpSession>> targets;
  {
    codemode::MutexLock lock(&impl_->mu);
    for (auto& [id, session] : impl_->sessions) targets.push_back(session->mcp);
  }
  for (auto& mcp : targets) mcp->NotifyToolsChanged();
}

size_t HttpServer::session_count() const {
  codemode::MutexLock lock(&impl_->mu);
  return impl_->sessions.size();
}

}  // namespace gateway
