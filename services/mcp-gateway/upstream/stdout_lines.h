// StdoutLines: a stdio upstream's stdout, split into lines as its bytes arrive, each line
// charged to a receive budget while it is buffered and dispatched (StdioTransport's reader).
//
// A line is bounded three ways, none of which a hostile server can stretch:
//  - its size (max_message_bytes): a longer line is skipped as it arrives, never buffered;
//  - the budget: a line the budget refuses is skipped, and holds nothing while skipped;
//  - time (idle_timeout): a line that has received no byte for that long while incomplete
//    is abandoned (its hold released, the rest skipped up to its newline), so a server
//    that begins a large line and never ends it does not hold its charge for as long as it
//    lives.
// The request a dropped or abandoned line answered (its id, found by a MessageIdScanner fed
// the same bytes) fails at once, with the reason.
//
// An answer line whose id is a request sent with a caller's budget (StdioTransport::
// SendRequest) is charged to that caller instead of the shared budget from the moment its
// id is seen (so one token's large stdio answers do not use the budget every credential
// shares), and only while the caller waits: once it gives up, the line is skipped and its
// charge released (CheckCallers: a server trickling a byte now and then cannot keep a
// timed-out caller's charge for as long as it lives).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "jsonrpc/jsonrpc.h"
#include "nlohmann/json.hpp"
#include "upstream/message_id.h"

namespace gateway {

class StdoutLines {
 public:
  struct Hooks {
    // A complete line within the bounds (not yet parsed).
    std::function<void(const std::string& line)> on_line;
    // The requests a dropped line answered, and why.
    std::function<void(const std::vector<nlohmann::json>& ids, const absl::Status& why)> on_failed;
    // The budget of the caller waiting for an answer with this id, or null (shared budget).
    std::function<std::shared_ptr<codemode::ByteBudget>(const nlohmann::json& id)> caller_budget;
    // Whether a request with this id waits for its answer (only those ids of a batch are
    // recorded, to fail them when it is dropped); empty: every id.
    std::function<bool(const nlohmann::json& id)> is_pending;
    // A line with this id (an answer) ended, read or dropped.
    std::function<void(const nlohmann::json& id)> on_answer_end;
    // Whether one more warning may be logged (rate-limited).
    std::function<bool()> may_log;
  };

  // `shared` may be null (unbounded); a zero `idle_timeout` disables the timeout.
  StdoutLines(std::string name, size_t max_message_bytes,
              std::shared_ptr<codemode::ByteBudget> shared, absl::Duration idle_timeout,
              Hooks hooks);

  // The next bytes of stdout, received at `now`.
  void Feed(const char* data, size_t size, absl::Time now);
  // Abandons the line being read if it has received nothing for idle_timeout.
  void CheckIdle(absl::Time now);
  // Skips the line being read if it is charged to a caller who no longer waits for it
  // (hooks.is_pending says no): run when a call is abandoned.
  void CheckCallers();
  // How long the reader may wait for more bytes before CheckIdle is due; -1: forever (no
  // incomplete line is held).
  int PollTimeoutMs(absl::Time now) const;
  // Bytes the line being read holds, in whichever budget (for tests and logs).
  size_t held() const { return hold_->held(); }

 private:
  enum class Drop { kNone, kTooLarge, kBusy, kStalled, kUnwanted };
  // One piece of a line (up to and including its newline, if any).
  void FeedPiece(const char* data, size_t size, bool ends_line);
  // Charges `bytes` more for the line; skips it when refused.
  void Charge(size_t bytes);
  // Moves the line's hold to its caller's budget once its id is known.
  void MaybeMoveToCaller();
  // The line is dropped for `why` (and logged); the requests it answered fail now (those
  // whose ids come later in a batch line, at its end).
  void Skip(Drop why, const std::string& busy);
  // Fails (unless nobody waits) and ends the requests answered by the line whose ids were
  // read since the last call.
  void FailIdsSoFar();
  void EndLine();
  absl::Status Reason() const;
  std::string Answered(const std::vector<nlohmann::json>& ids) const;

  const std::string name_;
  const size_t max_message_bytes_;
  const std::shared_ptr<codemode::ByteBudget> shared_;
  const absl::Duration idle_timeout_;
  const Hooks hooks_;
  LineFramer framer_;
  MessageIdScanner scanner_;
  std::optional<codemode::ByteHold> hold_;  // on shared_, or on the caller's once moved
  bool moved_ = false;       // hold_ is on a caller's budget: the one of request line_id_
  nlohmann::json line_id_;
  bool id_checked_ = false;  // the id was looked up (once per line)
  bool in_line_ = false;     // bytes of an unfinished line were received and are held
  absl::Time last_byte_;
  Drop drop_ = Drop::kNone;
  size_t ids_failed_ = 0;    // the first so many of the line's ids were failed already
  std::string busy_;         // the budget that refused the line ("--flag=N")
};

}  // namespace gateway
