// Private to gateway_server: who is at the other end of an accepted TCP connection, for sharing
// the connections not yet authenticated fairly (http_admission.h). On loopback every
// local user has the same address, so there it is the user owning the client's socket,
// which the kernel tells through sock_diag (what `ss -e` shows; no privilege needed);
// elsewhere it is the client's address.
//
// Asking the kernel costs a netlink round trip, and the answer only matters when a
// connection must be evicted, so the server reads the two ends at accept (AddressOf, two
// cheap syscalls) and asks only when admission needs it (ResolvePeer):
//
//   PeerAddress a = AddressOf(fd);
//   std::string peer = QuickPeerOf(a);       // "addr 10.0.0.7", or "" on loopback
//   if (peer.empty()) peer = ResolvePeer(a);  // later, when it matters: "uid 1000"
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace gateway {
namespace http {

// Both ends of an accepted TCP connection. It needs no socket to be resolved later.
struct PeerAddress {
  sockaddr_storage self{};
  sockaddr_storage peer{};
  bool known = false;  // both ends were read and the peer is IPv4 or IPv6
};

PeerAddress AddressOf(int fd);

// What can be told without asking the kernel: "addr <ip>" for a peer that is not on
// loopback, "unknown" when the ends are not known, and "" for a loopback peer (whose user
// only ResolvePeer tells).
std::string QuickPeerOf(const PeerAddress& address);

// "uid <n>" for a loopback peer whose socket the kernel reports (one sock_diag query),
// else "addr <ip>"; "unknown" when neither can be told.
std::string ResolvePeer(const PeerAddress& address);

// ResolvePeer(AddressOf(fd)).
std::string PeerOf(int fd);

// How many sock_diag queries this process has made (tests check that accepting asks none).
uint64_t PeerLookups();

}  // namespace http
}  // namespace gateway
