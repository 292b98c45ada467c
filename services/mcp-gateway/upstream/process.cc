// Executable lookup and child environment for stdio upstreams (see process.h).
#include "upstream/process.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_split.h"

namespace gateway {
namespace {

// Variables a typical MCP server (node, python, uvx, docker CLIs) needs to find its tools
// and caches. Deliberately short: everything else in our environment may be a secret.
constexpr const char* kInheritedVariables[] = {
    "PATH",   "HOME",        "USER",   "LOGNAME", "SHELL",    "LANG",
    "LC_ALL", "LC_CTYPE",    "TERM",   "TZ",      "TMPDIR",   "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
};

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string ResolveExecutable(const std::string& command, const std::string& path_env,
                              const std::string& cwd) {
  if (command.empty()) return "";
  if (command.find('/') != std::string::npos) {
    std::string path = command;
    if (command[0] != '/' && !cwd.empty()) path = cwd + "/" + command;
    return IsExecutableFile(path) ? path : "";
  }
  for (absl::string_view dir : absl::StrSplit(path_env, ':')) {
    // An empty PATH element means the current directory (of the child).
    std::string base = dir.empty() ? (cwd.empty() ? "." : cwd) : std::string(dir);
    std::string candidate = base + "/" + command;
    if (IsExecutableFile(candidate)) return candidate;
  }
  return "";
}

std::string ChildPath(const std::map<std::string, std::string>& extra) {
  auto it = extra.find("PATH");
  if (it != extra.end()) return it->second;
  const char* path = std::getenv("PATH");
  return path ? path : "/usr/local/bin:/usr/bin:/bin";
}

std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (const char* name : kInheritedVariables) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& [key, value] : extra) env[key] = value;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

}  // namespace gateway
