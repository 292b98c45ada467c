#include "server/http_peer.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"

namespace gateway {
namespace http {
namespace {

std::atomic<uint64_t> lookups{0};

bool IsLoopback(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr) >> 24) == 127;
  }
  if (a.ss_family == AF_INET6) {
    const in6_addr& addr = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&addr) ||
           (IN6_IS_ADDR_V4MAPPED(&addr) && addr.s6_addr[12] == 127);
  }
  return false;
}

// Fills one end of a sock_diag socket id from an address.
void SetEnd(const sockaddr_storage& a, __be16* port, __be32* addr) {
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    *port = in.sin_port;
    std::memcpy(addr, &in.sin_addr, sizeof in.sin_addr);
  } else {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    *port = in6.sin6_port;
    std::memcpy(addr, &in6.sin6_addr, sizeof in6.sin6_addr);
  }
}

// The uid owning the client's end of a loopback connection: the socket whose source is
// our peer address and whose destination is our own.
std::optional<uint32_t> LoopbackPeerUid(const sockaddr_storage& self, const sockaddr_storage& peer) {
  lookups.fetch_add(1, std::memory_order_relaxed);
  const int nl = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return std::nullopt;
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;
  message.request.sdiag_family = static_cast<uint8_t>(peer.ss_family);
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = ~0u;
  message.request.id.idiag_cookie[0] = message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  SetEnd(peer, &message.request.id.idiag_sport, message.request.id.idiag_src);
  SetEnd(self, &message.request.id.idiag_dport, message.request.id.idiag_dst);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::optional<uint32_t> uid;
  if (::sendto(nl, &message, sizeof message, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) ==
      static_cast<ssize_t>(sizeof message)) {
    alignas(nlmsghdr) char reply[1024];
    const ssize_t n = ::recv(nl, reply, sizeof reply, 0);
    const auto* h = reinterpret_cast<const nlmsghdr*>(reply);
    if (n >= static_cast<ssize_t>(sizeof(nlmsghdr)) && NLMSG_OK(h, static_cast<size_t>(n)) &&
        h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
        h->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
      uid = reinterpret_cast<const inet_diag_msg*>(NLMSG_DATA(h))->idiag_uid;
    }
  }
  ::close(nl);
  return uid;
}

std::string AddressText(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* addr =
      peer.ss_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in&>(peer).sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr);
  ::inet_ntop(peer.ss_family, addr, text, sizeof text);
  return absl::StrCat("addr ", text);
}

}  // namespace

PeerAddress AddressOf(int fd) {
  PeerAddress a;
  socklen_t self_len = sizeof a.self, peer_len = sizeof a.peer;
  a.known = ::getsockname(fd, reinterpret_cast<sockaddr*>(&a.self), &self_len) == 0 &&
            ::getpeername(fd, reinterpret_cast<sockaddr*>(&a.peer), &peer_len) == 0 &&
            (a.peer.ss_family == AF_INET || a.peer.ss_family == AF_INET6);
  return a;
}

std::string QuickPeerOf(const PeerAddress& address) {
  if (!address.known) return "unknown";
  return IsLoopback(address.peer) ? "" : AddressText(address.peer);
}

std::string ResolvePeer(const PeerAddress& address) {
  if (!address.known) return "unknown";
  if (IsLoopback(address.peer)) {
    if (auto uid = LoopbackPeerUid(address.self, address.peer)) return absl::StrCat("uid ", *uid);
  }
  return AddressText(address.peer);
}

std::string PeerOf(int fd) { return ResolvePeer(AddressOf(fd)); }

uint64_t PeerLookups() { return lookups.load(std::memory_order_relaxed); }

}  // namespace http
}  // namespace gateway
