// The gateway's upstream MCP client as a command for the official conformance suite
// (@modelcontextprotocol/conformance, `client` mode): it is started with the scenario
// server's URL as its last argument, connects the way mcp-gateway connects to a
// Streamable HTTP upstream, lists the tools and calls each one. Exit status 0 when every
// call returned a result.
#include <cstdio>

#include "upstream/manager.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <server-url>\n", argv[0]);
    return 2;
  }
  spdlog::set_default_logger(spdlog::stderr_logger_mt("conformance-client"));
  spdlog::set_level(spdlog::level::debug);
  gateway::UpstreamConfig config;
  config.name = "conformance";
  config.type = gateway::UpstreamConfig::Type::kStreamableHttp;
  config.url = argv[argc - 1];
  gateway::UpstreamOptions options;
  options.call_timeout = absl::Seconds(20);
  gateway::UpstreamManager manager({config}, options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(20));
  const gateway::UpstreamStatus status = manager.Snapshot().at(0);
  if (!status.connected) {
    std::fprintf(stderr, "not connected: %s\n", status.error.c_str());
    return 1;
  }
  int failed = 0;
  for (const auto& tool : status.tools) {
    absl::StatusOr<nlohmann::json> r = manager.CallTool("conformance", tool.name, nlohmann::json::object(), {});
    std::fprintf(stderr, "%s: %s\n", tool.name.c_str(),
                 r.ok() ? r->dump().c_str() : std::string(r.status().message()).c_str());
    failed += !r.ok();
  }
  manager.Stop();
  return failed == 0 ? 0 : 1;
}
