// The run_python and run_javascript descriptions. See run_descriptions.h.
#include "adapter/run_descriptions.h"

#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/utf8.h"
#include "bridge/run_catalog.h"
#include "bridge/sandbox_egress.h"
#include "catalog/catalog.h"
#include "catalog/typescript.h"

namespace gateway {
namespace {

constexpr char kHowToCall[] =
    "Run Python 3 code in a sandbox (no network, no host files) with a persistent namespace: "
    "variables, imports and functions survive between calls. Top-level `await` works, the "
    "value of the last expression is returned, print() output comes back. Call MCP tools "
    "from the code as async functions; filter and join their results in Python and print "
    "only what you need.\n\n"
    "Example:\n"
    "  r = await mcp_server.tool_name(arg=\"value\")        # or: await tools[\"server.tool_name\"](...)\n"
    "  a, b = await asyncio.gather(mcp_x.t1(q=1), mcp_y.t2(q=2))   # concurrent calls\n"
    "  _search(\"keyword\"); _schema(\"server.tool\"); help(mcp_server.tool_name)   # discover\n"
    "A failing tool raises ToolError. Results: structured content as dict, JSON text parsed, "
    "else str or a list of content blocks.\n";

constexpr char kHowToCallJavaScript[] =
    "Run JavaScript (Node.js) in a sandbox (no network, no host files) with a persistent "
    "namespace: const, let, function and class declarations survive between calls. Top-level "
    "`await` works, the value of the trailing expression is returned, console.log() and "
    "console.error() output comes back. Call MCP tools from the code as async functions; "
    "filter and join their results in JavaScript and log only what you need.\n\n"
    "Example:\n"
    "  const r = await mcp_server.tool_name({ arg: \"value\" });   // or: await callTool(\"server\", \"tool-name\", { arg: \"value\" })\n"
    "  const [a, b] = await Promise.all([mcp_x.t1({ q: 1 }), mcp_y.t2({ q: 2 })]);   // concurrent calls\n"
    "  _search(\"keyword\"); _schema(\"server.tool\"); _discover()   // discover (synchronous, plain objects)\n"
    "A failing tool rejects with a ToolError (server, tool, message). Results: structured "
    "content as an object, JSON text parsed, else a string or an array of content blocks.\n";

// What levels 1 to 4 of run_javascript's description add: descriptions and schemas are a
// call away (the runner's worker_discovery.js), as in run_python's.
constexpr char kDiscoverJavaScript[] =
    "Use _search(text) or _schema(\"server.tool\") inside the code for details.\n";

// `how_to_call` saying what the code may reach under `egress`: "no network" as written, or
// the policy's entries and how `clients_reach` them ("fetch() reaches").
std::string WithEgress(const char* how_to_call, const std::string& egress, const char* clients_reach) {
  std::string head = how_to_call;
  std::vector<std::string> entries = PolicyEntries(egress);
  if (entries.empty()) return head;
  std::string more;
  if (entries.size() > kMaxDescribedEntries) {
    more = absl::StrCat(" and ", entries.size() - kMaxDescribedEntries, " more");
    entries.resize(kMaxDescribedEntries);
  }
  absl::StrReplaceAll({{"(no network, no host files)", "(no host files)"}}, &head);
  head.insert(head.find("\n\nExample:"),
              absl::StrCat(" Network: only ", absl::StrJoin(entries, ", "), more, "; ", clients_reach,
                           " them through the proxy already set in the environment, and "
                           "everything else is refused."));
  return head;
}

// The first line of upstream text, at most `max` bytes, with no control or invisible
// characters (JsCommentLine's rules: they become spaces).
std::string FirstLine(const std::string& text, size_t max = 100) {
  return codemode::JsCommentLine(absl::StripAsciiWhitespace(text.substr(0, text.find('\n'))), max);
}

// An upstream's name as shown in run_python's description: as it is, or as a quoted string
// literal when it holds anything escaped there: a line break in a tool's name would
// otherwise forge lines of the description.
std::string ShownName(const std::string& name) {
  std::string literal = codemode::JsStringLiteral(name);
  return literal.size() == name.size() + 2 ? name : literal;
}

// "name(a, b, c?)": required parameters plain, optional ones with '?'.
std::string Signature(const UpstreamTool& t) {
  std::vector<std::string> params;
  std::set<std::string> required;
  if (auto r = t.input_schema.find("required"); r != t.input_schema.end() && r->is_array()) {
    for (const auto& n : *r) {
      if (n.is_string()) required.insert(n.get<std::string>());
    }
  }
  if (auto p = t.input_schema.find("properties"); p != t.input_schema.end() && p->is_object()) {
    for (const auto& [name, _] : p->items()) {
      params.push_back(required.count(name) ? ShownName(name) : ShownName(name) + "?");
    }
  }
  return absl::StrCat(ShownName(t.name), "(", absl::StrJoin(params, ", "), ")");
}

// The catalog of every connected upstream by the shared catalog rules (sanitising,
// keywords, collisions), so a description names exactly what the sandbox defines.
absl::StatusOr<codemode::Catalog> DescribedCatalog(const std::vector<UpstreamStatus>& upstreams) {
  return codemode::Catalog::FromProto(BuildCatalog(upstreams, ServerAllowlist::All()));
}

std::map<std::string, std::string> PythonNames(const std::vector<UpstreamStatus>& upstreams) {
  std::map<std::string, std::string> py_names;
  absl::StatusOr<codemode::Catalog> c = DescribedCatalog(upstreams);
  if (c.ok()) {
    for (const auto& server : c->servers()) py_names[server.name] = server.py_name;
  }
  return py_names;
}

// Level 0: every tool's signature and first line; 1: tool names; 2: tool counts.
std::string ListServers(const std::vector<UpstreamStatus>& upstreams,
                        std::map<std::string, std::string>& py_names, int level) {
  std::string body = "\nServers and tools:\n";
  if (upstreams.empty()) body += "(no upstream MCP servers are configured)\n";
  for (const auto& s : upstreams) {
    if (!s.connected) {
      body += absl::StrCat("- ", s.name, ": unavailable (", FirstLine(s.error, 120), ")\n");
      continue;
    }
    const std::string& py = py_names[s.name];
    if (level == 2) {
      body += absl::StrCat("- ", s.name, " (", py, "): ", s.tools.size(), " tools\n");
      continue;
    }
    body += absl::StrCat("- ", s.name, " (", py, "):\n");
    for (const auto& t : s.tools) {
      body += level == 0 ? absl::StrCat("    ", Signature(t), " - ", FirstLine(t.description), "\n")
                         : absl::StrCat("    ", ShownName(t.name), "\n");
    }
  }
  return body;
}

using CatalogServers = std::map<std::string, const codemode::CatalogServer*>;

// One line for a server at level 3 (its methods) or 4 (how many).
std::string NamesLine(const codemode::CatalogServer& server, int level) {
  std::string line = absl::StrCat("- ", server.name, " (", server.py_name, "): ");
  if (level == 4) return absl::StrCat(line, server.tools.size(), " tools\n");
  std::vector<std::string> names;
  for (const auto& t : server.tools) names.push_back(codemode::JsMethodName(server, t));
  return absl::StrCat(line, absl::StrJoin(names, ", "), "\n");
}

// Level 0: every server's TypeScript declaration with JSDoc; 1: one line of JSDoc a tool
// (its description's first line, "[needs approval]" and its MCP name stay) and compact
// types; 2: compact types only; 3: method names; 4: tool counts. Levels 0 to 2 give up
// (nullopt) when a declaration does not fit in `room`. `missing` says why a connected
// server is not in `servers`.
std::optional<std::string> ListJavaScript(const std::vector<UpstreamStatus>& upstreams,
                                          const CatalogServers& servers, const std::string& missing,
                                          int level, size_t room) {
  std::string body =
      level < 3 ? "\nServers and tools (TypeScript declarations):\n" : "\nServers and tools:\n";
  if (upstreams.empty()) body += "(no upstream MCP servers are configured)\n";
  std::string unavailable;
  for (const auto& s : upstreams) {
    auto it = servers.find(s.name);
    if (!s.connected || it == servers.end()) {
      absl::StrAppend(&unavailable, "- ", s.name, ": unavailable (",
                      codemode::JsCommentLine(s.connected ? missing : s.error, 120), ")\n");
      continue;
    }
    if (level >= 3) {
      body += NamesLine(*it->second, level);
      continue;
    }
    codemode::TypeScriptOptions options;
    options.jsdoc = level == 0;
    options.tool_jsdoc = level == 1;
    if (level == 1) options.max_description_bytes = 160, options.max_description_lines = 1;
    options.max_bytes = room > body.size() ? room - body.size() : 0;
    codemode::TypeScriptDeclaration declaration =
        codemode::DeclareServerTypeScript(*it->second, options);
    if (!declaration.complete) return std::nullopt;
    body += declaration.text;
  }
  return body + unavailable;
}

// `text` cut to `max_bytes` (at a character boundary), saying so.
std::string Clipped(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  const std::string more = "\n[... more servers: use _discover() ...]\n";
  if (max_bytes <= more.size()) return std::string(codemode::Utf8Prefix(text, max_bytes));
  return absl::StrCat(codemode::Utf8Prefix(text, max_bytes - more.size()), more);
}

}  // namespace

std::string DescribeRunJavaScript(const std::vector<UpstreamStatus>& upstreams, size_t max_bytes,
                                  const std::string& egress) {
  const std::string head = WithEgress(kHowToCallJavaScript, egress, "fetch() reaches");
  absl::StatusOr<codemode::Catalog> catalog = DescribedCatalog(upstreams);
  CatalogServers servers;
  if (catalog.ok()) {
    for (const auto& s : catalog->servers()) servers[s.name] = &s;
  }
  const std::string missing =
      catalog.ok() ? "" : absl::StrCat("left out of the catalog: ", catalog.status().message());
  const size_t room = max_bytes > head.size() ? max_bytes - head.size() : 0;
  static const char* const kLeftOut[] = {
      "", "Descriptions are shortened to their first line to fit.\n",
      "Descriptions are left out to fit.\n",
      "Types are left out to fit: each tool takes one object of its MCP arguments.\n",
      "Types are left out to fit: each tool takes one object of its MCP arguments.\n"};
  for (int level = 0; level < 5; ++level) {
    std::optional<std::string> body = ListJavaScript(upstreams, servers, missing, level, room);
    if (!body) continue;
    *body += kLeftOut[level];
    if (level > 0) *body += kDiscoverJavaScript;
    if (head.size() + body->size() > max_bytes && level < 4) continue;
    return Clipped(head + *body, max_bytes);
  }
  return Clipped(head, max_bytes);
}

std::string DescribeRunPython(const std::vector<UpstreamStatus>& upstreams, size_t max_bytes,
                              const std::string& egress) {
  const std::string head = WithEgress(kHowToCall, egress, "urllib, requests and pip reach");
  std::map<std::string, std::string> py_names = PythonNames(upstreams);
  for (int level = 0; level < 3; ++level) {
    std::string body = ListServers(upstreams, py_names, level);
    if (head.size() + body.size() > max_bytes && level < 2) continue;
    if (level > 0) body += "Use _search(text) or _schema(name) inside the code for details.\n";
    std::string out = head + body;
    if (out.size() > max_bytes) {
      out = absl::StrCat(codemode::Utf8Prefix(out, max_bytes - 60), "\n[... more servers: use _discover() ...]\n");
    }
    return out;
  }
  return head;
}

}  // namespace gateway
