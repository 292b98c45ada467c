#include "server/http_stream.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "jsonrpc/jsonrpc.h"
#include "base/mutex.h"

namespace gateway {
namespace http {

using json = nlohmann::json;

EventStream::EventStream(Options options) : options_(options) {}

void EventStream::Send(const json& message) {
  const bool response = wire::IsResponse(message);
  if (!options_.sse && !response) return;  // a JSON body carries only the response
  codemode::MutexLock lock(&mu_);
  if (closed_ || done_) return;
  Event event{next_seq_++, "", response && options_.ends_with_reply};
  event.text = options_.sse ? absl::StrCat("id: ", options_.number, "-", event.seq,
                                           "\nevent: message\ndata: ", wire::Dump(message), "\n\n")
                            : wire::Dump(message);
  if (event.last) {
    answered_ = true;
    if (!ever_attached_) early_response_ = message;
  }
  if (consumer_) HandTo(*consumer_, event);
  Keep(std::move(event));
}

void EventStream::Prime() {
  codemode::MutexLock lock(&mu_);
  if (!options_.sse || closed_) return;
  Event event{next_seq_++, "", false};
  event.text = absl::StrCat("id: ", options_.number, "-", event.seq, "\ndata: \n\n");
  if (consumer_) HandTo(*consumer_, event);
  Keep(std::move(event));
}

// Keeps the newest events within the budget. The oldest go first; a client resuming from
// before them misses them (the spec's redelivery is best effort), never the newest.
void EventStream::Keep(Event event) {
  bytes_ += event.text.size();
  events_.push_back(std::move(event));
  while (events_.size() > 1 && (events_.size() > options_.max_events || bytes_ > options_.max_bytes)) {
    bytes_ -= events_.front().text.size();
    events_.pop_front();
  }
}

void EventStream::HandTo(Consumer& consumer, const Event& event) {
  consumer.Deliver(event.text, event.last);
  handed_ = event.seq;
}

void EventStream::Close() {
  codemode::MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  // A stream answered through its last event has ended already; any other ends here.
  if (consumer_ && !answered_) consumer_->Deliver("", true);
}

void EventStream::Replace(std::shared_ptr<Consumer> consumer) {
  if (consumer_) consumer_->Deliver("", true);
  consumer_ = std::move(consumer);
  ever_attached_ = true;
  orphaned_since_.reset();
}

void EventStream::Attach(std::shared_ptr<Consumer> consumer, std::optional<uint64_t> after_seq) {
  codemode::MutexLock lock(&mu_);
  Replace(std::move(consumer));
  for (const Event& event : events_) {
    if (!after_seq || event.seq > *after_seq) HandTo(*consumer_, event);
  }
  if (closed_ && !answered_) consumer_->Deliver("", true);
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
  orphaned_since_ = now;
}

void EventStream::Delivered(const Consumer* consumer) {
  codemode::MutexLock lock(&mu_);
  if (consumer_.get() != consumer) return;
  consumer_.reset();
  done_ = true;
  events_.clear();
  bytes_ = 0;
}

std::optional<json> EventStream::TakeResponse() {
  codemode::MutexLock lock(&mu_);
  if (!early_response_) return std::nullopt;
  done_ = true;
  events_.clear();
  bytes_ = 0;
  return std::exchange(early_response_, std::nullopt);
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
  return options_.sse && handed_ > 0;
}

std::optional<EventStream::Clock::time_point> EventStream::orphaned_since() const {
  codemode::MutexLock lock(&mu_);
  return orphaned_since_;
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
