// The tool catalog of a session: which upstream servers and tools the sandboxed code may
// call, with the Python identifiers the runner exposes them under. The contract between
// the two services, so both link this library and nothing of each other: sandboxd
// validates every catalog a client sends and checks each tool_call frame against it; the
// gateway builds catalogs from its upstreams and applies the same rules before it sends
// one, so an upstream that would not fit is left out there, not refused for everyone.
//
// Every name the runners expose is computed here (the Python identifiers, the JavaScript
// method names, the Python parameter names) and sent in set_catalog: the runners only
// read and check them.
//
//   absl::StatusOr<Catalog> c = Catalog::FromProto(request.catalog());
//   if (c->Contains("github", "create_issue")) ...
//   runner.Send(MakeSetCatalogFrame(id, c->ToRunnerJson()));
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "catalog/python_names.h"
#include "nlohmann/json.hpp"
#include "sandbox/v1/sandbox.pb.h"

namespace codemode {

// Limits on what a client may put into a catalog.
inline constexpr size_t kMaxCatalogServers = 256;
inline constexpr size_t kMaxCatalogTools = 10000;
inline constexpr size_t kMaxCatalogBytes = 8u << 20;
// The catalog as ToRunnerJson gives it, in JSON: the names computed here come on top of
// what the client sent, and the set_catalog frame that carries it must stay within the
// runner's 16 MiB (docs/runner-protocol.md), with room for the frame's own fields.
inline constexpr size_t kMaxRunnerCatalogBytes = 15u << 20;
// The longest server or tool name: what a runner's tool_call frame may carry
// (sandboxd/frame.h), so every tool of a catalog can be called.
inline constexpr size_t kMaxCatalogNameBytes = 256;

// Turns any name into a Python identifier: characters outside [A-Za-z0-9_] become '_',
// a leading digit gets a '_' prefix, keywords get a '_' suffix, empty becomes "_".
std::string SanitizeIdentifier(std::string_view name);

// A tool's Python name before it is made unique within its server: SanitizeIdentifier,
// plus a '_' suffix when the result would name an attribute of the runner's server object
// itself (Python's special names `__x__`, whose assignment fails or changes the object, and
// its own state `_MCPServer__spec` and `_MCPServer__proxies`): one such tool would otherwise cost
// the runner the whole catalog, or replace the object's own state. The runner refuses a
// catalog with such a name (sandbox_runner/catalog.py).
std::string PythonToolName(std::string_view name);

struct CatalogTool {
  std::string name;
  std::string py_name;
  std::string description;
  nlohmann::json input_schema;   // always an object
  nlohmann::json output_schema;  // object or null
  // Set by Catalog::FromProto: JsMethodName, and PythonParameterNames(input_schema).
  std::string js_name;
  std::vector<CatalogParam> py_params;
  std::string py_kwargs;
};

struct CatalogServer {
  std::string name;
  std::string py_name;  // "mcp_<sanitised name>"
  std::string description;
  std::vector<CatalogTool> tools;
};

// The method the JavaScript runner defines for `tool` on the object of `server`: its
// py_name, except `then` (the object would be a thenable: `await mcp_x` would call the tool),
// which is the first of then_, then_2, ... that no tool of `server` has as py_name.
std::string JsMethodName(const CatalogServer& server, const CatalogTool& tool);

// Immutable once built; safe to share between threads.
class Catalog {
 public:
  Catalog() = default;

  // Validates and builds. INVALID_ARGUMENT for empty, duplicate or over-long names, schemas
  // that are not JSON objects, or a catalog over the size caps (kMaxRunnerCatalogBytes too).
  static absl::StatusOr<Catalog> FromProto(const sandbox::v1::Catalog& proto);

  bool Contains(std::string_view server, std::string_view tool) const;
  const std::vector<CatalogServer>& servers() const { return servers_; }
  size_t tool_count() const { return tool_count_; }

  // The `catalog` object of a set_catalog frame (docs/runner-protocol.md).
  nlohmann::json ToRunnerJson() const;

  // Back to the wire form (for persisting session metadata).
  sandbox::v1::Catalog ToProto() const;

 private:
  std::vector<CatalogServer> servers_;
  size_t tool_count_ = 0;
};

}  // namespace codemode
