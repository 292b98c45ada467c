// ReadTurns: who gets the next resources/read slot. Reads are few
// (--max_resource_reads_in_flight) and long (up to --resources_read_timeout each). Were a
// refused read answered at once, whoever asks first when a slot frees would take it:
// credentials holding slots and asking again the moment one ends would keep every slot
// between them, and a credential asking politely would wait as long as they like. So a read
// of a credential that holds none waits in line, on its call's own thread (one per call
// already, bounded by --max_calls_in_flight), and a freed slot goes to the line first, in
// order. A read whose wait passed keeps its credential's place for kKeepPlace: asked again
// by then, it goes back where it was, so a client that retries after a pause is not sent to
// the back behind those who retried at once. One read per credential waits; a credential holding a read, or with one waiting
// already, is refused at once, as is every read once `max_line` wait (each holds a call of
// --max_calls_in_flight: the line must leave most of them to other calls).
//
//   auto turns = std::make_shared<ReadTurns>(reads_overall, absl::Seconds(30), 64);
//   ReadTurns::Turn turn = turns->Take(credential, reads_of_credential);
//   if (turn.full) refuse(turn.full->Describe());
//   if (turn.waiting) { absl::Status s = turns->Await(turn.waiting, cancel); ... }
//   ... the read ...
//   reads_of_credential->Release(1); turns->Released();
//
// Safe for concurrent use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "base/cancel.h"
#include "base/mutex.h"

namespace gateway {

class ReadTurns : public std::enable_shared_from_this<ReadTurns> {
 public:
  // How long a credential whose read waited in vain keeps its place in line.
  static constexpr absl::Duration kKeepPlace = absl::Seconds(5);

  // `overall` counts every read in flight; each credential's budget is its child. A read
  // waits in line for at most `wait`, behind at most `max_line` - 1 others.
  ReadTurns(std::shared_ptr<codemode::ByteBudget> overall, absl::Duration wait, size_t max_line);

  // A read waiting in line (opaque).
  struct Waiter;
  struct Turn {
    // The budget that refused the read (nothing is charged, nothing waits); nullptr when it
    // is charged now, or waits.
    const codemode::ByteBudget* full = nullptr;
    // Set when the read waits in line: Await it (or Leave the line) before anything else.
    std::shared_ptr<Waiter> waiting;
  };
  // One read of `credential`, whose budget is `mine`: charged to it now when nobody waits in
  // line and its budgets allow; else in line when the credential holds no read and has none
  // waiting; else refused.
  Turn Take(const std::string& credential, const std::shared_ptr<codemode::ByteBudget>& mine);

  // Until `waiting` is charged its slot (OK: release it as any read's), `cancel` is
  // cancelled (CANCELLED) or the wait passes (RESOURCE_EXHAUSTED naming the flags); it leaves
  // the line in every case.
  absl::Status Await(const std::shared_ptr<Waiter>& waiting, const std::shared_ptr<codemode::CancelToken>& cancel);
  // Leaves the line without reading (the call ended first); a slot it was given goes on.
  void Leave(const std::shared_ptr<Waiter>& waiting);
  // A read's slot was released: free slots go to the line, first come first served.
  void Released();

  size_t waiting() const;

 private:
  void GrantLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(const std::shared_ptr<Waiter>& waiting) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Remembers the place of `waiting`, whose wait passed, for kKeepPlace.
  void KeepPlaceLocked(const Waiter& waiting) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<codemode::ByteBudget> overall_;
  const absl::Duration wait_;
  const size_t max_line_;
  mutable codemode::Mutex mu_;
  std::deque<std::shared_ptr<Waiter>> line_ ABSL_GUARDED_BY(mu_);  // by place
  uint64_t next_place_ ABSL_GUARDED_BY(mu_) = 0;
  // Places kept for credentials whose read waited in vain, until when (at most max_line_).
  std::map<std::string, std::pair<uint64_t, absl::Time>> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gateway
