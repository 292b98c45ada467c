#include "server/http_stream.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "jsonrpc/jsonrpc.h"
#include "metrics/stage_times.h"
#include "base/mutex.h"

namespace gateway {
namespace http {

using json = nlohmann::json;

EventStream::EventStream(Options options) : options_(options) {
  if (!options_.sse || !options_.budget || options_.kept_overhead == 0) return;
  codemode::MutexLock lock(&mu_);
  overhead_held_ = options_.budget->TryCharge(options_.kept_overhead);
  live_only_ = !overhead_held_;
}

EventStream::~EventStream() {
  codemode::MutexLock lock(&mu_);
  DropKept();
  ReleaseReplay();
}

void EventStream::Send(const json& message) {
  const bool response = wire::IsResponse(message);
  if (!options_.sse && !response) return;  // a JSON body carries only the response
  // A response ends its request's stages (metrics/stage_times.h); "written" is its hand-off
  // to the connection, which writes it on its event-loop thread.
  const bool timed = response && StageTimes::enabled();
  StageMarks marks;
  {
    codemode::MutexLock lock(&mu_);
    if (closed_ || done_) return;
    Event event{next_seq_++, "", response && options_.ends_with_reply};
    event.text = options_.sse ? absl::StrCat("id: ", options_.number, "-", event.seq,
                                             "\nevent: message\ndata: ", wire::Dump(message), "\n\n")
                              : wire::Dump(message);
    StageTimes::Mark(Stage::kEncoded);
    if (timed) marks = StageTimes::Take();
    if (event.last) {
      answered_ = true;
      Finish();
      if (!ever_attached_) early_response_ = message;
    }
    if (consumer_) HandTo(*consumer_, event);
    Keep(std::move(event));
  }
  if (timed) StageTimes::Emit(marks);
}

void EventStream::Prime() {
  codemode::MutexLock lock(&mu_);
  if (!options_.sse || closed_) return;
  Event event{next_seq_++, "", false};
  event.text = absl::StrCat("id: ", options_.number, "-", event.seq, "\ndata: \n\n");
  if (consumer_) HandTo(*consumer_, event);
  Keep(std::move(event));
}

// Keeps the newest events within the stream's limits and the replay budget. The oldest go
// first; a client resuming from before them misses them (the spec's redelivery is best
// effort), never the newest. Before the first consumer the events are the only copy and
// are kept regardless (the handler attaches one right away).
void EventStream::Keep(Event event) {
  if (forgotten_ || (live_only_ && ever_attached_)) return;
  const size_t size = event.text.size();
  auto drop_oldest = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bytes_ -= events_.front().text.size();
    if (events_.front().charged) options_.budget->Release(events_.front().text.size());
    events_.pop_front();
  };
  if (options_.budget) {
    while (!(event.charged = options_.budget->TryCharge(size)) && !events_.empty()) drop_oldest();
    if (!event.charged && ever_attached_) {
      if (event.last) unkept_response_ = event.seq;
      return;
    }
  }
  bytes_ += size;
  events_.push_back(std::move(event));
  while (events_.size() > 1 && (events_.size() > options_.max_events || bytes_ > options_.max_bytes)) {
    drop_oldest();
  }
}

void EventStream::DropKept() {
  while (!events_.empty()) {
    if (events_.front().charged) options_.budget->Release(events_.front().text.size());
    events_.pop_front();
  }
  bytes_ = 0;
  if (overhead_held_) options_.budget->Release(options_.kept_overhead);
  overhead_held_ = false;
}

void EventStream::ReleaseReplay() {
  if (replay_bytes_ > 0) options_.budget->Release(replay_bytes_);
  replay_bytes_ = 0;
}

void EventStream::Finish() {
  if (!finished_since_) finished_since_ = Clock::now();
}

void EventStream::HandTo(Consumer& consumer, const Event& event) {
  consumer.Deliver(event.text, event.last);
  handed_ = event.seq;
}

void EventStream::Close() {
  codemode::MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  Finish();
  // A stream answered through its last event has ended already; any other ends here.
  if (consumer_ && !answered_) consumer_->Deliver("", true);
}

void EventStream::Replace(std::shared_ptr<Consumer> consumer) {
  if (consumer_) consumer_->Superseded();
  ReleaseReplay();
  consumer_ = std::move(consumer);
  ever_attached_ = true;
  orphaned_since_.reset();
}

absl::Status EventStream::Attach(std::shared_ptr<Consumer> consumer,
                                 std::optional<uint64_t> after_seq) {
  codemode::MutexLock lock(&mu_);
  if (forgotten_) return absl::ResourceExhaustedError("this stream can no longer be resumed");
  if (live_only_ && after_seq) {
    return absl::ResourceExhaustedError(
        "this stream could not be kept for redelivery: the replay budget was full when its "
        "request came (--max_replay_bytes_per_session, --max_replay_bytes)");
  }
  if (after_seq && unkept_response_ > *after_seq) {
    return absl::ResourceExhaustedError(
        "the response on this stream was too large to keep for redelivery (replay budget: "
        "--max_replay_bytes_per_session, --max_replay_bytes)");
  }
  // A resumption copies what it replays into its connection: that copy is charged too,
  // until the connection ends, so resuming again and again cannot multiply it.
  size_t replay = 0;
  if (after_seq && options_.budget) {
    for (const Event& event : events_) replay += event.seq > *after_seq ? event.text.size() : 0;
    // What the consumer being replaced holds goes with it (Replace closes it).
    const size_t freed = replay_bytes_;
    if (replay > freed && !options_.budget->TryCharge(replay - freed)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "resuming needs ", replay, " bytes of replay, over the replay budget ("
          "--max_replay_bytes_per_session, --max_replay_bytes); retry when other streams end"));
    }
    if (replay < freed) options_.budget->Release(freed - replay);
    replay_bytes_ = 0;  // the difference is settled: Replace must not release it again
  }
  Replace(std::move(consumer));
  replay_bytes_ = replay;
  for (const Event& event : events_) {
    if (!after_seq || event.seq > *after_seq) HandTo(*consumer_, event);
  }
  if (closed_ && !answered_) consumer_->Deliver("", true);
  if (live_only_) DropKept();  // handed over: nobody may come back for them
  return absl::OkStatus();
}

void EventStream::AttachLive(std::shared_ptr<Consumer> consumer) {
  codemode::MutexLock lock(&mu_);
  Replace(std::move(consumer));
  if (closed_) consumer_->Deliver("", true);
}

void EventStream::Detach(const Consumer* consumer, Clock::time_point now) {
  codemode::MutexLock lock(&mu_);
  if (consumer_.get() != consumer) return;
  consumer_.reset();
  ReleaseReplay();
  orphaned_since_ = now;
}

void EventStream::Delivered(const Consumer* consumer) {
  codemode::MutexLock lock(&mu_);
  if (consumer_.get() != consumer) return;
  consumer_.reset();
  ReleaseReplay();
  done_ = true;
  DropKept();
}

std::optional<json> EventStream::TakeResponse() {
  codemode::MutexLock lock(&mu_);
  if (!early_response_) return std::nullopt;
  done_ = true;
  DropKept();
  return std::exchange(early_response_, std::nullopt);
}

void EventStream::Forget() {
  codemode::MutexLock lock(&mu_);
  forgotten_ = true;
  DropKept();
  ReleaseReplay();
}

bool EventStream::attached() const {
  codemode::MutexLock lock(&mu_);
  return consumer_ != nullptr;
}

bool EventStream::closed() const {
  codemode::MutexLock lock(&mu_);
  return closed_;
}

bool EventStream::done() const {
  codemode::MutexLock lock(&mu_);
  return done_;
}

bool EventStream::resumable() const {
  codemode::MutexLock lock(&mu_);
  return options_.sse && handed_ > 0 && !live_only_;
}

bool EventStream::live_only() const {
  codemode::MutexLock lock(&mu_);
  return live_only_;
}

std::optional<EventStream::Clock::time_point> EventStream::orphaned_since() const {
  codemode::MutexLock lock(&mu_);
  return orphaned_since_;
}

std::optional<EventStream::Clock::time_point> EventStream::finished_since() const {
  codemode::MutexLock lock(&mu_);
  return finished_since_;
}

size_t EventStream::kept_bytes() const {
  codemode::MutexLock lock(&mu_);
  return bytes_;
}

size_t EventStream::replay_bytes() const {
  codemode::MutexLock lock(&mu_);
  return replay_bytes_;
}

std::optional<std::pair<uint64_t, uint64_t>> EventStream::ParseEventId(const std::string& id) {
  const size_t dash = id.find('-');
  if (dash == std::string::npos) return std::nullopt;
  uint64_t stream = 0, seq = 0;
  if (!absl::SimpleAtoi(id.substr(0, dash), &stream) || !absl::SimpleAtoi(id.substr(dash + 1), &seq)) {
    return std::nullopt;
  }
  // SimpleAtoi accepts signs and whitespace; an id of ours has digits only.
  for (char c : id) {
    if (c != '-' && (c < '0' || c > '9')) return std::nullopt;
  }
  return std::make_pair(stream, seq);
}

}  // namespace http
}  // namespace gateway
