// mcp-gateway: an MCP server (stdio or Streamable HTTP) offering `run_python` and
// `run_javascript` (--tools), which run
// code in sandboxd sessions that call the configured upstream MCP servers' tools.
// See docs/operating.md for flags and config locations, README.md for client set-up.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "base/daemon.h"
#include "base/log_text.h"
#include "base/thread.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/http_token.h"
#include "adapter/run_code.h"
#include "adapter/run_tools.h"
#include "flag_groups.h"
#include "observability_flags.h"
#include "call_limits_flags.h"
#include "run_flags.h"
#include "sandboxd_flags.h"
#include "bridge/sandbox_client.h"
#include "server/http_server.h"
#include "server/stdio_server.h"
#include "upstream/manager.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, transport, "stdio", "stdio (one client on stdin/stdout) or http.");
ABSL_FLAG(std::string, listen, "127.0.0.1:8931",
          "HTTP address host:port (http transport). Loopback by default.");
ABSL_FLAG(std::string, path, "/mcp", "HTTP endpoint path.");
ABSL_FLAG(std::vector<std::string>, config, {},
          "mcpServers JSON files (Claude Desktop / .mcp.json / Cursor format), comma-separated. "
          "Default: $MCP_GATEWAY_CONFIG, else $XDG_CONFIG_HOME/mcp-gateway/mcp.json when it exists.");
ABSL_FLAG(std::vector<std::string>, config_dir, {},
          "Directories of *.json mcpServers files, comma-separated. Default: "
          "$XDG_CONFIG_HOME/mcp-gateway/servers.d.");
ABSL_FLAG(std::vector<std::string>, token, {},
          "The bearer token HTTP clients must send ('Authorization: Bearer <token>'). Prefer "
          "$MCP_GATEWAY_TOKEN: other local users can read a command line (a warning says so). "
          "Several, comma-separated, give each client its own credential "
          "(see --max_mcp_sessions_per_credential). Default: the one in --token_file.");
ABSL_FLAG(std::string, token_file, "",
          "File holding the HTTP bearer token, created (mode 0600) with a random token at the "
          "first start. Default: $XDG_STATE_HOME/mcp-gateway/token "
          "(~/.local/state/mcp-gateway/token).");
ABSL_FLAG(bool, no_auth, false,
          "Serve HTTP without authentication: every local user (and every process) can then "
          "use your upstream servers and their credentials. Logged loudly at every start.");
ABSL_FLAG(std::vector<std::string>, allowed_origins, {},
          "Origins allowed to call the HTTP endpoint (default: loopback origins only).");
ABSL_FLAG(std::vector<std::string>, allowed_hosts, {},
          "Host header values allowed (default: loopback names and the bind address).");
ABSL_FLAG(uint64_t, max_body_bytes, 4 << 20, "Largest HTTP request body.");
ABSL_FLAG(absl::Duration, session_idle_ttl, absl::Minutes(30),
          "HTTP MCP sessions idle this long are closed (and their sandbox sessions deleted).");
ABSL_FLAG(absl::Duration, call_timeout, absl::Seconds(60), "Timeout of one upstream tool call.");
ABSL_FLAG(absl::Duration, startup_wait, absl::Seconds(10),
          "How long to wait for upstreams to connect before serving (they keep connecting after).");
ABSL_FLAG(uint32_t, max_mcp_sessions, 256,
          "MCP sessions the HTTP transport holds at once; more initializes get 503.");
ABSL_FLAG(uint32_t, max_mcp_sessions_per_credential, 64,
          "MCP sessions one bearer token (one client) may hold at once; more get 503.");
ABSL_FLAG(uint32_t, max_http_connections, 4096,
          "Open HTTP connections. Past it a new one closes the oldest connection not yet "
          "authenticated, or is closed at once if all are. Raised file limits permitting.");
ABSL_FLAG(uint32_t, max_unauthenticated_connections, 256,
          "HTTP connections that have not yet passed the token and Origin/Host checks; a new "
          "one past it closes the oldest of the local user (or remote address) holding the "
          "most. Refused requests (401, 403, ...) close their connection.");
ABSL_FLAG(uint32_t, max_http_connections_per_credential, 2048,
          "HTTP connections one bearer token may hold; a request needing one more gets 503. "
          "Not applied under --no_auth.");
ABSL_FLAG(uint64_t, max_header_bytes, 60 << 10,
          "Largest HTTP request line plus headers; larger requests get 431.");
ABSL_FLAG(uint32_t, max_headers, 100, "Most HTTP header fields in a request; more get 431.");
ABSL_FLAG(absl::Duration, http_header_timeout, absl::Seconds(10),
          "Time from a request's first byte to the end of its headers; slower clients are "
          "disconnected.");
ABSL_FLAG(absl::Duration, http_idle_timeout, absl::Seconds(60),
          "A kept-alive HTTP connection with no request for this long is closed.");
ABSL_FLAG(absl::Duration, resume_grace, absl::Seconds(30),
          "How long a tools/call whose SSE connection dropped keeps running for the client to "
          "resume it (Last-Event-ID); then it is cancelled.");
ABSL_FLAG(uint64_t, max_replay_bytes, 64 << 20,
          "Bytes all MCP sessions together keep for resumable streams (kept events, and what "
          "resumptions replay until their connection ends); a resumption past it gets 503.");
ABSL_FLAG(uint64_t, max_replay_bytes_per_session, 16 << 20,
          "As --max_replay_bytes, for one MCP session.");
ABSL_FLAG(uint64_t, max_resumable_streams_per_session, 1000,
          "Call streams one MCP session keeps for resumption (Last-Event-ID); past it a new "
          "call drops the session's oldest finished stream. Streams of running calls stay.");
ABSL_FLAG(uint64_t, max_request_bytes_in_flight, 48 << 20,
          "Bytes of HTTP requests being received at once (bodies, and the headers of a "
          "connection that authenticated before), all connections together; a request past it "
          "gets 503 with Retry-After.");
ABSL_FLAG(uint64_t, max_request_bytes_in_flight_per_credential, 16 << 20,
          "As --max_request_bytes_in_flight, for the connections of one bearer token.");
ABSL_FLAG(uint64_t, max_pending_write_bytes, 96 << 20,
          "Bytes of HTTP responses queued for clients that have not read them yet, all "
          "connections together; the connection whose write passes it is closed.");
ABSL_FLAG(uint64_t, max_pending_write_bytes_per_credential, 48 << 20,
          "As --max_pending_write_bytes, for the connections of one bearer token.");
ABSL_FLAG(uint64_t, max_write_overdraft_bytes, 8 << 20,
          "Bytes of HTTP responses that connections with less than 64 KiB queued may still "
          "queue when the budgets above or --max_buffered_bytes refuse them, all connections "
          "together (outside --max_buffered_bytes); past it such a connection is closed.");
ABSL_FLAG(uint64_t, max_write_overdraft_bytes_per_credential, 2 << 20,
          "As --max_write_overdraft_bytes, for the connections of one bearer token.");
ABSL_FLAG(uint64_t, max_buffered_bytes, 128 << 20,
          "Ceiling over the budgets above and the tool-call ones: bytes clients, sandboxes and "
          "upstreams make the gateway hold at once (request bodies, queued responses, replay, "
          "call arguments, tool calls), all together; past it the budget's usual refusal "
          "(503, closed connection, ToolError) names this flag.");
ABSL_FLAG(uint64_t, max_buffered_bytes_per_credential, 64 << 20,
          "A bearer token's share of --max_buffered_bytes. Not applied with one credential "
          "(--transport=stdio or --no_auth).");
ABSL_FLAG(uint64_t, max_message_json_values, 1 << 16,
          "JSON values (objects, arrays, strings, numbers...) one message from an MCP client "
          "may hold; more get a parse error (-32700). Each parsed value costs tens of bytes.");
ABSL_FLAG(uint64_t, max_catalog_bytes_per_upstream, 1 << 20,
          "Largest tool catalog (names, descriptions, schemas) of one upstream; a larger "
          "upstream is left out with the reason, the others keep working.");
ABSL_FLAG(uint64_t, max_upstream_message_bytes, gateway::kDefaultMaxUpstreamMessageBytes,
          "Largest single message from an upstream (a JSON response body, one SSE event, one "
          "stdio line); reading stops there and the call gets a ToolError. At least "
          "--max_tool_result_bytes plus 64 KiB (a result travels in a JSON-RPC envelope).");
ABSL_FLAG(uint64_t, max_upstream_bytes_in_flight, 96 << 20,
          "Bytes of answers being received from HTTP upstreams at once, all calls together "
          "(charged twice: the body and its parse); a call whose answer would pass it fails "
          "with a ToolError naming this flag. Inside --max_buffered_bytes.");
ABSL_FLAG(uint64_t, max_upstream_bytes_in_flight_per_credential, 40 << 20,
          "One credential's part of --max_upstream_bytes_in_flight (all of it with stdio or "
          "--no_auth), inside its share of --max_buffered_bytes. Keep it above twice "
          "--max_upstream_message_bytes, or the largest answers fail for this reason instead.");
ABSL_FLAG(absl::Duration, upstream_message_idle_timeout,
          gateway::kDefaultUpstreamMessageIdleTimeout,
          "A message from an upstream (a stdio line) that gets no byte for this long while "
          "incomplete is abandoned: its bytes are released, the call it answered gets a "
          "ToolError naming this flag, and the rest of it is skipped. An HTTP upstream's GET "
          "or legacy SSE stream whose event stalls as long is cut and reopened (a stream "
          "quiet between events is not). 0: never.");
ABSL_FLAG(absl::Duration, upstream_write_timeout, gateway::kDefaultUpstreamWriteTimeout,
          "A message to a stdio upstream waits at most this long for its turn and for the "
          "server to read it, then fails (the call gets a ToolError); a message cut off part "
          "way is ended with a newline before the next one.");
ABSL_FLAG(absl::Duration, upstream_stream_retry_min, absl::Milliseconds(250),
          "Shortest wait before reopening an HTTP upstream's event stream, whatever its "
          "`retry:` says (an upstream answering `retry: 0` must not make us spin).");
ABSL_FLAG(absl::Duration, upstream_stream_retry_max, absl::Seconds(30),
          "Longest wait before reopening an HTTP upstream's event stream; the wait doubles, "
          "with jitter, up to this while reopened streams keep ending at once.");
ABSL_FLAG(absl::Duration, upstream_discover_timeout, absl::Seconds(5),
          "Stdio and Streamable HTTP upstreams are asked server/discover first and spoken to in "
          "protocol 2026-07-28 when they serve it; one that does not answer within this is "
          "initialized (2025). 0: never ask, always initialize.");
ABSL_FLAG(absl::Duration, min_tools_refresh_interval, absl::Seconds(1),
          "An upstream's tools/list_changed flood is coalesced: at most one tools/list per "
          "upstream per this interval, and clients are told only when its tools changed.");
ABSL_FLAG(double, upstream_log_rate, 10,
          "notifications/message lines logged per second per upstream (bursts of as many); "
          "more are counted and reported. 0: none logged.");
ABSL_FLAG(double, upstream_notification_rate, 100,
          "Notifications one upstream may send per second (bursts of ten times as many); more "
          "are dropped, and a 2026-07-28 upstream's subscriptions/listen stream is closed and "
          "reopened after a growing pause. 0: no limit.");
ABSL_FLAG(uint32_t, max_tool_calls_in_flight, 64,
          "Tool calls of one run_python answered at the same time; more get a ToolError.");
ABSL_FLAG(uint32_t, max_tool_calls_in_flight_per_credential, 128,
          "Tool calls in flight at once of one credential over all its runs (each "
          "holds a thread until its answer is written); more get a ToolError.");
ABSL_FLAG(uint32_t, max_tool_calls_in_flight_total, 512,
          "Tool calls in flight at once over every credential; a credential with calls in "
          "flight may not take the last eighth. More get a ToolError.");
ABSL_FLAG(uint64_t, max_tool_call_bytes, 4 << 20,
          "Largest JSON arguments of one tool call from sandboxed code; larger get a ToolError.");
ABSL_FLAG(uint64_t, max_tool_result_bytes, 8 << 20,
          "Largest JSON result of one tool call handed back to sandboxed code; larger get a "
          "ToolError.");
ABSL_FLAG(uint64_t, max_tool_call_bytes_in_flight, 32 << 20,
          "Arguments of one run's tool calls in flight together; more get a ToolError.");
ABSL_FLAG(uint64_t, max_tool_call_bytes_in_flight_per_credential, 64 << 20,
          "Bytes of tool calls (arguments being answered, results not yet taken by the "
          "sandbox) held at once for one credential over all its runs; more get a ToolError.");
ABSL_FLAG(uint64_t, max_tool_call_bytes_in_flight_total, 128 << 20,
          "Bytes of tool calls held at once over every credential; more get a ToolError.");
ABSL_FLAG(absl::Duration, sandbox_cancel_grace, absl::Seconds(5),
          "A cancelled run's Execute stream must end within this of its cancel; past it (a "
          "stream backed up by code that reads none of its tool calls' answers) the call to "
          "sandboxd is cancelled instead. Keep it above sandboxd's --kill_grace.");
ABSL_FLAG(uint32_t, max_tool_calls_per_run, 10000,
          "Tool calls one run_python may make in total; later ones get a ToolError.");
ABSL_FLAG(std::string, image, "",
          "The sandboxd image (by its name in sandboxd's GetInfo) every session runs, e.g. "
          "data for numpy, pandas and matplotlib. Empty: sandboxd's default image.");
ABSL_FLAG(std::string, isolation, "",
          "Isolation the gateway asks sandboxd for in every session: container, gvisor or wasm "
          "(sandboxd must allow it, --allowed_isolations). Empty: sandboxd's default.");

namespace {

namespace fs = std::filesystem;

// Room for the JSON-RPC envelope around a tool result (and its escaping differences)
// within --max_upstream_message_bytes.
constexpr uint64_t kUpstreamEnvelopeBytes = 64 << 10;

std::string ConfigHome() {
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return x;
  const char* home = std::getenv("HOME");
  return absl::StrCat(home ? home : "/tmp", "/.config");
}

// The HTTP bearer token: --token, $MCP_GATEWAY_TOKEN, or the token file (created at the
// first start). Empty only with --no_auth. `file` is set when the token came from a file.
absl::StatusOr<std::vector<std::string>> ResolveTokens(std::string* file) {
  if (absl::GetFlag(FLAGS_no_auth)) {
    spdlog::warn("--no_auth: HTTP requests are NOT authenticated; any local user or process "
                 "that reaches the port can run code with your upstream servers' credentials");
    return std::vector<std::string>();
  }
  std::vector<std::string> tokens = absl::GetFlag(FLAGS_token);
  if (tokens.empty()) {
    if (const char* t = std::getenv("MCP_GATEWAY_TOKEN"); t && *t) {
      tokens = absl::StrSplit(t, ',', absl::SkipWhitespace());
    }
  }
  for (const std::string& t : tokens) {
    if (t.size() < 16) {
      return absl::InvalidArgumentError("a bearer token needs at least 16 characters");
    }
  }
  if (!tokens.empty()) return tokens;
  *file = absl::GetFlag(FLAGS_token_file);
  if (file->empty()) *file = gateway::DefaultTokenFile();
  absl::StatusOr<std::string> token = gateway::LoadOrCreateTokenFile(*file);
  if (!token.ok()) return token.status();
  return std::vector<std::string>{*token};
}


// Environment fallbacks, for clients that can set env vars more easily than arguments.
std::vector<std::string> FromEnv(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::vector<std::string>(absl::StrSplit(v, ',', absl::SkipEmpty()))
                 : std::vector<std::string>();
}

absl::StatusOr<std::vector<gateway::UpstreamConfig>> LoadConfigs() {
  std::vector<std::string> files = absl::GetFlag(FLAGS_config);
  std::vector<std::string> dirs = absl::GetFlag(FLAGS_config_dir);
  if (files.empty() && dirs.empty()) files = FromEnv("MCP_GATEWAY_CONFIG");
  if (files.empty() && dirs.empty()) {
    std::string def = ConfigHome() + "/mcp-gateway/mcp.json";
    if (fs::exists(def)) files.push_back(def);
    dirs.push_back(ConfigHome() + "/mcp-gateway/servers.d");
  }
  std::error_code ec;
  std::string self = fs::canonical("/proc/self/exe", ec).string();
  return gateway::LoadUpstreamConfig(files, dirs, self);
}

// Whose sandboxes a request without an MCP session lists: a credential that names no one
// client must not list what others made (owned_resources.h).
gateway::OwnedScope OwnedScope() {
  if (absl::GetFlag(FLAGS_transport) == "stdio") return gateway::OwnedScope::kThisProcess;
  if (absl::GetFlag(FLAGS_no_auth)) return gateway::OwnedScope::kNone;
  return gateway::OwnedScope::kSandboxd;
}

// Whether every client is one credential (stdio, --no_auth): per-credential bounds are then
// the overall ones.
bool OneCredential() {
  return absl::GetFlag(FLAGS_transport) == "stdio" || absl::GetFlag(FLAGS_no_auth);
}

// --max_buffered_bytes and each credential's share (all of it with one credential).
std::shared_ptr<codemode::BufferCeiling> CeilingFromFlags() {
  const uint64_t all = absl::GetFlag(FLAGS_max_buffered_bytes);
  return std::make_shared<codemode::BufferCeiling>(
      all, OneCredential() ? all : absl::GetFlag(FLAGS_max_buffered_bytes_per_credential));
}

// `receiving`: the upstreams' receive budget, of which each credential's answers in transit
// take their part.
gateway::ToolCallLimits ToolCallLimitsFromFlags(std::shared_ptr<codemode::BufferCeiling> ceiling,
                                                std::shared_ptr<codemode::ByteBudget> receiving) {
  gateway::ToolCallLimits l;
  l.shared.ceiling = std::move(ceiling);
  l.shared.receiving = std::move(receiving);
  l.shared.receiving_per_credential =
      OneCredential() ? absl::GetFlag(FLAGS_max_upstream_bytes_in_flight)
                      : absl::GetFlag(FLAGS_max_upstream_bytes_in_flight_per_credential);
  l.max_in_flight = absl::GetFlag(FLAGS_max_tool_calls_in_flight);
  l.shared.calls_per_credential = absl::GetFlag(FLAGS_max_tool_calls_in_flight_per_credential);
  l.shared.calls_total = absl::GetFlag(FLAGS_max_tool_calls_in_flight_total);
  l.max_per_run = absl::GetFlag(FLAGS_max_tool_calls_per_run);
  l.max_argument_bytes = absl::GetFlag(FLAGS_max_tool_call_bytes);
  l.max_result_bytes = absl::GetFlag(FLAGS_max_tool_result_bytes);
  l.max_argument_bytes_in_flight = absl::GetFlag(FLAGS_max_tool_call_bytes_in_flight);
  l.shared.bytes_per_credential =
      absl::GetFlag(FLAGS_max_tool_call_bytes_in_flight_per_credential);
  l.shared.bytes_total = absl::GetFlag(FLAGS_max_tool_call_bytes_in_flight_total);
  l.cancel_grace = absl::GetFlag(FLAGS_sandbox_cancel_grace);
  return l;
}

// --listen, --path, the tokens and the HTTP limits; `token_file` names where a generated
// token lives (empty when the tokens came from flags or the environment).
absl::StatusOr<gateway::HttpServerOptions> HttpOptionsFromFlags(std::string* token_file) {
  gateway::HttpServerOptions http;
  std::string listen = absl::GetFlag(FLAGS_listen);
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("--listen must be host:port");
  http.host = listen.substr(0, colon);
  if (http.host.size() > 2 && http.host.front() == '[') http.host = http.host.substr(1, http.host.size() - 2);
  http.port = std::atoi(listen.substr(colon + 1).c_str());
  http.path = absl::GetFlag(FLAGS_path);
  absl::StatusOr<std::vector<std::string>> tokens = ResolveTokens(token_file);
  if (!tokens.ok()) return tokens.status();
  http.bearer_tokens = *tokens;
  http.allowed_origins = absl::GetFlag(FLAGS_allowed_origins);
  http.allowed_hosts = absl::GetFlag(FLAGS_allowed_hosts);
  http.max_body_bytes = absl::GetFlag(FLAGS_max_body_bytes);
  http.session_idle_ttl = absl::GetFlag(FLAGS_session_idle_ttl);
  http.max_sessions = absl::GetFlag(FLAGS_max_mcp_sessions);
  http.max_sessions_per_credential = absl::GetFlag(FLAGS_max_mcp_sessions_per_credential);
  http.max_connections = absl::GetFlag(FLAGS_max_http_connections);
  http.max_unauthenticated_connections =
      std::max<uint32_t>(1, absl::GetFlag(FLAGS_max_unauthenticated_connections));
  http.max_connections_per_credential = absl::GetFlag(FLAGS_max_http_connections_per_credential);
  http.max_header_bytes = absl::GetFlag(FLAGS_max_header_bytes);
  http.max_headers = absl::GetFlag(FLAGS_max_headers);
  http.header_timeout = absl::GetFlag(FLAGS_http_header_timeout);
  http.idle_timeout = absl::GetFlag(FLAGS_http_idle_timeout);
  http.resume_grace = absl::GetFlag(FLAGS_resume_grace);
  http.max_replay_bytes = absl::GetFlag(FLAGS_max_replay_bytes);
  http.max_replay_bytes_per_session = absl::GetFlag(FLAGS_max_replay_bytes_per_session);
  http.max_resumable_streams_per_session =
      std::max<uint64_t>(1, absl::GetFlag(FLAGS_max_resumable_streams_per_session));
  http.max_request_bytes_in_flight = absl::GetFlag(FLAGS_max_request_bytes_in_flight);
  http.max_request_bytes_in_flight_per_credential =
      absl::GetFlag(FLAGS_max_request_bytes_in_flight_per_credential);
  http.max_pending_write_bytes = absl::GetFlag(FLAGS_max_pending_write_bytes);
  http.max_pending_write_bytes_per_credential =
      absl::GetFlag(FLAGS_max_pending_write_bytes_per_credential);
  http.max_write_overdraft_bytes = absl::GetFlag(FLAGS_max_write_overdraft_bytes);
  http.max_write_overdraft_bytes_per_credential =
      absl::GetFlag(FLAGS_max_write_overdraft_bytes_per_credential);
  return http;
}

// The address and a ready client snippet, as Jupyter prints its token, but never the
// token itself (logs end up in journald): where to read it instead.
void LogHowToConnect(const gateway::HttpServerOptions& http, int port, const std::string& token_file) {
  const std::string host = absl::StrContains(http.host, ':') ? "[" + http.host + "]" : http.host;
  const std::string url = absl::StrCat("http://", host, ":", port, http.path);
  spdlog::info("serving MCP on {}", url);
  if (http.bearer_tokens.empty()) return;
  const std::string where = token_file.empty()
                                ? std::string("the token you gave ($MCP_GATEWAY_TOKEN or --token)")
                                : "the token in " + token_file;
  const std::string token = token_file.empty() ? "$MCP_GATEWAY_TOKEN" : "$(cat " + token_file + ")";
  spdlog::info(
      "clients must send 'Authorization: Bearer <token>' with {}. For example:\n"
      "  claude mcp add --transport http codemode {} --header \"Authorization: Bearer {}\"\n"
      "  curl -H \"Authorization: Bearer {}\" -H 'Content-Type: application/json' "
      "-H 'Accept: application/json, text/event-stream' -d '{{\"jsonrpc\":\"2.0\",\"id\":1,"
      "\"method\":\"initialize\",\"params\":{{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{{}},"
      "\"clientInfo\":{{\"name\":\"curl\",\"version\":\"1\"}}}}}}' {}",
      where, url, token, token, url);
}

// The transport --transport names, started; a stdio transport asks `shutdown` to end the
// process when stdin closes.
absl::StatusOr<std::unique_ptr<gateway::ServerTransport>> StartTransport(
    gateway::RunCodeTool* tool, const gateway::ServerOptions& options,
    codemode::ShutdownSignal* shutdown) {
  const std::string transport = absl::GetFlag(FLAGS_transport);
  if (transport == "stdio") {
    for (const std::string& line : gateway::UnservedCredentials(tool->egress(), {"stdio"})) spdlog::warn("{}", line);
    auto stdio = std::make_unique<gateway::StdioServer>(STDIN_FILENO, STDOUT_FILENO, tool, options);
    absl::Status started = stdio->Start([shutdown] { shutdown->Request("stdin closed"); });
    if (!started.ok()) return started;
    return stdio;
  }
  if (transport != "http") return absl::InvalidArgumentError("--transport must be stdio or http");
  std::string token_file;
  absl::StatusOr<gateway::HttpServerOptions> http = HttpOptionsFromFlags(&token_file);
  if (!http.ok()) return http.status();
  std::vector<std::string> credentials = {"anonymous"};
  if (!http->bearer_tokens.empty()) credentials.clear();
  for (const std::string& t : http->bearer_tokens) credentials.push_back(gateway::CredentialOfToken(t));
  for (const std::string& line : gateway::UnservedCredentials(tool->egress(), credentials)) spdlog::warn("{}", line);
  codemode::RaiseFileLimit();
  auto server = std::make_unique<gateway::HttpServer>(*http, tool, options);
  if (absl::Status started = server->Start(); !started.ok()) return started;
  LogHowToConnect(*http, server->port(), token_file);
  return server;
}

absl::StatusOr<gateway::UpstreamOptions> UpstreamOptionsFromFlags(
    const std::shared_ptr<codemode::BufferCeiling>& ceiling) {
  gateway::UpstreamOptions options;
  options.call_timeout = absl::GetFlag(FLAGS_call_timeout);
  options.max_catalog_bytes = absl::GetFlag(FLAGS_max_catalog_bytes_per_upstream);
  options.stream_retry.min = absl::GetFlag(FLAGS_upstream_stream_retry_min);
  options.stream_retry.max =
      std::max(options.stream_retry.min, absl::GetFlag(FLAGS_upstream_stream_retry_max));
  options.min_tools_refresh_interval = absl::GetFlag(FLAGS_min_tools_refresh_interval);
  options.discover_timeout = absl::GetFlag(FLAGS_upstream_discover_timeout);
  options.discover = options.discover_timeout > absl::ZeroDuration();
  options.max_message_bytes = absl::GetFlag(FLAGS_max_upstream_message_bytes);
  options.message_idle_timeout = absl::GetFlag(FLAGS_upstream_message_idle_timeout);
  options.write_timeout = absl::GetFlag(FLAGS_upstream_write_timeout);
  options.log_messages_per_second = absl::GetFlag(FLAGS_upstream_log_rate);
  options.notifications_per_second = absl::GetFlag(FLAGS_upstream_notification_rate);
  options.receive_budget = std::make_shared<codemode::ByteBudget>(
      "max_upstream_bytes_in_flight", absl::GetFlag(FLAGS_max_upstream_bytes_in_flight),
      codemode::AllOf(ceiling));
  if (options.write_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--upstream_write_timeout must be positive");
  }
  // A result the sandbox may receive must fit in the message that carries it.
  if (options.max_message_bytes <
      absl::GetFlag(FLAGS_max_tool_result_bytes) + kUpstreamEnvelopeBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_upstream_message_bytes must be at least --max_tool_result_bytes plus ",
        kUpstreamEnvelopeBytes, " bytes"));
  }
  return options;
}

gateway::ServerOptions ServerOptionsFromFlags(std::shared_ptr<codemode::BufferCeiling> ceiling) {
  gateway::ServerOptions o;
  o.max_message_json_values = absl::GetFlag(FLAGS_max_message_json_values);
  o.call_limits = CallLimitsFromFlags(ceiling);
  o.parked_call_threads = ParkedCallThreadsFromFlags();
  o.ceiling = std::move(ceiling);
  return o;
}

// Serves `tool` on --transport (and metrics on --metrics_listen) until shutdown. Returns
// the process's exit code.
int Serve(gateway::RunCodeTool& tool, const gateway::ServerOptions& server_options,
          gateway::UpstreamManager& upstreams, gateway::GatewayMetrics* metrics,
          const gateway::AuditLog* audit,
          const std::string& sandboxd_at, codemode::ShutdownSignal& shutdown) {
  absl::StatusOr<std::unique_ptr<gateway::ServerTransport>> server =
      StartTransport(&tool, server_options, &shutdown);
  if (!server.ok()) {
    spdlog::critical("{}", std::string(server.status().message()));
    upstreams.Stop();
    return absl::IsInvalidArgument(server.status()) ? 2 : 1;
  }
  absl::StatusOr<std::unique_ptr<codemode::telemetry::MetricsServer>> metrics_server =
      ServeMetrics(metrics, upstreams, **server, tool, audit);
  if (!metrics_server.ok()) {
    spdlog::critical("{}", std::string(metrics_server.status().message()));
    (*server)->Stop();
    upstreams.Stop();
    return 2;
  }
  upstreams.SetCatalogListener([t = server->get()] { t->NotifyToolsChanged(); });
  spdlog::info("sandboxd at {}", sandboxd_at);

  spdlog::info("{}: shutting down", shutdown.Wait());
  if (*metrics_server) (*metrics_server)->BeginStop();
  upstreams.SetCatalogListener(nullptr);
  // An HTTP gateway's clients hold handles that a restarted gateway or another replica
  // opens: their sandboxes stay (sandboxd's --idle_ttl ends the forgotten ones). A stdio
  // gateway's one client is gone: its sandboxes go with it.
  if (absl::GetFlag(FLAGS_transport) == "http") tool.KeepSandboxes();
  (*server)->Stop();
  tool.CloseAll();
  upstreams.Stop();
  return 0;
}

}  // namespace

namespace {

// gRPC's and protobuf's own log lines (a failed TLS handshake with a sandboxd address is
// one, an answer with invalid UTF-8 in a string field another) go through spdlog,
// rate-limited.
void RouteLibraryLogs() {
  gpr_set_log_function([](gpr_log_func_args* args) {
    codemode::LogLibraryLine("grpc", args->severity == GPR_LOG_SEVERITY_ERROR, args->message ? args->message : "");
  });
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel level, const char*, int, const std::string& text) {
    codemode::LogLibraryLine("protobuf", level >= google::protobuf::LOGLEVEL_ERROR, text);
  });
}

int RunGateway(int argc, char** argv) {
  codemode::StartMain(argc, argv, GatewayHelp());
  codemode::ShutdownSignal shutdown;  // before any thread starts
  RouteLibraryLogs();
  if (gateway::HideTokenArguments(argc, argv)) {
    spdlog::warn("--token on the command line is readable by every local user (/proc/<pid>/"
                 "cmdline, ps) until the gateway hides it; set $MCP_GATEWAY_TOKEN or use "
                 "--token_file instead");
  }

  absl::StatusOr<std::vector<gateway::UpstreamConfig>> configs = LoadConfigs();
  if (!configs.ok()) {
    spdlog::critical("{}", std::string(configs.status().message()));
    return 2;
  }
  spdlog::info("{} upstream server(s) configured", configs->size());
  const std::shared_ptr<codemode::BufferCeiling> ceiling = CeilingFromFlags();
  absl::StatusOr<gateway::UpstreamOptions> upstream_options = UpstreamOptionsFromFlags(ceiling);
  if (!upstream_options.ok()) {
    spdlog::critical("{}", std::string(upstream_options.status().message()));
    return 2;
  }
  gateway::UpstreamManager upstreams(*configs, *upstream_options);
  upstreams.Start();
  const std::shared_ptr<gateway::GatewayMetrics> metrics = MetricsFromFlags();
  StageTimesFromFlags();

  absl::StatusOr<SandboxdFlags> sandboxd = SandboxdFromFlags();
  if (!sandboxd.ok()) {
    spdlog::critical("{}", std::string(sandboxd.status().message()));
    upstreams.Stop();
    return 2;
  }
  absl::StatusOr<sandbox::v1::Isolation> isolation =
      gateway::ParseIsolationFlag(absl::GetFlag(FLAGS_isolation));
  if (!isolation.ok()) {
    spdlog::critical("{}", std::string(isolation.status().message()));
    return 2;
  }
  gateway::ToolCallLimits call_limits = ToolCallLimitsFromFlags(ceiling, upstream_options->receive_budget);
  call_limits.metrics = metrics.get();
  gateway::MembershipOptions membership;
  membership.interval = sandboxd->resolve_interval;
  auto members = std::make_unique<gateway::Membership>(sandboxd->endpoints, gateway::SystemResolver(), membership);
  members->Start();
  gateway::SandboxClient sandboxes(std::move(members), call_limits, *isolation, absl::GetFlag(FLAGS_image),
                                   sandboxd->tcp_token, sandboxd->tls);
  gateway::ManagerUpstreams upstream_view(&upstreams);
  absl::StatusOr<gateway::RunCodeOptions> run_options = RunOptionsFromFlags(*configs);
  if (!run_options.ok()) {
    spdlog::critical("{}", std::string(run_options.status().message()));
    return 2;
  }
  // Only the tools sandboxd can run (it answers before this under systemd: the gateway's
  // unit starts after sandboxd's is ready); a sandboxd that does not answer yet may run all.
  std::vector<std::string> not_runnable;
  run_options->languages = gateway::RunnableLanguages(
      run_options->languages, [&](const std::string& runtime) { return sandboxes.RuntimeUnavailable(runtime); },
      &not_runnable);
  for (const std::string& line : not_runnable) spdlog::warn("{}", line);
  run_options->egress.sandboxd_default = CheckSandboxEgress(sandboxes, run_options->egress);
  run_options->cap_credentials_in_sandboxd = !OneCredential();
  run_options->owned_scope = OwnedScope();
  run_options->metrics = metrics;
  gateway::RunCodeTool tool(&sandboxes, &upstream_view, *run_options);
  gateway::ServerOptions server_options = ServerOptionsFromFlags(ceiling);
  server_options.instructions = ServerInstructions(run_options->languages);
  server_options.metrics = metrics;
  upstreams.WaitInitial(absl::GetFlag(FLAGS_startup_wait));

  return Serve(tool, server_options, upstreams, metrics.get(), run_options->audit.get(), absl::StrJoin(sandboxd->endpoints, ", ") +
               (sandboxd->tls.ca.empty() ? "" : " (TCP endpoints over TLS)"), shutdown);
}

}  // namespace

int main(int argc, char** argv) {
  const int code = RunGateway(argc, argv);
  // What the gateway started is joined by now, except a thread that could not be waited for
  // (an audit writer stuck in write(2) past --audit_drain_timeout): joined here when it has
  // ended, else the process ends under it without tearing anything down.
  return codemode::FinishThreads(code, absl::ZeroDuration());
}
