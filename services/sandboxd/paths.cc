#include "paths.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "base/secret_file.h"
#include "base/untrusted_json.h"
#include "base/utf8.h"

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
  return codemode::DefaultStateDir("sandboxd");
}

std::string DefaultRunner(const std::string& file, const std::string& built) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p : {exe.parent_path() / file, exe.parent_path() / "../share/sandboxd" / file}) {
      if (fs::exists(p, ec)) {
        fs::path found = fs::canonical(p, ec);
        if (!ec) return found.string();
      }
    }
  }
  return built;
}

absl::Status CheckPlainFlag(const std::string& flag, const std::string& value) {
  if (codemode::IsPlainLine(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " ", codemode::LogText(value), " holds ", codemode::kNotPlainLine));
}

absl::Status CheckPodmanPath(const std::string& path, const std::string& flag) {
  std::string why;
  if (!codemode::IsValidUtf8(path)) {
    why = "is not valid UTF-8 (podman would mount another path: it turns each invalid byte into U+FFFD)";
  } else if (path.find(',') != std::string::npos) {
    why = "holds a comma (podman's --mount would read what follows as options)";
  } else if (!codemode::IsPlainLine(path)) {
    why = absl::StrCat("holds ", codemode::kNotPlainLine, " (it would not show as itself on a line of the log)");
  }
  if (why.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " ", codemode::LogText(path), " ", why, "; choose another path"));
}

}  // namespace sandboxd
