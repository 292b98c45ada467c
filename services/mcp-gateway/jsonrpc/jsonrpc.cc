#include "jsonrpc/jsonrpc.h"

#include "absl/strings/str_cat.h"
#include "base/untrusted_json.h"

namespace gateway {

using nlohmann::json;

bool IsServedVersion(const std::string& version) {
  for (const char* v : kProtocolVersions) {
    if (version == v) return true;
  }
  return false;
}

bool IsUpstreamVersion(const std::string& version) {
  for (const char* v : kUpstreamProtocolVersions) {
    if (version == v) return true;
  }
  return false;
}

std::string NegotiateVersion(const std::string& requested) {
  return IsServedVersion(requested) ? requested : kProtocolVersions[0];
}

absl::Status ErrorToStatus(const json& error) {
  int code = 0;
  std::string text = "unknown error";
  std::string data;
  if (error.is_object()) {
    if (auto c = error.find("code"); c != error.end() && c->is_number_integer()) {
      int64_t v = c->get<int64_t>();
      if (v >= INT32_MIN && v <= INT32_MAX) code = static_cast<int>(v);
    }
    if (auto m = error.find("message"); m != error.end() && m->is_string()) {
      text = m->get<std::string>();
    }
    if (auto d = error.find("data"); d != error.end() && !d->is_null()) {
      data = d->is_string() ? d->get<std::string>() : wire::Dump(*d);
    }
  }
  std::string message = absl::StrCat(text, " (code ", code, ")");
  if (!data.empty()) absl::StrAppend(&message, ": ", data);
  switch (code) {
    case kInvalidParams:
      return absl::InvalidArgumentError(message);
    case kMethodNotFound:
      return absl::UnimplementedError(message);
    case kResourceNotFound:
      return absl::NotFoundError(message);
    case kInternalError:
    case kParseError:      // the peer could not parse what we sent: our fault
    case kInvalidRequest:
      return absl::InternalError(message);
    default:
      return absl::UnknownError(message);
  }
}

int StatusToErrorCode(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
      return kInvalidParams;
    case absl::StatusCode::kUnimplemented:
      return kMethodNotFound;
    default:
      return kInternalError;
  }
}

json MakeRequest(const json& id, const std::string& method, json params) {
  json message = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) message["params"] = std::move(params);
  return message;
}

json MakeNotification(const std::string& method, json params) {
  json message = {{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) message["params"] = std::move(params);
  return message;
}

json MakeResult(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json MakeError(const json& id, int code, const std::string& message, const json& data) {
  json error = {{"code", code}, {"message", message}};
  if (!data.is_null()) error["data"] = data;
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

absl::StatusOr<json> ParseMessage(const std::string& text, json* error_response,
                                  size_t max_values) {
  // Depth-checked before anything copies or dumps it (see base/untrusted_json.h).
  codemode::JsonLimits limits;
  limits.max_values = max_values;
  absl::StatusOr<json> maybe = codemode::ParseUntrustedJson(text, "the message", limits);
  json error;
  if (!maybe.ok()) {
    error = MakeError(nullptr, kParseError, absl::StrCat("Parse error: ", maybe.status().message()));
  } else if (maybe->is_array()) {
    error = MakeError(nullptr, kInvalidRequest, "JSON-RPC batches are not supported");
  } else if (!maybe->is_object()) {
    error = MakeError(nullptr, kInvalidRequest, "a message must be a JSON object");
  } else {
    return maybe;
  }
  if (error_response) *error_response = error;
  return absl::InvalidArgumentError(error["error"]["message"].get<std::string>());
}

}  // namespace gateway
