// ResourceWatch: notifications/resources/list_changed for subscriptions/listen streams
// (stateless, protocol 2026-07-28), whose resource list is everything their credential's sandboxes
// hold (owned_resources.h), wherever it changed: a run through this gateway, through
// another replica, a sandbox that expired.
//
// A credential's list is looked at (its Fingerprint) when a stream of it subscribes, when
// a run of that credential ends here (Poke), and every `interval` while any stream of it
// listens; a stream is told when a look differs from the one before. A stream is ready,
// and gets its acknowledgement, after the first look: what changes after the
// acknowledgement is announced. Looks at credentials nobody listens for cost nothing.
// Each credential is looked at on its own thread (at most kMaxLooks at once, one per
// credential), and a look is cancelled after `look_timeout`: a sandbox answers its own
// listings, and one that stalls them delays only its own credential's streams (with one
// thread for all, it would delay everyone's by the look timeout each).
//
//   ResourceWatch watch([&](auto& credential, auto& cancel) { return owned.Fingerprint(credential, cancel); },
//                       absl::Seconds(10), absl::Seconds(5));
//   std::shared_ptr<void> sub = watch.Subscribe(credential, send_ack, send_list_changed);
//   watch.Poke(credential);  // a run of the credential ended
//   sub.reset();             // the stream ended
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/deadline.h"
#include "base/mutex.h"
#include "base/thread_pool.h"

namespace gateway {

class ResourceWatch {
 public:
  using FingerprintFn = std::function<std::optional<size_t>(
      const std::string& credential, const std::shared_ptr<codemode::CancelToken>& cancel)>;

  // `interval` 0: no periodic looks (only subscriptions and pokes). A look is cancelled
  // (and counts as no change) after `look_timeout`: a sandbox answers its own listings and
  // may stall them, and the one thread looks for every credential.
  ResourceWatch(FingerprintFn fingerprint, absl::Duration interval, absl::Duration look_timeout);
  ~ResourceWatch();  // cancels the looks under way and joins every thread

  // Looks under way at once, each on its own thread.
  static constexpr int kMaxLooks = 8;
  ResourceWatch(const ResourceWatch&) = delete;
  ResourceWatch& operator=(const ResourceWatch&) = delete;

  // `ready` once after the first look, then `changed` after each look that differs; both on
  // the watch's thread, without its lock, so they must be quick and must not call back into
  // the watch. Dropping the returned subscription ends it; a call already under way may
  // still finish after that, so neither may refer to what the subscriber destroys.
  std::shared_ptr<void> Subscribe(const std::string& credential, std::function<void()> ready,
                                  std::function<void()> changed);

  // The credential's list may have changed: look now (when anyone listens).
  void Poke(const std::string& credential);

 private:
  struct Subscriber {
    std::string credential;
    std::function<void()> ready, changed;
    bool is_ready = false;
  };
  struct Credential {
    std::optional<size_t> last;  // the last complete look
    bool poked = false;          // look (again) as soon as it may
    bool looking = false;        // a look is under way
  };
  // A look under way, for the timer.
  struct Running {
    std::shared_ptr<codemode::CancelToken> cancel;
    codemode::SteadyTime deadline;
  };
  void Unsubscribe(uint64_t id);
  // Starts the looks that are due, on looks_.
  void Loop();
  // Cancels the looks that run past their deadline.
  void Timer();
  // One look at `credential`, on its own thread; calls its subscribers as the look says.
  void Look(const std::string& credential, std::shared_ptr<codemode::CancelToken> cancel);
  bool Due() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FingerprintFn fingerprint_;
  const absl::Duration interval_;
  const absl::Duration look_timeout_;
  codemode::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, Running> running_ ABSL_GUARDED_BY(mu_);  // by look id
  uint64_t next_look_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Subscriber> subscribers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Credential> credentials_ ABSL_GUARDED_BY(mu_);  // those with subscribers
  std::thread thread_, timer_;  // started by the first Subscribe
  // The looks' threads (at most kMaxLooks, as running_ admits them), parked a while for
  // the next round; the last member, stopped by the destructor before the others go.
  codemode::ThreadPool looks_;
};

}  // namespace gateway
