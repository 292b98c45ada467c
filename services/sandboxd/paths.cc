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

absl::Status PrepareSocket(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(dir.string(), " is not owned by us"));
  }
  chmod(dir.c_str(), 0700);
  if (fs::exists(path)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) return absl::InvalidArgumentError("socket path too long");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (live) return absl::AlreadyExistsError(absl::StrCat("another sandboxd serves ", path));
    fs::remove(path, ec);
  }
  return absl::OkStatus();
}

}  // namespace sandboxd
