// The bearer token of the HTTP transport. HTTP is authenticated by default: loopback is
// not a boundary between the users of one machine. The token is given ($MCP_GATEWAY_TOKEN,
// or --token, which every local user can read in /proc/<pid>/cmdline) or kept in a file
// only its owner can read, created with a random value at the first start, the way
// Jupyter does it. No log line carries a token.
//
//   absl::StatusOr<std::string> token = LoadOrCreateTokenFile(DefaultTokenFile());
//   if (HideTokenArguments(argc, argv)) spdlog::warn("--token is visible ...");
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace gateway {

// $XDG_STATE_HOME/mcp-gateway/token, else ~/.local/state/mcp-gateway/token.
std::string DefaultTokenFile();

// Reads the token from `path`, or creates the file (mode 0600) with 32 random bytes in hex.
// Missing directories are created 0700; existing ones keep their mode. Refuses a file
// that is not a regular file owned by us (a symlink included) or that others can read,
// and a directory someone else owns (root aside) or others can write unless it is sticky:
// there another user could swap the file. The file is written under a random name opened
// with O_EXCL|O_NOFOLLOW and linked into place, so nothing planted is ever written to.
absl::StatusOr<std::string> LoadOrCreateTokenFile(const std::string& path);

// The credential a token stands for in logs, caps, sandboxd owners and sandbox handles:
// "token " and the first 12 hex digits of the token's SHA-256. The same on every replica
// and whatever the order of --token, and it does not give the token away.
std::string CredentialOfToken(const std::string& token);

// Overwrites the values of --token arguments in argv with 'x' (what /proc/<pid>/cmdline
// shows from then on; absl has copied them). True when there was one: the caller warns,
// since the value was readable by every local user until now.
bool HideTokenArguments(int argc, char** argv);

}  // namespace gateway
