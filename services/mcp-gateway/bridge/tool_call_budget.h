// ToolCallBudget: the bytes of sandboxed code's tool calls the gateway holds at once
// (arguments of calls being answered, results not yet taken by the sandbox), per credential
// and over everyone, inside the gateway's byte ceiling (base/byte_budget.h). A run's own
// bounds (ToolCallLimits) are not enough: a credential may hold many sandboxes, and each
// call is copied several times on its way (arguments, parsed form, upstream request and
// response, result, proto), so 8 sandboxes of one token each flooding 3 MiB calls took the
// gateway to ~1 GiB. Each call is charged kCopies times its size. Shared by every execution
// of a SandboxClient.
//
// It also counts the calls themselves (CallsOf: a ByteBudget charged 1 per call), per
// credential and over everyone: each call in flight holds a gateway thread until its
// answer is written, and a run's own cap (--max_tool_calls_in_flight) alone would let one
// token's 16 sandboxes x 64 slow calls hold over a thousand threads.
//
//   ToolCallBudgetOptions options;
//   options.ceiling = ceiling;
//   ToolCallBudget budget(options);
//   std::shared_ptr<codemode::ByteBudget> mine = budget.Of("token 0");  // held by the run
//   if (const codemode::ByteBudget* full = mine->Charge(n)) return ToolError(Refusal(...));
//   ...
//   mine->Release(n);
//   std::shared_ptr<codemode::ByteBudget> calls = budget.CallsOf("token 0");
//   if (const codemode::ByteBudget* full = calls->Charge(1)) return ToolError(CallRefusal(...));
#pragma once

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/byte_budget.h"

namespace gateway {

// The bounds of a ToolCallBudget, named as their flags (without "--max_").
struct ToolCallBudgetOptions {
  size_t bytes_per_credential = 64u << 20;  // tool_call_bytes_in_flight_per_credential
  size_t bytes_total = 128u << 20;          // tool_call_bytes_in_flight_total
  size_t calls_per_credential = 128;        // tool_calls_in_flight_per_credential
  size_t calls_total = 512;                 // tool_calls_in_flight_total
  // The gateway's byte ceiling, which the bytes also draw on (null: none).
  std::shared_ptr<codemode::BufferCeiling> ceiling;
  // The budget of upstream answers being received, everyone's (--max_upstream_bytes_in_flight,
  // shared with UpstreamOptions::receive_budget; null: answers in transit are not charged
  // to a credential), and one credential's part of it.
  std::shared_ptr<codemode::ByteBudget> receiving;
  size_t receiving_per_credential = 40u << 20;  // upstream_bytes_in_flight_per_credential
};

class ToolCallBudget {
 public:
  // A call is charged this many times its arguments' and its result's JSON size: that is
  // how many copies of them live at once on their way (the proto, the parsed arguments, the
  // upstream request, the upstream's response and its parse, the dumped result, the proto
  // answer). Charged once, 2 tokens x 64 MiB of calls would take the gateway to 546 MiB.
  static constexpr size_t kCopies = 4;

  explicit ToolCallBudget(const ToolCallBudgetOptions& o)
      : ceiling_(o.ceiling),
        total_(Kind("max_tool_call_bytes_in_flight_total", o.bytes_total, codemode::AllOf(ceiling_))),
        per_credential_("max_tool_call_bytes_in_flight_per_credential", o.bytes_per_credential,
                        {total_}, codemode::FairReserve(total_, o.bytes_per_credential)),
        calls_total_(Kind("max_tool_calls_in_flight_total", o.calls_total, {})),
        calls_per_credential_("max_tool_calls_in_flight_per_credential", o.calls_per_credential,
                              {calls_total_},
                              codemode::CountReserve(calls_total_, o.calls_per_credential)),
        receiving_(o.receiving),
        receiving_per_credential_(
            "max_upstream_bytes_in_flight_per_credential", o.receiving_per_credential,
            receiving_ ? codemode::ByteBudget::Parents{receiving_} : codemode::ByteBudget::Parents{},
            receiving_ ? codemode::FairReserve(receiving_, o.receiving_per_credential)
                       : codemode::ByteBudget::Reserve{}) {}

  // The budget `credential`'s runs charge (arguments, results, parsed answers); hold it
  // while it holds bytes.
  std::shared_ptr<codemode::ByteBudget> Of(const std::string& credential) {
    return per_credential_.Of(credential, codemode::SharesOf(ceiling_, credential));
  }
  // The budget `credential`'s upstream answers are charged to while they arrive
  // (AnswerCharges::receiving): apart from Of(), so that answers in transit cannot take
  // what the answers already received need to become results. Null without `receiving`.
  std::shared_ptr<codemode::ByteBudget> ReceivingOf(const std::string& credential) {
    if (!receiving_) return nullptr;
    return receiving_per_credential_.Of(credential, codemode::SharesOf(ceiling_, credential));
  }

  // Why a charge of `mine` was refused by `full`, naming the flag to raise.
  static std::string Refusal(const codemode::ByteBudget& full, const codemode::ByteBudget& mine) {
    if (&full == &mine) {
      return absl::StrCat("this credential's tool calls already hold ", mine.used() / kCopies,
                          " bytes of arguments and results over all its runs (charged ", kCopies,
                          " times for their copies: the gateway's ", full.Describe(),
                          "); await some first");
    }
    return absl::StrCat("the gateway holds too many bytes for tool calls now (its ",
                        full.Describe(), ", ", full.used(), " in use); try again later");
  }

  // The count of `credential`'s tool calls in flight over all its runs (charge 1 per call,
  // release it once the call's answer is written); hold it while it holds calls.
  std::shared_ptr<codemode::ByteBudget> CallsOf(const std::string& credential) {
    return calls_per_credential_.Of(credential);
  }

  // Why a call of `mine` (a CallsOf budget) was refused by `full`, naming the flag to raise.
  static std::string CallRefusal(const codemode::ByteBudget& full,
                                 const codemode::ByteBudget& mine) {
    if (&full == &mine) {
      return absl::StrCat("this credential already has ", mine.used(),
                          " tool calls in flight over all its runs (the gateway's ",
                          full.Describe(), "); await some first");
    }
    return absl::StrCat("the gateway has too many tool calls in flight now (its ",
                        full.Describe(), ", ", full.used(),
                        " in flight; the last eighth is kept for credentials with few calls); "
                        "await some first");
  }

  // Bytes held by `credential` and by everyone (tests, logs).
  size_t held(const std::string& credential) const { return per_credential_.Used(credential); }
  size_t total() const { return total_->used(); }
  // Tool calls in flight of `credential` and of everyone.
  size_t calls(const std::string& credential) const {
    return calls_per_credential_.Used(credential);
  }
  size_t calls_total() const { return calls_total_->used(); }

 private:
  // An overall budget of one kind.
  static std::shared_ptr<codemode::ByteBudget> Kind(const char* flag, size_t limit,
                                                    codemode::ByteBudget::Parents parents) {
    return std::make_shared<codemode::ByteBudget>(flag, limit, std::move(parents));
  }


  const std::shared_ptr<codemode::BufferCeiling> ceiling_;
  const std::shared_ptr<codemode::ByteBudget> total_;  // draws on the ceiling's all()
  codemode::ByteBudgets per_credential_;               // each draws on total_ and a share
  // Counts of calls (charged 1 each): not bytes, so outside the ceiling.
  const std::shared_ptr<codemode::ByteBudget> calls_total_;
  codemode::ByteBudgets calls_per_credential_;  // each draws on calls_total_
  const std::shared_ptr<codemode::ByteBudget> receiving_;  // may be null
  codemode::ByteBudgets receiving_per_credential_;     // each draws on receiving_ and a share
};

}  // namespace gateway
