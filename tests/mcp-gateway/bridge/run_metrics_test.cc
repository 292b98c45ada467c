// What RunPythonTool counts for Prometheus (metrics/gateway_metrics.h): runs by outcome,
// tool calls by server, tool and outcome, calls per run, and the bound on tool labels
// whatever names sandboxed code makes up.
#include <map>
#include <string>

#include "bridge/run_python.h"
#include "bridge_fakes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace gateway {
namespace {

using nlohmann::json;
using sandbox::v1::Finished;
using testing::CallsNamedByCode;
using testing::FakeSandboxes;
using testing::FakeUpstreams;
using testing::Server;
using testing::ToolCallOf;

// name{label="value",...} -> value of every counter and gauge, and <histogram>_count.
std::map<std::string, double> Samples(const GatewayMetrics& metrics) {
  std::map<std::string, double> out;
  for (const prometheus::MetricFamily& f : metrics.registry()->Collect()) {
    for (const prometheus::ClientMetric& m : f.metric) {
      std::string key = f.name;
      if (!m.label.empty()) {
        key += "{";
        for (size_t i = 0; i < m.label.size(); ++i) {
          key += (i ? "," : "") + m.label[i].name + "=\"" + m.label[i].value + "\"";
        }
        key += "}";
      }
      if (f.type == prometheus::MetricType::Histogram) {
        out[key + "_count"] = static_cast<double>(m.histogram.sample_count);
      } else {
        out[key] = f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
      }
    }
  }
  return out;
}

class RunMetricsTest : public ::testing::Test {
 protected:
  RunMetricsTest() {
    upstreams_.SetServers({Server("github", {"search", "delete_repo"}), Server("memory", {"read"})});
  }

  absl::StatusOr<json> Call(const json& args) {
    ToolCallContext ctx;
    ctx.session_key = "mcp-1";
    ctx.credential = "token 0";
    ctx.cancel = std::make_shared<codemode::CancelToken>();
    return tool_.CallTool("run_python", args, ctx);
  }
  static RunPythonOptions Options(const std::shared_ptr<GatewayMetrics>& metrics) {
    RunPythonOptions o;
    o.metrics = metrics;
    return o;
  }

  std::shared_ptr<GatewayMetrics> metrics_ = std::make_shared<GatewayMetrics>(3);
  FakeSandboxes sandboxes_;
  FakeUpstreams upstreams_;
  RunPythonTool tool_{&sandboxes_, &upstreams_, Options(metrics_)};
};

TEST_F(RunMetricsTest, RunsAndTheirToolCallsAreCountedByOutcome) {
  upstreams_.SetAnswer([](const FakeUpstreams::Call& c) -> absl::StatusOr<json> {
    if (c.tool == "read") return json{{"content", json::array()}, {"isError", true}};
    if (c.arguments.contains("slow")) return absl::DeadlineExceededError("call_timeout");
    return json{{"content", json::array()}};
  });
  sandboxes_.SetScript(CallsNamedByCode("{}"));
  ASSERT_TRUE(Call({{"code", "github.search,memory.read,github.search"}}).ok());
  sandboxes_.SetScript(CallsNamedByCode(R"({"slow": 1})"));
  ASSERT_TRUE(Call({{"code", "github.search"}}).ok());
  // Refused before any upstream: a server outside the run's list.
  sandboxes_.SetScript(CallsNamedByCode("{}"));
  ASSERT_TRUE(Call({{"code", "memory.read"}, {"servers", {"github"}}}).ok());
  // A run whose code raised, one that timed out, and arguments refused before anything ran.
  sandboxes_.SetScript([](const FakeSandboxes::Execution& e, const ExecuteHandlers&,
                          std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
    Finished f;
    f.set_status(e.code == "raise" ? Finished::ERROR : Finished::TIMEOUT);
    return f;
  });
  ASSERT_TRUE(Call({{"code", "raise"}}).ok());
  ASSERT_TRUE(Call({{"code", "while True: pass"}}).ok());
  EXPECT_FALSE(Call({{"code", ""}}).ok());

  std::map<std::string, double> s = Samples(*metrics_);
  EXPECT_EQ(s["codemode_gateway_runs_total{outcome=\"ok\"}"], 3);
  EXPECT_EQ(s["codemode_gateway_runs_total{outcome=\"error\"}"], 1);
  EXPECT_EQ(s["codemode_gateway_runs_total{outcome=\"timeout\"}"], 1);
  EXPECT_EQ(s["codemode_gateway_runs_total{outcome=\"refused\"}"], 1);
  EXPECT_EQ(s["codemode_gateway_run_duration_seconds_count"], 6);
  EXPECT_EQ(s["codemode_gateway_tool_calls_per_run_count"], 6);
  EXPECT_EQ(s["codemode_gateway_tool_calls_total{outcome=\"ok\",server=\"github\",tool=\"search\"}"], 2);
  EXPECT_EQ(s["codemode_gateway_tool_calls_total{outcome=\"timeout\",server=\"github\",tool=\"search\"}"], 1);
  EXPECT_EQ(s["codemode_gateway_tool_calls_total{outcome=\"tool_error\",server=\"memory\",tool=\"read\"}"], 1);
  EXPECT_EQ(s["codemode_gateway_tool_calls_total{outcome=\"refused\",server=\"memory\",tool=\"read\"}"], 1);
  // Latency is of calls that reached an upstream: 3 to github, 1 to memory.
  EXPECT_EQ(s["codemode_gateway_tool_call_duration_seconds{server=\"github\"}_count"], 3);
  EXPECT_EQ(s["codemode_gateway_tool_call_duration_seconds{server=\"memory\"}_count"], 1);
}

TEST_F(RunMetricsTest, ToolNamesMadeUpBySandboxedCodeStayWithinTheBound) {
  // 10,000 distinct names, as hostile code (or an upstream listing 10,000 tools) could make.
  sandboxes_.SetScript([](const FakeSandboxes::Execution&, const ExecuteHandlers& h,
                          std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
    for (int i = 0; i < 10000; ++i) {
      h.on_tool_call(ToolCallOf("github", "made_up_" + std::to_string(i), "{}"), {});
    }
    Finished f;
    f.set_status(Finished::OK);
    return f;
  });
  ASSERT_TRUE(Call({{"code", "..."}}).ok());
  size_t series = 0;
  double calls = 0;
  for (const auto& [key, value] : Samples(*metrics_)) {
    if (key.rfind("codemode_gateway_tool_calls_total{", 0) == 0) {
      ++series;
      calls += value;
    }
  }
  // Bound 3: three pairs of their own and _other, each with one outcome here.
  EXPECT_EQ(series, 4u);
  EXPECT_EQ(calls, 10000);
  EXPECT_EQ(Samples(*metrics_)["codemode_gateway_tool_calls_total{outcome=\"ok\",server=\"_other\",tool=\"_other\"}"],
            10000 - 3);
}

TEST_F(RunMetricsTest, ExpositionIsValidTextFormat) {
  // Label values are cleaned: quotes, newlines and bytes past ASCII cannot break a line.
  metrics_->ToolCallFinished("gi\"t\nhub", "t\xe2\x80\xae", ToolOutcome::kOk, absl::Milliseconds(3), true);
  const std::string text = prometheus::TextSerializer().Serialize(metrics_->registry()->Collect());
  EXPECT_THAT(text, ::testing::ContainsRegex(
                        "codemode_gateway_tool_calls_total\\{outcome=\"ok\",server=\"gi\\\\\"t_hub~[0-9a-f]{8}\",tool=\"t___~[0-9a-f]{8}\"\\} 1"));
}

}  // namespace
}  // namespace gateway
