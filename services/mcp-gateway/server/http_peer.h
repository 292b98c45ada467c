// Private to mcp_core: who is at the other end of an accepted TCP connection, for sharing
// the connections not yet authenticated fairly (http_admission.h). On loopback every
// local user has the same address, so there it is the user owning the client's socket,
// which the kernel tells through sock_diag (what `ss -e` shows; no privilege needed);
// elsewhere it is the client's address.
#pragma once

#include <string>

namespace gateway {
namespace http {

// "uid <n>" for a loopback peer whose socket the kernel reports, else "addr <ip>";
// "unknown" when neither can be told.
std::string PeerOf(int fd);

}  // namespace http
}  // namespace gateway
