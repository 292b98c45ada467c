// What RunCodeTool counts for Prometheus (metrics/gateway_metrics.h): runs by outcome,
// tool calls by server, tool and outcome, calls per run, and the bound on tool labels
// whatever names sandboxed code makes up; and what its audit lines say (audit/audit_log.h).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "adapter/run_code.h"
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
  ~RunMetricsTest() override { std::filesystem::remove_all(dir_); }

  absl::StatusOr<json> Call(const json& args) {
    ToolCallContext ctx;
    ctx.mcp_session = "mcp-1";
    ctx.credential = "token 0";
    ctx.cancel = std::make_shared<codemode::CancelToken>();
    return tool_.CallTool("run_python", args, ctx);
  }
  RunCodeOptions Options() {
    RunCodeOptions o;
    o.metrics = metrics_;
    o.audit = audit_;
    return o;
  }
  std::vector<std::string> AuditLines() {
    audit_->Flush();
    std::ifstream in(dir_ + "/audit.jsonl");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  static std::string MakeDir() {
    char tmpl[] = "/tmp/run-metrics-test-XXXXXX";
    return mkdtemp(tmpl);
  }

  std::string dir_ = MakeDir();
  std::shared_ptr<GatewayMetrics> metrics_ = std::make_shared<GatewayMetrics>(3);
  std::shared_ptr<AuditLog> audit_ = *AuditLog::Open({dir_ + "/audit.jsonl"});
  FakeSandboxes sandboxes_;
  FakeUpstreams upstreams_;
  RunCodeTool tool_{&sandboxes_, &upstreams_, Options()};
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
  // Refused before any upstream: a server outside the run's list, which ends the run.
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
  EXPECT_EQ(s["codemode_gateway_runs_total{outcome=\"ok\",tool=\"run_python\"}"], 2);
  EXPECT_EQ(s["codemode_gateway_runs_total{outcome=\"failed\",tool=\"run_python\"}"], 1);
  EXPECT_EQ(s["codemode_gateway_runs_total{outcome=\"error\",tool=\"run_python\"}"], 1);
  EXPECT_EQ(s["codemode_gateway_runs_total{outcome=\"timeout\",tool=\"run_python\"}"], 1);
  EXPECT_EQ(s["codemode_gateway_runs_total{outcome=\"refused\",tool=\"run_python\"}"], 1);
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
  // 10,000 distinct names, as a hostile peer at sandboxd's address could send (each
  // refused: none is in the run's catalog).
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
  // Bound 3: three pairs of their own and _other, each with one outcome here (refused: no
  // such tool is in the run's catalog).
  EXPECT_EQ(series, 4u);
  EXPECT_EQ(calls, 10000);
  EXPECT_EQ(
      Samples(*metrics_)["codemode_gateway_tool_calls_total{outcome=\"refused\",server=\"_other\",tool=\"_other\"}"],
      10000 - 3);
}

TEST_F(RunMetricsTest, ExpositionIsValidTextFormat) {
  // Label values are cleaned: quotes, newlines and bytes past ASCII cannot break a line.
  metrics_->ToolCallFinished("gi\"t\nhub", "t\xe2\x80\xae", ToolOutcome::kOk, absl::Milliseconds(3), true);
  const std::string text = prometheus::TextSerializer().Serialize(metrics_->registry()->Collect());
  EXPECT_THAT(text, ::testing::ContainsRegex(
                        "codemode_gateway_tool_calls_total\\{outcome=\"ok\",server=\"gi\\\\\"t_hub~[0-9a-f]{8}\",tool=\"t___~[0-9a-f]{8}\"\\} 1"));
}

// Calls the gateway refuses before routing them (a cap of the run, the credential or the
// gateway: ToolCallDispatcher) reach the code as ToolErrors, and count in the run's
// tool_calls_total, the metrics' outcome and the audit log like any other call.
TEST_F(RunMetricsTest, CallsRefusedByACapCountInTheRunTheMetricsAndTheAudit) {
  upstreams_.SetAnswer([](const FakeUpstreams::Call&) -> absl::StatusOr<json> {
    return json{{"content", json::array()}};
  });
  // What SandboxClient's dispatcher does past a cap: the handler hears of it, nothing is routed.
  sandboxes_.SetScript([](const FakeSandboxes::Execution&, const ExecuteHandlers& h,
                          std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
    (void)h.on_tool_call(ToolCallOf("github", "search", "{}"), {});
    h.on_tool_call_refused(ToolCallOf("github", "search", "{}"), "more than 1 tool calls in flight");
    Finished f;
    f.set_status(Finished::OK);
    return f;
  });
  absl::StatusOr<json> r = Call({{"code", "x"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["structuredContent"]["tool_calls_total"], 2) << r->dump();
  EXPECT_EQ(upstreams_.calls().size(), 1u);
  std::map<std::string, double> s = Samples(*metrics_);
  EXPECT_EQ(s["codemode_gateway_tool_calls_total{outcome=\"refused\",server=\"github\",tool=\"search\"}"], 1);
  EXPECT_EQ(s["codemode_gateway_tool_calls_total{outcome=\"ok\",server=\"github\",tool=\"search\"}"], 1);
  size_t refused = 0;
  for (const std::string& line : AuditLines()) {
    const json j = json::parse(line);
    if (j["kind"] == "tool_call" && j["outcome"] == "refused") {
      ++refused;
      EXPECT_FALSE(j["trace_id"].get<std::string>().empty()) << line;
    }
  }
  EXPECT_EQ(refused, 1u);
}

// A run sandboxd refuses (its catalog) has a `why` in its line, bounded and escaped.
TEST_F(RunMetricsTest, ARefusedRunSaysWhyBoundedAndEscaped) {
  EXPECT_FALSE(Call({{"code", ""}}).ok());  // refused as its arguments are read
  sandboxes_.create_error = absl::InvalidArgumentError(
      "catalog has more than 10000 tools\n{\"kind\":\"forged\"} \xe2\x80\xae" + std::string(500, 'x'));
  (void)Call({{"code", "print(1)"}});
  sandboxes_.create_error = absl::OkStatus();
  ASSERT_TRUE(Call({{"code", "print(1)"}}).ok());
  const std::vector<std::string> lines = AuditLines();
  ASSERT_EQ(lines.size(), 3u) << "one line per run, whatever the reason holds";
  const json arguments = json::parse(lines[0]), catalog = json::parse(lines[1]), ok = json::parse(lines[2]);
  EXPECT_EQ(arguments["outcome"], "refused");
  EXPECT_FALSE(arguments["why"].get<std::string>().empty());
  EXPECT_EQ(catalog["outcome"], "refused");
  ASSERT_TRUE(catalog.contains("why")) << lines[1];
  const std::string why = catalog["why"];
  EXPECT_THAT(why, ::testing::HasSubstr("catalog has more than 10000 tools"));
  EXPECT_LE(why.size(), 200u);
  EXPECT_THAT(why, ::testing::EndsWith("..."));
  EXPECT_THAT(lines[1], ::testing::Not(::testing::HasSubstr("\n"))) << "the newline is escaped";
  EXPECT_EQ(ok["outcome"], "ok");
  EXPECT_FALSE(ok.contains("why"));
}

}  // namespace
}  // namespace gateway
