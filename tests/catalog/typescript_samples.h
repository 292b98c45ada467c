// Schemas for the TypeScript generator's tests (typescript_test.cc, typescript_tsc_test.cc):
// tools of the npm `everything` reference server (@modelcontextprotocol/server-everything
// 2026.8.31, as its tools/list answers), and hostile servers built in code.
#pragma once

#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "nlohmann/json.hpp"

namespace codemode {

// Part of the `everything` server's tools/list result (its $schema keys left out).
inline constexpr char kEverythingTools[] = R"json([
  {"name": "echo", "description": "Echoes back the input string", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
  {"name": "get-annotated-message", "description": "Demonstrates how annotations can be used to provide metadata about content.", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"messageType": {"type": "string", "enum": ["error", "success", "debug"]}, "includeImage": {"default": false, "type": "boolean"}}, "required": ["messageType"]}},
  {"name": "get-env", "description": "Returns all environment variables, helpful for debugging MCP server configuration", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {}}},
  {"name": "get-resource-links", "description": "Returns up to ten resource links that reference different types of resources", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"count": {"default": 3, "type": "number"}}}},
  {"name": "get-structured-content", "description": "Returns structured content along with an output schema for client data validation", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"location": {"type": "string", "enum": ["New York", "Chicago", "Los Angeles"]}}, "required": ["location"]}, "outputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"temperature": {"type": "number"}, "conditions": {"type": "string"}, "humidity": {"type": "number"}}, "required": ["temperature", "conditions", "humidity"], "additionalProperties": false}},
  {"name": "get-sum", "description": "Returns the sum of two numbers", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}},
  {"name": "gzip-file-as-resource", "description": "Compresses a single file using gzip compression. Depending upon the selected output type, returns either the compressed data as a gzipped resource or a resource link, allowing it to be downloaded in a subsequent request during the current session.", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"name": {"default": "README.md.gz", "type": "string"}, "data": {"default": "https://raw.githubusercontent.com/modelcontextprotocol/servers/refs/heads/main/README.md", "type": "string"}, "outputType": {"default": "resourceLink", "type": "string", "enum": ["resourceLink", "resource"]}}}},
  {"name": "trigger-long-running-operation", "description": "Demonstrates a long running operation with progress updates.", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"duration": {"default": 10, "type": "number"}, "steps": {"default": 5, "type": "number"}}}}
])json";

inline CatalogServer EverythingServer() {
  CatalogServer server{"everything",
                       "mcp_everything",
                       "# Everything Server \u2013 Server Instructions\n\nAudience: These "
                       "instructions are written for an LLM.",
                       {}};
  for (const auto& t : nlohmann::json::parse(kEverythingTools)) {
    CatalogTool tool;
    tool.name = t["name"];
    tool.py_name = SanitizeIdentifier(tool.name);
    tool.description = t["description"];
    tool.input_schema = t["inputSchema"];
    tool.output_schema = t.value("outputSchema", nlohmann::json());
    server.tools.push_back(std::move(tool));
  }
  return server;
}

// `{"type": "object", "properties": {"a": {"type": "object", "properties": {"a": ...}}}}`
// `depth` levels deep. ParseUntrustedJson would refuse it, but a schema built in code is not
// parsed. Built by moves: nlohmann's copies and dump() recurse.
inline nlohmann::json DeeplyNestedSchema(int depth) {
  nlohmann::json schema = {{"type", "string"}};
  for (int i = 0; i < depth; ++i) {
    nlohmann::json outer = {{"type", "object"}, {"required", {"a"}}};
    outer["properties"]["a"] = std::move(schema);
    schema = std::move(outer);
  }
  return schema;
}

}  // namespace codemode
