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
#include "base/log_text.h"
#include "server/http_server_impl.h"
#include "server/http_token.h"

namespace gateway {

HttpServer::Impl::Impl(HttpServerOptions o, ToolProvider* p, ServerOptions so)
    : options(std::move(o)), provider(p), server_options(std::move(so)) {
  for (const std::string& token : options.bearer_tokens) credentials.push_back(CredentialOfToken(token));
  limits.max_header_bytes = options.max_header_bytes;
  limits.max_headers = options.max_headers;
  limits.max_body_bytes = options.max_body_bytes;
  limits.idle_timeout = Ms(options.idle_timeout);
  limits.header_timeout = Ms(options.header_timeout);
  limits.body_timeout = Ms(options.body_timeout);
  limits.write_timeout = Ms(options.write_timeout);
  const auto& ceiling = server_options.ceiling;
  replay_budget = std::make_shared<codemode::ByteBudget>("max_replay_bytes", options.max_replay_bytes,
                                                         codemode::AllOf(ceiling));
  // Without tokens every client is "anonymous": one credential, which the overall bounds.
  if (options.bearer_tokens.empty() && server_options.call_limits) {
    server_options.call_limits = server_options.call_limits->OverallOnly();
  }
  overall_budgets.requests = std::make_shared<codemode::ByteBudget>(
      "max_request_bytes_in_flight", options.max_request_bytes_in_flight, codemode::AllOf(ceiling));
  overall_budgets.writes = std::make_shared<codemode::ByteBudget>(
      "max_pending_write_bytes", options.max_pending_write_bytes, codemode::AllOf(ceiling));
  // Outside the ceiling: what clients that read may queue when it is full (BudgetsOf).
  overall_budgets.overdraft = std::make_shared<codemode::ByteBudget>(
      "max_write_overdraft_bytes", options.max_write_overdraft_bytes);
  {
    codemode::MutexLock lock(&conns_mu);
    http::ConnectionAdmission::Caps caps;
    caps.max_connections = options.max_connections;
    caps.max_unauthenticated = options.max_unauthenticated_connections;
    // Without tokens every client is "anonymous": one credential, which the total caps.
    caps.max_per_credential = options.bearer_tokens.empty() ? options.max_connections
                                                            : options.max_connections_per_credential;
    admission.emplace(caps);
  }
  handler.check = [this](http::Connection* conn, const http::Request& req) {
    return Check(conn, req);
  };
  handler.handle = [this](const std::shared_ptr<http::Connection>& conn, http::Request req) {
    const bool ok = codemode::RunContained("http handler", [&] { Handle(conn, std::move(req)); });
    if (!ok) conn->Respond(Error(500, kInternalError, "internal error"));
  };
  handler.error = [](int status, const std::string& message) {
    return Error(status, kInvalidRequest, message);
  };
  if (server_options.metrics) {
    handler.on_respond = [metrics = server_options.metrics](int status) {
      if (status == 413) metrics->LimitHit(LimitKind::kBodyTooLarge);
      if (status == 431) metrics->LimitHit(LimitKind::kHeadersTooLarge);
      if (status == 503 || status == 429) metrics->LimitHit(LimitKind::kOverloaded);
    };
  }
  handler.on_closed = [this](http::Connection* conn) {
    codemode::MutexLock lock(&conns_mu);
    conns.erase(conn);
    admission->Remove(conn);
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
    // Who the peer is matters only when a connection must be evicted: a loopback client's
    // user (a sock_diag query) is asked then, not on every accept (http_admission.h).
    const http::PeerAddress address = http::AddressOf(socket.native_handle());
    const std::string peer = http::QuickPeerOf(address);
    auto conn = std::make_shared<http::Connection>(std::move(socket), limits, handler, overall_budgets);
    std::shared_ptr<http::Connection> evicted;
    bool admitted;
    {
      codemode::MutexLock lock(&conns_mu);
      auto has_unread_input = [this](const void* key) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        // Runs inside Add, under conns_mu.
        auto it = conns.find(static_cast<http::Connection*>(const_cast<void*>(key)));
        auto other = it == conns.end() ? nullptr : it->second.lock();
        return other && other->HasUnreadInput();
      };
      const http::ConnectionAdmission::Admission a =
          peer.empty() ? admission->AddUnresolved(
                             conn.get(), [address] { return http::ResolvePeer(address); },
                             has_unread_input)
                       : admission->Add(conn.get(), peer, has_unread_input);
      admitted = a.admitted;
      if (admitted) conns[conn.get()] = conn;
      if (a.evict) {
        auto it = conns.find(static_cast<http::Connection*>(const_cast<void*>(a.evict)));
        if (it != conns.end()) evicted = it->second.lock();
      }
    }
    if (evicted) {
      spdlog::debug("http: connections not yet authenticated are at their cap; closing the oldest");
      evicted->Close();
    }
    if (admitted) {
      conn->Start();
    } else {
      spdlog::warn("http: {} connections are open (--max_http_connections), all authenticated; "
                   "refusing one", options.max_connections);
      conn->Close();
    }
    Accept();
  });
}

// Runs on the headers alone, before any body is read.
std::optional<http::Response> HttpServer::Impl::Check(http::Connection* conn, const http::Request& req) {
  if (req.path != options.path) return Error(404, kInvalidRequest, "Not Found");
  // Fields that decide who the client is or what it asks for say it once: with two, a proxy
  // that reads the last could see another request than we serve.
  for (const char* name : {"Host", "Origin", "Authorization", kSessionHeader, kVersionHeader,
                           "Mcp-Method", "Mcp-Name", kLastEventHeader}) {
    if (req.Count(name) > 1) {
      return Error(400, kInvalidRequest, absl::StrCat("Bad Request: the ", name, " header appears more than once"));
    }
  }
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
  const std::string credential = Credential(req);
  if (credential.empty()) {
    http::Response res =
        Error(401, kInvalidRequest, "Unauthorized: a valid bearer token is required");
    res.headers.emplace_back("WWW-Authenticate", "Bearer");
    return res;
  }
  // Absent is fine: the spec says to assume 2025-03-26 (or what was negotiated). A POST's
  // body decides if it is stateless (its version is there), so it is checked with it.
  if (req.method != "POST" && req.Has(kVersionHeader) && !IsServedVersion(req.Header(kVersionHeader))) {
    return Error(400, kInvalidRequest,
                 "Bad Request: unsupported MCP-Protocol-Version " + req.Header(kVersionHeader));
  }
  return Admit(conn, credential);
}

// The request passed the checks: its connection now counts against its credential.
std::optional<http::Response> HttpServer::Impl::Admit(http::Connection* conn,
                                                      const std::string& credential) {
  size_t cap;
  {
    codemode::MutexLock lock(&conns_mu);
    if (admission->Authenticate(conn, credential)) {
      conn->ChargeTo(BudgetsOf(credential));  // Check runs on the connection's strand
      return std::nullopt;
    }
    cap = options.max_connections_per_credential;
  }
  return Error(503, kInternalError,
               absl::StrCat("Service Unavailable: this credential holds ", cap,
                            " connections (--max_http_connections_per_credential); close one "
                            "or retry later"));
}

http::Connection::Budgets HttpServer::Impl::BudgetsOf(const std::string& credential) {
  auto [it, added] = credential_budgets.try_emplace(credential);
  if (added) {
    // Without tokens every client is "anonymous": one credential, which the overall caps.
    const bool tokens = !options.bearer_tokens.empty();
    const size_t requests =
        tokens ? options.max_request_bytes_in_flight_per_credential : options.max_request_bytes_in_flight;
    const size_t writes = tokens ? options.max_pending_write_bytes_per_credential : options.max_pending_write_bytes;
    it->second.requests = std::make_shared<codemode::ByteBudget>(
        "max_request_bytes_in_flight_per_credential", requests,
        WithShare(overall_budgets.requests, credential),
        codemode::FairReserve(overall_budgets.requests, requests));
    it->second.writes = std::make_shared<codemode::ByteBudget>(
        "max_pending_write_bytes_per_credential", writes, WithShare(overall_budgets.writes, credential),
        codemode::FairReserve(overall_budgets.writes, writes));
    it->second.overdraft = std::make_shared<codemode::ByteBudget>(
        "max_write_overdraft_bytes_per_credential",
        tokens ? options.max_write_overdraft_bytes_per_credential : options.max_write_overdraft_bytes,
        codemode::ByteBudget::Parents{overall_budgets.overdraft});
  }
  return it->second;
}

codemode::ByteBudget::Parents HttpServer::Impl::WithShare(const std::shared_ptr<codemode::ByteBudget>& overall,
                                                         const std::string& credential) {
  // The share first: its reserve is checked against the ceiling before the charge reaches
  // the ceiling through `overall`.
  codemode::ByteBudget::Parents parents = codemode::SharesOf(server_options.ceiling, credential);
  parents.push_back(overall);
  return parents;
}

// The credential a request authenticated with (CredentialOfToken: "token 3f2a9c01b7e4"),
// "anonymous" without auth, "" when no token matches.
std::string HttpServer::Impl::Credential(const http::Request& req) const {
  if (options.bearer_tokens.empty()) return "anonymous";
  const std::string authorization = req.Header("Authorization");
  for (size_t i = 0; i < options.bearer_tokens.size(); ++i) {
    if (http::BearerMatches(authorization, options.bearer_tokens[i])) return credentials[i];
  }
  return "";
}

void HttpServer::Impl::Handle(const std::shared_ptr<http::Connection>& conn, http::Request req) {
  if (req.method == "POST") return HandlePost(conn, req);
  if (req.method == "GET") return HandleGet(conn, req);
  HandleDelete(conn, req);
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
    ReapStateless();
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
      const std::shared_ptr<HttpSession> s = it->second;
      bool streaming;
      {
        codemode::MutexLock session_lock(&s->mu);
        for (auto c = s->calls.begin(); c != s->calls.end();) {
          const auto& stream = c->second.stream;
          auto orphaned = stream->orphaned_since();
          // A finished stream is resumable for the grace only, however often it is re-attached.
          auto finished = stream->finished_since();
          // One the replay budget could not keep goes once it ended and lost its connection:
          // nobody can resume it, so it must not stay for the grace outside the budget.
          const bool unkept = stream->live_only() && finished && orphaned && !stream->attached();
          if (stream->done() || unkept || (finished && now - *finished > grace) ||
              (orphaned && !stream->attached() && now - *orphaned > grace)) {
            if (!stream->done() && !stream->closed()) {
              abandoned.emplace_back(s, c->second.request_id);
            }
            stream->Forget();  // its kept events and replay budget go now
            c = s->calls.erase(c);
          } else {
            ++c;
          }
        }
        streaming = s->get_stream && s->get_stream->attached();
      }
      if (!streaming && s->mcp->in_flight() == 0 && now_ms - s->mcp->last_activity_ms() > ttl_ms) {
        expired.push_back(s);
        ++closing[s->credential];
        it = sessions.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [session, id] : abandoned) {
    spdlog::info("http: session {}: nobody resumed the stream of request {}; cancelling it",
                 session->id, codemode::LogText(id.dump()));
    CancelCall(session, id, "client disconnected and did not resume");
  }
  for (auto& session : expired) {
    spdlog::info("http: session {} expired after being idle", session->id);
    CloseRemoved(session);
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
  asio::post(d.accept_strand, [&d] {
    boost::system::error_code ignored;
    d.acceptor.close(ignored);
    d.accept_retry.cancel();
  });

  // Sessions first, while the event loop still runs: their streams end on the wire.
  std::map<std::string, std::shared_ptr<HttpSession>> sessions;
  std::map<uint64_t, Impl::StatelessCall> stateless;
  {
    codemode::MutexLock lock(&d.mu);
    sessions.swap(d.sessions);
    stateless.swap(d.stateless);
  }
  for (auto& [id, session] : sessions) d.CloseSession(session);
  // A running request is told why it ends (-32603, the gateway is shutting down), with
  // nothing to resume; closing cancels it (its own answer is not sent), and a listen
  // stream ends with its final result.
  for (auto& [n, call] : stateless) {
    if (!call.listen) {
      call.stream->Send(Impl::ShutdownAnswer(call.request_id));
    }
    call.session->mcp->Close();
  }
  // And the sessions DELETEs are closing: their threads must not outlive us.
  d.deleters.Stop();

  std::vector<std::shared_ptr<http::Connection>> open;
  {
    codemode::MutexLock lock(&d.conns_mu);
    for (auto& [ptr, weak] : d.conns) {
      if (auto conn = weak.lock()) open.push_back(std::move(conn));
    }
  }
  for (auto& conn : open) conn->CloseWhenWritten();
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
    for (auto& [n, call] : impl_->stateless) {
      if (call.listen) targets.push_back(call.session->mcp);
    }
  }
  for (auto& mcp : targets) mcp->NotifyToolsChanged();
}

size_t HttpServer::connection_count() const {
  codemode::MutexLock lock(&impl_->conns_mu);
  return impl_->conns.size();
}

size_t HttpServer::session_count() const {
  codemode::MutexLock lock(&impl_->mu);
  return impl_->sessions.size();
}

}  // namespace gateway
