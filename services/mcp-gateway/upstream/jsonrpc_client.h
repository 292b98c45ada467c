// JsonRpcClient: the transport-independent JSON-RPC 2.0 client side of an upstream
// connection. It numbers requests, keeps a map of pending ones so that any number can be
// in flight at once, routes responses and notifications/progress to their callers,
// answers server->client requests (ping: {}, anything else: -32601), and turns timeouts
// and CancelTokens into notifications/cancelled.
//
//   JsonRpcClient rpc("files", std::move(transport), handlers);
//   if (absl::Status s = rpc.Start(absl::Seconds(30)); !s.ok()) return s;
//   JsonRpcClient::RequestOptions options;
//   options.timeout = absl::Seconds(30);
//   absl::StatusOr<json> result = rpc.Request("tools/list", json::object(), options);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/log_text.h"
#include "jsonrpc/jsonrpc.h"
#include "upstream/transport.h"
#include "nlohmann/json.hpp"
#include "base/mutex.h"

namespace gateway {

class JsonRpcClient {
 public:
  struct Handlers {
    // notifications/tools/list_changed arrived. Runs on a transport thread: do not issue
    // requests from it (their responses may need that very thread).
    std::function<void()> on_tools_list_changed;
    // The transport lost its connection; pending requests have failed with UNAVAILABLE.
    std::function<void(const std::string& reason)> on_disconnected;
    // More notifications came than `notifications_per_second` allows (each one past it,
    // dropped, calls this). Runs on a transport thread.
    std::function<void()> on_notification_flood;
  };

  struct RequestOptions {
    absl::Duration timeout = absl::Seconds(60);
    std::shared_ptr<codemode::CancelToken> cancel;
    // When set, params._meta.progressToken is added and each matching
    // notifications/progress is passed here (never after Request() returned).
    std::function<void(const nlohmann::json& params)> on_progress;
    // Send notifications/cancelled on timeout or cancellation. Off for initialize, which
    // the protocol forbids cancelling.
    bool notify_cancelled = true;
    // What the answer is charged to (transport.h): answers queued for busy callers hold
    // their callers' budgets, not bytes nobody counts.
    AnswerCharges answer;
  };

  // At most `log_messages_per_second` of the upstream's notifications/message are logged
  // (UpstreamOptions::log_messages_per_second), and as many warnings about messages that
  // are unusable; the others are counted and reported.
  JsonRpcClient(std::string name, std::unique_ptr<ClientTransport> transport,
                Handlers handlers, double log_messages_per_second = 10,
                double notifications_per_second = 0);
  ~JsonRpcClient();  // Close()s
  JsonRpcClient(const JsonRpcClient&) = delete;
  JsonRpcClient& operator=(const JsonRpcClient&) = delete;

  absl::Status Start(absl::Duration timeout);

  // Sends a request and waits for its result. Errors: the server's JSON-RPC error mapped
  // by ErrorToStatus (jsonrpc.h: -32602 INVALID_ARGUMENT, -32601 UNIMPLEMENTED, ...;
  // "<message> (code N)"), DEADLINE_EXCEEDED, CANCELLED, UNAVAILABLE (connection lost).
  absl::StatusOr<nlohmann::json> Request(const std::string& method, nlohmann::json params,
                                         const RequestOptions& options);
  absl::Status Notify(const std::string& method, nlohmann::json params);

  ClientTransport* transport() { return transport_.get(); }
  bool connected() const { return connected_.load(); }
  std::string disconnect_reason() const;

  // Fails pending requests (UNAVAILABLE), then closes the transport. Idempotent.
  void Close();

 private:
  struct Pending;

  void OnMessage(nlohmann::json message);
  void OnResponse(nlohmann::json& message);
  void OnNotification(const nlohmann::json& message);
  void OnServerRequest(const nlohmann::json& message);
  // notifications/message: checked level, clipped data, rate-limited.
  void LogUpstreamMessage(const nlohmann::json& params);
  // Whether a warning about an unusable message may be logged (rate-limited).
  bool MayWarn();
  void OnRequestFailed(const nlohmann::json& id, const absl::Status& error);
  void OnClosed(const std::string& reason);
  // Removes and returns the pending request `id`, or null.
  std::shared_ptr<Pending> TakePending(int64_t id);
  // Request()'s endings: the message could not be sent; the wait timed out or was
  // cancelled before an answer (tells the server, when asked to).
  absl::StatusOr<nlohmann::json> AfterFailedSend(int64_t id, const std::string& method,
                                                 Pending& pending, const absl::Status& sent,
                                                 const RequestOptions& options);
  absl::Status GiveUp(int64_t id, const std::string& method, Pending& pending, bool cancelled,
                      const RequestOptions& options);
  std::shared_ptr<Pending> FindPending(int64_t id);

  const std::string name_;
  std::unique_ptr<ClientTransport> transport_;
  const Handlers handlers_;
  codemode::LogRateLimit log_limit_;
  std::unique_ptr<codemode::LogRateLimit> notification_limit_;  // null: no limit
  codemode::LogRateLimit warn_limit_;
  // Answers to the server's own requests (ping, and "not supported" for the rest): a
  // server that floods us with requests and never reads its answers would otherwise hold
  // our reader thread on every write.
  codemode::LogRateLimit reply_limit_;
  std::atomic<int64_t> next_id_{1};
  std::atomic<bool> connected_{false};

  mutable codemode::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::string disconnect_reason_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::shared_ptr<Pending>> pending_ ABSL_GUARDED_BY(mu_);

  std::once_flag close_once_;
};

}  // namespace gateway
