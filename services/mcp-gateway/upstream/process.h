// Process helpers shared by the config loader (self-detection) and the stdio transport
// (spawning): executable lookup and the environment a child MCP server gets.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gateway {

// Finds `command` the way execvp would, but with an explicit PATH (the child's, which may
// differ from ours) and relative to `cwd` for commands containing a '/'. Returns "" when
// nothing executable is found.
std::string ResolveExecutable(const std::string& command, const std::string& path_env,
                              const std::string& cwd);

// The environment of a stdio upstream: a minimal base copied from our own environment
// (PATH, HOME, USER, LANG, TERM, ...; nothing else, so none of the gateway's secrets leak)
// overlaid with the config's `env`. Entries are "KEY=value".
std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& extra);

// The PATH a child with this extra environment would see.
std::string ChildPath(const std::map<std::string, std::string>& extra);

}  // namespace gateway
