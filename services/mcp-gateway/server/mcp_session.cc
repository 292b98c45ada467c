// McpSession: the transport-independent MCP server side of one client connection.
//
// Handle() validates the JSON-RPC shape of each message and dispatches it. Everything but
// tools/call and resources/read is answered synchronously on the caller's thread; those two
// run the ToolProvider on a worker thread of the session (one per call, at most
// ServerOptions::max_concurrent_calls at a time; beyond that the call is refused with
// -32603 rather than queued, so a flood of calls can never build an unbounded backlog;
// across sessions, ServerOptions::call_limits bounds them per credential and overall, and
// a call holds its ticket, charged with its arguments' bytes, until its response is sent).
// Close() cancels in-flight calls, waits for their workers to return, and only then tells
// the provider the session is gone, so the provider never sees a call for a dead session.
// (So a provider must not call Close() from inside CallTool, and should honour the token.)
//
// Lifecycle (with a session, protocols up to 2025-11-25): requests other than initialize/ping are refused until initialize
// has been answered; notifications/initialized is not required before tools/list or
// tools/call (lenient towards clients that pipeline), but list_changed is only sent after
// it. Log messages pass at "info" and above until logging/setLevel says otherwise.
//
// A stateless request (protocol 2026-07-28, mcp_stateless.h) needs no initialize: its envelope is
// checked (-32602, -32022), it runs outside any MCP session (ToolCallContext::mcp_session is
// absent, so run_python places it by its `sandbox` handle), its results carry resultType, the
// server's name and caching hints, and it never gets log messages (it cannot ask for a
// level the way 2025 clients do). subscriptions/listen keeps its reply sink open and sends
// the list changes it asked for, each tagged with its id, until the client cancels it or
// the session closes. On stdio the first such request (other than server/discover) pins
// the connection: a later initialize gets -32022.
#include "server/mcp_session.h"
#include "server/mcp_session_impl.h"
#include "base/thread.h"
#include "base/untrusted_json.h"

#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "base/log_text.h"
#include "server/mcp_stateless.h"
#include "spdlog/spdlog.h"
#include "base/mutex.h"

namespace gateway {

using json = nlohmann::json;

namespace {

// RFC 5424 severities as used by MCP logging, least severe first.
constexpr const char* kLogLevels[] = {"debug", "info",     "notice", "warning",
                                      "error", "critical", "alert",  "emergency"};

int LogLevelIndex(const std::string& level) {
  for (int i = 0; i < static_cast<int>(std::size(kLogLevels)); ++i) {
    if (level == kLogLevels[i]) return i;
  }
  return -1;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}



}  // namespace

// Converts the provider's answer to a JSON-RPC response; NOT_FOUND becomes
// `not_found_code` (-32602 for tools, -32002 "resource not found" for resources, -32602
// with the uri as data for resources of a stateless request: SEP-2164).
json WorkResponse(const json& id, const absl::StatusOr<json>& result, int not_found_code,
                  const json& not_found_data) {
  if (!result.ok()) {
    if (json required = MissingCapabilityOf(result.status()); !required.is_null()) {
      return MakeError(id, kMissingClientCapability, std::string(result.status().message()),
                       {{"requiredCapabilities", std::move(required)}});
    }
    const int code = absl::IsNotFound(result.status()) ? not_found_code
                                                       : StatusToErrorCode(result.status());
    // The data goes with every -32602 of the call (a resource that is not there and one
    // that cannot be there are the same to the client).
    return MakeError(id, code, std::string(result.status().message()),
                     code == not_found_code ? not_found_data : json(nullptr));
  }
  if (!result->is_object()) {
    return MakeError(id, kInternalError, "the provider returned a result that is not an object");
  }
  return MakeResult(id, *result);
}


void McpSession::Impl::Dispatch(const json& message, const std::shared_ptr<ReplySink>& reply) {
  if (!message.is_object()) {
    Reply(reply, MakeError(nullptr, kInvalidRequest, "a message must be a JSON object"));
    return;
  }
  auto id_it = message.find("id");
  const bool has_id = id_it != message.end();
  const bool id_ok = has_id && wire::IsValidId(*id_it);
  const json reply_id = id_ok ? *id_it : json(nullptr);

  auto version = message.find("jsonrpc");
  if (version == message.end() || !version->is_string() || *version != "2.0") {
    Reply(reply, MakeError(reply_id, kInvalidRequest, "jsonrpc must be \"2.0\""));
    return;
  }
  auto method_it = message.find("method");
  if (method_it == message.end()) {
    // A response from the client: to one of our requests (ClientRequests), or dropped.
    if (message.contains("result") || message.contains("error")) {
      client_requests.Answer(message);
      return;
    }
    Reply(reply, MakeError(reply_id, kInvalidRequest, "message has no method"));
    return;
  }
  if (!method_it->is_string()) {
    Reply(reply, MakeError(reply_id, kInvalidRequest, "method must be a string"));
    return;
  }
  const std::string method = method_it->get<std::string>();
  json params = json::object();
  auto params_it = message.find("params");
  const bool params_ok =
      params_it == message.end() || params_it->is_null() || params_it->is_object();
  if (params_ok && params_it != message.end() && params_it->is_object()) params = *params_it;

  if (!has_id) {  // notification: never answered, even when malformed
    if (params_ok) HandleNotification(method, params);
    return;
  }
  if (!id_ok) {
    Reply(reply, MakeError(nullptr, kInvalidRequest, "id must be a string or an integer"));
    return;
  }
  if (!params_ok) {
    Reply(reply, MakeError(reply_id, kInvalidParams, "params must be an object"));
    return;
  }
  if (options.stateless || HasEnvelopeClaim(message)) {
    HandleStatelessRequest(method, reply_id, params, reply);
    return;
  }
  HandleRequest(method, reply_id, params, reply);
}

void McpSession::Impl::HandleNotification(const std::string& method, const json& params) {
  if (method == "notifications/initialized") {
    codemode::MutexLock lock(&mu);
    if (init_done && !closed) self->initialized_ = true;
  } else if (method == "notifications/cancelled") {
    CancelRequest(params);
  }
  // Anything else (roots/list_changed, progress, ...) is of no interest: ignore it.
}

void McpSession::Impl::HandleRequest(const std::string& method, const json& id, const json& params,
                                     const std::shared_ptr<ReplySink>& reply) {
  bool ready, is_closed;
  {
    codemode::MutexLock lock(&mu);
    ready = init_done;
    is_closed = closed;
  }
  json response;
  bool stateless_connection;
  {
    codemode::MutexLock lock(&mu);
    stateless_connection = pinned_stateless;
  }
  if (is_closed) {
    response = MakeError(id, kInvalidRequest, "session is closed");
  } else if (stateless_connection && method == "initialize") {
    auto requested = params.find("protocolVersion");
    response = UnsupportedVersion(id, requested != params.end() && requested->is_string()
                                          ? requested->get<std::string>()
                                          : "");
  } else if (stateless_connection) {  // a request of neither kind: say what this one needs
    response = EnvelopeError(id, params).value_or(MakeError(id, kInvalidRequest, "invalid request"));
  } else if (method == "initialize") {
    response = Initialize(id, params);
  } else if (method == "ping") {
    response = MakeResult(id, json::object());
  } else if (!ready) {
    response = MakeError(id, kInvalidRequest, "session not initialized: send initialize first");
  } else if (method == "logging/setLevel") {
    response = SetLevel(id, params);
  } else if (method == "tools/list") {
    response = ListTools(id, params);
  } else if (method == "tools/call") {
    response = StartToolCall(id, params, reply, /*stateless=*/false);
  } else if (provider->resources() != nullptr && method == "resources/read") {
    response = StartRead(id, params, reply, /*stateless=*/false);
  } else if (provider->resources() != nullptr &&
             (method == "resources/list" || method == "resources/templates/list")) {
    response = ListResources(id, method, params);
  } else {
    response = MakeError(id, kMethodNotFound, "method not found: " + method);
  }
  if (!response.is_null()) Reply(reply, response);
}

json McpSession::Impl::Initialize(const json& id, const json& params) {
  auto requested = params.find("protocolVersion");
  if (requested == params.end() || !requested->is_string()) {
    return MakeError(id, kInvalidParams, "params.protocolVersion must be a string");
  }
  std::string version = NegotiateVersion(requested->get<std::string>());
  {
    codemode::MutexLock lock(&mu);
    if (init_done) return MakeError(id, kInvalidRequest, "session is already initialized");
    init_done = true;
    protocol_version = version;
    auto declared = params.find("capabilities");
    if (declared != params.end()) client_capabilities = UsableCapabilities(*declared);
  }
  auto client = params.find("clientInfo");
  spdlog::debug("mcp session {}: initialize, protocol {}, client {}", self->key(), version,
                client != params.end() ? codemode::LogText(wire::Dump(*client)) : "unknown");

  json capabilities = {{"tools", {{"listChanged", true}}}, {"logging", json::object()}};
  if (provider->resources() != nullptr) capabilities["resources"] = {{"listChanged", true}};
  json result = {
      {"protocolVersion", version},
      {"capabilities", std::move(capabilities)},
      {"serverInfo", {{"name", options.name}, {"version", options.version}}},
  };
  if (!options.instructions.empty()) result["instructions"] = options.instructions;
  return MakeResult(id, std::move(result));
}

json McpSession::Impl::SetLevel(const json& id, const json& params) {
  auto level = params.find("level");
  int index =
      (level != params.end() && level->is_string()) ? LogLevelIndex(level->get<std::string>()) : -1;
  if (index < 0) {
    return MakeError(id, kInvalidParams,
                     "params.level must be one of debug, info, notice, warning, error, "
                     "critical, alert, emergency");
  }
  codemode::MutexLock lock(&mu);
  min_log_level = index;
  return MakeResult(id, json::object());
}

json McpSession::Impl::ListTools(const json& id, const json& params) {
  auto cursor = params.find("cursor");
  if (cursor != params.end() && !cursor->is_string() && !cursor->is_null()) {
    return MakeError(id, kInvalidParams, "params.cursor must be a string");
  }
  // Everything fits in one page, so any cursor means "from the start".
  return MakeResult(id, {{"tools", provider->ListTools(self->credential())}});
}

json McpSession::Impl::ListResources(const json& id, const std::string& method,
                                     const json& params) {
  auto cursor = params.find("cursor");
  if (cursor != params.end() && !cursor->is_string() && !cursor->is_null()) {
    return MakeError(id, kInvalidParams, "params.cursor must be a string");
  }
  // resources/list pages (the provider bounds a page); templates fit in one page, so any
  // cursor there means "from the start", as for tools/list.
  const std::string from = cursor != params.end() && cursor->is_string() ? cursor->get<std::string>() : "";
  return WorkResponse(id,
                      method == "resources/list" ? provider->resources()->ListResources(self->key(), from)
                                                 : provider->resources()->ListResourceTemplates(self->key()),
                      kResourceNotFound);
}

void McpSession::Impl::CancelRequest(const json& params) {
  auto request_id = params.find("requestId");
  if (request_id == params.end() || !wire::IsValidId(*request_id)) return;
  std::string reason = "cancelled by the client";
  auto r = params.find("reason");
  if (r != params.end() && r->is_string()) reason = r->get<std::string>();

  std::shared_ptr<codemode::CancelToken> token;
  std::shared_ptr<ReplySink> listening;
  {
    codemode::MutexLock lock(&mu);
    // A listen stream the client no longer wants: it ends without a result.
    if (auto l = listeners.find(IdKey(*request_id)); l != listeners.end()) {
      listening = std::move(l->second.sink);
      listeners.erase(l);
    }
  }
  if (listening) {
    listening->Close();
    return;
  }
  {
    codemode::MutexLock lock(&mu);
    auto it = in_flight.find(IdKey(*request_id));
    if (it == in_flight.end()) return;  // finished already, or never existed: ignore
    it->second.cancelled_by_client = true;
    token = it->second.token;
  }
  token->Cancel(reason);  // outside the lock: callbacks may do real work
}

// ---------------------------------------------------------------------------------------
McpSession::McpSession(std::string key, ToolProvider* provider, ServerOptions options,
                       std::string credential)
    : impl_(std::make_unique<Impl>(this, provider, std::move(options))),
      key_(std::move(key)),
      credential_(std::move(credential)) {
  last_activity_ms_ = NowMs();
}

McpSession::~McpSession() { Close(); }

void McpSession::Handle(const nlohmann::json& message, std::shared_ptr<ReplySink> reply) {
  last_activity_ms_ = NowMs();
  try {
    impl_->Dispatch(message, reply);
  } catch (const std::exception& e) {
    // Only reachable through a provider or sink throwing; never let it escape.
    spdlog::error("mcp session {}: error handling a message: {}", key_,
                  codemode::LogLongText(e.what()));
    if (wire::LooksLikeRequest(message) && wire::IsValidId(message.at("id"))) {
      Reply(reply, MakeError(message.at("id"), kInternalError,
                             std::string("internal error: ") + e.what()));
    }
  }
}

void McpSession::SetNotificationSink(std::shared_ptr<ReplySink> sink) {
  codemode::MutexLock lock(&impl_->mu);
  if (impl_->closed) return;
  impl_->notification_sink = std::move(sink);
}

void McpSession::NotifyToolsChanged() {
  impl_->NotifyListChanged("notifications/tools/list_changed", /*tools=*/true);
}

void McpSession::NotifyResourcesChanged() {
  impl_->NotifyListChanged("notifications/resources/list_changed", /*tools=*/false);
}

void McpSession::Log(const std::string& level, const std::string& logger,
                     const nlohmann::json& data) {
  int index = LogLevelIndex(level);
  if (index < 0) {
    spdlog::warn("mcp session {}: dropping a log message with unknown level '{}'", key_,
                 codemode::LogQuoted(level));
    return;
  }
  std::shared_ptr<ReplySink> sink;
  {
    codemode::MutexLock lock(&impl_->mu);
    if (!impl_->init_done || impl_->closed || index < impl_->min_log_level) return;
    sink = impl_->notification_sink;
  }
  json params = {{"level", level}, {"data", data}};
  if (!logger.empty()) params["logger"] = logger;
  Reply(sink, MakeNotification("notifications/message", std::move(params)));
}

void McpSession::Close() {
  std::vector<std::shared_ptr<codemode::CancelToken>> tokens;
  std::map<std::string, Impl::Listener> listeners;
  {
    codemode::MutexLock lock(&impl_->mu);
    if (impl_->closed) return;
    impl_->closed = true;
    impl_->notification_sink.reset();
    for (auto& [key, call] : impl_->in_flight) tokens.push_back(call.token);
    listeners.swap(impl_->listeners);
  }
  for (auto& token : tokens) token->Cancel("session closed");
  impl_->client_requests.CloseAll();
  for (auto& [key, listener] : listeners) {  // ended by the server: with its final result
    Reply(listener.sink, impl_->ListenEnded(listener.id));
    if (listener.sink) listener.sink->Close();
  }
  {
    // Wait for the workers so SessionClosed really is the provider's last word. A provider
    // that ignores cancellation keeps us here; say so rather than hang silently.
    codemode::MutexLock lock(&impl_->mu);
    while (!impl_->mu.AwaitWithTimeout(absl::Condition(impl_.get(), &Impl::NoWorkers),
                                       absl::Seconds(10))) {
      spdlog::warn("mcp session {}: waiting for {} cancelled call(s) to return", key_,
                   impl_->running_workers);
    }
  }
  if (impl_->options.stateless) return;  // it held nothing of its own
  try {
    impl_->provider->SessionClosed(key_);
  } catch (const std::exception& e) {
    spdlog::error("mcp session {}: SessionClosed threw: {}", key_, codemode::LogLongText(e.what()));
  }
}

std::string McpSession::protocol_version() const {
  codemode::MutexLock lock(&impl_->mu);
  return impl_->protocol_version;
}

int McpSession::in_flight() const {
  codemode::MutexLock lock(&impl_->mu);
  return static_cast<int>(impl_->in_flight.size());
}

}  // namespace gateway
