// TypeScript declarations of a server's tools, generated from their JSON Schemas: what the
// run_javascript description shows the model (issue 26). The form is Cloudflare Code
// Mode's (one `declare const` per API, JSDoc from the descriptions), with the names the
// JavaScript runner defines: a global per server (its py_name) whose methods are the
// tools' py_names (but `then`, see JsMethodName in catalog.h), each taking the arguments object and
// returning a Promise of the result.
//
//   TypeScriptOptions o;
//   o.max_bytes = 16 << 10;
//   TypeScriptDeclaration d = DeclareServerTypeScript(server, o);
//   // /** Echoes back the input */
//   // declare const mcp_everything: {
//   //   /** Echoes back the input string */
//   //   echo(args: { message: string }): Promise<unknown>;
//   // };
//
// Schemas come from untrusted upstream servers, so every input is tolerated (a field of
// the wrong type is ignored, a schema that cannot be typed is `unknown`), nothing throws,
// and the output is bounded (depth, enum members, text length, total bytes), valid UTF-8,
// and valid TypeScript: no text of the schema can end a comment or a string literal, or
// start a line of code.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "catalog/catalog.h"
#include "nlohmann/json.hpp"

namespace codemode {

struct TypeScriptOptions {
  // Descriptions (and defaults) as JSDoc, properties with one a line; false: compact types
  // on one line and no comments.
  bool jsdoc = true;
  // With jsdoc false: each tool still gets a JSDoc of its description's first line (at
  // most max_description_bytes and max_description_lines; and its MCP name when renamed),
  // its types stay compact.
  bool tool_jsdoc = false;
  // Schema nesting rendered (each object, array item, union member or $ref is a level);
  // deeper schemas are `unknown`.
  int max_depth = 8;
  // Larger enums (and anyOf/oneOf/allOf/type lists) become their members' base types.
  size_t max_union_members = 64;
  // A tool's description in its JSDoc: bytes and lines; a property's: one line of
  // max_property_description_bytes.
  size_t max_description_bytes = 1024;
  size_t max_description_lines = 12;
  size_t max_property_description_bytes = 200;
  // The whole declaration. Tools that do not fit are left out with a comment saying how
  // many; a type that would not fit is `unknown`. This also bounds the work done for
  // schemas whose $refs fan out.
  size_t max_bytes = 64u << 10;
};

// The type of the values `schema` accepts; $refs resolve against `root` (the tool's
// whole input or output schema). Never throws.
std::string SchemaToTypeScript(const nlohmann::json& schema, const nlohmann::json& root,
                               const TypeScriptOptions& options = {});

struct TypeScriptDeclaration {
  std::string text;
  bool complete = true;  // false: tools left out or types cut short by max_bytes
};

// `declare const <server.py_name>: { <JsMethodName(tool)>(args: In): Promise<Out>; ... };`
// with In from each tool's input_schema and Out from its output_schema (`unknown` when
// null). Arguments are optional (`args?`) when the schema requires no property.
TypeScriptDeclaration DeclareServerTypeScript(const CatalogServer& server,
                                              const TypeScriptOptions& options = {});

// A JavaScript (and JSON) string literal of `text`: quotes, backslashes, control
// characters, line and paragraph separators and bidi controls escaped; bytes that are not
// UTF-8 become U+FFFD.
std::string JsStringLiteral(absl::string_view text);

// `text` as one line of comment text (in // or /** */) of at most `max_bytes` (then it ends
// in "…"): line terminators and other control characters are spaces, "*/" is "*\/",
// bytes that are not UTF-8 are U+FFFD.
std::string JsCommentLine(absl::string_view text, size_t max_bytes);

// Whether `name` is an ASCII JavaScript IdentifierName ([A-Za-z_$][A-Za-z0-9_$]*), so it
// may be a property name unquoted.
bool IsJsIdentifierName(absl::string_view name);

}  // namespace codemode
