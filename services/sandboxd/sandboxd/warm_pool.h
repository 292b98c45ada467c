// WarmPool: containers started ahead of time, so CreateSession takes one in milliseconds
// instead of waiting for podman. A background thread keeps `target` sandboxes ready.
//
//   WarmPool pool(&factory, /*target=*/2, {default_limits, default_isolation});
//   pool.Start();
//   if (std::optional<Sandbox> sb = pool.Take()) ...   // a live one, or nothing
//   pool.Stop();                                        // removes what it holds
//
// While containers cannot start (the factory is not serving) the thread keeps trying, a
// probe container at a time when the pool is full, backing off from 1 s to 15 s, so the
// daemon finds out by itself when they work again. Tell it with SetServing() when the
// factory's readiness changed. Lock order: the pool's lock, then the factory's. Safe for
// concurrent use.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "sandboxd/limits.h"
#include "sandboxd/sandbox_factory.h"

namespace sandboxd {

class WarmPool {
 public:
  WarmPool(SandboxFactory* factory, size_t target, SandboxConfig config);
  ~WarmPool() { Stop(); }
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  void Start();
  // Stops the thread and removes the pool's containers. Idempotent.
  void Stop();
  // A ready sandbox of the pool's config; dead ones (a pooled container may die while
  // it waits) are discarded on the way. nullopt when none is ready.
  std::optional<Sandbox> Take();
  // Whether the factory starts containers (its readiness changed): while it does not,
  // the thread probes even when the pool is full.
  void SetServing(bool serving);

  size_t ready();
  size_t target() const { return target_; }

 private:
  void Loop();

  SandboxFactory* const factory_;
  const size_t target_;
  const SandboxConfig config_;
  codemode::Mutex mu_;
  std::deque<Sandbox> ready_ ABSL_GUARDED_BY(mu_);
  bool serving_ ABSL_GUARDED_BY(mu_) = false;  // no container has started yet
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sandboxd
