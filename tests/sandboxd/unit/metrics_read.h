// Reading SandboxdMetrics back in tests, through the collectables MetricsServer serves
// (the same families a scrape serializes).
#pragma once

#include <map>
#include <string>

#include "prometheus/metric_family.h"
#include "sandboxd/metrics.h"

namespace sandboxd::testing {

using Labels = std::map<std::string, std::string>;

// The value of series `name{labels}`: a counter's or gauge's value, a histogram's sample
// count. -1 when there is no such series (so a wrong name fails every comparison).
inline double Read(const SandboxdMetrics& metrics, const std::string& name, const Labels& labels = {}) {
  for (const auto& collectable : metrics.collectables()) {
    for (const prometheus::MetricFamily& family : collectable->Collect()) {
      if (family.name != name) continue;
      for (const prometheus::ClientMetric& m : family.metric) {
        Labels have;
        for (const auto& l : m.label) have[l.name] = l.value;
        if (have != labels) continue;
        switch (family.type) {
          case prometheus::MetricType::Counter: return m.counter.value;
          case prometheus::MetricType::Gauge: return m.gauge.value;
          case prometheus::MetricType::Histogram:
            return static_cast<double>(m.histogram.sample_count);
          default: return -1;
        }
      }
    }
  }
  return -1;
}

}  // namespace sandboxd::testing
