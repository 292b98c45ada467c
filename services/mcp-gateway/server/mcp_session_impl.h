// The inside of McpSession, shared by its three source files: mcp_session.cc (dispatch,
// requests with a session, cancellation, closing), mcp_session_work.cc (tools/call,
// resources/read and resources/list on workers) and mcp_session_stateless.cc (stateless
// requests, protocol 2026-07-28: server/discover, subscriptions/listen). Private to them;
// users include server/mcp_session.h.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/thread_pool.h"
#include "jsonrpc/jsonrpc.h"
#include "server/client_requests.h"
#include "server/mcp_stateless.h"
#include "server/mcp_session.h"

namespace gateway {

using json = nlohmann::json;

// "info": log messages pass at this level and above until the client says otherwise.
inline constexpr int kDefaultLogLevel = 1;

// Map key for a request id. Dumping keeps "1" (string) and 1 (integer) distinct.
inline std::string IdKey(const json& id) { return wire::Dump(id); }

// Converts the provider's answer to a JSON-RPC response; NOT_FOUND becomes
// `not_found_code` (-32602 for tools, -32002 "resource not found" for resources, -32602
// with the uri as data for resources of a stateless request: SEP-2164).
json WorkResponse(const json& id, const absl::StatusOr<json>& result, int not_found_code,
                  const json& not_found_data = nullptr);

// What of a client's declared capabilities the gateway keeps (ToolCallContext::
// client_capabilities): `elicitation`, `sampling` and `roots`, each object at most 4 KiB
// (a larger one is kept as {}); anything else, or a non-object, is dropped.
json UsableCapabilities(const json& declared);

inline void Reply(const std::shared_ptr<ReplySink>& sink, const json& message) {
  if (sink) sink->Send(message);
}

// ---------------------------------------------------------------------------------------
// Impl: all protocol state, guarded by `mu`. Sinks are always called without `mu` held,
// because a sink may block briefly (stdio writes) and must never be able to deadlock us.
struct McpSession::Impl {
  struct InFlight {
    std::shared_ptr<codemode::CancelToken> token;
    bool cancelled_by_client = false;  // suppresses the eventual response
  };

  McpSession* self;
  ToolProvider* provider;
  ServerOptions options;

  mutable codemode::Mutex mu;
  bool init_done ABSL_GUARDED_BY(mu) = false;  // the initialize request has been answered
  bool closed ABSL_GUARDED_BY(mu) = false;
  std::string protocol_version ABSL_GUARDED_BY(mu);
  int min_log_level ABSL_GUARDED_BY(mu) = kDefaultLogLevel;
  std::shared_ptr<ReplySink> notification_sink ABSL_GUARDED_BY(mu);
  std::map<std::string, InFlight> in_flight ABSL_GUARDED_BY(mu);  // by IdKey(id)
  int running_workers ABSL_GUARDED_BY(mu) = 0;
  // Open subscriptions/listen requests (2026-07-28), by IdKey(id): where their
  // notifications go and which they asked for. They count against max_concurrent_calls.
  struct Listener {
    json id;
    std::shared_ptr<ReplySink> sink;
    bool tools = false;
    // Nothing goes to it before its acknowledgement; set by the provider's watch thread
    // when the stream watches resources.
    std::shared_ptr<std::atomic<bool>> acknowledged = std::make_shared<std::atomic<bool>>(false);
    // resourcesListChanged: ResourceProvider::WatchResources's subscription; dropped with it.
    std::shared_ptr<void> resources_watch;
  };
  std::map<std::string, Listener> listeners ABSL_GUARDED_BY(mu);
  // What initialize's capabilities declared (ToolCallContext::client_capabilities).
  json client_capabilities ABSL_GUARDED_BY(mu) = json::object();
  // Requests to the client (elicitation), answered by its responses.
  ClientRequests client_requests{static_cast<size_t>(std::max(options.max_concurrent_calls, 1))};
  // stdio: a 2026-07-28 request (other than server/discover) came before any initialize.
  bool pinned_stateless ABSL_GUARDED_BY(mu) = false;
  // The calls' workers, a thread per call; one that ended its call may wait for the next
  // while the server's ServerOptions::parked_call_threads has room (a thread made per call
  // was ~0.06 ms of each run_python). The last member: Close() waits for running_workers
  // to reach zero, and this joins their threads before anything they touched goes.
  // A stateless session (one request's) never has a next call: its thread does not wait.
  codemode::ThreadPool workers{
      WorkerOptions(options.max_concurrent_calls, options.stateless ? nullptr : options.parked_call_threads)};

  bool NoWorkers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return running_workers == 0; }
  // At most max_concurrent_calls calls run; one that just answered may still hold its
  // thread for a moment, and the next call waits for it past twice that.
  static codemode::ThreadPoolOptions WorkerOptions(int max_concurrent_calls,
                                                   std::shared_ptr<codemode::ParkedThreads> parked) {
    codemode::ThreadPoolOptions o;
    o.name = "mcp request";
    o.max_threads = 2 * static_cast<size_t>(std::max(max_concurrent_calls, 1));
    if (parked) {
      o.max_idle = 1;
      o.idle_timeout = kParkedCallThreadFor;
      o.parked = std::move(parked);
    }
    return o;
  }

  Impl(McpSession* s, ToolProvider* p, ServerOptions o)
      : self(s), provider(p), options(std::move(o)) {}

  void Dispatch(const json& message, const std::shared_ptr<ReplySink>& reply);
  void HandleNotification(const std::string& method, const json& params);
  void HandleRequest(const std::string& method, const json& id, const json& params,
                     const std::shared_ptr<ReplySink>& reply);
  // A stateless request (protocol 2026-07-28, mcp_stateless.h).
  void HandleStatelessRequest(const std::string& method, const json& id, const json& params,
                              const std::shared_ptr<ReplySink>& reply);
  json ServerInfo() const { return {{"name", options.name}, {"version", options.version}}; }
  // `response` as a stateless request gets it (a result gets resultType, _meta, hints).
  json Stateless(json response, const std::string& method) const {
    if (auto result = response.find("result"); result != response.end()) {
      *result = StatelessResult(std::move(*result), method, ServerInfo());
    }
    return response;
  }
  json Discover(const json& id);
  // subscriptions/listen: answers the acknowledgement and keeps `reply` open (null), or an error.
  json Listen(const json& id, const json& params, const std::shared_ptr<ReplySink>& reply);
  // The last message of a listen stream the server ends.
  json ListenEnded(const json& id) const {
    return MakeResult(id, {{"resultType", "complete"},
                           {"_meta", {{kMetaSubscriptionId, id}, {kMetaServerInfo, ServerInfo()}}}});
  }
  json Initialize(const json& id, const json& params);
  json SetLevel(const json& id, const json& params);
  json ListTools(const json& id, const json& params);
  json ListResources(const json& id, const std::string& method, const json& params);
  // Subscribes listen stream `key` to the provider's watch of the credential's resources;
  // `ack` goes out once it is ready. False when the provider watches nothing.
  bool WatchResources(const std::string& key, const json& id, const std::shared_ptr<ReplySink>& reply,
                      const json& ack, const std::shared_ptr<std::atomic<bool>>& acknowledged);
  // resources/list of a stateless request: the credential's resources, on a worker.
  json StartOwnedList(const json& id, const json& params, const std::shared_ptr<ReplySink>& reply);
  // These return an error response, or null when the work was started on a worker.
  // `stateless`: a stateless request (protocol 2026-07-28).
  json StartToolCall(const json& id, const json& params, const std::shared_ptr<ReplySink>& reply,
                     bool stateless);
  json StartRead(const json& id, const json& params, const std::shared_ptr<ReplySink>& reply,
                 bool stateless);
  using Work = std::function<absl::StatusOr<json>(ToolCallContext&)>;
  // One call that runs on a worker.
  struct WorkSpec {
    std::string what;  // for logs and errors: "tool run_python", "resources/read"
    Work work;
    json client_capabilities = json::object();  // ToolCallContext::client_capabilities
    int not_found_code = kInvalidParams;
    json not_found_data;       // the error's data when the provider says NOT_FOUND
    bool read = false;         // counted as a read by CallLimits
    uint64_t bytes = 0;        // what its arguments hold
    std::string stateless_method;  // the method, for a stateless request; else ""
    // A stateless tools/call: its retry fields (ToolCallContext::stateless).
    std::string request_state;
    json input_responses = json::object();
    std::string traceparent;  // params._meta.traceparent, as sent (parsed in RunWork)
  };
  json StartWork(const json& id, const json& params, const std::shared_ptr<ReplySink>& reply,
                 WorkSpec spec);
  // ToolCallContext::ask_client of a 2025 call: ClientRequests on its own stream, ended by
  // the call's cancellation or by what asks.
  decltype(ToolCallContext::ask_client) AskClient(const std::shared_ptr<ReplySink>& reply,
                                                  const std::shared_ptr<codemode::CancelToken>& token);
  void RunWork(const json& id, const WorkSpec& spec, const json& progress_token,
               const std::shared_ptr<codemode::CancelToken>& token,
               const std::shared_ptr<ReplySink>& reply);
  void CancelRequest(const json& params);
  // Sends a list_changed notification once the client has initialized, and on each
  // listen stream that asked for it (tagged with its id).
  void NotifyListChanged(const char* method, bool tools) {
    std::shared_ptr<ReplySink> sink;
    std::vector<std::pair<json, std::shared_ptr<ReplySink>>> listening;
    {
      codemode::MutexLock lock(&mu);
      if (closed) return;
      if (self->initialized_) sink = notification_sink;
      for (const auto& [key, l] : listeners) {
        if (*l.acknowledged && tools && l.tools) listening.emplace_back(l.id, l.sink);
      }
    }
    Reply(sink, MakeNotification(method, json::object()));
    for (const auto& [id, listener] : listening) {
      Reply(listener, MakeNotification(method, {{"_meta", {{kMetaSubscriptionId, id}}}}));
    }
  }
};


}  // namespace gateway
