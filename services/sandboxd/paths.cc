#include "paths.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace sandboxd {

namespace fs = std::filesystem;

std::string DefaultSocket() {
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg) {
    return absl::StrCat(xdg, "/sandboxd/sandboxd.sock");
  }
  if (geteuid() == 0) return "/run/sandboxd/sandboxd.sock";
  return absl::StrCat("/tmp/sandboxd-", geteuid(), "/sandboxd.sock");
}

std::string DefaultStateDir() {
  if (geteuid() == 0) return "/var/lib/sandboxd";
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) {
    return absl::StrCat(xdg, "/sandboxd");
  }
  const char* home = std::getenv("HOME");
  return absl::StrCat(home ? home : "/tmp", "/.local/state/sandboxd");
}

std::string DefaultRunner(const std::string& file, const std::string& built) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p : {exe.parent_path() / file, exe.parent_path() / "../share/sandboxd" / file}) {
      if (fs::exists(p)) return fs::canonical(p).string();
    }
  }
  return built;
}


}  // namespace sandboxd
