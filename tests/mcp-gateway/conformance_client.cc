// The gateway's upstream MCP client as a command for the official conformance suite
// (@modelcontextprotocol/conformance, `client` mode): it is started with the scenario
// server's URL as its last argument, connects the way mcp-gateway connects to a
// Streamable HTTP upstream (in the revision the server speaks: server/discover first), lists the
// tools and calls those the scenario's context names ($MCP_CONFORMANCE_CONTEXT toolCalls,
// with their arguments), or else each one with a sample of the arguments its schema
// requires. Exit status 0 when every call returned a result.
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "upstream/manager.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

// Arguments a tool's inputSchema accepts: a sample value for each required property, by
// its type (the suite's tools check that the call arrived with values of the right types).
nlohmann::json SampleArguments(const nlohmann::json& schema) {
  nlohmann::json args = nlohmann::json::object();
  if (!schema.is_object() || !schema.contains("required") || !schema["required"].is_array()) return args;
  const nlohmann::json props = schema.value("properties", nlohmann::json::object());
  int n = 0;
  for (const auto& name : schema["required"]) {
    if (!name.is_string() || !props.is_object()) continue;
    const nlohmann::json prop = props.value(name.get<std::string>(), nlohmann::json::object());
    const std::string type = prop.is_object() && prop.contains("type") && prop["type"].is_string()
                                 ? prop["type"].get<std::string>()
                                 : "string";
    ++n;
    if (type == "number" || type == "integer") {
      args[name.get<std::string>()] = n;
    } else if (type == "boolean") {
      args[name.get<std::string>()] = false;
    } else if (type == "object") {
      args[name.get<std::string>()] = nlohmann::json::object();
    } else if (type == "array") {
      args[name.get<std::string>()] = nlohmann::json::array();
    } else {
      args[name.get<std::string>()] = "test";
    }
  }
  return args;
}

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
  // The calls to make: those the scenario's context names (with its arguments), else each
  // tool with sample arguments.
  std::vector<std::pair<std::string, nlohmann::json>> calls;
  const char* context = std::getenv("MCP_CONFORMANCE_CONTEXT");
  const nlohmann::json named = nlohmann::json::parse(context ? context : "{}", nullptr, false);
  if (named.is_object() && named.contains("toolCalls") && named["toolCalls"].is_array()) {
    for (const auto& call : named["toolCalls"]) {
      calls.emplace_back(call.value("name", ""), call.value("arguments", nlohmann::json::object()));
    }
  } else {
    for (const auto& tool : status.tools) calls.emplace_back(tool.name, SampleArguments(tool.input_schema));
  }
  int failed = 0;
  for (const auto& [name, arguments] : calls) {
    absl::StatusOr<nlohmann::json> r = manager.CallTool("conformance", name, arguments, {});
    std::fprintf(stderr, "%s: %s\n", name.c_str(),
                 r.ok() ? r->dump().c_str() : std::string(r.status().message()).c_str());
    failed += !r.ok();
  }
  manager.Stop();
  return failed == 0 ? 0 : 1;
}
