#include "base/unix_socket.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace codemode {

absl::StatusOr<sockaddr_un> UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path is too long (", path.size(),
                                                   " bytes; the limit is ",
                                                   sizeof(addr.sun_path) - 1, ")"));
  }
  if (path.empty() || path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("socket path is empty or holds a NUL byte");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

UniqueFd ConnectUnix(const std::string& path, Blocking blocking) {
  absl::StatusOr<sockaddr_un> addr = UnixAddress(path);
  if (!addr.ok()) {
    errno = path.size() >= sizeof(sockaddr_un::sun_path) ? ENAMETOOLONG : EINVAL;
    return UniqueFd();
  }
  const int type = SOCK_STREAM | SOCK_CLOEXEC | (blocking == Blocking::kNo ? SOCK_NONBLOCK : 0);
  UniqueFd fd(socket(AF_UNIX, type, 0));
  if (fd.get() < 0) return fd;
  int rc;
  do {
    rc = connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr));
  } while (rc != 0 && errno == EINTR && blocking == Blocking::kYes);
  if (rc != 0) {
    const int err = errno;
    fd.Reset();
    errno = err;
  }
  return fd;
}

}  // namespace codemode
