// Upstream MCP servers: configuration (the mcpServers JSON format of Claude Desktop,
// Claude Code's .mcp.json and Cursor), clients for the three transports (stdio child
// process, Streamable HTTP, legacy HTTP+SSE), and the manager that connects them in
// parallel, keeps their tool catalogs and routes tool calls.
//
//   auto configs = LoadUpstreamConfig({"~/.config/mcp-gateway/servers.json"}, {}, self);
//   if (!configs.ok()) return configs.status();
//   UpstreamManager upstreams(*configs, options);
//   upstreams.Start();                                   // connects in the background
//   upstreams.WaitInitial(absl::Seconds(10));
//   for (auto& s : upstreams.Snapshot()) ...             // name, connected, error, tools
//   absl::StatusOr<json> r = upstreams.CallTool("everything", "echo", {{"message","hi"}}, call);
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "base/cancel.h"
#include "nlohmann/json.hpp"
#include "upstream/transport.h"

namespace gateway {

struct UpstreamConfig {
  enum class Type { kStdio, kStreamableHttp, kSse };
  std::string name;
  Type type = Type::kStdio;
  // stdio
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;  // added to a minimal environment (PATH, HOME, ...)
  std::string cwd;
  // http / sse
  std::string url;
  std::map<std::string, std::string> headers;
  bool disabled = false;
};

// Reads mcpServers configs from files and from directories of *.json (sorted; later
// entries override earlier ones by name). `${VAR}` and `${VAR:-default}` are expanded from
// the environment in every string. `type` is "stdio" (or absent with `command`), "http" /
// "streamable-http" (or absent with `url`), or "sse". Disabled entries are dropped, and so
// is an entry that would launch the gateway itself (its command resolves to `self_exe`).
// Missing files are an error; a missing directory is not. INVALID_ARGUMENT names the file
// and entry on bad input.
absl::StatusOr<std::vector<UpstreamConfig>> LoadUpstreamConfig(
    const std::vector<std::string>& files, const std::vector<std::string>& dirs,
    const std::string& self_exe);

struct UpstreamTool {
  std::string name;
  std::string description;
  nlohmann::json input_schema;   // object
  nlohmann::json output_schema;  // object or null
};

struct UpstreamStatus {
  std::string name;
  UpstreamConfig::Type type;
  bool connected = false;
  std::string error;  // why it is unavailable (last failure), when not connected
  std::string server_name;     // from its initialize result
  std::string instructions;    // from its initialize result
  std::vector<UpstreamTool> tools;
};

// How an HTTP upstream's event streams (its GET stream, a response stream it ended before
// the response) are reopened. The server's `retry:` is honoured within [min, max] (1 s
// when it gave none); while reopened streams keep ending at once, without a message, the
// delay doubles, with jitter, up to max. A stream that delivered a message or stayed open
// `lived` starts over. An upstream answering `retry: 0` cannot make us spin.
struct StreamRetryPolicy {
  absl::Duration min = absl::Milliseconds(250);
  absl::Duration max = absl::Seconds(30);
  absl::Duration lived = absl::Seconds(10);
};

// The default of UpstreamOptions::max_message_bytes (--max_upstream_message_bytes).
inline constexpr size_t kDefaultMaxUpstreamMessageBytes = 16u << 20;
// The default of UpstreamOptions::message_idle_timeout (--upstream_message_idle_timeout).
inline constexpr absl::Duration kDefaultUpstreamMessageIdleTimeout = absl::Seconds(30);

// The JSON values (objects, arrays, strings, numbers, ...) one upstream message may hold:
// one per 128 bytes of the byte cap (131,072 at 16 MiB). A parsed value costs ~140 bytes,
// so a 3 MiB answer of a million `{}` would have become a 200 MiB document; at this bound
// a message's document stays near the cap's size. Tool results are usually one text block
// (one value however long); a dense structuredContent needs a larger byte cap. A message
// past it is dropped with a warning, as one that is not JSON.
inline size_t UpstreamJsonValueLimit(size_t max_message_bytes) {
  return std::max<size_t>(max_message_bytes / 128, 1024);
}

struct UpstreamOptions {
  absl::Duration call_timeout = absl::Seconds(60);
  absl::Duration connect_timeout = absl::Seconds(30);
  absl::Duration retry_initial = absl::Seconds(1);
  absl::Duration retry_max = absl::Seconds(60);
  // stdio shutdown: close stdin, wait this long, SIGTERM, wait again, SIGKILL.
  absl::Duration stop_grace = absl::Seconds(2);
  std::string client_name = "mcp-gateway";
  std::string client_version = "0.1.0";
  // The tool catalog of one upstream (names, descriptions and schemas as the sandbox
  // receives them, JSON-escaped) may be at most this large. A larger one is left out, with
  // the reason, so one upstream can never make run_python fail for every client.
  size_t max_catalog_bytes = 1u << 20;
  // One message from an upstream (a JSON response body, one SSE event's data, one stdio
  // line) may be at most this large; reading stops there, before it is buffered whole. A
  // larger response fails its call with an error naming the upstream and
  // --max_upstream_message_bytes; the connection stays up for other calls.
  size_t max_message_bytes = kDefaultMaxUpstreamMessageBytes;
  // A stdio line that gets no byte for this long while incomplete is abandoned: its
  // charge and buffer are released, the request it answered fails naming
  // --upstream_message_idle_timeout, and the rest of it is skipped up to its newline.
  // Zero: never. (Events of HTTP GET and legacy SSE streams are not timed out yet.)
  absl::Duration message_idle_timeout = kDefaultUpstreamMessageIdleTimeout;
  StreamRetryPolicy stream_retry;
  // A flood of tools/list_changed is coalesced: one tools/list at a time per upstream, at
  // most one per this interval, and the MCP clients hear of a refresh only when the
  // catalog changed.
  absl::Duration min_tools_refresh_interval = absl::Seconds(1);
  // An upstream's notifications/message lines logged per second (bursts of as many); more
  // are counted, and the count logged with the next line that passes. 0: none logged.
  double log_messages_per_second = 10;
  // Answers being received from HTTP upstreams for requests that charge no caller's budget
  // (CallOptions::answer_hold; the gateway's own initialize and tools/list), all upstreams
  // together: charged kReceiveCopies times as they arrive; past it the request fails with
  // RESOURCE_EXHAUSTED naming the flag. Null: not bounded beyond max_message_bytes.
  std::shared_ptr<codemode::ByteBudget> receive_budget;
};

struct CallOptions {
  absl::Duration timeout = absl::ZeroDuration();  // zero: UpstreamOptions::call_timeout
  std::shared_ptr<codemode::CancelToken> cancel;            // sends notifications/cancelled upstream
  // Called with the params of each notifications/progress the upstream sends for this call.
  std::function<void(const nlohmann::json& params)> on_progress;
  // What the answer is charged to (transport.h). Without `receiving`, an answer of a
  // Streamable HTTP upstream is charged to UpstreamOptions::receive_budget as it arrives.
  AnswerCharges answer;
};

class UpstreamManager {
 public:
  UpstreamManager(std::vector<UpstreamConfig> configs, UpstreamOptions options);
  ~UpstreamManager();  // Stop()s
  UpstreamManager(const UpstreamManager&) = delete;
  UpstreamManager& operator=(const UpstreamManager&) = delete;

  // Connects every upstream in parallel, in the background. One that fails does not
  // block the others; it is retried with exponential backoff.
  void Start();
  // Waits until every upstream has connected or failed at least once (or the timeout).
  void WaitInitial(absl::Duration timeout);
  void Stop();

  std::vector<UpstreamStatus> Snapshot() const;
  // Increases whenever any catalog changes (connect, disconnect, list_changed refresh).
  uint64_t catalog_version() const;
  // Called (on an internal thread) after the catalog version changed.
  void SetCatalogListener(std::function<void()> listener);

  // Calls a tool and returns the upstream's CallToolResult object (which may have
  // isError: true). Errors: NOT_FOUND unknown server or tool, UNAVAILABLE server not
  // connected (a dead stdio server is restarted first), DEADLINE_EXCEEDED, CANCELLED,
  // INTERNAL for a JSON-RPC error from the upstream (its message included). Safe to call
  // concurrently: requests are multiplexed by id.
  absl::StatusOr<nlohmann::json> CallTool(const std::string& server, const std::string& tool,
                                          const nlohmann::json& arguments,
                                          const CallOptions& options);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gateway
