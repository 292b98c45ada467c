// Metrics both daemons build on (docs/observability.md).
//
// Everything is a prometheus-cpp metric in one prometheus::Registry per daemon, served by
// MetricsServer (metrics_server.h). Two rules keep a scrape cheap and the series count
// bounded whatever clients and upstreams do:
//   - Label values that come from outside (tool names an upstream lists, server names)
//     pass through a LabelFold: the first N distinct values get their own series, every
//     later one is counted under "_other". No session id, code or argument is ever a label.
//   - What is a state, not an event (sessions active, pool ready, upstream up), is read at
//     scrape time from its owner by a ScrapeGauges callback, so it cannot drift.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "base/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace codemode::telemetry {

// The label value every value past a LabelFold's bound is counted under.
inline constexpr absl::string_view kOtherLabel = "_other";

// Seconds: 1 ms .. 5 min, for runs, tool calls and container operations.
prometheus::Histogram::BucketBoundaries LatencyBuckets();
// Small counts (tool calls per run): 0 .. 1000.
prometheus::Histogram::BucketBoundaries CountBuckets();

// Label values from untrusted sources, bounded. Thread-safe.
class LabelFold {
 public:
  // At most 64 bytes of a value are kept, and bytes outside printable ASCII become '_'
  // (a label value is shown to operators and queried by them, not parsed); a value so
  // changed ends in "~" and 8 hex digits of its hash, so different values stay different.
  static constexpr size_t kMaxValueBytes = 64;

  explicit LabelFold(size_t max_values) : max_values_(max_values) {}

  // `value` itself (cleaned as above) while fewer than max_values distinct values have been
  // seen, or it was among them; kOtherLabel after that.
  std::string operator()(absl::string_view value);
  // Whether `key` (e.g. a label pair joined) is one of the first max_values keys.
  bool Admit(absl::string_view key);
  // `value` clipped and with bytes outside printable ASCII replaced, as above.
  static std::string Clean(absl::string_view value);

  size_t max_values() const { return max_values_; }

 private:
  const size_t max_values_;
  Mutex mu_;
  absl::flat_hash_set<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

// Gauges whose value is read when Prometheus scrapes. Register every gauge before the
// registry is served; each callback must be cheap, must not block on a run, and must stay
// callable until the MetricsServer serving it is gone.
class ScrapeGauges : public prometheus::Collectable {
 public:
  using Samples = std::vector<std::pair<std::string, double>>;  // label value -> value

  // One unlabelled gauge.
  void Add(std::string name, std::string help, std::function<double()> read);
  // One gauge family with one label; `read` returns its series (a bounded set).
  void AddLabelled(std::string name, std::string help, std::string label,
                   std::function<Samples()> read);
  // A counter kept by its owner (it only grows), read like AddLabelled.
  void AddLabelledCounter(std::string name, std::string help, std::string label,
                          std::function<Samples()> read);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Family {
    std::string name, help, label;
    std::function<Samples()> read;
    bool counter = false;
  };
  std::vector<Family> families_;  // written before serving only
};

// codemode_build_info{component, version} 1.
void AddBuildInfo(prometheus::Registry& registry, const std::string& component,
                  const std::string& version);

}  // namespace codemode::telemetry
