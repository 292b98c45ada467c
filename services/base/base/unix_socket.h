// Unix stream sockets named by a path: the address and its length check in one place.
//
//   codemode::UniqueFd fd = codemode::ConnectUnix(path, codemode::Blocking::kNo);
//   if (fd.get() < 0) return errno == EAGAIN ? "busy" : strerror(errno);
//
// A path must fit sun_path (107 bytes and its NUL): a longer one fails with ENAMETOOLONG,
// never a truncated address that names another socket.
#pragma once

#include <sys/un.h>

#include <string>

#include "absl/status/statusor.h"
#include "base/process.h"

namespace codemode {

// The address of the socket at `path`; INVALID_ARGUMENT when it does not fit.
absl::StatusOr<sockaddr_un> UnixAddress(const std::string& path);

enum class Blocking { kYes, kNo };

// A close-on-exec stream socket connected to the listener at `path`, or an invalid UniqueFd
// with errno set. Blocking::kNo: the socket is non-blocking, and a listener whose backlog is
// full fails at once with EAGAIN rather than holding the caller until it accepts.
UniqueFd ConnectUnix(const std::string& path, Blocking blocking);

}  // namespace codemode
