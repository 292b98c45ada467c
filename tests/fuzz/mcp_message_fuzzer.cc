// libFuzzer target: what an MCP client sends the gateway, one message per line (stdio
// framing; HTTP bodies go through the same ParseMessage and McpSession). Each line is
// parsed with the budgeted parser and handed to one session, whose answers are
// serialised as a transport would.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/mcp_session.h"
#include "jsonrpc/jsonrpc.h"
#include "spdlog/spdlog.h"

namespace {

// Offers one tool; calls are never made (they would start threads).
class Provider : public gateway::ToolProvider {
 public:
  nlohmann::json ListTools(const std::string&) override {
    return nlohmann::json::array({{{"name", "t"}, {"inputSchema", {{"type", "object"}}}}});
  }
  absl::StatusOr<nlohmann::json> CallTool(const std::string&, const nlohmann::json&,
                                          gateway::ToolCallContext&) override {
    return nlohmann::json::object();
  }
  void SessionClosed(const std::string&) override {}
};

class Sink : public gateway::ReplySink {
 public:
  void Send(const nlohmann::json& message) override { (void)gateway::wire::Dump(message); }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Provider provider;
  auto session = std::make_shared<gateway::McpSession>("fuzz", &provider, gateway::ServerOptions{});
  auto sink = std::make_shared<Sink>();
  session->SetNotificationSink(sink);
  std::string input(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (start <= input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string::npos) end = input.size();
    nlohmann::json error;
    auto message = gateway::ParseMessage(input.substr(start, end - start), &error);
    if (message.ok()) {
      const auto method = message->find("method");
      const bool tool_call = method != message->end() && *method == "tools/call";
      if (!tool_call) session->Handle(*message, sink);
    } else {
      (void)gateway::wire::Dump(error);
    }
    start = end + 1;
  }
  session->Close();
  return 0;
}
