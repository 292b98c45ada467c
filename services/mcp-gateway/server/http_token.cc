#include "server/http_token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace gateway {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::FailedPreconditionError(absl::StrCat(what, " ", path, ": ", strerror(errno)));
}

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open token file", path);
  struct stat st;
  std::string text;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return Errno("cannot stat token file", path);
  }
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("token file ", path, " is not a regular file owned by us"));
  }
  if (st.st_mode & 077) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "token file ", path, " can be read by other users; run chmod 600 on it (or delete it "
        "for a new token)"));
  }
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n < 0) return Errno("cannot read token file", path);
  text.assign(buf, static_cast<size_t>(n));
  std::string token(absl::StripAsciiWhitespace(text));
  if (token.size() < 16) {
    return absl::FailedPreconditionError(
        absl::StrCat("token file ", path, " holds no token of at least 16 characters"));
  }
  return token;
}

}  // namespace

std::string DefaultTokenFile() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) {
    return absl::StrCat(x, "/mcp-gateway/token");
  }
  const char* home = std::getenv("HOME");
  return absl::StrCat(home ? home : "/tmp", "/.local/state/mcp-gateway/token");
}

absl::StatusOr<std::string> LoadOrCreateTokenFile(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) return ReadToken(path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  chmod(dir.c_str(), 0700);
  unsigned char random[32];
  if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
    return Errno("cannot read random bytes for", path);
  }
  std::string token = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(random), sizeof random));
  // Written whole under a private name, then linked into place: a gateway starting at the
  // same moment either sees no file or a complete one, and the first link wins.
  std::string tmp = absl::StrCat(path, ".", getpid(), ".tmp");
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot create token file", tmp);
  std::string line = token + "\n";
  bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  int linked = ok ? link(tmp.c_str(), path.c_str()) : -1;
  int link_errno = errno;
  unlink(tmp.c_str());
  if (!ok) return Errno("cannot write token file", tmp);
  if (linked != 0) {
    if (link_errno == EEXIST) return ReadToken(path);
    errno = link_errno;
    return Errno("cannot create token file", path);
  }
  return token;
}

}  // namespace gateway
