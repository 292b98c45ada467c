// HttpServer's handling of a stateless POST (MCP 2026-07-28) (mcp_stateless.h): no MCP session,
// no initialize. The body decides if it is stateless (a version in params._meta); a request
// that only says so in MCP-Protocol-Version is refused for its missing envelope. The
// request is checked in the order of the specification (envelope -32602, headers -32020,
// version -32022, all HTTP 400), then answered by an McpSession of its own (stateless)
// that lives as long as the request: discover and the lists in one JSON body, tools/call
// and resources/read as JSON or SSE, subscriptions/listen as an SSE stream that stays open.
//
// Nothing here can be resumed: a client that drops the connection cancels its request
// (the 2026-07-28 way to cancel over HTTP) and ends its listen stream. Requests still
// running, and listen streams, are kept in `stateless` so that list changes reach them and
// Stop() ends them; the reaper forgets them once they are done.
#include "base/log_text.h"
#include "server/http_server_impl.h"
#include "server/mcp_stateless.h"

namespace gateway {

namespace {

std::optional<std::string> OptionalHeader(const http::Request& req, const char* name) {
  if (!req.Has(name)) return std::nullopt;
  return req.Header(name);
}

}  // namespace

bool HttpServer::Impl::IsStatelessPost(const http::Request& req, const json& message) {
  if (HasEnvelopeClaim(message)) return true;
  if (!req.Has(kVersionHeader)) return false;
  std::string version = req.Header(kVersionHeader);
  version.erase(0, version.find_first_not_of(" \t"));
  return NamesStatelessVersion(version);
}

// Why a stateless POST (2026-07-28) is refused before anything serves it, in the order of
// the specification: the envelope (-32602), the headers against the body (-32020), the
// version it names (-32022); nullopt when it may go on.
std::optional<json> HttpServer::Impl::StatelessRefusal(const http::Request& req, const json& message,
                                                       const json& id) {
  const bool is_request = wire::LooksLikeRequest(message);
  // The JSON-RPC shape first: a method that is not a string, or a message that is neither
  // request, notification nor response: 400 with -32600 and the id, never a 500.
  auto method = message.find("method");
  if (method != message.end() && !method->is_string()) {
    return MakeError(id, kInvalidRequest, "method must be a string");
  }
  if (method == message.end() && !message.contains("result") && !message.contains("error")) {
    return MakeError(id, kInvalidRequest, "message has no method");
  }
  static const json kNoParams = json::object();
  auto p = message.find("params");
  const json& params = p != message.end() && p->is_object() ? *p : kNoParams;
  // initialize belongs to the 2025 revisions; its header says otherwise (-32020).
  if (method != message.end() && *method == "initialize" && !HasEnvelopeClaim(message)) {
    return MakeError(id, kHeaderMismatch,
                     "Header mismatch: MCP-Protocol-Version names the stateless revision (2026-07-28), "
                     "which has no initialize; send it without that header to start a 2025 session",
                     json{{"header", kVersionHeader}});
  }
  if (is_request) {
    if (auto invalid = EnvelopeError(id, params)) return invalid;
  }
  const StandardHeaders headers{OptionalHeader(req, kVersionHeader), OptionalHeader(req, "Mcp-Method"),
                                OptionalHeader(req, "Mcp-Name")};
  if (auto mismatch = HeaderError(id, message, headers, is_request)) return mismatch;
  if (!is_request) return std::nullopt;
  if (const std::string version = ClaimedVersion(params); version != kStatelessVersion) {
    return UnsupportedVersion(id, version);
  }
  return std::nullopt;
}

// Under `mu`: why `credential` may not open another listen stream, or "".
std::string HttpServer::Impl::ListenRefusal(const std::string& credential) {
  if (stopping) return "the server is shutting down";
  const auto [all, mine] = SessionsHeld(credential);
  if (all < options.max_sessions && mine < options.max_sessions_per_credential) return "";
  return absl::StrCat(mine, " MCP sessions and subscriptions/listen streams are open with this "
                      "credential and ", all, " in all (--max_mcp_sessions_per_credential, "
                      "--max_mcp_sessions); close one or retry later");
}

void HttpServer::Impl::HandleStatelessPost(const std::shared_ptr<http::Connection>& conn,
                                           const http::Request& req, const json& message,
                                           const http::AcceptedTypes& accept) {
  const bool is_request = wire::LooksLikeRequest(message);
  auto given = message.find("id");
  const json id = given != message.end() && wire::IsValidId(*given) ? *given : json(nullptr);
  auto refuse = [&](const json& error) {
    conn->Respond({StatelessHttpStatus(error), "application/json", wire::Dump(error), {}});
  };
  if (auto refusal = StatelessRefusal(req, message, id)) return refuse(*refusal);
  if (!is_request) {
    // Stateless MCP's only client notification is notifications/cancelled, which over HTTP is
    // the client closing its stream; responses answer nothing we asked. Neither has anyone
    // to go to without a session.
    return conn->Respond({202, "", "", {}});
  }
  const std::string method = message.at("method").get<std::string>();
  const bool listen = method == "subscriptions/listen";
  if (listen && !accept.sse) {
    return refuse(MakeError(id, kInvalidRequest,
                            "subscriptions/listen answers with an SSE stream: accept text/event-stream"));
  }
  const std::string credential = Credential(req);
  if (listen) {
    codemode::MutexLock lock(&mu);
    if (std::string why = ListenRefusal(credential); !why.empty()) {
      return conn->Respond(Error(503, kInternalError, "Service Unavailable: " + why));
    }
  }
  auto session = std::make_shared<HttpSession>();
  session->credential = credential;
  ServerOptions stateless_options = server_options;
  stateless_options.stateless = true;
  session->mcp = std::make_shared<McpSession>("", provider, stateless_options, credential);

  // Progress needs SSE, and a listen stream is SSE; otherwise JSON when the client takes it.
  const bool sse = accept.sse && (method == "tools/call" || listen || !accept.json);
  http::EventStream::Options stream_options;
  stream_options.number = 1;
  stream_options.sse = sse;
  auto stream = std::make_shared<http::EventStream>(stream_options);
  session->mcp->Handle(message, stream);
  // (A listen stream is SSE from its acknowledgement on, even when it ends at once.)
  if (auto response = listen ? std::nullopt : stream->TakeResponse()) {
    session->mcp->Close();
    http::Response res = SingleResponse(*response, sse);
    res.status = StatelessHttpStatus(*response);
    return conn->Respond(std::move(res));
  }
  CarryStateless(conn, StatelessCall{session, stream, id, listen});
}

// Keeps `call` (so that list changes reach it and Stop() ends it) and streams it on `conn`.
void HttpServer::Impl::CarryStateless(const std::shared_ptr<http::Connection>& conn, StatelessCall call) {
  bool registered = false;
  {
    codemode::MutexLock lock(&mu);
    // Stop() has taken what it ends: this one it would miss.
    if (!stopped) stateless[next_stateless++] = call;
    registered = !stopped;
  }
  if (!registered) {
    // Stop() took the calls before this one was kept. Its stream is not attached yet and
    // Stop() is about to close the connection: answer here, on the connection's own
    // executor, before that close runs, or the request would end with no answer at all.
    call.session->mcp->Close();
    const json error = ShutdownAnswer(call.request_id);
    return conn->Respond({StatelessHttpStatus(error), "application/json", wire::Dump(error), {}});
  }
  auto consumer = std::make_shared<ConnectionConsumer>(conn);
  // Everything so far (a listen stream's acknowledgement), then live; nothing is kept for
  // a resumption that cannot come.
  (void)call.stream->Attach(consumer, std::nullopt);
  call.stream->Forget();
  std::weak_ptr<HttpSession> weak = call.session;
  http::Connection::StreamCallbacks callbacks;
  callbacks.on_lost = [this, weak, stream = call.stream, id = call.request_id, c = consumer.get()] {
    stream->Detach(c, Clock::now());
    auto s = weak.lock();
    if (s && !stream->closed()) CancelCall(s, id, "client disconnected");
  };
  callbacks.on_done = [stream = call.stream, c = consumer.get()] { stream->Delivered(c); };
  const bool sse = call.stream->sse();
  conn->StartStream(sse ? "text/event-stream" : "application/json", sse, {}, std::move(callbacks));
}

json HttpServer::Impl::ShutdownAnswer(const json& request_id) {
  return MakeError(request_id, kInternalError, "the gateway is shutting down: the request was cancelled");
}

// The stateless requests (2026-07-28) that are done: answered (or cancelled) and not
// listening. Closed off the event loop (a closing McpSession waits for its worker).
void HttpServer::Impl::ReapStateless() {
  std::vector<std::shared_ptr<HttpSession>> done;
  {
    codemode::MutexLock lock(&mu);
    for (auto it = stateless.begin(); it != stateless.end();) {
      if (it->second.stream->closed() && it->second.session->mcp->in_flight() == 0) {
        done.push_back(it->second.session);
        it = stateless.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& s : done) s->mcp->Close();
}

}  // namespace gateway
