// The bearer token of the HTTP transport. HTTP is authenticated by default: loopback is
// not a boundary between the users of one machine. The token is given (--token,
// $MCP_GATEWAY_TOKEN) or kept in a file only its owner can read, created with a random
// value at the first start, the way Jupyter does it.
//
//   absl::StatusOr<std::string> token = LoadOrCreateTokenFile(DefaultTokenFile());
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace gateway {

// $XDG_STATE_HOME/mcp-gateway/token, else ~/.local/state/mcp-gateway/token.
std::string DefaultTokenFile();

// Reads the token from `path`, or creates the file (mode 0600, its directory 0700) with 32
// random bytes in hex. Refuses a file that is not a regular file owned by us (a symlink
// included) or that others can read: a token others could read authenticates nobody.
absl::StatusOr<std::string> LoadOrCreateTokenFile(const std::string& path);

}  // namespace gateway
