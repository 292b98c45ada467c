// StdoutLines (see stdout_lines.h).
#include "upstream/stdout_lines.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "spdlog/spdlog.h"
#include "upstream/transport.h"

namespace gateway {

using nlohmann::json;

StdoutLines::StdoutLines(std::string name, size_t max_message_bytes,
                         std::shared_ptr<codemode::ByteBudget> shared,
                         absl::Duration idle_timeout, Hooks hooks)
    : name_(std::move(name)),
      max_message_bytes_(max_message_bytes),
      shared_(std::move(shared)),
      idle_timeout_(idle_timeout),
      hooks_(std::move(hooks)),
      framer_(max_message_bytes),
      scanner_(hooks_.is_pending) {
  hold_.emplace(shared_);
}

void StdoutLines::Feed(const char* data, size_t size, absl::Time now) {
  while (size > 0) {
    const char* newline = static_cast<const char*>(std::memchr(data, '\n', size));
    const size_t piece = newline ? static_cast<size_t>(newline - data) + 1 : size;
    if (!newline) last_byte_ = now;
    FeedPiece(data, piece, newline != nullptr);
    data += piece;
    size -= piece;
  }
}

void StdoutLines::FeedPiece(const char* data, size_t size, bool ends_line) {
  scanner_.Feed(data, ends_line ? size - 1 : size);
  if (!framer_.skipping()) {
    MaybeMoveToCaller();
    // Charged before the bytes are buffered.
    if (!framer_.skipping()) Charge(kReceiveCopies * size);
  }
  framer_.Feed(
      data, size, [this](const std::string& line) { if (hooks_.on_line) hooks_.on_line(line); },
      [this] { Skip(Drop::kTooLarge, ""); });
  // A line being skipped holds nothing: its charge must not stay until a newline that a
  // hostile server never sends.
  if (framer_.skipping()) hold_->ShrinkTo(0);
  in_line_ = !ends_line && !framer_.skipping();
  if (ends_line) EndLine();
}

void StdoutLines::Charge(size_t bytes) {
  if (const codemode::ByteBudget* full = hold_->GrowBy(bytes)) Skip(Drop::kBusy, full->Describe());
}

void StdoutLines::MaybeMoveToCaller() {
  if (moved_ || id_checked_ || !hooks_.caller_budget) return;
  json id = scanner_.id();
  if (id.is_null()) return;
  id_checked_ = true;
  std::shared_ptr<codemode::ByteBudget> caller = hooks_.caller_budget(id);
  if (!caller) return;  // not a request of a caller's (or one that charges nobody)
  codemode::ByteHold moved(std::move(caller));
  if (const codemode::ByteBudget* full = moved.GrowBy(hold_->held())) {
    Skip(Drop::kBusy, full->Describe());
    return;
  }
  hold_.emplace(std::move(moved));  // releases the shared budget's part
  moved_ = true;
  line_id_ = std::move(id);
}

void StdoutLines::CheckCallers() {
  if (!moved_ || drop_ != Drop::kNone || !hooks_.is_pending) return;
  if (!hooks_.is_pending(line_id_)) Skip(Drop::kUnwanted, "");
}

void StdoutLines::Skip(Drop why, const std::string& busy) {
  if (drop_ != Drop::kNone) return;
  drop_ = why;
  busy_ = busy;
  framer_.Skip();
  hold_->ShrinkTo(0);
  in_line_ = false;
  // Said now: a line that never ends never reaches EndLine.
  const std::string answered = Answered(scanner_.ids());
  switch (why) {
    case Drop::kTooLarge:
      spdlog::error("upstream {}: a message larger than {} bytes (--max_upstream_message_bytes) "
                    "dropped{}", name_, max_message_bytes_, answered);
      break;
    case Drop::kBusy:
      if (hooks_.may_log && hooks_.may_log()) {
        spdlog::warn("upstream {}: a message dropped: the gateway is receiving too many bytes "
                     "from upstreams ({}){}; the rest of its line is skipped", name_, busy,
                     answered);
      }
      break;
    case Drop::kStalled:
      if (hooks_.may_log && hooks_.may_log()) {
        spdlog::warn("upstream {}: a message abandoned: nothing more of it came for {} while "
                     "it was incomplete (--upstream_message_idle_timeout){}; the rest of its "
                     "line is skipped", name_, absl::FormatDuration(idle_timeout_), answered);
      }
      break;
    case Drop::kUnwanted:
      spdlog::debug("upstream {}: a message skipped: the call it answers ended while it "
                    "arrived{}", name_, answered);
      break;
    case Drop::kNone:
      break;
  }
  FailIdsSoFar();
}

void StdoutLines::FailIdsSoFar() {
  const std::vector<json> ids = scanner_.ids();
  if (ids.size() <= ids_failed_) return;
  std::vector<json> fresh;
  for (size_t i = ids_failed_; i < ids.size(); ++i) {
    // A skipped answer fails only the requests still waited for (its own caller gave up).
    if (drop_ == Drop::kUnwanted && hooks_.is_pending && !hooks_.is_pending(ids[i])) continue;
    fresh.push_back(ids[i]);
  }
  if (hooks_.on_failed && !fresh.empty()) hooks_.on_failed(fresh, Reason());
  if (hooks_.on_answer_end) {
    for (size_t i = ids_failed_; i < ids.size(); ++i) hooks_.on_answer_end(ids[i]);
  }
  ids_failed_ = ids.size();
}

std::string StdoutLines::Answered(const std::vector<json>& ids) const {
  if (ids.empty()) return "";
  return absl::StrCat("; it answered request ", codemode::LogText(wire::Dump(ids[0])),
                      ids.size() > 1 ? absl::StrCat(" and ", ids.size() - 1, " more") : "");
}

void StdoutLines::EndLine() {
  if (drop_ != Drop::kNone) {
    FailIdsSoFar();  // those read after the line was dropped (later answers of a batch)
  } else if (hooks_.on_answer_end) {
    // The line has been dispatched (its answer charged to its caller by then).
    for (const json& id : scanner_.ids()) hooks_.on_answer_end(id);
  }
  hold_.emplace(shared_);
  scanner_.Reset();
  moved_ = id_checked_ = in_line_ = false;
  line_id_ = nullptr;
  ids_failed_ = 0;
  drop_ = Drop::kNone;
  busy_.clear();
}

absl::Status StdoutLines::Reason() const {
  switch (drop_) {
    case Drop::kTooLarge:
      return MessageTooLargeError(max_message_bytes_);
    case Drop::kBusy:
      return absl::ResourceExhaustedError(absl::StrCat(
          "the answer was not read: the gateway is receiving too many bytes from upstreams "
          "now (its ", busy_, "); retry later"));
    case Drop::kStalled:
      return absl::DeadlineExceededError(absl::StrCat(
          "the upstream began its answer and sent nothing more of it for ",
          absl::FormatDuration(idle_timeout_),
          " (--upstream_message_idle_timeout); the answer was abandoned"));
    case Drop::kUnwanted:
      return absl::AbortedError(
          "the upstream answered in one message with a call that ended (timed out or "
          "cancelled) before its answer arrived; the message was skipped, retry the call");
    case Drop::kNone:
      break;
  }
  return absl::OkStatus();
}

void StdoutLines::CheckIdle(absl::Time now) {
  if (!in_line_ || idle_timeout_ <= absl::ZeroDuration()) return;
  if (now - last_byte_ < idle_timeout_) return;
  Skip(Drop::kStalled, "");
}

int StdoutLines::PollTimeoutMs(absl::Time now) const {
  if (!in_line_ || idle_timeout_ <= absl::ZeroDuration()) return -1;
  const absl::Duration left = last_byte_ + idle_timeout_ - now;
  if (left <= absl::ZeroDuration()) return 0;
  // Rounded up, so that the wake-up finds the line idle long enough.
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, INT_MAX));
}

}  // namespace gateway
