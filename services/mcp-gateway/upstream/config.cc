// LoadUpstreamConfig: the mcpServers JSON format shared by Claude Desktop
// (claude_desktop_config.json), Claude Code (.mcp.json) and Cursor (mcp.json).
//
//   {"mcpServers": {
//      "files":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
//                 "env": {"DEBUG": "${DEBUG:-0}"}},
//      "remote": {"type": "http", "url": "https://example.com/mcp",
//                 "headers": {"Authorization": "Bearer ${TOKEN}"}},
//      "legacy": {"type": "sse", "url": "http://127.0.0.1:8080/sse", "disabled": true}}}
//
// Files in a config directory may also hold the bare {"name": {...}} map. Unknown fields
// are ignored (the formats carry tool-specific extras such as "autoApprove").
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "base/untrusted_json.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "upstream/config.h"
#include "upstream/process.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

// ordered_json keeps the file's order of entries (std::map would sort them by name).
using json = nlohmann::ordered_json;

// Where an error happened, for messages like `servers.json: entry "files": args must be ...`.
struct Where {
  std::string file;
  std::string entry;
  absl::Status Error(const std::string& what) const {
    if (entry.empty()) return absl::InvalidArgumentError(absl::StrCat(file, ": ", what));
    return absl::InvalidArgumentError(absl::StrCat(file, ": entry \"", entry, "\": ", what));
  }
};

// Expands ${VAR} and ${VAR:-default}. A variable that is unset (or, with `:-`, empty)
// takes the default; an unset variable without a default is an error, as in Claude Code:
// silently sending an empty API key would be worse.
absl::StatusOr<std::string> Expand(const std::string& in, const Where& where) {
  std::string out;
  size_t i = 0;
  while (i < in.size()) {
    size_t start = in.find("${", i);
    if (start == std::string::npos) break;
    size_t end = in.find('}', start + 2);
    if (end == std::string::npos) break;  // unterminated: keep literally
    out.append(in, i, start - i);
    std::string body = in.substr(start + 2, end - start - 2);
    std::string name = body;
    bool has_default = false;
    std::string fallback;
    size_t sep = body.find(":-");
    if (sep != std::string::npos) {
      name = body.substr(0, sep);
      fallback = body.substr(sep + 2);
      has_default = true;
    }
    const char* value = name.empty() ? nullptr : std::getenv(name.c_str());
    if (value != nullptr && (!has_default || *value != '\0')) {
      out += value;
    } else if (has_default) {
      out += fallback;
    } else {
      return where.Error(absl::StrCat("environment variable ", name, " is not set"));
    }
    i = end + 1;
  }
  out.append(in, i, std::string::npos);
  return out;
}

absl::StatusOr<std::string> GetString(const json& entry, const char* key, const Where& where) {
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return std::string();
  if (!it->is_string()) return where.Error(absl::StrCat(key, " must be a string"));
  return Expand(it->get<std::string>(), where);
}

absl::StatusOr<std::map<std::string, std::string>> GetStringMap(const json& entry,
                                                                const char* key,
                                                                const Where& where) {
  std::map<std::string, std::string> out;
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return out;
  if (!it->is_object()) return where.Error(absl::StrCat(key, " must be an object of strings"));
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      return where.Error(absl::StrCat(key, ".", k, " must be a string"));
    }
    auto expanded = Expand(v.get<std::string>(), where);
    if (!expanded.ok()) return expanded.status();
    out[k] = *std::move(expanded);
  }
  return out;
}

// One parsed entry; `disabled` is kept until the end so that a later file can disable
// an entry of an earlier one.
absl::StatusOr<UpstreamConfig> ParseEntry(const std::string& name, const json& entry,
                                          const Where& where) {
  if (name.empty()) return where.Error("server name must not be empty");
  if (!entry.is_object()) return where.Error("must be an object");
  UpstreamConfig config;
  config.name = name;

  if (auto it = entry.find("disabled"); it != entry.end() && !it->is_null()) {
    if (!it->is_boolean()) return where.Error("disabled must be a boolean");
    config.disabled = it->get<bool>();
  }
  // Disabled entries are not expanded: they may refer to variables that are not set.
  if (config.disabled) return config;
  if (auto it = entry.find("approval"); it != entry.end() && !it->is_null()) {
    absl::StatusOr<ApprovalRules> rules = ParseApprovalRules(*it);
    if (!rules.ok()) return where.Error(std::string(rules.status().message()));
    config.approval = *std::move(rules);
  }

  auto type = GetString(entry, "type", where);
  if (!type.ok()) return type.status();
  bool has_command = entry.contains("command") && !entry["command"].is_null();
  bool has_url = entry.contains("url") && !entry["url"].is_null();
  if (type->empty()) {
    if (has_command && has_url) return where.Error("has both command and url; set type");
    if (has_command) {
      *type = "stdio";
    } else if (has_url) {
      *type = "http";
    } else {
      return where.Error("needs a command (stdio) or a url (http, sse)");
    }
  }
  if (*type == "stdio") {
    config.type = UpstreamConfig::Type::kStdio;
  } else if (*type == "http" || *type == "streamable-http" || *type == "streamableHttp" ||
             *type == "streamable_http") {
    config.type = UpstreamConfig::Type::kStreamableHttp;
  } else if (*type == "sse") {
    config.type = UpstreamConfig::Type::kSse;
  } else {
    return where.Error(absl::StrCat("unknown type \"", *type,
                                    "\" (expected stdio, http, streamable-http or sse)"));
  }

  if (config.type == UpstreamConfig::Type::kStdio) {
    auto command = GetString(entry, "command", where);
    if (!command.ok()) return command.status();
    if (command->empty()) return where.Error("stdio server needs a command");
    config.command = *std::move(command);
    if (auto it = entry.find("args"); it != entry.end() && !it->is_null()) {
      if (!it->is_array()) return where.Error("args must be an array of strings");
      for (const auto& arg : *it) {
        if (!arg.is_string()) return where.Error("args must be an array of strings");
        auto expanded = Expand(arg.get<std::string>(), where);
        if (!expanded.ok()) return expanded.status();
        config.args.push_back(*std::move(expanded));
      }
    }
    auto env = GetStringMap(entry, "env", where);
    if (!env.ok()) return env.status();
    config.env = *std::move(env);
    auto cwd = GetString(entry, "cwd", where);
    if (!cwd.ok()) return cwd.status();
    config.cwd = *std::move(cwd);
  } else {
    auto url = GetString(entry, "url", where);
    if (!url.ok()) return url.status();
    if (!absl::StartsWith(*url, "http://") && !absl::StartsWith(*url, "https://")) {
      return where.Error(absl::StrCat("url must start with http:// or https:// (got \"", *url,
                                      "\")"));
    }
    config.url = *std::move(url);
    auto headers = GetStringMap(entry, "headers", where);
    if (!headers.ok()) return headers.status();
    config.headers = *std::move(headers);
  }
  return config;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::strerror(err)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parses one file and merges its entries into `out` (same name: replaced in place).
absl::Status LoadFile(const std::string& path, bool bare_map_allowed,
                      std::vector<UpstreamConfig>* out) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  Where where{path, ""};
  codemode::JsonLimits limits;
  limits.allow_comments = true;
  absl::StatusOr<json> parsed = codemode::ParseUntrustedJson<json>(*text, "the file", limits);
  if (!parsed.ok()) return where.Error(std::string(parsed.status().message()));
  json doc = std::move(*parsed);
  if (!doc.is_object()) return where.Error("top level must be an object");

  const json* servers = nullptr;
  if (auto it = doc.find("mcpServers"); it != doc.end()) {
    servers = &*it;
  } else if (bare_map_allowed) {
    servers = &doc;
  }
  if (servers == nullptr) {
    spdlog::warn("{}: no mcpServers object; no upstream servers configured there", path);
    return absl::OkStatus();
  }
  if (!servers->is_object()) return where.Error("mcpServers must be an object");

  for (const auto& item : servers->items()) {
    // (Not a structured binding: C++17 lambdas cannot capture those, and clang says so.)
    const std::string& name = item.key();
    const json& entry = item.value();
    where.entry = name;
    auto config = ParseEntry(name, entry, where);
    if (!config.ok()) return config.status();
    auto existing = std::find_if(out->begin(), out->end(),
                                 [&](const UpstreamConfig& c) { return c.name == name; });
    if (existing != out->end()) {
      spdlog::info("{}: upstream \"{}\" overrides an earlier definition", path, name);
      *existing = *std::move(config);
    } else {
      out->push_back(*std::move(config));
    }
  }
  return absl::OkStatus();
}

// The *.json files of a directory, sorted by name; hidden files are skipped.
absl::StatusOr<std::vector<std::string>> ListJsonFiles(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return files;
    return absl::InvalidArgumentError(absl::StrCat(dir, ": ", std::strerror(errno)));
  }
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.' || !absl::EndsWith(name, ".json")) continue;
    std::string path = absl::StrCat(dir, "/", name);
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.push_back(path);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (path.empty() || realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

// True when launching this entry would start the gateway itself (a config shared with a
// desktop app usually lists the gateway among the servers: it must not recurse).
bool LaunchesSelf(const UpstreamConfig& config, const std::string& self_real) {
  if (self_real.empty() || config.type != UpstreamConfig::Type::kStdio) return false;
  std::string exe = ResolveExecutable(config.command, ChildPath(config.env), config.cwd);
  return !exe.empty() && RealPath(exe) == self_real;
}

}  // namespace

absl::StatusOr<std::vector<UpstreamConfig>> LoadUpstreamConfig(
    const std::vector<std::string>& files, const std::vector<std::string>& dirs,
    const std::string& self_exe) {
  std::vector<UpstreamConfig> merged;
  for (const auto& file : files) {
    absl::Status s = LoadFile(file, /*bare_map_allowed=*/false, &merged);
    if (!s.ok()) return s;
  }
  for (const auto& dir : dirs) {
    auto list = ListJsonFiles(dir);
    if (!list.ok()) return list.status();
    for (const auto& file : *list) {
      absl::Status s = LoadFile(file, /*bare_map_allowed=*/true, &merged);
      if (!s.ok()) return s;
    }
  }
  std::string self_real = RealPath(self_exe);
  std::vector<UpstreamConfig> out;
  for (auto& config : merged) {
    if (config.disabled) {
      spdlog::info("upstream \"{}\" is disabled", config.name);
      continue;
    }
    if (LaunchesSelf(config, self_real)) {
      spdlog::info("upstream \"{}\" would launch the gateway itself; skipped", config.name);
      continue;
    }
    out.push_back(std::move(config));
  }
  return out;
}

}  // namespace gateway
