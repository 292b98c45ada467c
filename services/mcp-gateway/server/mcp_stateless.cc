// The stateless revision's envelope, header checks and result shape (see mcp_stateless.h).
#include "server/mcp_stateless.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "jsonrpc/header_value.h"
#include "jsonrpc/jsonrpc.h"

namespace gateway {

using json = nlohmann::json;

namespace {

const json* Meta(const json& params) {
  if (!params.is_object()) return nullptr;
  auto meta = params.find("_meta");
  return meta != params.end() && meta->is_object() ? &*meta : nullptr;
}

json HeaderMismatch(const json& id, const std::string& header, const std::string& why) {
  return MakeError(id, kHeaderMismatch, absl::StrCat("Header mismatch: ", header, " ", why),
                   json{{"header", header}});
}


// The body field Mcp-Name must repeat, or nullptr for methods without one.
const char* NameField(const std::string& method) {
  if (method == "tools/call" || method == "prompts/get") return "name";
  if (method == "resources/read") return "uri";
  return nullptr;
}

}  // namespace

bool HasEnvelopeClaim(const json& message) {
  if (!message.is_object()) return false;
  auto params = message.find("params");
  if (params == message.end()) return false;
  const json* meta = Meta(*params);
  return meta && meta->contains(kMetaProtocolVersion);
}

bool NamesStatelessVersion(const std::string& version) { return version >= kStatelessVersion; }

std::optional<json> EnvelopeError(const json& id, const json& params) {
  const json* meta = Meta(params);
  auto invalid = [&](const std::string& why, json data) {
    return MakeError(id, kInvalidParams,
                     absl::StrCat("Invalid params: ", why,
                                  " (protocol 2026-07-28 sends the protocol version and the "
                                  "client's capabilities in params._meta of every request)"),
                     json{{"envelope", std::move(data)}});
  };
  if (!meta) return invalid("params._meta is missing", {{"missing", {"_meta"}}});
  json missing = json::array();
  for (const char* key : {kMetaProtocolVersion, kMetaClientCapabilities}) {
    if (!meta->contains(key)) missing.push_back(key);
  }
  if (!missing.empty()) {
    return invalid(absl::StrCat("params._meta lacks ", wire::Dump(missing)), {{"missing", missing}});
  }
  if (!meta->at(kMetaProtocolVersion).is_string()) {
    return invalid(absl::StrCat(kMetaProtocolVersion, " must be a string"),
                   {{"key", kMetaProtocolVersion}, {"problem", "not a string"}});
  }
  if (!meta->at(kMetaClientCapabilities).is_object()) {
    return invalid(absl::StrCat(kMetaClientCapabilities, " must be an object"),
                   {{"key", kMetaClientCapabilities}, {"problem", "not an object"}});
  }
  if (auto info = meta->find(kMetaClientInfo); info != meta->end() && !info->is_object()) {
    return invalid(absl::StrCat(kMetaClientInfo, " must be an object"),
                   {{"key", kMetaClientInfo}, {"problem", "not an object"}});
  }
  return std::nullopt;
}

std::string ClaimedVersion(const json& params) {
  const json* meta = Meta(params);
  if (!meta) return "";
  auto version = meta->find(kMetaProtocolVersion);
  return version != meta->end() && version->is_string() ? version->get<std::string>() : "";
}

json UnsupportedVersion(const json& id, const std::string& requested) {
  return MakeError(id, kUnsupportedVersion,
                   absl::StrCat("Unsupported protocol version: this server serves ", kStatelessVersion,
                                " per request, and 2025-11-25, 2025-06-18 and 2025-03-26 through "
                                "initialize"),
                   json{{"supported", {kStatelessVersion}}, {"requested", requested}});
}

std::optional<json> HeaderError(const json& id, const json& message, const StandardHeaders& headers,
                                bool has_id) {
  auto m = message.find("method");
  const std::string method = m != message.end() && m->is_string() ? m->get<std::string>() : "";
  static const json kNoParams = json::object();
  auto p = message.find("params");
  const json& params = p != message.end() && p->is_object() ? *p : kNoParams;
  std::string value;
  if (headers.protocol_version) {
    if (!DecodeHeaderValue(*headers.protocol_version, &value) || value != ClaimedVersion(params)) {
      return HeaderMismatch(id, "MCP-Protocol-Version", "does not match params._meta's protocol version");
    }
  } else if (has_id) {
    return HeaderMismatch(id, "MCP-Protocol-Version", "is required");
  }
  if (headers.method) {
    if (!DecodeHeaderValue(*headers.method, &value) || value != method) {
      return HeaderMismatch(id, "Mcp-Method", "does not match the request's method");
    }
  } else if (has_id) {
    return HeaderMismatch(id, "Mcp-Method", "is required");
  }
  const char* field = NameField(method);
  if (!field) return std::nullopt;
  auto named = params.find(field);
  if (named == params.end() || !named->is_string()) return std::nullopt;  // the method says why
  if (!headers.name) return HeaderMismatch(id, "Mcp-Name", absl::StrCat("is required for ", method));
  if (!DecodeHeaderValue(*headers.name, &value) || value != named->get_ref<const std::string&>()) {
    return HeaderMismatch(id, "Mcp-Name", absl::StrCat("does not match params.", field));
  }
  return std::nullopt;
}

bool IsCacheable(const std::string& method) {
  return method == "server/discover" || method == "tools/list" || method == "prompts/list" ||
         method == "resources/list" || method == "resources/templates/list" ||
         method == "resources/read";
}

int64_t TtlMs(const std::string& method) {
  if (method == "server/discover" || method == "tools/list" || method == "resources/templates/list") {
    return kListTtlMs;
  }
  return 0;
}

json StatelessResult(json result, const std::string& method, const json& server_info) {
  // A tools/call may answer input_required (ToolCallContext::input_required); every other
  // result is complete.
  auto type = result.find("resultType");
  const bool input_required = method == "tools/call" && type != result.end() && *type == "input_required";
  result["resultType"] = input_required ? "input_required" : "complete";
  if (!input_required && IsCacheable(method)) {
    result["ttlMs"] = TtlMs(method);
    result["cacheScope"] = "private";
  }
  json& meta = result["_meta"];
  if (!meta.is_object()) meta = json::object();
  meta[kMetaServerInfo] = server_info;
  return result;
}

int StatelessHttpStatus(const json& response) {
  auto error = response.find("error");
  if (error == response.end() || !error->is_object()) return 200;
  const int code = error->value("code", 0);
  if (code == kMethodNotFound) return 404;
  if (code == kHeaderMismatch || code == kMissingClientCapability || code == kUnsupportedVersion) return 400;
  if (code == kParseError || code == kInvalidRequest) return 400;
  if (code == kInvalidParams) {
    auto data = error->find("data");
    if (data != error->end() && data->is_object() && data->contains("envelope")) return 400;
  }
  return 200;
}

}  // namespace gateway
