// TypeScript declarations from JSON Schema. See typescript.h.
#include "catalog/typescript.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/untrusted_json.h"
#include "base/utf8.h"

namespace codemode {
namespace {

using nlohmann::json;

// ---- text -------------------------------------------------------------------------------

// Longer keys are left out of an object type (and longer string constants are `string`).
constexpr size_t kMaxLiteralBytes = 256;
// A default value's JSON longer than this is not shown.
constexpr size_t kMaxDefaultBytes = 80;
// $ref pointers with more segments are not followed.
constexpr size_t kMaxRefSegments = 32;

// JavaScript's line terminators and Unicode's NEXT LINE.
bool IsLineBreak(uint32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

// Characters that would be invisible or reorder text: C0 and C1 controls, DEL, bidi
// marks, embeddings, overrides and isolates, the byte order mark, zero-width characters,
// the soft hyphen, invisible operators and tag characters: text a model would read and a
// person reviewing the description would not see.
bool IsHiddenControl(uint32_t cp) {
  return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0xAD || cp == 0x180E ||
         (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xFEFF ||
         (cp >= 0xFFF9 && cp <= 0xFFFB) ||
         (cp >= 0xE0000 && cp <= 0xE007F);  // tag characters: invisible text for a model
}

size_t Utf8Length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Calls `f(code point)` for each character of `text` (U+FFFD for each byte that is not
// UTF-8) until it returns false.
template <typename F>
void ForEachCodePoint(absl::string_view text, F f) {
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = static_cast<unsigned char>(text[i]);
    size_t n = 1;
    if (cp >= 0x80) {
      n = DecodeUtf8(text, i, &cp);
      if (n == 0) cp = 0xFFFD, n = 1;
    }
    i += n;
    if (!f(cp)) return;
  }
}

void TrimTrailingSpaces(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

// `text` as lines of comment text, at most `max_lines` (1: line breaks become spaces) and
// `max_bytes`: hidden controls become spaces, runs of spaces one, blank lines go, "*/"
// becomes "*\/" (so the text cannot end the comment), and text cut short ends in "…".
std::vector<std::string> CommentLines(absl::string_view text, size_t max_bytes, size_t max_lines) {
  std::vector<std::string> lines(1);
  size_t bytes = 0;
  bool cut = false;
  ForEachCodePoint(text, [&](uint32_t cp) {
    std::string& line = lines.back();
    if (IsLineBreak(cp) && max_lines > 1) {
      TrimTrailingSpaces(line);
      if (line.empty()) return true;
      if (lines.size() == max_lines) return !(cut = true);
      lines.emplace_back();
      return true;
    }
    if (IsLineBreak(cp) || IsHiddenControl(cp)) cp = ' ';
    if (cp == ' ' && (line.empty() || line.back() == ' ')) return true;
    const bool escape = cp == '/' && !line.empty() && line.back() == '*';
    if (bytes + Utf8Length(cp) + escape > max_bytes) return !(cut = true);
    if (escape) line.push_back('\\');
    AppendUtf8(line, cp);
    bytes += Utf8Length(cp) + escape;
    return true;
  });
  for (auto& line : lines) TrimTrailingSpaces(line);
  if (lines.back().empty()) lines.pop_back();
  if (cut) {
    if (lines.empty()) lines.emplace_back();
    absl::StrAppend(&lines.back(), lines.back().empty() ? "" : " ", "…");
  }
  return lines;
}

// ES reserved words (and strict mode's): quoted as property names, never declared.
bool IsReservedWord(absl::string_view name) {
  static const auto* words = new std::set<absl::string_view>{
      "await",    "break",   "case",       "catch",     "class",    "const",  "continue",
      "debugger", "default", "delete",     "do",        "else",     "enum",   "export",
      "extends",  "false",   "finally",    "for",       "function", "if",     "implements",
      "import",   "in",      "instanceof", "interface", "let",      "new",    "null",
      "package",  "private", "protected",  "public",    "return",   "static", "super",
      "switch",   "this",    "throw",      "true",      "try",      "typeof", "var",
      "void",     "while",   "with",       "yield"};
  return words->count(name) > 0;
}

std::string PropertyKey(absl::string_view name) {
  return IsJsIdentifierName(name) && !IsReservedWord(name) ? std::string(name)
                                                           : JsStringLiteral(name);
}

// ---- types ------------------------------------------------------------------------------

// Binding strength of a rendered type, for parentheses: `(A | B)[]`, `(A | B) & C`.
enum Precedence { kUnion, kIntersection, kPrimary };

struct Ts {
  std::string text;
  Precedence precedence = kPrimary;
};

Ts Unknown() { return {"unknown"}; }
Ts Never() { return {"never"}; }

std::string Wrapped(const Ts& t, Precedence at_least) {
  return t.precedence < at_least ? absl::StrCat("(", t.text, ")") : t.text;
}

// The literal type of an enum or const member; past max_union_members (or when there is
// no literal type for it) its base type.
std::string Literal(const json& v, bool base_type) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    return base_type || s.size() > kMaxLiteralBytes ? "string" : JsStringLiteral(s);
  }
  if (v.is_number()) return base_type ? "number" : v.dump();
  if (v.is_boolean()) return base_type ? "boolean" : v.dump();
  if (v.is_null()) return "null";
  return v.is_array() ? "unknown[]" : "Record<string, unknown>";
}

// Renders schemas against one root. `work` counts the bytes of every type rendered (a
// type nested n deep counts n times), shared by all generators of one declaration: past
// `work_limit` every further type is `unknown`, so $refs that fan out cost bounded time.
class TypeGenerator {
 public:
  TypeGenerator(const json& root, const TypeScriptOptions& options, size_t* work, size_t work_limit)
      : root_(root), options_(options), work_(work), work_limit_(work_limit) {}

  Ts Type(const json& schema, int depth, int indent);
  bool cut() const { return cut_; }

 private:
  Ts Dispatch(const json& schema, int depth, int indent);
  Ts Ref(const std::string& ref, int depth, int indent);
  Ts Combine(const json& members, bool is_union, int depth, int indent);
  Ts Literals(const json& values) const;
  Ts TypeNames(const json& type, const json& schema, int depth, int indent);
  Ts TypeName(const std::string& name, const json& schema, int depth, int indent);
  Ts Object(const json& schema, int depth, int indent);
  std::vector<std::string> Members(const json& properties, const json& schema, int depth,
                                   int indent, bool* multiline);
  Ts Array(const json& schema, int depth, int indent);
  std::string PropertyDoc(const json& property) const;
  const json* Resolve(const std::string& ref) const;
  bool OverBudget() const { return *work_ > work_limit_; }

  const json& root_;
  const TypeScriptOptions& options_;
  size_t* work_;
  const size_t work_limit_;
  std::vector<const json*> expanding_;  // $ref targets being rendered (cycles: `unknown`)
  bool cut_ = false;
};

Ts TypeGenerator::Type(const json& schema, int depth, int indent) {
  if (OverBudget()) {
    cut_ = true;
    return Unknown();
  }
  if (depth >= options_.max_depth) return Unknown();
  if (schema.is_boolean()) return schema.get<bool>() ? Unknown() : Never();
  if (!schema.is_object()) return Unknown();
  Ts t = Dispatch(schema, depth, indent);
  auto nullable = schema.find("nullable");
  if (nullable != schema.end() && nullable->is_boolean() && nullable->get<bool>() &&
      t.text != "unknown" && t.text != "null") {
    t = {t.text == "never" ? "null" : absl::StrCat(t.text, " | null"), kUnion};
  }
  *work_ += t.text.size();
  return t;
}

Ts TypeGenerator::Dispatch(const json& schema, int depth, int indent) {
  if (auto ref = schema.find("$ref"); ref != schema.end() && ref->is_string()) {
    return Ref(ref->get<std::string>(), depth, indent);
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    auto members = schema.find(key);
    if (members != schema.end() && members->is_array() && !members->empty()) {
      return Combine(*members, key[1] != 'l', depth, indent);
    }
  }
  if (auto c = schema.find("const"); c != schema.end()) return {Literal(*c, false)};
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) return Literals(*e);
  if (auto type = schema.find("type"); type != schema.end()) {
    return TypeNames(*type, schema, depth, indent);
  }
  if (schema.contains("properties") || schema.contains("additionalProperties")) {
    return Object(schema, depth, indent);
  }
  if (schema.contains("items") || schema.contains("prefixItems")) {
    return Array(schema, depth, indent);
  }
  return Unknown();
}

const json* TypeGenerator::Resolve(const std::string& ref) const {
  if (ref == "#") return &root_;
  if (ref.rfind("#/", 0) != 0) return nullptr;  // only pointers into this schema
  std::vector<std::string> segments = absl::StrSplit(ref.substr(2), '/');
  if (segments.size() > kMaxRefSegments) return nullptr;
  const json* at = &root_;
  for (std::string& segment : segments) {
    std::string key;
    for (size_t i = 0; i < segment.size(); ++i) {  // JSON Pointer: ~1 is '/', ~0 is '~'
      if (segment[i] == '~' && i + 1 < segment.size() &&
          (segment[i + 1] == '0' || segment[i + 1] == '1')) {
        key.push_back(segment[++i] == '1' ? '/' : '~');
      } else {
        key.push_back(segment[i]);
      }
    }
    if (!at->is_object()) return nullptr;
    auto next = at->find(key);
    if (next == at->end()) return nullptr;
    at = &*next;
  }
  return at;
}

Ts TypeGenerator::Ref(const std::string& ref, int depth, int indent) {
  const json* target = Resolve(ref);
  if (target == nullptr ||
      std::find(expanding_.begin(), expanding_.end(), target) != expanding_.end()) {
    return Unknown();
  }
  expanding_.push_back(target);
  Ts t = Type(*target, depth + 1, indent);
  expanding_.pop_back();
  return t;
}

// anyOf/oneOf as a union, allOf as an intersection, members deduplicated.
Ts TypeGenerator::Combine(const json& members, bool is_union, int depth, int indent) {
  if (members.size() > options_.max_union_members) return Unknown();
  std::vector<Ts> parts;
  std::set<std::string> seen;
  for (const json& member : members) {
    Ts t = Type(member, depth + 1, indent);
    // unknown absorbs a union and vanishes from an intersection; never the other way round.
    if (t.text == (is_union ? "unknown" : "never")) return t;
    if (t.text == (is_union ? "never" : "unknown")) continue;
    if (seen.insert(t.text).second) parts.push_back(std::move(t));
  }
  if (parts.empty()) return is_union ? Never() : Unknown();
  if (parts.size() == 1) return parts[0];
  std::vector<std::string> texts;
  for (const Ts& t : parts) texts.push_back(Wrapped(t, is_union ? kUnion : kIntersection));
  return {absl::StrJoin(texts, is_union ? " | " : " & "), is_union ? kUnion : kIntersection};
}

Ts TypeGenerator::Literals(const json& values) const {
  if (values.empty()) return Never();
  const bool too_many = values.size() > options_.max_union_members;
  std::vector<std::string> parts;
  std::set<std::string> seen;
  for (const json& v : values) {
    std::string t = Literal(v, too_many);
    if (seen.insert(t).second) parts.push_back(std::move(t));
  }
  return {absl::StrJoin(parts, " | "), parts.size() > 1 ? kUnion : kPrimary};
}

Ts TypeGenerator::TypeNames(const json& type, const json& schema, int depth, int indent) {
  if (type.is_string()) return TypeName(type.get<std::string>(), schema, depth, indent);
  if (!type.is_array() || type.empty() || type.size() > options_.max_union_members) {
    return Unknown();
  }
  std::vector<Ts> parts;
  std::set<std::string> seen;
  for (const json& name : type) {
    Ts t = name.is_string() ? TypeName(name.get<std::string>(), schema, depth, indent) : Unknown();
    if (t.text == "unknown") return t;
    if (seen.insert(t.text).second) parts.push_back(std::move(t));
  }
  if (parts.size() == 1) return parts[0];
  std::vector<std::string> texts;
  for (const Ts& t : parts) texts.push_back(t.text);
  return {absl::StrJoin(texts, " | "), kUnion};
}

Ts TypeGenerator::TypeName(const std::string& name, const json& schema, int depth, int indent) {
  if (name == "string") return {"string"};
  if (name == "number" || name == "integer") return {"number"};
  if (name == "boolean") return {"boolean"};
  if (name == "null") return {"null"};
  if (name == "object") return Object(schema, depth, indent);
  if (name == "array") return Array(schema, depth, indent);
  return Unknown();
}

std::string Pad(int n) { return std::string(static_cast<size_t>(n), ' '); }

Ts TypeGenerator::Object(const json& schema, int depth, int indent) {
  Ts additional;  // empty: no index signature
  if (auto a = schema.find("additionalProperties"); a != schema.end()) {
    if (a->is_object()) additional = Type(*a, depth + 1, indent);
    if (a->is_boolean()) additional = a->get<bool>() ? Unknown() : Never();
  }
  auto properties = schema.find("properties");
  bool multiline = false;
  std::vector<std::string> members;
  if (properties != schema.end() && properties->is_object()) {
    members = Members(*properties, schema, depth, indent, &multiline);
  }
  if (members.empty()) {
    return {absl::StrCat("Record<string, ", additional.text.empty() ? "unknown" : additional.text,
                         ">")};
  }
  std::string body;
  if (multiline) {
    body = absl::StrCat("{\n", absl::StrJoin(members, ""), Pad(indent), "}");
  } else {
    body = absl::StrCat("{ ", absl::StrJoin(members, "; "), " }");
  }
  if (additional.text.empty() || additional.text == "never") return {body};
  return {absl::StrCat(body, " & Record<string, ", additional.text, ">"), kIntersection};
}

// The property signatures of an object type: one a line with their JSDoc when any has one
// (`*multiline`), else for one line. Properties past the work budget become an index
// signature, so the type stays open.
std::vector<std::string> TypeGenerator::Members(const json& properties, const json& schema,
                                                int depth, int indent, bool* multiline) {
  std::set<std::string> required;
  if (auto r = schema.find("required"); r != schema.end() && r->is_array()) {
    for (const json& name : *r) {
      if (name.is_string()) required.insert(name.get<std::string>());
    }
  }
  std::vector<std::pair<std::string, std::string>> docs_and_members;
  bool open = false;
  for (const auto& [key, property] : properties.items()) {
    if (OverBudget()) {
      cut_ = open = true;
      break;
    }
    if (key.size() > kMaxLiteralBytes) {
      open = true;
      continue;
    }
    std::string doc = options_.jsdoc ? PropertyDoc(property) : "";
    *multiline = *multiline || !doc.empty();
    Ts t = Type(property, depth + 1, indent + 2);
    docs_and_members.emplace_back(
        std::move(doc),
        absl::StrCat(PropertyKey(key), required.count(key) ? "" : "?", ": ", t.text));
  }
  if (open) docs_and_members.emplace_back("", "[key: string]: unknown");
  std::vector<std::string> out;
  for (auto& [doc, member] : docs_and_members) {
    if (!*multiline) {
      out.push_back(std::move(member));
      continue;
    }
    std::string pad = Pad(indent + 2);
    out.push_back(doc.empty() ? absl::StrCat(pad, member, ";\n")
                              : absl::StrCat(pad, "/** ", doc, " */\n", pad, member, ";\n"));
  }
  return out;
}

Ts TypeGenerator::Array(const json& schema, int depth, int indent) {
  const json* tuple = ArrayField(schema, "prefixItems");
  if (tuple == nullptr) tuple = ArrayField(schema, "items");
  if (tuple != nullptr) {
    if (tuple->size() > options_.max_union_members) return {"unknown[]"};
    std::vector<std::string> elements;
    for (const json& element : *tuple) elements.push_back(Type(element, depth + 1, indent).text);
    return {absl::StrCat("[", absl::StrJoin(elements, ", "), "]")};
  }
  auto items = schema.find("items");
  if (items == schema.end() || !(items->is_object() || items->is_boolean())) return {"unknown[]"};
  return {absl::StrCat(Wrapped(Type(*items, depth + 1, indent), kPrimary), "[]")};
}

// A property's description and default, for a one-line JSDoc comment.
std::string TypeGenerator::PropertyDoc(const json& property) const {
  if (!property.is_object()) return "";
  std::string doc;
  if (auto d = property.find("description"); d != property.end() && d->is_string()) {
    doc = JsCommentLine(d->get_ref<const std::string&>(), options_.max_property_description_bytes);
  }
  // Scalars only: a container's dump() would recurse through whatever depth it has.
  if (auto d = property.find("default"); d != property.end() && d->is_primitive()) {
    std::string value = d->dump(-1, ' ', false, json::error_handler_t::replace);
    if (value.size() <= kMaxDefaultBytes) {
      absl::StrAppend(&doc, doc.empty() ? "" : " ", "@default ",
                      JsCommentLine(value, kMaxDefaultBytes));
    }
  }
  return doc;
}

// The name a server is declared under: its py_name, which the catalog makes an identifier
// starting "mcp_"; anything else (a hand-made CatalogServer) is made one.
std::string DeclaredName(const std::string& py_name) {
  if (IsJsIdentifierName(py_name) && !IsReservedWord(py_name)) return py_name;
  return absl::StrCat("mcp_", SanitizeIdentifier(py_name));
}

// A tool's JSDoc: its description, and its MCP name when that differs from the method's
// (callTool takes the MCP name).
std::string ToolDoc(const CatalogTool& tool, const std::string& method,
                    const TypeScriptOptions& options) {
  absl::string_view text = tool.description;
  if (!options.jsdoc) text = text.substr(0, text.find('\n'));  // tool_jsdoc: the first line
  std::vector<std::string> lines =
      CommentLines(text, options.max_description_bytes, options.max_description_lines);
  if (tool.name != method) {
    lines.push_back(
        absl::StrCat("MCP name: ", JsCommentLine(JsStringLiteral(tool.name), kMaxLiteralBytes)));
  }
  if (lines.empty()) return "";
  if (lines.size() == 1) return absl::StrCat("  /** ", lines[0], " */\n");
  std::string doc = "  /**\n";
  for (const auto& line : lines) absl::StrAppend(&doc, "   * ", line, "\n");
  return absl::StrCat(doc, "   */\n");
}

// Whether the input schema requires any argument (else `args` may be left out).
bool RequiresArguments(const json& schema) {
  const json* required = ArrayField(schema, "required");
  if (required == nullptr) return false;
  return std::any_of(required->begin(), required->end(),
                     [](const json& n) { return n.is_string(); });
}

// One method signature (with its JSDoc); `*cut` when a type was cut short.
std::string ToolSignature(const CatalogServer& server, const CatalogTool& tool,
                          const TypeScriptOptions& options, size_t* work, size_t work_limit,
                          bool* cut) {
  TypeGenerator input(tool.input_schema, options, work, work_limit);
  Ts args = input.Type(tool.input_schema, 0, 2);
  Ts result = Unknown();
  TypeGenerator output(tool.output_schema, options, work, work_limit);
  if (tool.output_schema.is_object()) result = output.Type(tool.output_schema, 0, 2);
  *cut = *cut || input.cut() || output.cut();
  const std::string method = JsMethodName(server, tool);
  return absl::StrCat(options.jsdoc || options.tool_jsdoc ? ToolDoc(tool, method, options) : "", "  ",
                      PropertyKey(method),
                      RequiresArguments(tool.input_schema) ? "(args: " : "(args?: ", args.text,
                      "): Promise<", result.text, ">;\n");
}

}  // namespace

std::string JsStringLiteral(absl::string_view text) {
  std::string out = "\"";
  ForEachCodePoint(text, [&out](uint32_t cp) {
    // "*/" as "*\/" too, so that the generated text holds no "*/" but the comment ends it
    // writes (and the literal means the same).
    if (cp == '"' || cp == '\\' || (cp == '/' && out.back() == '*')) {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if ((IsHiddenControl(cp) || IsLineBreak(cp)) && cp > 0xFFFF) {  // as a surrogate pair
      absl::StrAppendFormat(&out, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + (cp & 0x3FF));
    } else if (IsHiddenControl(cp) || IsLineBreak(cp)) {
      absl::StrAppendFormat(&out, "\\u%04x", cp);
    } else {
      AppendUtf8(out, cp);
    }
    return true;
  });
  out.push_back('"');
  return out;
}

std::string JsCommentLine(absl::string_view text, size_t max_bytes) {
  std::vector<std::string> lines = CommentLines(text, max_bytes, 1);
  return lines.empty() ? "" : lines[0];
}

bool IsJsIdentifierName(absl::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string SchemaToTypeScript(const json& schema, const json& root,
                               const TypeScriptOptions& options) {
  size_t work = 0;
  TypeGenerator generator(root, options, &work, options.max_bytes);
  return generator.Type(schema, 0, 0).text;
}

TypeScriptDeclaration DeclareServerTypeScript(const CatalogServer& server,
                                              const TypeScriptOptions& options) {
  TypeScriptDeclaration out;
  std::string head;
  if (options.jsdoc) {
    std::vector<std::string> first =
        CommentLines(server.description, options.max_property_description_bytes, 2);
    if (!first.empty()) head = absl::StrCat("/** ", first[0], " */\n");
  }
  absl::StrAppend(&head, "declare const ", DeclaredName(server.py_name), ": {\n");
  const std::string kTail = "};\n";
  // Room for the line that counts the tools left out ("  // 10000 more tools ...").
  constexpr size_t kMoreLine = 80;
  if (head.size() + kTail.size() + (server.tools.empty() ? 0 : kMoreLine) > options.max_bytes) {
    return {"", false};
  }
  out.text = head;
  size_t work = 0;
  const size_t work_limit = 4 * options.max_bytes;
  size_t shown = 0;
  for (const CatalogTool& tool : server.tools) {
    std::string signature = ToolSignature(server, tool, options, &work, work_limit, &out.complete);
    const size_t reserve = shown + 1 < server.tools.size() ? kMoreLine : 0;
    if (out.text.size() + signature.size() + kTail.size() + reserve > options.max_bytes) break;
    out.text += signature;
    ++shown;
  }
  if (shown < server.tools.size()) {
    out.complete = false;
    absl::StrAppend(&out.text, "  // ", server.tools.size() - shown,
                    " more tools not shown: callTool(server, tool, args) calls any tool\n");
  }
  out.text += kTail;
  return out;
}

}  // namespace codemode
