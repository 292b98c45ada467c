// Test doubles for mcp_core: a ToolProvider that records what happens to it, and a
// ReplySink that collects what the session sends. Every wait is bounded.
#pragma once

#include <chrono>
#include <thread>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/mcp_stateless.h"
#include "server/mcp_session.h"
#include "nlohmann/json.hpp"

namespace gateway {
namespace testing {

using json = nlohmann::json;

// Generous bound for things that should happen "soon"; only hit when a test fails.
inline constexpr std::chrono::seconds kWait{5};

// Tools:
//   echo      returns its arguments (as text and structuredContent)
//   slow      reports progress 1..steps (of steps), then waits for cancellation or
//             wait_ms (default 0); returns "done", or CANCELLED when cancelled
//   progress  reports each value of arguments.values in order, then returns
//   throw     throws std::runtime_error
//   anything else: INVALID_ARGUMENT (unknown tool)
// Resources, when `resources` is set:
//   resources/list            one resource, test://<session key>
//   resources/templates/list  one template
//   resources/read            test://<key> -> its text (the negotiated protocol version)
//                             and a list_changed notification; test://slow waits for
//                             cancellation; anything else NOT_FOUND
// params of a 2026-07-28 request: the envelope, and `extra`.
inline nlohmann::json Params(nlohmann::json extra = nlohmann::json::object(),
                             const std::string& version = kStatelessVersion) {
  extra["_meta"] = {{kMetaProtocolVersion, version},
                    {kMetaClientCapabilities, nlohmann::json::object()},
                    {kMetaClientInfo, {{"name", "t"}, {"version", "1"}}}};
  return extra;
}

class FakeProvider : public ToolProvider, public ResourceProvider {
 public:
  struct Call {
    std::string name;
    json arguments;
    std::string session_key;
  };

  json ListTools(const std::string& credential) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      listed_for_.push_back(credential);
    }
    return json::array({
        {{"name", "echo"}, {"description", "echoes"}, {"inputSchema", {{"type", "object"}}}},
        {{"name", "slow"}, {"description", "waits"}, {"inputSchema", {{"type", "object"}}}},
    });
  }

  absl::StatusOr<json> CallTool(const std::string& name, const json& arguments,
                                ToolCallContext& context) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back({name, arguments, context.mcp_session.value_or("")});
      cv_.notify_all();
    }
    if (name == "echo") {
      return json{{"content", json::array({{{"type", "text"}, {"text", arguments.dump()}}})},
                  {"structuredContent", arguments}};
    }
    if (name == "slow") return Slow(arguments, context);
    if (name == "progress") {
      for (const auto& v : arguments.value("values", json::array())) {
        if (context.progress) context.progress(v.get<double>(), std::nullopt, "");
      }
      return json{{"content", json::array()}};
    }
    if (name == "throw") throw std::runtime_error("boom");
    if (name == "ask") return Ask(arguments, context);
    if (name == "needs_elicitation") {
      return MissingClientCapability("needs elicitation", {{"elicitation", json::object()}});
    }
    if (name == "mrtr") {  // a multi round-trip request: asks once, then says what the retry brought
      if (context.stateless && context.request_state.empty()) {
        return json{{"resultType", "input_required"},
                    {"inputRequests", {{"q", {{"method", "elicitation/create"}, {"params", {{"message", "ok?"}}}}}}},
                    {"requestState", "state-1"}};
      }
      return json{{"content", json::array()},
                  {"structuredContent", {{"input_required", context.stateless},
                                         {"state", context.request_state},
                                         {"responses", context.input_responses}}}};
    }
    return absl::InvalidArgumentError("unknown tool: " + name);
  }

  void SessionClosed(const std::string& session_key) override {
    std::lock_guard<std::mutex> lock(mu_);
    closed_.push_back(session_key);
    cv_.notify_all();
  }

  bool serves_resources = false;  // set before use
  ResourceProvider* resources() override { return serves_resources ? this : nullptr; }
  absl::StatusOr<json> ListResources(const std::string& session_key,
                                     const std::string& cursor) override {
    return json{{"resources", json::array({{{"uri", "test://" + session_key}, {"name", "a"}}})}};
  }
  absl::StatusOr<json> ListResourceTemplates(const std::string& session_key) override {
    return json{{"resourceTemplates", json::array({{{"uriTemplate", "test://{x}"}, {"name", "t"}}})}};
  }
  absl::StatusOr<json> ReadResource(const std::string& uri, ToolCallContext& context) override {
    if (uri == "test://slow") {
      auto done = std::make_shared<std::promise<void>>();
      context.cancel->OnCancel([done] { done->set_value(); });
      done->get_future().wait_for(kWait);
      return absl::CancelledError("cancelled");
    }
    if (uri != "test://" + context.mcp_session.value_or("")) return absl::NotFoundError("no " + uri);
    context.resources_changed();
    return json{{"contents", json::array({{{"uri", uri}, {"text", context.protocol_version}}})}};
  }

  absl::StatusOr<json> ListOwnedResources(const std::string& cursor, ToolCallContext& context) override {
    if (cursor == "bad") return absl::InvalidArgumentError("params.cursor is not a cursor of this server");
    return json{{"resources", json::array({{{"uri", "test://owned/" + context.credential + "/" + cursor},
                                            {"name", "o"}}})}};
  }
  // WatchResources keeps its callbacks here for the test to call; `watching` counts the
  // subscriptions not yet dropped. With `no_watch`, it watches nothing.
  struct Watch {
    std::string credential;
    std::function<void()> ready, changed;
  };
  bool no_watch = false;
  std::shared_ptr<void> WatchResources(const std::string& credential, std::function<void()> ready,
                                       std::function<void()> changed) override {
    if (no_watch) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    watches_.push_back({credential, std::move(ready), std::move(changed)});
    ++watching_;
    struct Subscription {
      explicit Subscription(FakeProvider* p) : provider(p) {}
      Subscription(const Subscription&) = delete;
      FakeProvider* provider;
      ~Subscription() {
        std::lock_guard<std::mutex> lock(provider->mu_);
        --provider->watching_;
      }
    };
    return std::make_shared<Subscription>(this);
  }
  std::vector<Watch> watches() {
    std::lock_guard<std::mutex> lock(mu_);
    return watches_;
  }
  int watching() {
    std::lock_guard<std::mutex> lock(mu_);
    return watching_;
  }

  // Waits (bounded) until `pred` holds; the predicate runs under the provider's lock.
  bool WaitUntil(const std::function<bool()>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, pred);
  }
  bool WaitForCalls(size_t n) {
    return WaitUntil([&] { return calls_.size() >= n; });
  }
  bool WaitForCancelled(int n) {
    return WaitUntil([&] { return cancelled_ >= n; });
  }
  bool WaitForClosed(const std::string& key) {
    return WaitUntil([&] { return ClosedCountLocked(key) > 0; });
  }

  // The credential of each tools/list, in order.
  std::vector<std::string> listed_for() {
    std::lock_guard<std::mutex> lock(mu_);
    return listed_for_;
  }
  std::vector<Call> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::vector<std::string> closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }
  int closed_count(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return ClosedCountLocked(key);
  }
  int cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  int finished() {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }

 private:
  std::vector<Watch> watches_;
  int watching_ = 0;
  // "ask": asks the client arguments.params by elicitation/create within
  // arguments.timeout_ms; the answer (or the error, or that it cannot ask) and the client's
  // capabilities are its structuredContent.
  absl::StatusOr<json> Ask(const json& arguments, ToolCallContext& context) {
    json out = {{"caps", context.client_capabilities}};
    if (!context.ask_client) {
      out["cannot_ask"] = true;
    } else {
      // "end_after_ms": what asks (an execution) ends that long after the question goes out.
      std::shared_ptr<codemode::CancelToken> ended;
      std::thread ender;
      if (arguments.contains("end_after_ms")) {
        ended = std::make_shared<codemode::CancelToken>();
        ender = std::thread([ended, ms = arguments.value("end_after_ms", 0)] {
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
          ended->Cancel("the execution finished");
        });
      }
      absl::StatusOr<json> answer =
          context.ask_client("elicitation/create", arguments.value("params", json::object()),
                             absl::Milliseconds(arguments.value("timeout_ms", 30000)), ended);
      if (ender.joinable()) ender.join();
      if (answer.ok()) {
        out["answer"] = *answer;
      } else {
        out["error"] = absl::StatusCodeToString(answer.status().code());
        out["message"] = std::string(answer.status().message());
      }
    }
    return json{{"content", json::array()}, {"structuredContent", out}};
  }
  int ClosedCountLocked(const std::string& key) {
    int n = 0;
    for (const auto& k : closed_) n += k == key;
    return n;
  }

  absl::StatusOr<json> Slow(const json& arguments, ToolCallContext& context) {
    const int steps = arguments.value("steps", 3);
    for (int i = 1; i <= steps && context.progress; ++i) {
      context.progress(i, steps, "step " + std::to_string(i));
    }
    // Shared with the cancel callback, which may outlive this frame.
    struct Latch {
      std::mutex mu;
      std::condition_variable cv;
      bool set = false;
    };
    auto latch = std::make_shared<Latch>();
    context.cancel->OnCancel([latch] {
      std::lock_guard<std::mutex> lock(latch->mu);
      latch->set = true;
      latch->cv.notify_all();
    });
    {
      std::unique_lock<std::mutex> lock(latch->mu);
      latch->cv.wait_for(lock, std::chrono::milliseconds(arguments.value("wait_ms", 0)),
                         [&] { return latch->set; });
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++finished_;
    cv_.notify_all();
    if (context.cancel->cancelled()) {
      ++cancelled_;
      return absl::CancelledError(context.cancel->reason());
    }
    return json{{"content", json::array({{{"type", "text"}, {"text", "done"}}})}};
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Call> calls_;
  std::vector<std::string> listed_for_;
  std::vector<std::string> closed_;
  int cancelled_ = 0;
  int finished_ = 0;
};

// Collects everything sent to it.
class CollectSink : public ReplySink {
 public:
  void Send(const json& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    messages_.push_back(message);
    cv_.notify_all();
  }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++closes_;
    cv_.notify_all();
  }
  std::vector<json> messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }
  int closes() {
    std::lock_guard<std::mutex> lock(mu_);
    return closes_;
  }
  // Waits (bounded) for the first message `match` accepts; null when none came.
  json WaitFor(const std::function<bool(const json&)>& match) {
    std::unique_lock<std::mutex> lock(mu_);
    json found;
    cv_.wait_for(lock, kWait, [&] {
      for (const auto& m : messages_) {
        if (match(m)) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  // Waits (bounded) for the response with `id`.
  json WaitResponse(const json& id) {
    std::unique_lock<std::mutex> lock(mu_);
    json found;
    cv_.wait_for(lock, kWait, [&] {
      for (const auto& m : messages_) {
        if (!m.contains("method") && m.contains("id") && m["id"] == id) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  bool WaitForCloses(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return closes_ >= n; });
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    messages_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> messages_;
  int closes_ = 0;
};

inline json Request(const json& id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

inline json Notification(const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
}

inline json InitializeParams(const std::string& version = "2025-11-25") {
  return {{"protocolVersion", version},
          {"capabilities", json::object()},
          {"clientInfo", {{"name", "test"}, {"version", "1"}}}};
}

// Sends a request and returns its (synchronous or eventual) response.
inline json Call(McpSession& session, const json& request) {
  auto sink = std::make_shared<CollectSink>();
  session.Handle(request, sink);
  return sink->WaitResponse(request.value("id", json()));
}

// The JSON-RPC error code of a response (0 for a result).
inline int ErrorCode(const json& response) {
  return response.contains("error") ? response["error"].value("code", 0) : 0;
}

}  // namespace testing
}  // namespace gateway
