// ToolCallBudget: the bytes of sandboxed code's tool calls the gateway holds at once
// (arguments of calls being answered, results not yet taken by the sandbox), per credential
// and over everyone. A run's own bounds (ToolCallLimits) are not enough: a credential may
// hold many sandboxes, and each call is copied several times on its way (arguments, parsed
// form, upstream request and response, result, proto), so 8 sandboxes of one token each
// flooding 3 MiB calls took the gateway to ~1 GiB. Shared by every execution of a
// SandboxClient.
//
//   ToolCallBudget budget(64 << 20, 128 << 20);
//   if (std::string why = budget.Charge("token 0", n); !why.empty()) return ToolError(why);
//   ...
//   budget.Release("token 0", n);
#pragma once

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"

namespace gateway {

class ToolCallBudget {
 public:
  ToolCallBudget(size_t per_credential, size_t total)
      : per_credential_(per_credential), total_limit_(total) {}

  // Empty when `bytes` are now charged to `credential`; otherwise why not (nothing charged),
  // naming the flag to raise.
  std::string Charge(const std::string& credential, size_t bytes) ABSL_LOCKS_EXCLUDED(mu_) {
    codemode::MutexLock lock(&mu_);
    size_t& mine = held_[credential];
    if (mine + bytes > per_credential_) {
      std::string why = absl::StrCat(
          "this credential's tool calls already hold ", mine, " bytes of arguments and results "
          "over all its runs (the gateway's --max_tool_call_bytes_in_flight_per_credential is ",
          per_credential_, "); await some first");
      if (mine == 0) held_.erase(credential);
      return why;
    }
    if (total_ + bytes > total_limit_) {
      if (mine == 0) held_.erase(credential);
      return absl::StrCat("the gateway's tool calls already hold ", total_,
                          " bytes of arguments and results (its --max_tool_call_bytes_in_flight_total "
                          "is ", total_limit_, "); try again later");
    }
    mine += bytes;
    total_ += bytes;
    return "";
  }

  void Release(const std::string& credential, size_t bytes) ABSL_LOCKS_EXCLUDED(mu_) {
    codemode::MutexLock lock(&mu_);
    auto it = held_.find(credential);
    if (it == held_.end()) return;
    it->second -= std::min(it->second, bytes);
    total_ -= std::min(total_, bytes);
    if (it->second == 0) held_.erase(it);
  }

  // Bytes held by `credential` (tests, logs).
  size_t held(const std::string& credential) ABSL_LOCKS_EXCLUDED(mu_) {
    codemode::MutexLock lock(&mu_);
    auto it = held_.find(credential);
    return it == held_.end() ? 0 : it->second;
  }
  size_t total() ABSL_LOCKS_EXCLUDED(mu_) {
    codemode::MutexLock lock(&mu_);
    return total_;
  }

 private:
  const size_t per_credential_;
  const size_t total_limit_;
  codemode::Mutex mu_;
  std::map<std::string, size_t> held_ ABSL_GUARDED_BY(mu_);  // credentials holding bytes
  size_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gateway
