// ToolCallBudget: the bytes of sandboxed code's tool calls the gateway holds at once
// (arguments of calls being answered, results not yet taken by the sandbox), per credential
// and over everyone, inside the gateway's byte ceiling (base/byte_budget.h). A run's own
// bounds (ToolCallLimits) are not enough: a credential may hold many sandboxes, and each
// call is copied several times on its way (arguments, parsed form, upstream request and
// response, result, proto), so 8 sandboxes of one token each flooding 3 MiB calls took the
// gateway to ~1 GiB. Each call is charged kCopies times its size. Shared by every execution
// of a SandboxClient.
//
//   ToolCallBudget budget(64 << 20, 128 << 20, ceiling);
//   std::shared_ptr<codemode::ByteBudget> mine = budget.Of("token 0");  // held by the run
//   if (const codemode::ByteBudget* full = mine->Charge(n)) return ToolError(Refusal(...));
//   ...
//   mine->Release(n);
#pragma once

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/byte_budget.h"

namespace gateway {

class ToolCallBudget {
 public:
  // A call is charged this many times its arguments' and its result's JSON size: that is
  // how many copies of them live at once on their way (the proto, the parsed arguments, the
  // upstream request, the upstream's response and its parse, the dumped result, the proto
  // answer). Charged once, 2 tokens x 64 MiB of calls took the gateway to 546 MiB (attack
  // round 5).
  static constexpr size_t kCopies = 4;

  // `receiving`: the budget of upstream answers being received for everyone
  // (--max_upstream_bytes_in_flight, shared with UpstreamOptions::receive_budget); null:
  // answers in transit are not charged to a credential.
  ToolCallBudget(size_t per_credential, size_t total,
                 std::shared_ptr<codemode::BufferCeiling> ceiling = nullptr,
                 std::shared_ptr<codemode::ByteBudget> receiving = nullptr,
                 size_t receiving_per_credential = 0)
      : ceiling_(std::move(ceiling)),
        total_(std::make_shared<codemode::ByteBudget>("max_tool_call_bytes_in_flight_total", total,
                                                      codemode::AllOf(ceiling_))),
        per_credential_("max_tool_call_bytes_in_flight_per_credential", per_credential, {total_},
                        codemode::FairReserve(total_, per_credential)),
        receiving_(std::move(receiving)),
        receiving_per_credential_(
            "max_upstream_bytes_in_flight_per_credential", receiving_per_credential,
            receiving_ ? codemode::ByteBudget::Parents{receiving_} : codemode::ByteBudget::Parents{},
            receiving_ ? codemode::FairReserve(receiving_, receiving_per_credential)
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

  // Bytes held by `credential` and by everyone (tests, logs).
  size_t held(const std::string& credential) const { return per_credential_.Used(credential); }
  size_t total() const { return total_->used(); }

 private:
  const std::shared_ptr<codemode::BufferCeiling> ceiling_;
  const std::shared_ptr<codemode::ByteBudget> total_;  // draws on the ceiling's all()
  codemode::ByteBudgets per_credential_;               // each draws on total_ and a share
  const std::shared_ptr<codemode::ByteBudget> receiving_;  // may be null
  codemode::ByteBudgets receiving_per_credential_;     // each draws on receiving_ and a share
};

}  // namespace gateway
