// metrics_bench: what observing the gateway costs without a daemon (issue 25's targets:
// a scrape within 10 ms with 1,000 upstream tools; counting within 2% of a run_python's
// p50, which gateway_bench measures end to end with --only metrics). Fills a GatewayMetrics
// as 1,000 tools of 10 upstreams would (each tool called with two outcomes, each server's
// latency histogram), then times the counting calls one run and one tool call make, and
// GETs of /metrics from the real endpoint (prometheus-cpp's Exposer) over loopback.
// Prints a markdown table of medians.
//
//   build/bench/metrics_bench
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "metrics/gateway_metrics.h"
#include "sandboxd/metrics.h"
#include "telemetry/metrics_server.h"

namespace {

using Clock = std::chrono::steady_clock;

// Median of `rounds` timings of `ops` calls of `op`, per call, in microseconds.
double MedianMicros(int rounds, int ops, const std::function<void()>& op) {
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < ops; ++i) op();
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / ops);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// One GET /metrics over a new loopback connection; the body's size.
size_t Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return 0;
  }
  const char request[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  (void)!write(fd, request, sizeof request - 1);
  size_t bytes = 0;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) bytes += n;
  close(fd);
  return bytes;
}

}  // namespace

int main() {
  gateway::GatewayMetrics metrics(2000);
  for (int s = 0; s < 10; ++s) {
    for (int t = 0; t < 100; ++t) {
      const std::string server = "server_" + std::to_string(s), tool = "tool_" + std::to_string(t);
      metrics.ToolCallFinished(server, tool, gateway::ToolOutcome::kOk, absl::Milliseconds(3), true);
      metrics.ToolCallFinished(server, tool, gateway::ToolOutcome::kToolError, absl::Milliseconds(3), true);
    }
  }
  int i = 0;
  const double tool_call = MedianMicros(5, 20000, [&] {
    metrics.ToolCallFinished("server_3", "tool_" + std::to_string(i++ % 100), gateway::ToolOutcome::kOk,
                             absl::Milliseconds(2), true);
  });
  const double run = MedianMicros(5, 20000, [&] {
    metrics.RunFinished("run_python", gateway::RunOutcome::kOk, absl::Milliseconds(2), 3);
  });
  // What sandboxd counts for one execution: its queue wait, its end, two tool calls.
  sandboxd::SandboxdMetrics sandboxd_metrics;
  const double execution = MedianMicros(5, 20000, [&] {
    sandboxd_metrics.QueueWaited(absl::Microseconds(50));
    sandboxd_metrics.ExecutionFinished(sandbox::v1::Finished::OK, true, absl::Milliseconds(1));
    sandboxd_metrics.ToolCall(true);
    sandboxd_metrics.ToolCall(true);
  });
  auto server = codemode::telemetry::MetricsServer::Start(
      "127.0.0.1:0", {metrics.registry(), metrics.gauges_collectable()});
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  size_t body = 0;
  std::vector<double> scrapes;
  for (int r = 0; r < 50; ++r) {
    const auto start = Clock::now();
    body = Scrape((*server)->port());
    scrapes.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(scrapes.begin(), scrapes.end());
  std::printf("| what | median | target |\n|---|---|---|\n");
  std::printf("| count one tool call (server, tool, outcome, latency) | %.2f us | within 2%% of a run's p50 |\n",
              tool_call);
  std::printf("| count one run (outcome, duration, calls) | %.2f us | within 2%% of a run's p50 |\n", run);
  std::printf("| sandboxd: count one execution (queue wait, end, 2 tool calls) | %.2f us | within 5%% of executions/s |\n",
              execution);
  std::printf("| GET /metrics, 1,000 tools of 10 servers (%zu KiB) | %.2f ms (p90 %.2f ms) | 10 ms |\n",
              body / 1024, scrapes[scrapes.size() / 2], scrapes[scrapes.size() * 9 / 10]);
  (*server)->BeginStop();
  return 0;
}
