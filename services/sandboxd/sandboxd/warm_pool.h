// WarmPool: containers started ahead of time, so CreateSession takes one in milliseconds
// instead of waiting for podman. Background threads keep `target` sandboxes ready: while
// the factory serves, up to PoolOptions::refills starts are under way at once (a start
// keeps about 0.6 of a core busy for its wall time, so two overlap and the pool is full
// again sooner after a burst); while it does not, one thread alone retries.
//
// Demand raises the target up to PoolOptions::max: a Take() that finds the pool empty
// raises it to the number of Take()s since the pool was last full (at least by one), and
// so does every Take() after it until the pool is full again (those a refill serves), so
// a workload whose bursts outrun the pool finds a whole burst ready after the first one.
// After PoolOptions::shrink_after without such a miss the target is the configured one
// again, and what is over it is removed.
//
//   WarmPool pool(&factory, /*target=*/2, {default_limits, default_isolation});
//   pool.Start();
//   if (std::optional<Sandbox> sb = pool.Take()) ...   // a live one, or nothing
//   pool.Stop();                                        // removes what it holds
//
// While containers cannot start (the factory is not serving) that thread keeps trying, a
// probe container at a time when the pool is full, backing off from 1 s to 15 s, so the
// daemon finds out by itself when they work again. Tell it with SetServing() when the
// factory's readiness changed. Of several pools on one factory only one should probe
// (PoolOptions::probes); the others still back off while their starts fail.
//
// A pool may depend on something besides the factory (PoolOptions::available: the
// JavaScript pool needs a JavaScript runner and an image that offers nodejs). While that
// says no, the pool starts nothing, holds nothing, logs the reason once (again only when it
// changes) and asks again every PoolOptions::recheck. Lock order: the pool's lock, then the
// factory's. Safe for concurrent use.
//
// WarmPools: the daemon's pools, one per runtime (language.h), each of containers of the
// default config in that runtime: Python (--pool_size) and JavaScript (--js_pool_size).
// A sandbox of the default limits, isolation and image is taken from the pool of its
// runtime; any other config is never pooled. No pool hands out another runtime's
// containers. The Python pool probes for both (it runs even with a target of 0, as a lone
// pool always did); the JavaScript pool runs only with a target, and only while
// `js_available` says yes.
//
//   WarmPools pools(&factory, {limits, isolation}, {.python = 2, .javascript = 1},
//                   [&] { return CheckJavaScript(); });
//   pools.Start();
//   std::optional<Sandbox> sb = pools.Take(config);  // nullopt: not pooled, or none ready
//   pools.Stop();
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "absl/status/status.h"
#include "sandboxd/language.h"
#include "sandboxd/limits.h"
#include "sandboxd/sandbox_factory.h"

namespace sandboxd {

struct PoolOptions {
  std::string name = "warm pool";  // its thread's name and how its log lines begin
  // Whether it starts probe containers while the factory is not serving and it is full.
  bool probes = true;
  // Whether the pool may start containers now; not OK: why it may not. Called on the
  // pool's thread without its lock. Empty: always.
  std::function<absl::Status()> available;
  absl::Duration recheck = absl::Seconds(30);  // how often `available` is asked again
  // Starts under way at once while the factory serves (at least 1).
  size_t refills = 1;
  // How far misses may raise the target; at most the configured target: it never grows.
  size_t max = 0;
  // How long the target stays raised after the last miss.
  absl::Duration shrink_after = absl::Minutes(5);
};

class WarmPool {
 public:
  WarmPool(SandboxFactory* factory, size_t target, SandboxConfig config,
           PoolOptions options = {});
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
  // What the pool fills to now: the configured target, or more after misses (PoolOptions::max).
  size_t target();
  const SandboxConfig& config() const { return config_; }
  // Sandboxes Take() has handed out since the start.
  uint64_t taken_total();
  // Why the pool holds nothing although it has a target (PoolOptions::available said no
  // the last time it was asked); empty otherwise.
  std::string unavailable();

 private:
  // Refill thread `index`: thread 0 also probes and retries while the factory does not
  // serve; the others start only while it does.
  void Loop(size_t index);
  // Asks PoolOptions::available; false (after logging a new reason and waiting for the
  // recheck or Stop) when the pool may not start containers now.
  bool Available();
  // Thread 0's wait for work; at shrink_after past the last miss, the target goes back to
  // the configured one and what is over it is removed.
  void AwaitWork(size_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SandboxFactory* const factory_;
  const size_t target_;
  const SandboxConfig config_;
  const PoolOptions options_;
  codemode::Mutex mu_;
  std::deque<Sandbox> ready_ ABSL_GUARDED_BY(mu_);
  size_t want_ ABSL_GUARDED_BY(mu_);  // the target now: target_ raised by misses
  codemode::SteadyTime missed_at_ ABSL_GUARDED_BY(mu_) = codemode::SteadyTime::min();
  size_t demand_ ABSL_GUARDED_BY(mu_) = 0;  // Take()s since the pool was last full
  bool missed_ ABSL_GUARDED_BY(mu_) = false;  // a Take() found it empty since then
  size_t starting_ ABSL_GUARDED_BY(mu_) = 0;  // pool starts under way
  // A failure was logged as a warning since the last start that worked.
  bool said_ ABSL_GUARDED_BY(mu_) = false;
  // What thread 0 last heard from PoolOptions::available: the others start only after a yes.
  bool available_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t taken_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::string unavailable_ ABSL_GUARDED_BY(mu_);
  bool serving_ ABSL_GUARDED_BY(mu_) = false;  // no container has started yet
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

struct PoolTargets {
  size_t python = 2;
  size_t javascript = 1;
  size_t refills = 2;  // each pool's PoolOptions::refills
  size_t python_max = 0;  // each pool's PoolOptions::max
  size_t javascript_max = 0;
  absl::Duration shrink_after = absl::Minutes(5);
};

class WarmPools {
 public:
  // `defaults`: the default config (its language is ignored: each pool has its own).
  // `js_available`: whether the JavaScript pool may start containers, asked again every
  // `js_recheck` while it may not.
  WarmPools(SandboxFactory* factory, SandboxConfig defaults, PoolTargets targets,
            std::function<absl::Status()> js_available, absl::Duration js_recheck = absl::Seconds(30));
  WarmPools(const WarmPools&) = delete;
  WarmPools& operator=(const WarmPools&) = delete;

  // The pool a sandbox of `config` is taken from: its runtime's when `config` is the
  // default config in that runtime; nullopt when it is not pooled.
  static std::optional<Language> PoolOf(const SandboxConfig& config,
                                        const SandboxConfig& defaults);

  void Start();
  void Stop();  // both pools' containers go. Idempotent.
  void SetServing(bool serving);
  // A ready sandbox of the pool of `config` (PoolOf); nullopt when none, or not pooled.
  std::optional<Sandbox> Take(const SandboxConfig& config);

  WarmPool& pool(Language language) { return *pools_[Index(language)]; }
  // What the pool wants: its target, or 0 while it is unavailable (it will hold nothing).
  size_t target(Language language);

 private:
  static size_t Index(Language language) { return language == Language::kJavaScript ? 1 : 0; }
  static SandboxConfig ConfigOf(SandboxConfig defaults, Language language);

  const SandboxConfig defaults_;
  std::array<std::unique_ptr<WarmPool>, 2> pools_;  // by Index
};

}  // namespace sandboxd
