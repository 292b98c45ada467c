#include "catalog/catalog.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/untrusted_json.h"

namespace codemode {
namespace {

// The names given so far in one scope (a catalog's servers, one server's tools), and for
// each base the suffix to try next: every name is found in amortised constant time, so
// 10,000 tools whose names sanitise alike cost no more than 10,000 others.
class UniqueNames {
 public:
  // `base` itself when free, else the first free base_2, base_3, ...
  std::string Take(const std::string& base) {
    std::string candidate = base;
    if (taken_.contains(candidate)) {
      int& n = next_suffix_.try_emplace(base, 2).first->second;
      do {
        candidate = absl::StrCat(base, "_", n++);
      } while (taken_.contains(candidate));
    }
    taken_.insert(candidate);
    return candidate;
  }

 private:
  absl::flat_hash_set<std::string> taken_;
  absl::flat_hash_map<std::string, int> next_suffix_;
};

absl::StatusOr<nlohmann::json> ParseSchema(const std::string& text, const std::string& where,
                                           bool allow_empty_as_null) {
  if (text.empty()) {
    if (allow_empty_as_null) return nlohmann::json(nullptr);
    return nlohmann::json{{"type", "object"}};
  }
  absl::StatusOr<nlohmann::json> schema = codemode::ParseUntrustedJson(text, where);
  if (!schema.ok()) return schema.status();
  if (!schema->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " is not a JSON object"));
  }
  return schema;
}

}  // namespace

std::string SanitizeIdentifier(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 1);
  for (char c : name) {
    out.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_');
  }
  if (out.empty()) return "_";
  if (absl::ascii_isdigit(static_cast<unsigned char>(out[0]))) out.insert(out.begin(), '_');
  if (IsPythonKeyword(out)) out.push_back('_');
  return out;
}

std::string PythonToolName(std::string_view name) {
  std::string out = SanitizeIdentifier(name);
  const bool special = out.size() >= 5 && absl::StartsWith(out, "__") && absl::EndsWith(out, "__") &&
                       out[out.size() - 3] != '_';
  const bool private_state = out == "_MCPServer__spec" || out == "_MCPServer__proxies";
  if (special || private_state) out.push_back('_');
  return out;
}

absl::StatusOr<Catalog> Catalog::FromProto(const sandbox::v1::Catalog& proto) {
  if (proto.ByteSizeLong() > kMaxCatalogBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("catalog is larger than ", kMaxCatalogBytes, " bytes"));
  }
  if (static_cast<size_t>(proto.servers_size()) > kMaxCatalogServers) {
    return absl::InvalidArgumentError(
        absl::StrCat("catalog has more than ", kMaxCatalogServers, " servers"));
  }
  Catalog catalog;
  absl::flat_hash_set<std::string> server_names;
  UniqueNames server_py_names;
  for (const auto& s : proto.servers()) {
    if (s.name().empty()) return absl::InvalidArgumentError("catalog server with an empty name");
    if (s.name().size() > kMaxCatalogNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a catalog server's name is ", s.name().size(), " bytes; at most ", kMaxCatalogNameBytes));
    }
    if (!server_names.insert(s.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate catalog server '", s.name(), "'"));
    }
    CatalogServer server;
    server.name = s.name();
    server.description = s.description();
    server.py_name = server_py_names.Take(SanitizeIdentifier(absl::StrCat("mcp_", s.name())));
    absl::flat_hash_set<std::string> tool_names;
    UniqueNames tool_py_names;
    for (const auto& t : s.tools()) {
      std::string where = absl::StrCat("tool '", s.name(), ".", t.name(), "'");
      if (t.name().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("server '", s.name(), "' has a tool with an empty name"));
      }
      if (t.name().size() > kMaxCatalogNameBytes) {
        return absl::InvalidArgumentError(absl::StrCat("server '", s.name(), "' has a tool name of ",
                                                       t.name().size(), " bytes; at most ",
                                                       kMaxCatalogNameBytes));
      }
      if (!tool_names.insert(t.name()).second) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate ", where));
      }
      CatalogTool tool;
      tool.name = t.name();
      tool.description = t.description();
      tool.py_name = tool_py_names.Take(PythonToolName(t.name()));
      auto input = ParseSchema(t.input_schema_json(), where + " input_schema_json", false);
      if (!input.ok()) return input.status();
      tool.input_schema = std::move(*input);
      auto output = ParseSchema(t.output_schema_json(), where + " output_schema_json", true);
      if (!output.ok()) return output.status();
      tool.output_schema = std::move(*output);
      PythonParameters params = PythonParameterNames(tool.input_schema);
      tool.py_params = std::move(params.params);
      tool.py_kwargs = std::move(params.kwargs);
      server.tools.push_back(std::move(tool));
      if (++catalog.tool_count_ > kMaxCatalogTools) {
        return absl::InvalidArgumentError(
            absl::StrCat("catalog has more than ", kMaxCatalogTools, " tools"));
      }
    }
    for (CatalogTool& tool : server.tools) tool.js_name = JsMethodName(server, tool);
    catalog.servers_.push_back(std::move(server));
  }
  const size_t runner_bytes =
      catalog.ToRunnerJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  if (runner_bytes > kMaxRunnerCatalogBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("catalog with its Python and JavaScript names is ", runner_bytes,
                     " bytes of JSON; at most ", kMaxRunnerCatalogBytes));
  }
  return catalog;
}

std::string JsMethodName(const CatalogServer& server, const CatalogTool& tool) {
  if (tool.py_name != "then") return tool.py_name;
  auto taken = [&server](const std::string& name) {
    return std::any_of(server.tools.begin(), server.tools.end(),
                       [&name](const CatalogTool& t) { return t.py_name == name; });
  };
  std::string candidate = "then_";
  for (int n = 2; taken(candidate); ++n) candidate = absl::StrCat("then_", n);
  return candidate;
}

bool Catalog::Contains(std::string_view server, std::string_view tool) const {
  for (const auto& s : servers_) {
    if (s.name != server) continue;
    for (const auto& t : s.tools) {
      if (t.name == tool) return true;
    }
  }
  return false;
}

nlohmann::json Catalog::ToRunnerJson() const {
  nlohmann::json servers = nlohmann::json::array();
  for (const auto& s : servers_) {
    nlohmann::json tools = nlohmann::json::array();
    for (const auto& t : s.tools) {
      nlohmann::json params = nlohmann::json::object();
      for (const CatalogParam& p : t.py_params) {
        params[p.name] = p.py_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.py_name);
      }
      tools.push_back({{"name", t.name},
                       {"py_name", t.py_name},
                       {"js_name", t.js_name},
                       {"py_params", std::move(params)},
                       {"py_kwargs", t.py_kwargs.empty() ? nlohmann::json(nullptr)
                                                         : nlohmann::json(t.py_kwargs)},
                       {"description", t.description},
                       {"input_schema", t.input_schema},
                       {"output_schema", t.output_schema}});
    }
    servers.push_back({{"name", s.name},
                       {"py_name", s.py_name},
                       {"description", s.description},
                       {"tools", std::move(tools)}});
  }
  return {{"servers", std::move(servers)}};
}

sandbox::v1::Catalog Catalog::ToProto() const {
  sandbox::v1::Catalog proto;
  for (const auto& s : servers_) {
    auto* ps = proto.add_servers();
    ps->set_name(s.name);
    ps->set_description(s.description);
    for (const auto& t : s.tools) {
      auto* pt = ps->add_tools();
      pt->set_name(t.name);
      pt->set_description(t.description);
      pt->set_input_schema_json(t.input_schema.dump());
      if (!t.output_schema.is_null()) pt->set_output_schema_json(t.output_schema.dump());
    }
  }
  return proto;
}

}  // namespace codemode
