// McpSession's requests of the 2026-07-28 era (mcp_era.h): the envelope and version
// checks, server/discover and subscriptions/listen. See mcp_session.cc for the rest.
#include "absl/strings/str_cat.h"
#include "server/mcp_session_impl.h"

namespace gateway {

namespace {

// Methods the 2026-07-28 revision removed: a client of that era gets -32601 for them.
bool RemovedInStatelessEra(const std::string& method) {
  return method == "initialize" || method == "ping" || method == "logging/setLevel" ||
         method == "resources/subscribe" || method == "resources/unsubscribe";
}

}  // namespace

void McpSession::Impl::HandleStatelessRequest(const std::string& method, const json& id,
                                              const json& params,
                                              const std::shared_ptr<ReplySink>& reply) {
  json response;
  std::string version, initialized_with;
  {
    codemode::MutexLock lock(&mu);
    if (init_done) initialized_with = protocol_version;
  }
  if (!initialized_with.empty()) {  // one era per connection (attack round 14, F6)
    response = MakeError(id, kInvalidRequest,
                         absl::StrCat("this connection initialized with protocol ", initialized_with,
                                      ": its requests carry no protocol version in _meta (protocol ",
                                      kStatelessVersion, " needs a connection of its own)"));
  } else if (auto invalid = EnvelopeError(id, params)) {
    response = std::move(*invalid);
  } else if (version = ClaimedVersion(params); version != kStatelessVersion) {
    response = UnsupportedVersion(id, version);
  } else {
    bool is_closed;
    {
      codemode::MutexLock lock(&mu);
      is_closed = closed;
      // server/discover is how a client finds out which era to speak: it pins nothing.
      if (method != "server/discover" && !init_done) pinned_stateless = true;
    }
    const bool resources = provider->HasResources();
    if (is_closed) {
      response = MakeError(id, kInvalidRequest, "session is closed");
    } else if (method == "server/discover") {
      response = Discover(id);
    } else if (method == "tools/list") {
      response = Stateless(ListTools(id, params), method);
    } else if (method == "tools/call") {
      response = StartToolCall(id, params, reply, /*stateless=*/true);
    } else if (resources && method == "resources/read") {
      response = StartRead(id, params, reply, /*stateless=*/true);
    } else if (resources && (method == "resources/list" || method == "resources/templates/list")) {
      response = Stateless(ListResources(id, method, params), method);
    } else if (method == "subscriptions/listen") {
      response = Listen(id, params, reply);
    } else if (RemovedInStatelessEra(method)) {
      response = MakeError(id, kMethodNotFound,
                           absl::StrCat("method not found: ", method, " is not part of protocol ",
                                        kStatelessVersion));
    } else {
      response = MakeError(id, kMethodNotFound, "method not found: " + method);
    }
  }
  if (!response.is_null()) Reply(reply, response);
}

json McpSession::Impl::Discover(const json& id) {
  json capabilities = {{"tools", {{"listChanged", true}}}};
  // Without an MCP session the resource list has nothing of the caller's (files are linked
  // by their sandbox handle): it does not change, so there is nothing to listen for.
  if (provider->HasResources()) capabilities["resources"] = json::object();
  json result = {{"supportedVersions", {kStatelessVersion}}, {"capabilities", std::move(capabilities)}};
  if (!options.instructions.empty()) result["instructions"] = options.instructions;
  return Stateless(MakeResult(id, std::move(result)), "server/discover");
}

json McpSession::Impl::Listen(const json& id, const json& params,
                              const std::shared_ptr<ReplySink>& reply) {
  auto filter = params.find("notifications");
  if (filter == params.end() || !filter->is_object()) {
    return MakeError(id, kInvalidParams,
                     "params.notifications must be an object naming the notifications to receive "
                     "(this server sends toolsListChanged)");
  }
  auto asked = [&](const char* key) {
    auto it = filter->find(key);
    return it != filter->end() && it->is_boolean() && it->get<bool>();
  };
  // What it gets: what it asked for of what this server sends. Only the tool list changes
  // (with the upstreams' catalogs); there are no prompts, and the resource list of a
  // request without an MCP session does not change (see Discover).
  Listener listener{id, reply, asked("toolsListChanged")};
  json honoured = json::object();
  if (listener.tools) honoured["toolsListChanged"] = true;
  const json ack = MakeNotification("notifications/subscriptions/acknowledged",
                                    {{"notifications", honoured}, {"_meta", {{kMetaSubscriptionId, id}}}});
  if (honoured.empty()) {  // nothing to wait for
    Reply(reply, ack);
    Reply(reply, ListenEnded(id));
    if (reply) reply->Close();
    return nullptr;
  }
  const std::string key = IdKey(id);
  {
    codemode::MutexLock lock(&mu);
    if (closed) return MakeError(id, kInvalidRequest, "session is closed");
    if (static_cast<int>(in_flight.size() + listeners.size()) >= options.max_concurrent_calls) {
      return MakeError(id, kInternalError, "too many concurrent calls and subscriptions");
    }
    if (in_flight.count(key) || listeners.count(key)) {
      return MakeError(id, kInvalidRequest, "request id is already in use");
    }
    listeners.emplace(key, std::move(listener));
  }
  // Sinks are called without `mu`; a change announced before this goes out is not sent to
  // this stream (a client lists after the acknowledgement).
  Reply(reply, ack);
  codemode::MutexLock lock(&mu);
  if (auto it = listeners.find(key); it != listeners.end()) it->second.acknowledged = true;
  return nullptr;
}


}  // namespace gateway
