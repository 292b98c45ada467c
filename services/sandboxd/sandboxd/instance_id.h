#pragma once
// The id of one daemon's state directory, shared with the test harness (which cleans up
// what a daemon leaves by it) without linking the daemon's libraries.

#include <cstdint>
#include <cstdio>
#include <string>

namespace sandboxd {

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
