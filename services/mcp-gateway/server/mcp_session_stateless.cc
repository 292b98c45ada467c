// McpSession's stateless requests (protocol 2026-07-28, mcp_stateless.h): the envelope and version
// checks, server/discover and subscriptions/listen. See mcp_session.cc for the rest.
#include "absl/strings/str_cat.h"
#include "server/mcp_session_impl.h"

namespace gateway {

namespace {

// Methods the 2026-07-28 revision removed: a stateless client gets -32601 for them.
bool RemovedInStateless(const std::string& method) {
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
  if (!initialized_with.empty()) {  // a connection with a session serves no stateless request
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
      // server/discover is how a client finds out whether to speak stateless: it pins nothing.
      if (method != "server/discover" && !init_done) pinned_stateless = true;
    }
    const bool resources = provider->resources() != nullptr;
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
    } else if (resources && method == "resources/list") {
      response = StartOwnedList(id, params, reply);
    } else if (resources && method == "resources/templates/list") {
      response = Stateless(ListResources(id, method, params), method);
    } else if (method == "subscriptions/listen") {
      response = Listen(id, params, reply);
    } else if (RemovedInStateless(method)) {
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
  // The resource list is the credential's (ResourceProvider::ListOwnedResources).
  if (provider->resources() != nullptr) capabilities["resources"] = {{"listChanged", true}};
  json result = {{"supportedVersions", {kStatelessVersion}}, {"capabilities", std::move(capabilities)}};
  if (!options.instructions.empty()) result["instructions"] = options.instructions;
  return Stateless(MakeResult(id, std::move(result)), "server/discover");
}

json McpSession::Impl::StartOwnedList(const json& id, const json& params,
                                      const std::shared_ptr<ReplySink>& reply) {
  auto cursor = params.find("cursor");
  if (cursor != params.end() && !cursor->is_string() && !cursor->is_null()) {
    return Stateless(MakeError(id, kInvalidParams, "params.cursor must be a string"), "resources/list");
  }
  const std::string from = cursor != params.end() && cursor->is_string() ? cursor->get<std::string>() : "";
  WorkSpec spec;
  spec.what = "resources/list";
  spec.work = [this, from](ToolCallContext& context) { return provider->resources()->ListOwnedResources(from, context); };
  spec.read = true;
  spec.bytes = from.size();
  spec.stateless_method = "resources/list";
  return StartWork(id, params, reply, std::move(spec));
}

bool McpSession::Impl::WatchResources(const std::string& key, const json& id,
                                      const std::shared_ptr<ReplySink>& reply, const json& ack,
                                      const std::shared_ptr<std::atomic<bool>>& acknowledged) {
  // Acknowledged once the watch has had its first look at the credential's list, so that
  // any change after the acknowledgement is announced. The callbacks hold only what
  // outlives this session.
  std::weak_ptr<ReplySink> sink = reply;
  std::shared_ptr<void> watch = provider->resources()->WatchResources(
      self->credential(),
      [sink, ack, acknowledged] {
        Reply(sink.lock(), ack);
        *acknowledged = true;
      },
      [sink, id] {
        Reply(sink.lock(), MakeNotification("notifications/resources/list_changed",
                                            {{"_meta", {{kMetaSubscriptionId, id}}}}));
      });
  if (!watch) return false;
  codemode::MutexLock lock(&mu);
  if (auto it = listeners.find(key); it != listeners.end()) it->second.resources_watch = std::move(watch);
  return true;  // `watch` is dropped here when the stream ended meanwhile
}

json McpSession::Impl::Listen(const json& id, const json& params,
                              const std::shared_ptr<ReplySink>& reply) {
  auto filter = params.find("notifications");
  if (filter == params.end() || !filter->is_object()) {
    return MakeError(id, kInvalidParams,
                     "params.notifications must be an object naming the notifications to receive "
                     "(this server sends toolsListChanged and resourcesListChanged)");
  }
  auto asked = [&](const char* key) {
    auto it = filter->find(key);
    return it != filter->end() && it->is_boolean() && it->get<bool>();
  };
  // What it gets: what it asked for of what this server sends. There are no prompts.
  Listener listener;
  listener.id = id;
  listener.sink = reply;
  listener.tools = asked("toolsListChanged");
  const bool resources = asked("resourcesListChanged") && provider->resources() != nullptr;
  const bool tools = listener.tools;
  auto acknowledgement = [&](bool with_resources) {
    json honoured = json::object();
    if (tools) honoured["toolsListChanged"] = true;
    if (with_resources) honoured["resourcesListChanged"] = true;
    return MakeNotification("notifications/subscriptions/acknowledged",
                            {{"notifications", honoured}, {"_meta", {{kMetaSubscriptionId, id}}}});
  };
  auto end_at_once = [&](const json& ack) {  // nothing to wait for
    Reply(reply, ack);
    Reply(reply, ListenEnded(id));
    if (reply) reply->Close();
    return nullptr;
  };
  json ack = acknowledgement(resources);
  if (!tools && !resources) return end_at_once(ack);
  const std::string key = IdKey(id);
  const std::shared_ptr<std::atomic<bool>> acknowledged = listener.acknowledged;
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
  if (resources) {
    if (WatchResources(key, id, reply, ack, acknowledged)) return nullptr;
    ack = acknowledgement(false);  // a provider that watches nothing
    if (!tools) {
      codemode::MutexLock lock(&mu);
      listeners.erase(key);
    }
    if (!tools) return end_at_once(ack);
  }
  // Sinks are called without `mu`; a change announced before this goes out is not sent to
  // this stream (a client lists after the acknowledgement).
  Reply(reply, ack);
  *acknowledged = true;
  return nullptr;
}

}  // namespace gateway
