#include "telemetry/metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"

namespace codemode::telemetry {

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

prometheus::Histogram::BucketBoundaries CountBuckets() {
  return {0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
}

std::string LabelFold::Clean(absl::string_view value) {
  std::string clean(value.substr(0, kMaxValueBytes));
  bool changed = clean.size() < value.size();
  for (char& c : clean) {
    if (c < 0x21 || c > 0x7e) {
      c = '_';
      changed = true;
    }
  }
  if (!changed) return clean;
  // Clipped or rewritten: names that differ stay apart (two 70-byte tool names, a read and
  // a delete, must not share one series). FNV-1a of the whole value.
  uint32_t hash = 2166136261u;
  for (unsigned char c : value) hash = (hash ^ c) * 16777619u;
  clean.resize(std::min(clean.size(), kMaxValueBytes - 9));
  return absl::StrCat(clean, "~", absl::Hex(hash, absl::kZeroPad8));
}

bool LabelFold::Admit(absl::string_view key) {
  MutexLock lock(&mu_);
  if (seen_.contains(key)) return true;
  if (seen_.size() >= max_values_) return false;
  seen_.emplace(key);
  return true;
}

std::string LabelFold::operator()(absl::string_view value) {
  std::string clean = Clean(value);
  if (clean == kOtherLabel || Admit(clean)) return clean;
  return std::string(kOtherLabel);
}

void ScrapeGauges::Add(std::string name, std::string help, std::function<double()> read) {
  families_.push_back({std::move(name), std::move(help), "",
                       [read = std::move(read)] { return Samples{{"", read()}}; }});
}

void ScrapeGauges::AddLabelled(std::string name, std::string help, std::string label,
                               std::function<Samples()> read) {
  families_.push_back({std::move(name), std::move(help), std::move(label), std::move(read)});
}

void ScrapeGauges::AddLabelledCounter(std::string name, std::string help, std::string label,
                                      std::function<Samples()> read) {
  families_.push_back(
      {std::move(name), std::move(help), std::move(label), std::move(read), /*counter=*/true});
}

std::vector<prometheus::MetricFamily> ScrapeGauges::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  out.reserve(families_.size());
  for (const Family& family : families_) {
    prometheus::MetricFamily& f = out.emplace_back();
    f.name = family.name;
    f.help = family.help;
    f.type = family.counter ? prometheus::MetricType::Counter : prometheus::MetricType::Gauge;
    for (auto& [label, value] : family.read()) {
      prometheus::ClientMetric& m = f.metric.emplace_back();
      if (!family.label.empty()) m.label.push_back({family.label, std::move(label)});
      (family.counter ? m.counter.value : m.gauge.value) = value;
    }
  }
  return out;
}

void AddBuildInfo(prometheus::Registry& registry, const std::string& component,
                  const std::string& version) {
  prometheus::BuildGauge()
      .Name("codemode_build_info")
      .Help("Always 1: the component and version of this daemon.")
      .Register(registry)
      .Add({{"component", component}, {"version", version}})
      .Set(1);
}

}  // namespace codemode::telemetry
