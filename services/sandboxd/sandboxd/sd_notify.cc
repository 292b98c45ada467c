#include "sandboxd/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sandboxd {

SystemdNotifier::SystemdNotifier() {
  if (const char* path = std::getenv("NOTIFY_SOCKET")) socket_ = path;
  unsetenv("NOTIFY_SOCKET");
}

absl::Status SystemdNotifier::Notify(const std::string& state) const {
  if (socket_.empty()) return absl::OkStatus();
  const char* path = socket_.c_str();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = std::strlen(path);
  if (len >= sizeof(addr.sun_path)) return absl::InvalidArgumentError("NOTIFY_SOCKET too long");
  std::memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  ssize_t n = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                     reinterpret_cast<sockaddr*>(&addr),
                     static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len));
  int err = errno;
  close(fd);
  if (n < 0) return absl::UnavailableError(absl::StrCat("sd_notify to ", path, ": ", strerror(err)));
  return absl::OkStatus();
}

}  // namespace sandboxd
