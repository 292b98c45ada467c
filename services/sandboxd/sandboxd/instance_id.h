#pragma once
// The path and id of one daemon's state directory, shared with the test harness (which
// cleans up what a daemon leaves by them) without linking the daemon's libraries.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace sandboxd {

// The state directory as the daemon names it (and hashes it, below): absolute, without a
// symbolic link in the part that exists, normal, and without a trailing separator, so
// `--state_dir=/x/state/` and a link to /x are the daemon of /x/state. "" stays "". The
// daemon claims the directory by the spelling given first (its links and directories
// checked, what is missing made), so that every part exists when it is named.
inline std::string StateDirPath(const std::string& given) {
  if (given.empty()) return given;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(given, ec);
  if (ec) return given;
  std::filesystem::path resolved = std::filesystem::weakly_canonical(p, ec);
  p = ec ? p.lexically_normal() : resolved.lexically_normal();
  if (!p.has_filename() && p != p.root_path()) p = p.parent_path();
  return p.string();
}

// A stable id of the state directory (12 hex digits: FNV-1a of the path) that names and
// labels this daemon's containers, so several daemons (root, users, tests) never touch
// each other's.
inline std::string InstanceId(const std::string& state_dir) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : state_dir) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char id[16];
  std::snprintf(id, sizeof id, "%012llx", static_cast<unsigned long long>(h & 0xffffffffffffull));
  return id;
}

}  // namespace sandboxd
