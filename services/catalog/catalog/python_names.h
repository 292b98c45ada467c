// The Python parameter names of a tool, from its input schema: what the Python runner's
// signature of `await mcp_x.tool(...)` uses. Computed here, once, with CPython's rules for
// str (python_name_tables.cc), and sent to the runner in set_catalog, which only reads them.
//
//   PythonParameters p = PythonParameterNames(tool.input_schema);
//   // {"max-results": "max_results", "from": "from_", "a b": "a_b"}, kwargs "" when every
//   // property has a name, else the name of the ** parameter that carries the others.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace codemode {

// Python 3.11's hard keywords: names that cannot be attributes, globals or parameters.
bool IsPythonKeyword(absl::string_view name);

// str.isidentifier() of the UTF-8 `name` (false for text that is not UTF-8).
bool IsPythonIdentifier(absl::string_view name);

struct CatalogParam {
  std::string name;     // the schema's property name, sent to the tool
  std::string py_name;  // its Python parameter; empty: only reachable through **kwargs
};

struct PythonParameters {
  // Required properties first (in the schema's order, then required names the schema does
  // not describe), then optional ones: the runner's signature order.
  std::vector<CatalogParam> params;
  std::string kwargs;  // the ** parameter: empty when every param has a py_name
};

// Properties that are identifiers (and not keywords) keep their name, unless NFKC would
// change them: Python reads identifiers in source as NFKC, so `ｆ=` typed as shown would
// send `f` (python_nfkc_table.cc: characters NFKC changes or composes). The others are made
// one like SanitizeIdentifier, but with Python's Unicode classes (`max-results` ->
// `max_results`, `from` -> `from_`, `1x` -> `_1x`), and have none (kwargs only) when that
// is not an identifier or is taken. kwargs is the first of kwargs, extra, _kwargs,
// __kwargs, kwargs_2, kwargs_3, ... no parameter has. A schema that is not an object, or
// `properties`/`required` of the wrong type, mean no parameters.
PythonParameters PythonParameterNames(const nlohmann::json& input_schema);

}  // namespace codemode
