// Custom headers from tool parameters (param_headers.h).
#include "upstream/param_headers.h"

#include <cstring>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "jsonrpc/header_value.h"

namespace gateway {
namespace {

constexpr size_t kMaxHeaderName = 128;

// RFC 9110 token characters.
bool IsToken(const std::string& name) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    if (!absl::ascii_isalnum(c) && std::strchr("!#$%&'*+-.^_`|~", c) == nullptr) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<ParamHeader>> ParamHeadersOf(const nlohmann::json& input_schema) {
  std::vector<ParamHeader> declared;
  if (!input_schema.is_object()) return declared;
  auto properties = input_schema.find("properties");
  if (properties == input_schema.end() || !properties->is_object()) return declared;
  std::set<std::string> seen;  // lower case
  for (auto it = properties->begin(); it != properties->end(); ++it) {
    const std::string& property = it.key();
    const nlohmann::json& schema = it.value();
    if (!schema.is_object()) continue;
    auto name = schema.find("x-mcp-header");
    if (name == schema.end()) continue;
    auto invalid = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat("x-mcp-header of property \"", absl::CEscape(property.substr(0, 64)), "\" ", why));
    };
    if (!name->is_string()) return invalid("is not a string");
    const std::string& header = name->get_ref<const std::string&>();
    if (header.size() > kMaxHeaderName) return invalid(absl::StrCat("is longer than ", kMaxHeaderName, " bytes"));
    if (!IsToken(header)) return invalid("is not an HTTP header name (empty, or a space, colon, control or non-ASCII character)");
    auto type = schema.find("type");
    const bool primitive = type != schema.end() && type->is_string() &&
                           (*type == "string" || *type == "integer" || *type == "boolean");
    if (!primitive) return invalid("is on a property whose type is not string, integer or boolean");
    if (!seen.insert(absl::AsciiStrToLower(header)).second) return invalid(absl::StrCat("repeats \"", header, "\""));
    declared.push_back({header, property});
  }
  return declared;
}

std::vector<std::pair<std::string, std::string>> ParamHeaderValues(const std::vector<ParamHeader>& declared,
                                                                   const nlohmann::json& arguments) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!arguments.is_object()) return headers;
  for (const ParamHeader& p : declared) {
    auto value = arguments.find(p.property);
    if (value == arguments.end()) continue;
    std::string text;
    if (value->is_string()) {
      text = EncodeHeaderValue(value->get<std::string>());
    } else if (value->is_number_integer() || value->is_boolean()) {
      text = value->dump();
    } else {
      continue;
    }
    headers.emplace_back(absl::StrCat("Mcp-Param-", p.header), std::move(text));
  }
  return headers;
}

}  // namespace gateway
