// ReadTurns: who gets the next resources/read slot. Reads are few (--max_resource_reads_in_flight)
// and long (up to --resources_read_timeout each), and a refused read holds no thread, so
// whoever asks first when a slot frees takes it. Credentials that hold slots and ask again
// the moment one ends would then keep every slot between them, and a credential that asks
// politely would wait minutes. So a credential refused a read while holding none is put in
// line, and a freed slot goes to those in line, first come first served, before anyone
// else. Waiting in line holds no thread either: the credential keeps its place by asking
// again within `hold`, and loses it otherwise (a client that gave up does not keep a slot
// idle for longer than that).
//
//   ReadTurns turns(reads_overall, absl::Seconds(2));
//   ReadTurns::Turn turn = turns.Take(credential, *reads_of_credential);
//   if (turn.full) refuse(turn.place > 0 ? "in line, place N" : turn.full->Describe());
//
// Safe for concurrent use.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "base/mutex.h"

namespace gateway {

class ReadTurns {
 public:
  // At most this many credentials wait in line; past it a refused credential is not put in
  // line (it is refused as before).
  static constexpr size_t kMaxLine = 1024;

  // `overall` counts every read in flight; each credential's budget is its child.
  ReadTurns(std::shared_ptr<codemode::ByteBudget> overall, absl::Duration hold);

  struct Turn {
    // nullptr when the read is charged to `mine` (and `overall`); else the budget that
    // refused it (`overall` when others are ahead in line), and nothing is charged.
    const codemode::ByteBudget* full = nullptr;
    size_t place = 0;  // refused and in line: its place (1 is next); 0 otherwise
    size_t line = 0;   // how many wait in line
  };
  // One read of `credential`, whose budget is `mine`: charged when there are more free
  // slots than credentials in line ahead of it.
  Turn Take(const std::string& credential, codemode::ByteBudget& mine, absl::Time now);

  absl::Duration hold() const { return hold_; }

 private:
  struct Waiting {
    std::string credential;
    absl::Time asked;
  };

  const std::shared_ptr<codemode::ByteBudget> overall_;
  const absl::Duration hold_;
  codemode::Mutex mu_;
  std::deque<Waiting> line_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gateway
