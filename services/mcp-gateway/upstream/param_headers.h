// Custom headers from tool parameters (SEP-2243, MCP 2026-07-28): a property of a tool's
// inputSchema may carry "x-mcp-header": "<Name>", and a client calling the tool over HTTP
// in stateless MCP mirrors that argument into the header Mcp-Param-<Name>, so that
// infrastructure (a load balancer, a gateway) can route on it without reading the body.
// A tool whose declarations are invalid must not be used at all.
//
//   schema: {"properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
//   ParamHeadersOf(schema)                     -> {{"Region", "region"}}
//   ParamHeaderValues(it, {{"region", "eu"}})  -> {{"Mcp-Param-Region", "eu"}}
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gateway {

struct ParamHeader {
  std::string header;    // the declared name (Mcp-Param-<header>)
  std::string property;  // the top-level property whose argument it mirrors
};

// The declarations of `input_schema` (top-level properties only). INVALID_ARGUMENT saying
// why when one is not valid: the name empty, not a string, longer than 128 bytes or not an
// HTTP token (no space, colon, control or non-ASCII character); on a property whose type
// is not string, integer or boolean; or the same as another one, ignoring case.
absl::StatusOr<std::vector<ParamHeader>> ParamHeadersOf(const nlohmann::json& input_schema);

// The headers for a call with `arguments`: one per declaration whose argument is a string
// (EncodeHeaderValue), an integer (decimal) or a boolean (true/false). Null, absent or
// other arguments get none.
std::vector<std::pair<std::string, std::string>> ParamHeaderValues(const std::vector<ParamHeader>& declared,
                                                                   const nlohmann::json& arguments);

}  // namespace gateway
