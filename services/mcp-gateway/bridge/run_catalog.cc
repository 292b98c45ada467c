// The run_python description, the per-run catalog and the memory of upstreams that went
// down. See run_catalog.h.
#include "bridge/run_catalog.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "catalog/catalog.h"

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

std::string FirstLine(const std::string& text, size_t max = 100) {
  std::string line = text.substr(0, text.find('\n'));
  line = std::string(absl::StripAsciiWhitespace(line));
  if (line.size() > max) line = line.substr(0, max - 3) + "...";
  return line;
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
      params.push_back(required.count(name) ? name : name + "?");
    }
  }
  return absl::StrCat(t.name, "(", absl::StrJoin(params, ", "), ")");
}

// The Python names come from the shared catalog rules (sanitising, keywords, collisions),
// so the description names exactly what the sandbox defines.
std::map<std::string, std::string> PythonNames(const std::vector<UpstreamStatus>& upstreams) {
  std::map<std::string, std::string> py_names;
  absl::StatusOr<codemode::Catalog> c =
      codemode::Catalog::FromProto(BuildCatalog(upstreams, ServerAllowlist::All()));
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
                         : absl::StrCat("    ", t.name, "\n");
    }
  }
  return body;
}

}  // namespace

std::string DescribeRunPython(const std::vector<UpstreamStatus>& upstreams, size_t max_bytes) {
  const std::string head = kHowToCall;
  std::map<std::string, std::string> py_names = PythonNames(upstreams);
  for (int level = 0; level < 3; ++level) {
    std::string body = ListServers(upstreams, py_names, level);
    if (head.size() + body.size() > max_bytes && level < 2) continue;
    if (level > 0) body += "Use _search(text) or _schema(name) inside the code for details.\n";
    std::string out = head + body;
    if (out.size() > max_bytes) {
      out = out.substr(0, max_bytes - 60) + "\n[... more servers: use _discover() ...]\n";
    }
    return out;
  }
  return head;
}

sandbox::v1::Catalog BuildCatalog(const std::vector<UpstreamStatus>& upstreams,
                                  const ServerAllowlist& servers) {
  sandbox::v1::Catalog catalog;
  for (const auto& s : upstreams) {
    if (!s.connected || !servers.Allows(s.name)) continue;
    auto* server = catalog.add_servers();
    server->set_name(s.name);
    server->set_description(s.instructions.substr(0, 2000));
    for (const auto& t : s.tools) {
      auto* tool = server->add_tools();
      tool->set_name(t.name);
      tool->set_description(t.description);
      tool->set_input_schema_json(t.input_schema.is_object() ? t.input_schema.dump() : "");
      if (t.output_schema.is_object()) tool->set_output_schema_json(t.output_schema.dump());
    }
  }
  return catalog;
}

std::vector<UpstreamStatus> UpstreamMemory::View(const std::vector<UpstreamStatus>& snapshot) {
  std::vector<UpstreamStatus> view;
  codemode::MutexLock lock(&mu_);
  for (const auto& s : snapshot) {
    if (s.connected) {
      last_connected_[s.name] = s;
      view.push_back(s);
    } else if (auto it = last_connected_.find(s.name); it != last_connected_.end()) {
      view.push_back(it->second);  // keeps `connected` from when it was up
    } else {
      view.push_back(s);
    }
  }
  return view;
}

}  // namespace gateway
