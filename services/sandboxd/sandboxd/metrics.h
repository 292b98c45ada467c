// SandboxdMetrics: what sandboxd tells Prometheus (docs/observability.md, the table
// "sandboxd"). One instance per daemon, passed down to whoever sees the event: the
// SessionManager (sessions), its Sessions (executions, tool calls, caps), PodmanRuntime
// (container operations), the gRPC file rpcs (bytes).
//
//   SandboxdMetrics metrics;                       // its own registry
//   metrics.SessionCreated(SandboxdMetrics::Source::kPool, Language::kPython,
//                          absl::Milliseconds(3));
//   MetricsServer::Start(listen, metrics.collectables());
//
// Every label has a fixed set of values, so each series is resolved once here and an
// event costs an atomic add (no lookup, no string). States (sessions active, pool ready and
// target) are read at scrape time from a StateSource. Thread-safe. It must outlive the
// MetricsServer serving its collectables (the gauges call back into it).
//
// SandboxdMetrics(/*counting=*/false) counts nothing (every event returns at once): what
// sandboxd runs without --metrics_listen, like the gateway, and the baseline of
// `sandboxd_bench --metrics=ab`.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "sandbox/v1/sandbox.pb.h"
#include "sandboxd/language.h"
#include "telemetry/metrics.h"

namespace sandboxd {

class SandboxdMetrics {
 public:
  // Where CreateSession's container came from.
  enum class Source { kPool, kCold, kCount };
  // Why a session went away: deleted by its client, expired idle, lost (its container
  // died or broke the protocol), ended to make room for a new session of its owner at a
  // limit (reclaim_idle), detached at daemon shutdown.
  enum class EndReason { kClosed, kIdle, kLost, kLimit, kShutdown, kCount };
  // The podman subcommands PodmanRuntime runs (the op label).
  enum class ContainerOp { kInfo, kImageExists, kImageInspect, kRun, kRm, kInspect, kPs, kCount };
  enum class Direction { kUpload, kDownload, kCount };

  // What the scrape-time gauges read. Each call must be cheap and must not wait on a
  // running execution (a lock held for a few map operations at most).
  class StateSource {
   public:
    virtual size_t sessions_active() = 0;
    // The warm pool of one runtime.
    virtual size_t pool_ready(Language language) = 0;
    virtual size_t pool_target(Language language) = 0;
    // Containers whose removal failed, waiting to be removed again.
    virtual size_t containers_failing_removal() = 0;
    // Containers of ended sessions not removed yet: queued, being removed, or failing.
    virtual size_t containers_awaiting_removal() = 0;

   protected:
    ~StateSource() = default;
  };

  explicit SandboxdMetrics(bool counting = true);
  SandboxdMetrics(const SandboxdMetrics&) = delete;
  SandboxdMetrics& operator=(const SandboxdMetrics&) = delete;

  // The registry (events, build info) and the scrape-time gauges, for MetricsServer.
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables() const {
    return {registry_, gauges_};
  }

  // The gauges read `source` from now on (0 while there is none).
  void SetStateSource(StateSource* source);
  // Stops reading `source` if it is the current one. Returns once no scrape reads it, so
  // its owner may go away.
  void ClearStateSource(StateSource* source);

  // `language`: the session's runtime (the runtime label: python or javascript).
  void SessionCreated(Source source, Language language, absl::Duration took);
  // Whether events are counted (the constructor's `counting`).
  bool counting() const { return counting_; }

  void SessionCreateFailed() {
    if (counting_) create_failures_->Increment();
  }
  void SessionsEnded(EndReason reason, size_t n = 1);
  // A finished execution; `ran` is how long it ran (absl::ZeroDuration and not observed
  // when it never started: cancelled or lost while queued).
  void ExecutionFinished(sandbox::v1::Finished::Status status, bool started, absl::Duration ran);
  // Execute refused before queueing (bad code or timeout, full queue, unknown or lost session).
  void ExecutionRejected() {
    if (counting_) executions_[kRejected]->Increment();
  }
  void QueueWaited(absl::Duration waited);
  void ToolCall(bool ok) {
    if (counting_) (ok ? tool_calls_ok_ : tool_calls_error_)->Increment();
  }
  void OutputDropped(uint64_t bytes);
  // A session's runner frames waited this long for their share of sandboxd's CPU
  // (--runner_cpu_millis).
  void RunnerFramesWaited(absl::Duration waited);
  void DisplaysDropped(uint64_t n);
  void ContainerOpDone(ContainerOp op, bool ok, absl::Duration took);
  void FileBytes(Direction direction, uint64_t bytes);
  // One egress proxy decision: a refused connection, or an allowed one that ended.
  void EgressDecision(bool allowed, uint64_t bytes_up, uint64_t bytes_down);

 private:
  // executions_total's status values, in this order.
  enum { kOk, kError, kTimeout, kCancelled, kCrashed, kRejected, kStatuses };
  // The constructor's parts: each registers its families and resolves every series.
  void RegisterSessions(prometheus::Registry& r);
  void RegisterExecutions(prometheus::Registry& r);
  // Container operations, file transfers and egress.
  void RegisterContainers(prometheus::Registry& r);
  double ReadState(size_t (StateSource::*read)());
  // A pool gauge: one series per runtime.
  codemode::telemetry::ScrapeGauges::Samples ReadPools(size_t (StateSource::*read)(Language));
  static constexpr size_t kLanguages = 2;  // Language::kPython, Language::kJavaScript
  static size_t LanguageIndex(Language language) {
    return language == Language::kJavaScript ? 1 : 0;
  }

  const bool counting_;
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::shared_ptr<codemode::telemetry::ScrapeGauges> gauges_;
  // [source][LanguageIndex]
  std::array<std::array<prometheus::Counter*, kLanguages>, static_cast<size_t>(Source::kCount)>
      created_{};
  std::array<std::array<prometheus::Histogram*, kLanguages>, static_cast<size_t>(Source::kCount)>
      create_duration_{};
  prometheus::Counter* create_failures_ = nullptr;
  std::array<prometheus::Counter*, static_cast<size_t>(EndReason::kCount)> ended_{};
  std::array<prometheus::Counter*, kStatuses> executions_{};
  prometheus::Histogram* execution_duration_ = nullptr;
  prometheus::Histogram* queue_wait_ = nullptr;
  prometheus::Counter* tool_calls_ok_ = nullptr;
  prometheus::Counter* tool_calls_error_ = nullptr;
  prometheus::Counter* output_dropped_ = nullptr;
  prometheus::Counter* runner_frames_waited_ = nullptr;
  prometheus::Counter* displays_dropped_ = nullptr;
  // [op][0] ok, [op][1] error.
  std::array<std::array<prometheus::Counter*, 2>, static_cast<size_t>(ContainerOp::kCount)>
      container_ops_{};
  std::array<prometheus::Histogram*, static_cast<size_t>(ContainerOp::kCount)> container_op_duration_{};
  std::array<prometheus::Counter*, static_cast<size_t>(Direction::kCount)> file_bytes_{};
  prometheus::Counter* egress_allowed_ = nullptr;
  prometheus::Counter* egress_refused_ = nullptr;
  prometheus::Counter* egress_bytes_up_ = nullptr;
  prometheus::Counter* egress_bytes_down_ = nullptr;

  // Held while a scrape reads the source, so SetStateSource(nullptr) waits for it.
  codemode::Mutex source_mu_;
  StateSource* source_ ABSL_GUARDED_BY(source_mu_) = nullptr;
};

}  // namespace sandboxd
