// Pieces both upstream HTTP transports use (http_transport.cc: Streamable HTTP;
// sse_transport.cc: legacy SSE): one httplib client per exchange, the configured headers,
// untrusted bodies parsed within a budget, and readable HTTP errors. Private to those two
// files.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "base/thread.h"
#include "base/untrusted_json.h"
#include "nlohmann/json.hpp"
#include "base/log_text.h"
#include "spdlog/spdlog.h"
#include "upstream/config.h"
#include "upstream/options.h"

namespace gateway {
// An unnamed namespace: this header is private to the two transports' files.
namespace {

using nlohmann::json;

inline constexpr size_t kMaxErrorBody = 2048;
// Streams (request responses, GET streams) are ended by stop(), not by a read timeout:
// a tool call may legitimately be silent for a long time.
inline constexpr absl::Duration kStreamReadTimeout = absl::Hours(1);
// Resuming a request's stream (Last-Event-ID): at most this many GETs, each after
// ReconnectDelay.
inline constexpr int kMaxResumes = 5;
// Before reopening a stream when the server gave no `retry:`.
inline constexpr absl::Duration kDefaultRetryDelay = absl::Seconds(1);
inline constexpr absl::Duration kProbeTimeout = absl::Seconds(2);
inline constexpr absl::Duration kDeleteTimeout = absl::Seconds(2);

// The wait before reopening an event stream after `failures` streams in a row that ended
// at once: the server's `retry:` (kDefaultRetryDelay without one) within [min, max],
// doubled per failure up to max, then drawn from its upper half (jitter, so gateways that
// lost a server together do not come back in step), never below min.
inline absl::Duration ReconnectDelay(const std::optional<int64_t>& retry_ms, int failures,
                                     const StreamRetryPolicy& policy) {
  absl::Duration delay = retry_ms ? absl::Milliseconds(*retry_ms) : kDefaultRetryDelay;
  delay = std::min(std::max(delay, policy.min), policy.max);
  if (failures <= 0) return delay;
  for (int i = 0; i < failures && delay < policy.max; ++i) delay *= 2;
  delay = std::min(delay, policy.max);
  thread_local std::mt19937_64 random{std::random_device{}()};
  const double fraction = std::uniform_real_distribution<double>(0.5, 1.0)(random);
  return std::max(delay * fraction, policy.min);
}

inline std::shared_ptr<httplib::Client> MakeClient(const std::string& origin,
                                            absl::Duration connect_timeout,
                                            absl::Duration read_timeout) {
  auto client = std::make_shared<httplib::Client>(origin);
  client->set_connection_timeout(
      std::chrono::milliseconds(absl::ToInt64Milliseconds(connect_timeout)));
  client->set_read_timeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(read_timeout)));
  client->set_write_timeout(std::chrono::seconds(30));
  client->set_follow_location(false);
  return client;
}

// client.send(), where a server that hangs up under our writes is an error (Error::Write)
// and not SIGPIPE ending the process: cpp-httplib writes without MSG_NOSIGNAL, and a
// process that links this library need not ignore SIGPIPE.
inline bool SendWithoutSigpipe(httplib::Client& client, httplib::Request& req,
                               httplib::Response& res, httplib::Error& error) {
  codemode::NoSigpipeHere no_sigpipe;
  return client.send(req, res, error);
}

// The configured headers, minus those the protocol itself sets.
inline httplib::Headers ConfiguredHeaders(const UpstreamConfig& config) {
  httplib::Headers headers;
  for (const auto& [key, value] : config.headers) {
    std::string lower = absl::AsciiStrToLower(key);
    if (lower == "accept" || lower == "content-type" || lower == "mcp-session-id" ||
        lower == "mcp-protocol-version" || lower == "content-length" || lower == "host") {
      continue;
    }
    headers.emplace(key, value);
  }
  return headers;
}

inline bool IsEventStream(const std::string& content_type) {
  return absl::StartsWith(absl::AsciiStrToLower(content_type), "text/event-stream");
}

// Parses one JSON text (a body, an SSE data field) of at most `max_message_bytes` and hands
// it on; it may hold UpstreamJsonValueLimit(max_message_bytes) values. An unusable text is
// logged and dropped; the error says why.
inline absl::Status DispatchText(const std::string& name, const std::string& text,
                                 const std::function<void(json)>& on_message,
                                 size_t max_message_bytes) {
  codemode::JsonLimits limits;
  limits.max_values = UpstreamJsonValueLimit(max_message_bytes);
  absl::StatusOr<json> message = codemode::ParseUntrustedJson(text, "the upstream's message", limits);
  if (!message.ok()) {
    spdlog::warn("upstream {}: ignoring a message ({}): {}", name,
                 codemode::LogLongText(message.status().message()), codemode::LogText(text));
    return message.status();
  }
  on_message(std::move(*message));
  return absl::OkStatus();
}

inline std::string Snippet(const std::string& body) {
  std::string s(absl::StripAsciiWhitespace(body));
  if (s.size() > 200) s = s.substr(0, 200) + "...";
  return s;
}

inline absl::Status HttpStatusError(int status, const std::string& body) {
  std::string text = absl::StrCat("HTTP ", status);
  std::string snippet = Snippet(body);
  if (!snippet.empty()) absl::StrAppend(&text, ": ", snippet);
  return absl::UnavailableError(text);
}

inline bool IsConnectError(httplib::Error error) {
  return error == httplib::Error::Connection || error == httplib::Error::ConnectionTimeout;
}

}  // namespace

// One HTTP exchange running on a thread of its own (`thread`, or one of a ThreadPool's).
// Another thread ends it by stop()ping the client it currently uses; `done` is set as the
// exchange's last action.
struct HttpExchange {
  json id;  // the request it carries (null for GET streams)
  // What its answer is charged to as it arrives (ClientTransport::SendRequest); null: the
  // transport's receive budget.
  std::shared_ptr<codemode::ByteBudget> answer_budget;
  std::thread thread;
  std::atomic<bool> done{false};
  std::atomic<bool> abandoned{false};

  void SetClient(std::shared_ptr<httplib::Client> c) {
    codemode::MutexLock lock(&mu);
    client = std::move(c);
  }
  void Stop() {
    codemode::MutexLock lock(&mu);
    if (client) client->stop();
  }
  // stop() only cuts a request already in flight, so repeat until the thread is out.
  // Safe to call from several threads (a failed Start() and Close()).
  void StopAndJoin() {
    codemode::MutexLock lock(&join_mu);
    StopUntilDone();
    if (thread.joinable()) thread.join();
  }
  void StopUntilDone() {
    while (!done) {
      Stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  codemode::Mutex join_mu;
  codemode::Mutex mu;
  std::shared_ptr<httplib::Client> client;
};

}  // namespace gateway
