// Private to mcp_core: the reply streams of the Streamable HTTP transport. An EventStream
// is the ReplySink a request (or the session's GET stream) writes to; it outlives the HTTP
// connection that carries it, so a client whose connection dropped can resume it with
// `Last-Event-ID` (MCP 2025-11-25, "Resumability and Redelivery").
//
// Every SSE event gets the id "<stream>-<seq>"; the stream keeps its recent events (bounded)
// and replays those after a given id to the next consumer. A JSON-mode stream (a client
// that does not accept SSE) carries only the response and cannot be resumed.
//
//   auto stream = std::make_shared<EventStream>(options);   // options.number = 3
//   session->Handle(request, stream);             // the session writes to it
//   stream->Attach(consumer, std::nullopt);       // everything so far, then live
//   ... connection lost: stream->Detach(consumer.get(), now);
//   ... GET with Last-Event-ID "3-7": stream->Attach(new_consumer, 7);
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "base/byte_budget.h"
#include "server/tool_provider.h"
#include "base/mutex.h"

namespace gateway {
namespace http {

// What keeping a call's stream for resumption costs beyond its events' text: the
// EventStream with its shared_ptr control block, mutex and deque (whose first block alone
// is 512 B), the strings' allocations, and the session's `calls` map node with the request
// id. Measured: 6,000 kept finished streams of unknown-tool calls added ~8 MB of RSS, ~1.3 KB
// each, of which ~250 B is event text charged on its own. It is
// charged to the replay budget while the stream is kept, so that the budget also bounds
// how many streams all sessions keep, not only their events' bytes.
inline constexpr size_t kKeptStreamBytes = 1024;

class EventStream : public ReplySink {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    uint64_t number = 0;           // unique within the session: the first part of event ids
    bool sse = true;               // false: the response as one JSON body; no ids, no replay
    bool ends_with_reply = true;   // a POST's stream; false for the session's GET stream
    size_t max_events = 1000;      // kept for replay and while nobody carries the stream
    size_t max_bytes = 8u << 20;
    // Charged for kept events and replayed copies; none: unbounded (beyond max_bytes).
    std::shared_ptr<codemode::ByteBudget> budget;
    // Charged to `budget` for as long as the stream is kept (kKeptStreamBytes for a call's
    // SSE stream; 0: nothing). Refused: the stream is delivered live only, as a response
    // too large to keep is, and a resumption of it fails (RESOURCE_EXHAUSTED).
    size_t kept_overhead = 0;
  };

  // What carries the stream now: an HTTP response in production, a fake in tests.
  class Consumer {
   public:
    virtual ~Consumer() = default;
    // `last` ends the HTTP response. Must not block.
    virtual void Deliver(std::string bytes, bool last) = 0;
    // Another consumer took the stream over. A connection closes at once, so the replay
    // still queued on it is freed now rather than at its write timeout.
    virtual void Superseded() { Deliver("", true); }
  };

  explicit EventStream(Options options);
  ~EventStream() override;

  void Send(const nlohmann::json& message) override;
  // The request was answered (or the session ended): the stream ends after what it has.
  void Close() override;

  // An event with an id and no data, so the client holds an id to resume from before the
  // first message arrives (MCP 2025-11-25 servers should send one first).
  void Prime();
  // Hands the stream to `consumer`: first the kept events after `after_seq` (all of them
  // for nullopt), then new ones as they come. A current consumer is ended and replaced (a
  // client that resumes may do so before we noticed its old connection drop).
  // RESOURCE_EXHAUSTED, with nothing changed, when the replay does not fit the budget or
  // the events it needs were too large to keep.
  absl::Status Attach(std::shared_ptr<Consumer> consumer, std::optional<uint64_t> after_seq);
  // Like Attach, without replaying anything already sent (a GET without Last-Event-ID).
  void AttachLive(std::shared_ptr<Consumer> consumer);
  // `consumer` lost its connection (ignored unless it is the current one).
  void Detach(const Consumer* consumer, Clock::time_point now);
  // `consumer` wrote the stream's last chunk: nothing is left to keep.
  void Delivered(const Consumer* consumer);

  // Before any Attach: the response, when the request was answered synchronously. The
  // stream is then done.
  std::optional<nlohmann::json> TakeResponse();
  // Nobody may resume the stream any more: its kept events go (and their budget). The
  // current consumer keeps what it was handed.
  void Forget();

  uint64_t number() const { return options_.number; }
  bool sse() const { return options_.sse; }
  bool attached() const;
  bool closed() const;
  // Delivered in full; the stream can be forgotten.
  bool done() const;
  // A client holds an id of this stream, so it can come back for the rest (and the stream
  // could be kept for it: see Options::kept_overhead).
  bool resumable() const;
  // The budget had no room to keep the stream (Options::kept_overhead): nobody can resume
  // it, so once finished and not carried it need not be kept at all.
  bool live_only() const;
  // Since when nobody carries a stream that was carried before.
  std::optional<Clock::time_point> orphaned_since() const;
  // Since when the stream has ended (answered or closed): resumable for a grace only.
  std::optional<Clock::time_point> finished_since() const;
  // Bytes of kept events, and of the current consumer's replay (both charged).
  size_t kept_bytes() const;
  size_t replay_bytes() const;

  // "<stream>-<seq>" -> {stream, seq}; nullopt for anything else.
  static std::optional<std::pair<uint64_t, uint64_t>> ParseEventId(const std::string& id);

 private:
  struct Event {
    uint64_t seq;
    std::string text;
    bool last;  // ends the HTTP response (a POST stream's response)
    bool charged = false;  // counted in the budget
  };
  void Keep(Event event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandTo(Consumer& consumer, const Event& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Replace(std::shared_ptr<Consumer> consumer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropKept() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseReplay() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable codemode::Mutex mu_;
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t handed_ ABSL_GUARDED_BY(mu_) = 0;  // the newest seq handed to a consumer
  std::shared_ptr<Consumer> consumer_ ABSL_GUARDED_BY(mu_);
  bool ever_attached_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;  // the last event (the response) is among events_
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<nlohmann::json> early_response_ ABSL_GUARDED_BY(mu_);  // for TakeResponse
  std::optional<Clock::time_point> orphaned_since_ ABSL_GUARDED_BY(mu_);
  std::optional<Clock::time_point> finished_since_ ABSL_GUARDED_BY(mu_);
  // The seq of a response that was too large to keep (over the budget), else 0: a
  // resumption from before it cannot be served.
  uint64_t unkept_response_ ABSL_GUARDED_BY(mu_) = 0;
  size_t replay_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // charged for the current consumer
  bool forgotten_ ABSL_GUARDED_BY(mu_) = false;
  // Options::kept_overhead is charged; or the budget refused it, and the stream is live only.
  bool overhead_held_ ABSL_GUARDED_BY(mu_) = false;
  bool live_only_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace http
}  // namespace gateway
