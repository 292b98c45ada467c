// CancelToken: a one-shot cancellation signal shared between whoever can cancel (an MCP
// notifications/cancelled, a session ending) and whoever does the work (an upstream
// call, a sandbox execution).
//
//   auto token = std::make_shared<CancelToken>();
//   token->OnCancel([&] { upstream.SendCancelled(id); });   // runs at once if already cancelled
//   ...
//   token->Cancel("client cancelled");
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace codemode {

// Safe for concurrent use. Callbacks run once, on the thread that calls Cancel() (or on
// the registering thread when already cancelled), without the internal lock held.
class CancelToken {
 public:
  void Cancel(const std::string& reason = "cancelled") {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return;
      cancelled_ = true;
      reason_ = reason;
      callbacks.swap(callbacks_);
    }
    for (auto& cb : callbacks) cb();
  }
  bool cancelled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }
  void OnCancel(std::function<void()> cb) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!cancelled_) {
        callbacks_.push_back(std::move(cb));
        return;
      }
    }
    cb();
  }

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::string reason_;
  std::vector<std::function<void()>> callbacks_;
};

}  // namespace codemode
