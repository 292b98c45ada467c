// HttpServer's handling of the MCP endpoint: POST (initialize creates a session; requests
// are answered in one piece or as an SSE stream that outlives its connection), GET (the
// session's notification stream, or the resumption of a call's stream with Last-Event-ID)
// and DELETE, and closing a session. See http_server.cc for the rest.
#include "base/log_text.h"
#include "metrics/stage_times.h"
#include "server/http_server_impl.h"
#include "telemetry/trace_context.h"

namespace gateway {

namespace {

// An unknown session and one that another credential created get the same answer, so a
// session id is no key: without its credential it names nothing (and ids may be logged).
http::Response SessionNotFound() {
  return Error(404, kInvalidRequest, "Session not found: initialize a new session");
}

}  // namespace

std::pair<size_t, size_t> HttpServer::Impl::SessionsHeld(const std::string& credential) {
  size_t all = sessions.size(), mine = 0;
  for (const auto& [id, s] : sessions) mine += s->credential == credential;
  for (const auto& [cred, n] : closing) {
    all += n;
    if (cred == credential) mine += n;
  }
  for (const auto& [n, call] : stateless) {
    if (!call.listen) continue;
    ++all;
    mine += call.session->credential == credential;
  }
  return {all, mine};
}

// The session named by Mcp-Session-Id, if the request's credential created it; 400 when
// the header is missing, 404 otherwise.
std::shared_ptr<HttpSession> HttpServer::Impl::FindSession(const http::Request& req,
                                                           http::Response* error) {
  if (!req.Has(kSessionHeader)) {
    *error = Error(400, kInvalidRequest, "Bad Request: Mcp-Session-Id header required");
    return nullptr;
  }
  const std::string credential = Credential(req);
  {
    codemode::MutexLock lock(&mu);
    auto it = sessions.find(req.Header(kSessionHeader));
    if (it != sessions.end() && it->second->credential == credential) return it->second;
  }
  *error = SessionNotFound();
  return nullptr;
}

// As FindSession, and removes the session from `sessions`; it stays counted in `closing`
// until CloseRemoved has closed it.
std::shared_ptr<HttpSession> HttpServer::Impl::TakeSession(const http::Request& req,
                                                           http::Response* error) {
  auto session = FindSession(req, error);
  if (!session) return nullptr;
  codemode::MutexLock lock(&mu);
  if (sessions.erase(session->id) == 0) {  // a concurrent DELETE (or expiry) took it first
    *error = SessionNotFound();
    return nullptr;
  }
  ++closing[session->credential];
  return session;
}

namespace {

// A request's W3C `traceparent` HTTP header goes where the MCP layer reads trace context,
// params._meta.traceparent (SEP-414), unless the message names its own there. Only a
// well-formed value is copied (telemetry/trace_context.h); anything else is ignored, as
// the W3C spec says.
void AdoptTraceparentHeader(const http::Request& req, json& message) {
  if (!req.Has("traceparent") || !wire::LooksLikeRequest(message)) return;
  const std::string header = req.Header("traceparent");
  if (!codemode::telemetry::TraceContext::Parse(header)) return;
  json& params = message["params"];
  if (params.is_null()) params = json::object();
  if (!params.is_object()) return;
  json& meta = params["_meta"];
  if (meta.is_null()) meta = json::object();
  if (meta.is_object() && !meta.contains("traceparent")) meta["traceparent"] = header;
}

}  // namespace

void HttpServer::Impl::HandlePost(const std::shared_ptr<http::Connection>& conn,
                                  const http::Request& req) {
  const http::AcceptedTypes accept = http::ParseAccept(req.Header("Accept"));
  if (!accept.json && !accept.sse) {
    return conn->Respond(Error(406, kInvalidRequest,
                               "Not Acceptable: accept application/json and/or text/event-stream"));
  }
  StageTimes::Mark(Stage::kRead);
  json error;
  auto message = ParseMessage(req.body, &error, server_options.max_message_json_values);
  if (!message.ok()) return conn->Respond({400, "application/json", wire::Dump(error), {}});
  StageTimes::Mark(Stage::kParsed);
  AdoptTraceparentHeader(req, *message);
  // The body decides whether a request is stateless; a 2026-07-28 request ignores Mcp-Session-Id.
  if (IsStatelessPost(req, *message)) return HandleStatelessPost(conn, req, *message, accept);
  if (req.Has(kVersionHeader) && !IsServedVersion(req.Header(kVersionHeader))) {
    return conn->Respond(Error(400, kInvalidRequest,
                               "Bad Request: unsupported MCP-Protocol-Version " + req.Header(kVersionHeader)));
  }
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
    const auto [all, mine] = SessionsHeld(credential);
    if (all >= options.max_sessions) {
      return absl::StrCat(options.max_sessions, " MCP sessions and subscriptions/listen streams are open "
                                                "(--max_mcp_sessions)");
    }
    if (mine >= options.max_sessions_per_credential) {
      return absl::StrCat(mine, " MCP sessions and subscriptions/listen streams are open with this "
                                "credential (--max_mcp_sessions_per_credential)");
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
  session->replay_budget =
      std::make_shared<codemode::ByteBudget>("max_replay_bytes_per_session", options.max_replay_bytes_per_session,
                                             WithShare(replay_budget, credential));
  session->mcp = std::make_shared<McpSession>(session->id, provider, server_options, credential);
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
               codemode::LogText(session->mcp->protocol_version()));
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
    codemode::MutexLock lock(&session->mu);
    number = session->next_stream++;
    http::EventStream::Options stream_options;
    stream_options.number = number;
    stream_options.sse = sse;
    stream_options.budget = session->replay_budget;
    stream_options.kept_overhead = http::kKeptStreamBytes;
    stream = std::make_shared<http::EventStream>(stream_options);
    session->calls[number] = {stream, message.at("id")};
    DropOldFinishedStreams(*session);
  }
  if (sse && tool_call && ExpectsPriming(session->mcp->protocol_version())) stream->Prime();
  session->mcp->Handle(message, stream);
  if (!(sse && tool_call)) {
    if (auto response = stream->TakeResponse()) {
      {
        codemode::MutexLock lock(&session->mu);
        session->calls.erase(number);
      }
      return conn->Respond(SingleResponse(*response, sse));
    }
  }
  CarryCall(conn, session, number, std::nullopt);
}

// Keeps a session's call streams within max_resumable_streams_per_session by dropping its
// oldest finished ones: a client that hangs up after the priming event, again and again,
// must not make us keep a stream per request for resume_grace. Streams of running calls stay.
void HttpServer::Impl::DropOldFinishedStreams(HttpSession& session) {
  for (auto it = session.calls.begin();
       session.calls.size() > options.max_resumable_streams_per_session && it != session.calls.end();) {
    if (!it->second.stream->finished_since()) {
      ++it;
      continue;
    }
    it->second.stream->Forget();  // its kept events and replay budget go now
    it = session.calls.erase(it);
  }
}

// Streams call `number` of `session` on `conn`: the events after `after_seq` (all for
// nullopt), then the rest as it comes.
void HttpServer::Impl::CarryCall(const std::shared_ptr<http::Connection>& conn,
                                 const std::shared_ptr<HttpSession>& session, uint64_t number,
                                 std::optional<uint64_t> after_seq) {
  HttpSession::Call call;
  {
    codemode::MutexLock lock(&session->mu);
    auto it = session->calls.find(number);
    // A resuming client (after_seq) takes the stream over; nobody else may.
    if (it == session->calls.end() || (!after_seq && it->second.stream->attached())) {
      return conn->Respond(Error(409, kInvalidRequest,
                                 "Conflict: that stream has ended or is being read elsewhere"));
    }
    call = it->second;
  }
  auto consumer = std::make_shared<ConnectionConsumer>(conn);
  // Attached before the response starts, so that a resumption past the replay budget gets
  // an error status. What it hands over reaches the connection after StartStream below
  // (Deliver posts to the connection's strand, which runs this handler).
  if (absl::Status attached = call.stream->Attach(consumer, after_seq); !attached.ok()) {
    return conn->Respond(Error(503, kInternalError,
                               absl::StrCat("Service Unavailable: ", attached.message())));
  }
  std::weak_ptr<HttpSession> weak = session;
  http::Connection::StreamCallbacks callbacks;
  callbacks.on_lost = [this, weak, call, number, c = consumer.get()] {
    call.stream->Detach(c, Clock::now());
    auto s = weak.lock();
    if (!s) return;
    if (call.stream->live_only() && call.stream->closed()) {  // nobody can come back for it
      codemode::MutexLock lock(&s->mu);
      s->calls.erase(number);
      return;
    }
    // A client without an event id of this stream cannot come back for it.
    if (!call.stream->closed() && !call.stream->resumable()) {
      CancelCall(s, call.request_id, "client disconnected");
    }
  };
  callbacks.on_done = [weak, call, number, c = consumer.get()] {
    call.stream->Delivered(c);
    auto s = weak.lock();
    if (s && call.stream->done()) {
      codemode::MutexLock lock(&s->mu);
      s->calls.erase(number);
    }
  };
  // A JSON body has no events to resume from: the response, when it comes, is the body.
  conn->StartStream(call.stream->sse() ? "text/event-stream" : "application/json",
                    call.stream->sse(), {}, std::move(callbacks));
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
      codemode::MutexLock lock(&session->mu);
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
    if (sessions.count(session->id) == 0) return conn->Respond(SessionNotFound());
    codemode::MutexLock session_lock(&session->mu);
    if (!after_seq && session->get_stream && session->get_stream->attached()) {
      return conn->Respond(
          Error(409, kInvalidRequest, "Conflict: this session already has a GET stream"));
    }
    if (!session->get_stream) {
      http::EventStream::Options get_options;
      get_options.number = session->next_stream++;
      get_options.ends_with_reply = false;
      get_options.max_events = kGetStreamReplayEvents;
      get_options.budget = session->replay_budget;
      session->get_stream = std::make_shared<http::EventStream>(get_options);
      session->mcp->SetNotificationSink(session->get_stream);
    }
    stream = session->get_stream;
  }
  auto consumer = std::make_shared<ConnectionConsumer>(conn);
  if (after_seq) {  // before the response starts, as in CarryCall
    if (absl::Status attached = stream->Attach(consumer, after_seq); !attached.ok()) {
      return conn->Respond(Error(503, kInternalError,
                                 absl::StrCat("Service Unavailable: ", attached.message())));
    }
  }
  http::Connection::StreamCallbacks callbacks;
  callbacks.on_lost = [stream, c = consumer.get()] { stream->Detach(c, Clock::now()); };
  callbacks.on_done = [stream, c = consumer.get()] { stream->Delivered(c); };
  conn->StartStream("text/event-stream", true, {}, std::move(callbacks));
  if (after_seq) return;
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
  http::Response not_found;
  auto session = TakeSession(req, &not_found);
  if (!session) return conn->Respond(std::move(not_found));
  spdlog::info("http: session {} deleted by the client", session->id);
  // Closing waits for the session's calls to end and its sandboxes to go: not on an
  // event-loop thread. Stop() joins `deleters`, so it never touches a stopped server.
  std::function<void()> close = [this, conn, session] {
    CloseRemoved(session);
    conn->Respond({200, "", "", {}});
  };
  // Refused once Stop() has joined the others: closed here.
  if (!deleters.Schedule(close).ok()) close();
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
    codemode::MutexLock lock(&session->mu);
    get_stream = session->get_stream;
    calls.swap(session->calls);
  }
  if (get_stream) get_stream->Close();
  for (auto& [number, call] : calls) call.stream->Close();
}

// CloseSession for a session TakeSession removed: its credential's slot is free only once
// the session really is closed (its calls ended).
void HttpServer::Impl::CloseRemoved(const std::shared_ptr<HttpSession>& session) {
  CloseSession(session);
  codemode::MutexLock lock(&mu);
  auto it = closing.find(session->credential);
  if (it != closing.end() && --it->second == 0) closing.erase(it);
}

}  // namespace gateway
