// JsonRpcClient: request multiplexing, notification routing and cancellation for one
// upstream connection (see jsonrpc_client.h).
#include "upstream/jsonrpc_client.h"
#include "upstream/message_id.h"

#include "jsonrpc/jsonrpc.h"

#include <chrono>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"
#include "base/deadline.h"
#include "base/log_text.h"
#include "base/mutex.h"
#include "base/untrusted_json.h"

namespace gateway {

using nlohmann::json;

namespace {

// Request ids we send are integers; anything else in a response is not ours.
bool AsId(const json& id, int64_t* out) {
  if (!id.is_number_integer()) return false;
  *out = id.get<int64_t>();
  return true;
}

// How a request that got no answer ended: cancelled (with the canceller's reason) or timed
// out, and `detail` on what it was waiting for, if anything.
absl::Status Ended(const std::string& method, bool cancelled,
                   const JsonRpcClient::RequestOptions& options, absl::string_view detail = "") {
  const std::string why = detail.empty() ? "" : absl::StrCat(" (", detail, ")");
  if (cancelled) {
    return absl::CancelledError(absl::StrCat(
        method, " cancelled: ", options.cancel ? options.cancel->reason() : "cancelled", why));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(method, " timed out after ", absl::FormatDuration(options.timeout), why));
}

// An upstream's notifications/message is its own business, and a hostile upstream can send
// thousands a second with megabytes of data each: only the eight RFC 5424 level names are
// believed (anything else is shown as "?"), the data is clipped, and the line is logged one
// step below the upstream's severity and never above info (docs/gateway.md, "Logs").
constexpr size_t kUpstreamLogDataBytes = 1024;
// A server's requests to us: how many we answer a second (ids longer than
// kMaxMessageIdBytes are not answered).
constexpr double kServerRequestRepliesPerSecond = 20;

spdlog::level::level_enum GatewayLevelOf(const std::string& level) {
  static constexpr const char* kAtInfo[] = {"warning", "error", "critical", "alert",
                                            "emergency"};
  for (const char* name : kAtInfo) {
    if (level == name) return spdlog::level::info;
  }
  return spdlog::level::debug;  // debug, info, notice and "?"
}

std::string LevelName(const json& params) {
  static constexpr const char* kLevels[] = {"debug",    "info",  "notice", "warning",
                                            "error",    "critical", "alert", "emergency"};
  auto it = params.find("level");
  if (it == params.end() || !it->is_string()) return "?";
  for (const char* name : kLevels) {
    if (it->get_ref<const std::string&>() == name) return name;
  }
  return "?";
}

}  // namespace

// One request in flight. `mu` guards its outcome; `progress_mu` makes sure no progress
// callback runs once the caller has returned (it may capture the caller's stack).
struct JsonRpcClient::Pending {
  codemode::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  absl::StatusOr<json> result ABSL_GUARDED_BY(mu) = absl::UnknownError("no result");

  codemode::Mutex progress_mu;
  bool finished ABSL_GUARDED_BY(progress_mu) = false;
  std::function<void(const json&)> on_progress;
  // RequestOptions::answer.parsed; grown by the thread that delivers the answer, before
  // Complete() hands it to the caller.
  std::shared_ptr<codemode::ByteHold> answer_hold;

  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done; }
  bool DoneOrCancelled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done || cancelled; }

  void Complete(absl::StatusOr<json> r) {
    codemode::MutexLock lock(&mu);
    if (done) return;
    result = std::move(r);
    done = true;  // the unlock wakes the waiter
  }
  void Cancel() {
    codemode::MutexLock lock(&mu);
    cancelled = true;
  }
  void Finish() {
    codemode::MutexLock lock(&progress_mu);
    finished = true;
  }
};

JsonRpcClient::JsonRpcClient(std::string name, std::unique_ptr<ClientTransport> transport,
                             Handlers handlers, double log_messages_per_second,
                             double notifications_per_second)
    : name_(std::move(name)),
      transport_(std::move(transport)),
      handlers_(std::move(handlers)),
      log_limit_(log_messages_per_second),
      notification_limit_(notifications_per_second > 0
                              ? std::make_unique<codemode::LogRateLimit>(notifications_per_second,
                                                                         10 * notifications_per_second)
                              : nullptr),
      warn_limit_(log_messages_per_second),
      reply_limit_(kServerRequestRepliesPerSecond, 2 * kServerRequestRepliesPerSecond) {}

JsonRpcClient::~JsonRpcClient() { Close(); }

absl::Status JsonRpcClient::Start(absl::Duration timeout) {
  TransportCallbacks callbacks;
  callbacks.on_message = [this](json message) { OnMessage(std::move(message)); };
  callbacks.on_request_failed = [this](const json& id, const absl::Status& error) {
    OnRequestFailed(id, error);
  };
  callbacks.on_closed = [this](const std::string& reason) { OnClosed(reason); };
  // Connected before Start() returns, so that an immediate on_closed (a process that
  // exits at once) is not overwritten afterwards.
  connected_ = true;
  absl::Status s = transport_->Start(std::move(callbacks), timeout);
  if (!s.ok()) connected_ = false;
  return s;
}

std::string JsonRpcClient::disconnect_reason() const {
  codemode::MutexLock lock(&mu_);
  return disconnect_reason_;
}

absl::StatusOr<json> JsonRpcClient::Request(const std::string& method, json params,
                                            const RequestOptions& options) {
  if (options.cancel && options.cancel->cancelled()) {
    return absl::CancelledError(absl::StrCat(method, " cancelled: ", options.cancel->reason()));
  }
  const int64_t id = next_id_++;
  auto pending = std::make_shared<Pending>();
  if (options.on_progress) {
    if (!params.is_object()) params = json::object();
    params["_meta"]["progressToken"] = id;
    pending->on_progress = options.on_progress;
  }
  pending->answer_hold = options.answer.parsed;
  json message = MakeRequest(id, method, std::move(params));
  {
    codemode::MutexLock lock(&mu_);
    if (closed_ || !connected_) {
      return absl::UnavailableError(
          disconnect_reason_.empty() ? "not connected" : disconnect_reason_);
    }
    pending_[id] = pending;
  }
  // The callback only flags the request: the waiting thread below does the I/O, so the
  // thread calling Cancel() never blocks on the upstream.
  if (options.cancel) options.cancel->OnCancel([pending] { pending->Cancel(); });

  // The call's time counts from here, also while its request waits to be written.
  SendLimits limits;
  limits.deadline = codemode::SteadyDeadline(options.timeout);
  limits.given_up = [pending] {
    codemode::MutexLock lock(&pending->mu);
    return pending->cancelled;
  };
  absl::Status sent = transport_->SendRequest(message, options.answer.receiving, limits);
  if (!sent.ok()) return AfterFailedSend(id, method, *pending, sent, options);

  bool done;
  bool cancelled;
  {
    codemode::MutexLock lock(&pending->mu);
    pending->mu.AwaitWithTimeout(
        absl::Condition(pending.get(), &Pending::DoneOrCancelled),
        absl::FromChrono(limits.deadline - std::chrono::steady_clock::now()));
    done = pending->done;
    cancelled = pending->cancelled;
  }
  if (!done) {
    if (TakePending(id) != nullptr) return GiveUp(id, method, *pending, cancelled, options);
    // A response won the race and is being delivered right now.
    codemode::MutexLock lock(&pending->mu);
    pending->mu.Await(absl::Condition(pending.get(), &Pending::Done));
  }
  absl::StatusOr<json> result;
  {
    codemode::MutexLock lock(&pending->mu);
    result = std::move(pending->result);
  }
  pending->Finish();
  return result;
}

absl::StatusOr<json> JsonRpcClient::AfterFailedSend(int64_t id, const std::string& method,
                                                    Pending& pending, const absl::Status& sent,
                                                    const RequestOptions& options) {
  if (sent.code() == absl::StatusCode::kDeadlineExceeded ||
      sent.code() == absl::StatusCode::kCancelled) {
    // The call ended while its request waited to be written: the server has not read it,
    // so there is nothing to cancel there.
    TakePending(id);
    pending.Finish();
    return Ended(method, sent.code() == absl::StatusCode::kCancelled, options, sent.message());
  }
  // A failed write usually means the server just died; give the transport a moment to
  // report why (exit code, last stderr line say more than "Broken pipe").
  std::optional<absl::StatusOr<json>> result;
  {
    codemode::MutexLock lock(&pending.mu);
    if (pending.mu.AwaitWithTimeout(absl::Condition(&pending, &Pending::Done), absl::Seconds(1))) {
      result = pending.result;
    }
  }
  if (!result) TakePending(id);
  pending.Finish();
  return result ? *std::move(result) : absl::StatusOr<json>(sent);
}

absl::Status JsonRpcClient::GiveUp(int64_t id, const std::string& method, Pending& pending,
                                   bool cancelled, const RequestOptions& options) {
  // We gave up first: nobody will complete this request any more.
  std::string reason = cancelled ? (options.cancel ? options.cancel->reason() : "cancelled")
                                 : "timed out";
  // First: what the answer holds is released now, not after a write to a server that may
  // have stopped reading (that write can wait --upstream_write_timeout).
  transport_->Abandon(id);
  if (options.notify_cancelled) {
    absl::Status s = Notify("notifications/cancelled", {{"requestId", id}, {"reason", reason}});
    if (!s.ok()) {
      spdlog::debug("upstream {}: could not send notifications/cancelled: {}", name_,
                    codemode::LogLongText(s.message()));
    }
  }
  pending.Finish();
  return Ended(method, cancelled, options);
}

absl::Status JsonRpcClient::Notify(const std::string& method, json params) {
  {
    codemode::MutexLock lock(&mu_);
    if (closed_) return absl::UnavailableError("connection closed");
  }
  return transport_->Send(MakeNotification(method, std::move(params)));
}

void JsonRpcClient::Close() {
  std::call_once(close_once_, [this] {
    std::map<int64_t, std::shared_ptr<Pending>> pending;
    {
      codemode::MutexLock lock(&mu_);
      closed_ = true;
      connected_ = false;
      if (disconnect_reason_.empty()) disconnect_reason_ = "connection closed";
      pending.swap(pending_);
    }
    // Callers return at once; the transport may take a while (stop_grace) to shut down.
    for (auto& [id, p] : pending) p->Complete(absl::UnavailableError("connection closed"));
    transport_->Close();
  });
}

std::shared_ptr<JsonRpcClient::Pending> JsonRpcClient::TakePending(int64_t id) {
  codemode::MutexLock lock(&mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return nullptr;
  auto p = std::move(it->second);
  pending_.erase(it);
  return p;
}

std::shared_ptr<JsonRpcClient::Pending> JsonRpcClient::FindPending(int64_t id) {
  codemode::MutexLock lock(&mu_);
  auto it = pending_.find(id);
  return it == pending_.end() ? nullptr : it->second;
}

void JsonRpcClient::OnMessage(json message) {
  if (message.is_array()) {  // a JSON-RPC batch (2025-03-26 allowed servers to send them)
    for (auto& m : message) OnMessage(std::move(m));
    return;
  }
  if (!message.is_object()) {
    if (MayWarn()) spdlog::warn("upstream {}: ignoring a message that is not an object", name_);
    return;
  }
  bool has_method = message.contains("method") && message["method"].is_string();
  bool has_id = message.contains("id") && !message["id"].is_null();
  // Upstream servers are outside our control: a field of an unexpected type must cost
  // that message, never the reader thread (and with it the gateway).
  try {
    if (has_method && has_id) {
      OnServerRequest(message);
    } else if (has_method) {
      uint64_t dropped = 0;
      if (notification_limit_ && !notification_limit_->Allow(absl::Now(), &dropped)) {
        if (MayWarn()) spdlog::warn("upstream {}: too many notifications: dropping them", name_);
        if (handlers_.on_notification_flood) handlers_.on_notification_flood();
        return;
      }
      OnNotification(message);
    } else if (has_id) {
      OnResponse(message);
    } else {
      if (MayWarn()) spdlog::warn("upstream {}: ignoring an invalid JSON-RPC message", name_);
    }
  } catch (const std::exception& e) {
    if (MayWarn()) {
      spdlog::warn("upstream {}: ignoring a malformed message: {}", name_,
                   codemode::LogLongText(e.what()));
    }
  }
}

void JsonRpcClient::OnResponse(json& message) {
  int64_t id;
  std::shared_ptr<Pending> pending;
  if (AsId(message["id"], &id)) pending = TakePending(id);
  if (pending == nullptr) {
    // Typical after a timeout or cancellation: the answer came too late. A server can send
    // these at will: rate-limited like its other unusable messages.
    if (spdlog::should_log(spdlog::level::debug) && MayWarn()) {
      spdlog::debug("upstream {}: response for unknown request {}", name_,
                    codemode::LogText(wire::Dump(message["id"])));
    }
    return;
  }
  if (auto it = message.find("error"); it != message.end() && !it->is_null()) {
    pending->Complete(ErrorToStatus(*it));
  } else if (auto result = message.find("result"); result != message.end()) {
    if (pending->answer_hold) {
      const size_t bytes = codemode::ApproxJsonBytes(*result);
      if (const codemode::ByteBudget* full =
              pending->answer_hold->GrowBy(kReceiveCopies * bytes)) {
        pending->Complete(absl::ResourceExhaustedError(absl::StrCat(
            "the answer (about ", bytes, " bytes) was dropped: holding it until it is taken "
            "(charged ", kReceiveCopies, " times) would pass the gateway's ", full->Describe(),
            "; retry when fewer calls are in flight")));
        return;
      }
    }
    pending->Complete(std::move(*result));
  } else {
    pending->Complete(absl::InternalError("response has neither result nor error"));
  }
}

void JsonRpcClient::OnNotification(const json& message) {
  const std::string& method = message["method"].get_ref<const std::string&>();
  // By reference: a hostile upstream's params may be as large as a message (a 15 MiB
  // progress notification), and a copy here would double it.
  static const json kNoParams = json::object();
  auto found = message.find("params");
  const json& params = found != message.end() ? *found : kNoParams;
  if (method == "notifications/tools/list_changed") {
    if (handlers_.on_tools_list_changed) handlers_.on_tools_list_changed();
  } else if (method == "notifications/progress") {
    int64_t token;
    std::shared_ptr<Pending> pending;
    if (params.is_object() && params.contains("progressToken") &&
        AsId(params["progressToken"], &token)) {
      pending = FindPending(token);
    }
    if (pending == nullptr) return;  // progress for a request that already ended
    codemode::MutexLock lock(&pending->progress_mu);
    if (!pending->finished && pending->on_progress) pending->on_progress(params);
  } else if (method == "notifications/message") {
    LogUpstreamMessage(params);
  } else {
    // notifications/cancelled (for a request of the server's: ours are answered at once),
    // resources/*, prompts/* ...: nothing to do.
    spdlog::debug("upstream {}: notification {}", name_, codemode::LogText(method));
  }
}

bool JsonRpcClient::MayWarn() {
  uint64_t dropped = 0;
  if (!warn_limit_.Allow(absl::Now(), &dropped)) return false;
  if (dropped > 0) {
    spdlog::warn("upstream {}: {} more unusable messages ignored without a log line "
                 "(--upstream_log_rate)", name_, dropped);
  }
  return true;
}

void JsonRpcClient::LogUpstreamMessage(const json& params) {
  if (!params.is_object()) return;
  const std::string level = LevelName(params);
  const spdlog::level::level_enum at = GatewayLevelOf(level);
  if (!spdlog::should_log(at)) return;
  uint64_t dropped = 0;
  if (!log_limit_.Allow(absl::Now(), &dropped)) return;
  if (dropped > 0) {
    spdlog::log(at, "upstream {}: dropped {} log messages (--upstream_log_rate)", name_, dropped);
  }
  std::string data;
  if (auto it = params.find("data"); it != params.end()) {
    // A string is shown as is (escaped); anything else as JSON. Only lines that pass the
    // rate limit pay for the dump.
    data = it->is_string()
               ? codemode::LogText(it->get_ref<const std::string&>(), kUpstreamLogDataBytes)
               : codemode::LogText(wire::Dump(*it), kUpstreamLogDataBytes);
  }
  spdlog::log(at, "upstream {} [{}]: {}", name_, level, data);
}

void JsonRpcClient::OnServerRequest(const json& message) {
  const std::string& method = message["method"].get_ref<const std::string&>();
  // Our reply echoes the id: a huge one (a 15 MiB string id, written from the reader
  // thread to a server that does not read it, would hold that thread and its copies until
  // the server died) is not worth an answer; no conforming server sends one.
  const json& id = message["id"];
  uint64_t dropped = 0;
  if (!(id.is_number_integer() || (id.is_string() && id.get_ref<const std::string&>().size() <=
                                                          kMaxMessageIdBytes))) {
    if (MayWarn()) {
      spdlog::warn("upstream {}: a {} request with an id that is not an integer or a string of "
                   "at most {} bytes left unanswered", name_, codemode::LogText(method),
                   kMaxMessageIdBytes);
    }
    return;
  }
  if (!reply_limit_.Allow(absl::Now(), &dropped)) return;
  if (dropped > 0 && MayWarn()) {
    spdlog::warn("upstream {}: {} of its requests left unanswered: more than {} a second",
                 name_, dropped, kServerRequestRepliesPerSecond);
  }
  json reply;
  if (method == "ping") {
    reply = MakeResult(id, json::object());
  } else {
    // We declare no client capabilities (roots, sampling, elicitation), so a conforming
    // server does not ask; answer anyway so it does not wait forever.
    reply = MakeError(id, kMethodNotFound,
                      absl::StrCat("Method not found: ", codemode::LogText(method)));
    spdlog::debug("upstream {}: rejected server request {}", name_, codemode::LogText(method));
  }
  absl::Status s = transport_->Send(reply);
  if (!s.ok()) {
    spdlog::debug("upstream {}: could not answer {}: {}", name_, codemode::LogText(method),
                  codemode::LogLongText(s.message()));
  }
}

void JsonRpcClient::OnRequestFailed(const json& id, const absl::Status& error) {
  int64_t n;
  if (!AsId(id, &n)) return;
  if (auto pending = TakePending(n)) pending->Complete(error);
}

void JsonRpcClient::OnClosed(const std::string& reason) {
  std::map<int64_t, std::shared_ptr<Pending>> pending;
  {
    codemode::MutexLock lock(&mu_);
    if (closed_ || !connected_) return;
    connected_ = false;
    disconnect_reason_ = reason;
    pending.swap(pending_);
  }
  spdlog::info("upstream {}: connection lost: {}", name_, codemode::LogLongText(reason));
  for (auto& [id, p] : pending) p->Complete(absl::UnavailableError(reason));
  if (handlers_.on_disconnected) handlers_.on_disconnected(reason);
}

}  // namespace gateway
