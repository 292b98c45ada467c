// McpClient: the MCP client lifecycle over a ClientTransport (see client.h), and
// MakeTransport, which picks the transport for a config.
#include "upstream/client.h"
#include "base/untrusted_json.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "upstream/http_transport.h"
#include "upstream/stdio_transport.h"
#include "base/log_text.h"
#include "base/thread.h"
#include "base/utf8.h"
#include "catalog/catalog.h"
#include "spdlog/spdlog.h"

namespace gateway {

using nlohmann::json;

// One upstream's part of the receive budget (--max_upstream_bytes_in_flight): at most a
// quarter of it, and an upstream holding more than a 64th (a line or event being read) may
// not take the last eighth. Each upstream reads one message at a time, so without the
// quarter a few upstreams whose messages never end would hold the whole budget for as long
// as they lived and every other upstream's answers would be refused; the reserve alone
// still leaves two such lines most of it. One upstream holds at most 24 MiB (at the
// default) of what no caller is charged for (an answer moves to its caller's budget once
// its id is read: stdio, StdoutLines), and only until its message stops growing
// (--upstream_message_idle_timeout).
std::shared_ptr<codemode::ByteBudget> UpstreamPart(const std::shared_ptr<codemode::ByteBudget>& all) {
  if (!all) return nullptr;
  return std::make_shared<codemode::ByteBudget>(absl::StrCat(all->flag(), "/4"), all->limit() / 4,
                                                codemode::ByteBudget::Parents{all},
                                                codemode::ByteReserve{all, all->limit() / 8,
                                                                      all->limit() / 64});
}

namespace {

// What is kept of a server's name and instructions: every Snapshot() copies them, so a
// server's 10 MB of each must not be kept whole; the catalog shows 2,000 characters of the
// instructions, logs a line of the name.
constexpr size_t kMaxServerName = 256;
constexpr size_t kMaxInstructions = 8192;

std::string Clip(const std::string& text, size_t limit) { return std::string(codemode::Utf8Prefix(text, limit)); }

}  // namespace

std::unique_ptr<ClientTransport> MakeTransport(const UpstreamConfig& config,
                                               const UpstreamOptions& options) {
  const std::shared_ptr<codemode::ByteBudget> receive = UpstreamPart(options.receive_budget);
  switch (config.type) {
    case UpstreamConfig::Type::kStdio:
      return std::make_unique<StdioTransport>(config, options.stop_grace,
                                              options.max_message_bytes,
                                              options.log_messages_per_second, receive,
                                              options.message_idle_timeout,
                                              options.write_timeout);
    case UpstreamConfig::Type::kStreamableHttp:
      return std::make_unique<StreamableHttpTransport>(config, options.connect_timeout,
                                                       options.stream_retry,
                                                       options.max_message_bytes, receive,
                                                       options.message_idle_timeout);
    case UpstreamConfig::Type::kSse:
      return std::make_unique<SseTransport>(config, options.connect_timeout,
                                            options.stream_retry, options.max_message_bytes,
                                            receive, options.message_idle_timeout);
  }
  return nullptr;
}

std::vector<UpstreamTool> ParseTools(const std::string& server, const json& result) {
  std::vector<UpstreamTool> tools;
  if (!result.is_object() || !result.contains("tools") || !result["tools"].is_array()) {
    spdlog::warn("upstream {}: tools/list result has no tools array", server);
    return tools;
  }
  for (const auto& entry : result["tools"]) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        entry["name"].get<std::string>().empty()) {
      spdlog::warn("upstream {}: skipping a tool without a name", server);
      continue;
    }
    UpstreamTool tool;
    tool.name = entry["name"].get<std::string>();
    if (entry.contains("description") && entry["description"].is_string()) {
      tool.description = entry["description"].get<std::string>();
    }
    tool.input_schema = entry.contains("inputSchema") && entry["inputSchema"].is_object()
                            ? entry["inputSchema"]
                            : json{{"type", "object"}};
    if (entry.contains("outputSchema") && entry["outputSchema"].is_object()) {
      tool.output_schema = entry["outputSchema"];
    }
    // A tool whose x-mcp-header declarations are invalid must not be used (SEP-2243).
    absl::StatusOr<std::vector<ParamHeader>> headers = ParamHeadersOf(tool.input_schema);
    if (!headers.ok()) {
      spdlog::warn("upstream {}: tool {} left out: {}", server, codemode::LogText(tool.name),
                   codemode::LogText(std::string(headers.status().message())));
      continue;
    }
    tool.param_headers = *std::move(headers);
    // Only the boolean hints: what approvals read (approvals/approval_policy.h).
    if (auto a = entry.find("annotations"); a != entry.end() && a->is_object()) {
      for (const char* hint : {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}) {
        if (auto h = a->find(hint); h != a->end() && h->is_boolean()) tool.annotations[hint] = *h;
      }
    }
    tools.push_back(std::move(tool));
  }
  return tools;
}

McpClient::McpClient(UpstreamConfig config, UpstreamOptions options, Handlers handlers)
    : config_(std::move(config)), options_(std::move(options)),
      on_tools_list_changed_(handlers.on_tools_list_changed) {
  auto transport = MakeTransport(config_, options_);
  transport_ = transport.get();
  // A flood on the listen stream closes it; Listen() opens it again after its pause.
  handlers.on_notification_flood = [this] {
    std::shared_ptr<codemode::CancelToken> listening;
    {
      codemode::MutexLock lock(&mu_);
      listening = listen_request_;
    }
    if (listening) listening->Cancel("the upstream sent too many notifications");
  };
  rpc_ = std::make_unique<JsonRpcClient>(config_.name, std::move(transport), std::move(handlers),
                                         options_.log_messages_per_second,
                                         options_.notifications_per_second);
}

McpClient::~McpClient() { Close(); }

absl::Status McpClient::Connect() {
  absl::Status started = rpc_->Start(options_.connect_timeout);
  if (!started.ok()) return started;
  // Legacy HTTP+SSE servers predate both: they only initialize.
  const bool probe = options_.discover && config_.type != UpstreamConfig::Type::kSse;
  if (!probe || !Discover()) {
    if (absl::Status s = Initialize(); !s.ok()) return s;
  }
  auto tools = ListTools(options_.connect_timeout);
  if (!tools.ok()) return tools.status();
  tools_ = *std::move(tools);
  spdlog::info("upstream {}: connected to {} (protocol {}, {} tools)", config_.name,
               server_name_.empty() ? "?" : codemode::LogText(server_name_),
               codemode::LogText(protocol_version_), tools_.size());
  if (stateless_) listener_ = codemode::StartThread("upstream listen", [this] { Listen(); });
  return absl::OkStatus();
}

void McpClient::Listen() {
  const json params = Enveloped({{"notifications", {{"toolsListChanged", true}}}});
  // A server that ends the stream at once (or answers it like any request) is asked again
  // later and later: 1 s, doubling up to 5 min, until a stream lasts a minute.
  absl::Duration pause = absl::Seconds(1);
  for (;;) {
    const absl::Time opened = absl::Now();
    auto token = std::make_shared<codemode::CancelToken>();
    {
      codemode::MutexLock lock(&mu_);
      if (closing_) return;
      listen_request_ = token;
    }
    JsonRpcClient::RequestOptions request;
    request.timeout = absl::InfiniteDuration();
    request.cancel = token;
    request.notify_cancelled = config_.type != UpstreamConfig::Type::kStreamableHttp;
    // Notifications on it (tagged with its subscriptionId) reach the handlers as any
    // others; its result comes only when the server ends the stream.
    absl::StatusOr<json> ended = rpc_->Request("subscriptions/listen", params, request);
    {
      codemode::MutexLock lock(&mu_);
      listen_request_.reset();
      if (closing_) return;
    }
    if (!rpc_->connected()) return;
    if (!ended.ok() && (absl::IsUnimplemented(ended.status()) || absl::IsInvalidArgument(ended.status()))) {
      spdlog::info("upstream {}: no subscriptions/listen ({}); its tool list is refreshed by ttlMs "
                   "and on reconnects only", config_.name, codemode::LogLongText(ended.status().message()));
      return;
    }
    // A change while no stream was open would be missed: ask for the list once more.
    if (on_tools_list_changed_) on_tools_list_changed_();
    pause = absl::Now() - opened >= absl::Minutes(1) ? absl::Seconds(1) : std::min(pause * 2, absl::Minutes(5));
    codemode::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&closing_), pause);
  }
}

codemode::SteadyTime McpClient::tools_expire() const {
  codemode::MutexLock lock(&mu_);
  return tools_expire_;
}

json McpClient::Enveloped(json params) const { return stateless_ ? Envelope(std::move(params)) : params; }

json McpClient::Envelope(json params) const {
  if (!params.is_object()) params = json::object();
  json& meta = params["_meta"];
  if (!meta.is_object()) meta = json::object();
  meta[kMetaProtocolVersion] = kStatelessVersion;
  meta[kMetaClientCapabilities] = json::object();  // no sampling, elicitation or roots
  meta[kMetaClientInfo] = {{"name", options_.client_name}, {"version", options_.client_version}};
  return params;
}

bool McpClient::Discover() {
  JsonRpcClient::RequestOptions request;
  request.timeout = std::min(options_.discover_timeout, options_.connect_timeout);
  request.notify_cancelled = false;
  const json params = Envelope(json::object());
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<json> found = rpc_->Request("server/discover", params, request);
    if (!found.ok()) {
      const std::string why(found.status().message());
      // -32022 that lists the version asked for: a corrective answer; ask once more (the
      // SDK's `auto` negotiation does the same).
      if (attempt == 0 && absl::StrContains(why, "(code -32022)") &&
          absl::StrContains(why, kStatelessVersion)) {
        continue;
      }
      spdlog::debug("upstream {}: server/discover: {}; initializing (protocol 2025)", config_.name,
                    codemode::LogLongText(why));
      return false;
    }
    auto versions = found->is_object() ? found->find("supportedVersions") : found->end();
    if (!found->is_object() || versions == found->end() || !versions->is_array() ||
        std::find(versions->begin(), versions->end(), json(kStatelessVersion)) == versions->end()) {
      return false;
    }
    stateless_ = true;
    protocol_version_ = kStatelessVersion;
    // Upstream input: names of the wrong type are as good as none.
    if (auto meta = found->find("_meta"); meta != found->end() && meta->is_object()) {
      if (auto info = meta->find(kMetaServerInfo); info != meta->end() && info->is_object()) {
        server_name_ = Clip(codemode::StringField(*info, "name").value_or(""), kMaxServerName);
      }
    }
    instructions_ = Clip(codemode::StringField(*found, "instructions").value_or(""), kMaxInstructions);
    return true;
  }
  return false;
}

absl::Status McpClient::Initialize() {
  json params = {
      {"protocolVersion", kUpstreamProtocolVersions[0]},
      {"capabilities", json::object()},
      {"clientInfo", {{"name", options_.client_name}, {"version", options_.client_version}}}};
  JsonRpcClient::RequestOptions request;
  request.timeout = options_.connect_timeout;
  request.notify_cancelled = false;  // initialize must not be cancelled (spec)
  absl::StatusOr<json> init = rpc_->Request("initialize", std::move(params), request);
  if (!init.ok()) {
    if (absl::IsDeadlineExceeded(init.status())) {
      return absl::DeadlineExceededError("initialize timed out");
    }
    if (absl::IsInternal(init.status())) {  // a JSON-RPC error
      return absl::UnavailableError(absl::StrCat("initialize failed: ", init.status().message()));
    }
    return init.status();
  }
  if (!init->is_object()) return absl::UnavailableError("initialize: result is not an object");

  // Upstream input: a protocolVersion of the wrong type is as good as none (value() would
  // throw on it).
  protocol_version_ = codemode::StringField(*init, "protocolVersion").value_or("");
  if (!IsUpstreamVersion(protocol_version_)) {
    // Spec: a client that does not support the server's version should disconnect.
    return absl::UnavailableError(
        absl::StrCat("unsupported protocol version \"", protocol_version_, "\""));
  }
  if (init->contains("serverInfo") && (*init)["serverInfo"].is_object() &&
      (*init)["serverInfo"].contains("name") && (*init)["serverInfo"]["name"].is_string()) {
    server_name_ = Clip((*init)["serverInfo"]["name"].get<std::string>(), kMaxServerName);
  }
  if (init->contains("instructions") && (*init)["instructions"].is_string()) {
    instructions_ = Clip((*init)["instructions"].get<std::string>(), kMaxInstructions);
  }
  transport_->OnInitialized(protocol_version_);
  absl::Status notified = rpc_->Notify("notifications/initialized", json());
  if (!notified.ok()) {
    return absl::UnavailableError(
        absl::StrCat("notifications/initialized: ", notified.message()));
  }
  return absl::OkStatus();
}

namespace {
// What a tool weighs once JSON-escaped, as the catalog travels to the sandbox.
size_t CatalogBytes(const UpstreamTool& t) {
  return json(t.name).dump().size() + json(t.description).dump().size() +
         t.input_schema.dump().size() + t.output_schema.dump().size();
}
}  // namespace

absl::StatusOr<std::vector<UpstreamTool>> McpClient::ListTools(absl::Duration timeout) {
  absl::StatusOr<std::vector<UpstreamTool>> tools = ListAllPages(timeout);
  if (tools.ok()) {
    std::map<std::string, std::vector<ParamHeader>> headers;
    for (const UpstreamTool& t : *tools) {
      if (!t.param_headers.empty()) headers[t.name] = t.param_headers;
    }
    transport_->SetParamHeaders(std::move(headers));
  }
  return tools;
}

absl::StatusOr<std::vector<UpstreamTool>> McpClient::ListAllPages(absl::Duration timeout) {
  constexpr int kMaxPages = 1000;  // a server whose cursors never end
  uint64_t ttl_ms = UINT64_MAX;
  std::vector<UpstreamTool> all;
  size_t bytes = 0;
  std::set<std::string> names;
  std::set<std::string> cursors_seen;
  std::string cursor;
  JsonRpcClient::RequestOptions request;
  request.timeout = timeout;
  for (int page = 0; page < kMaxPages; ++page) {
    json params = json::object();
    if (!cursor.empty()) params["cursor"] = cursor;
    absl::StatusOr<json> result = rpc_->Request("tools/list", Enveloped(std::move(params)), request);
    if (!result.ok()) {
      if (absl::IsDeadlineExceeded(result.status())) {
        return absl::DeadlineExceededError("tools/list timed out");
      }
      return absl::Status(result.status().code(),
                          absl::StrCat("tools/list: ", result.status().message()));
    }
    for (auto& tool : ParseTools(config_.name, *result)) {
      if (tool.name.size() > codemode::kMaxCatalogNameBytes) {
        // No sandbox could call it (a runner's tool_call carries at most this much), and a
        // session that tried would be lost: never offered.
        spdlog::warn("upstream {}: tool {} left out: its name is {} bytes, at most {}",
                     config_.name, codemode::LogText(tool.name), tool.name.size(),
                     codemode::kMaxCatalogNameBytes);
        continue;
      }
      if (!names.insert(tool.name).second) {
        spdlog::warn("upstream {}: duplicate tool {} ignored", config_.name,
                     codemode::LogText(tool.name));
        continue;
      }
      bytes += CatalogBytes(tool);
      all.push_back(std::move(tool));
    }
    if (bytes > options_.max_catalog_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "its tool catalog is over ", bytes, " bytes (", all.size(),
          " tools so far); the limit is ", options_.max_catalog_bytes,
          " (--max_catalog_bytes_per_upstream), so it is left out"));
    }
    if (auto ttl = result->find("ttlMs"); ttl != result->end() && ttl->is_number_unsigned()) {
      ttl_ms = std::min(ttl_ms, ttl->get<uint64_t>());
    }
    cursor = codemode::StringField(*result, "nextCursor").value_or("");
    if (cursor.empty()) {
      // ttlMs says how long the list may be kept (0: not at all, which a catalog cannot
      // honour; it waits for a change notification instead).
      codemode::MutexLock lock(&mu_);
      tools_expire_ = ttl_ms == 0 || ttl_ms == UINT64_MAX
                          ? codemode::SteadyTime::max()
                          : codemode::SteadyDeadline(absl::Milliseconds(std::min<uint64_t>(ttl_ms, INT64_MAX)));
      return all;
    }
    if (!cursors_seen.insert(cursor).second) {
      spdlog::warn("upstream {}: tools/list cursor repeats; stopping", config_.name);
      return all;
    }
  }
  spdlog::warn("upstream {}: tools/list has more than {} pages; stopping", config_.name,
               kMaxPages);
  return all;
}

absl::StatusOr<json> McpClient::CallTool(const std::string& tool, const json& arguments,
                                         const CallOptions& options, absl::Duration timeout) {
  json params = Enveloped({{"name", tool},
                           {"arguments", arguments.is_null() ? json::object() : arguments}});
  if (!options.traceparent.empty()) params["_meta"]["traceparent"] = options.traceparent;
  JsonRpcClient::RequestOptions request;
  request.timeout = timeout;
  request.cancel = options.cancel;
  // Over HTTP stateless MCP cancels by closing the request's stream (which Abandon
  // does); there is no session to send notifications/cancelled to.
  request.notify_cancelled = !(stateless_ && config_.type == UpstreamConfig::Type::kStreamableHttp);
  request.on_progress = options.on_progress;
  request.answer = options.answer;
  absl::StatusOr<json> result = rpc_->Request("tools/call", std::move(params), request);
  if (result.ok() && !result->is_object()) {
    return absl::InternalError("tools/call: the result is not an object");
  }
  return result;
}

void McpClient::Close() {
  std::call_once(close_once_, [this] {
    std::shared_ptr<codemode::CancelToken> listening;
    {
      codemode::MutexLock lock(&mu_);
      closing_ = true;
      listening = listen_request_;
    }
    if (listening) listening->Cancel("closing");
    rpc_->Close();
    if (listener_.joinable()) listener_.join();
  });
}

bool McpClient::connected() const { return rpc_->connected(); }

std::string McpClient::disconnect_reason() const { return rpc_->disconnect_reason(); }

bool McpClient::cut_for_misbehaviour() const {
  return transport_ != nullptr && transport_->CutForMisbehaviour();
}

}  // namespace gateway
