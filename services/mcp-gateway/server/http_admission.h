// Private to gateway_server: who may hold the HTTP front's connections. Not thread-safe (the
// server calls it under its connections' lock); no sockets, so it is tested on its own.
//
// A connection is "pre-auth" from its accept until one of its requests passes the
// endpoint's checks (path, Origin/Host, bearer token); from then on it belongs to the
// credential it passed with. Any local user can open pre-auth connections, so they must
// never keep a token holder out:
//   - At most `max_unauthenticated` are pre-auth, and a new connection that finds that many
//     (or the whole `max_connections`) closes a pre-auth one rather than being refused:
//     the oldest of the peer (a local user, or a remote address: http_peer.h) that holds
//     the most of them, the new connection's own peer on a tie. A flood pushes out only
//     its own connections, never those of a user with fewer. Among that peer's oldest few,
//     one with nothing unread in its socket goes first: a connection whose request waits
//     to be read is about to be checked.
//   - A credential holds at most `max_per_credential` connections, so no one token takes
//     every slot from the others.
//   - A new connection is refused only when `max_connections` are open and all of them
//     belong to credentials.
// Telling a loopback client's user takes a query to the kernel, needed only to choose a
// connection to evict: such a connection comes with a PeerResolver instead of its peer,
// run once, only when a new connection finds a cap reached (then for every pre-auth
// connection not yet resolved, the new one included). Below the caps nobody is asked.
//
//   ConnectionAdmission admission({4096, 256, 2048});
//   auto a = admission.Add(conn, "uid 1000");  // a.admitted; close a.evict if set
//   auto b = admission.AddUnresolved(conn2, [addr] { return ResolvePeer(addr); });
//   admission.Authenticate(conn, "token 0");   // false: the credential is at its cap
//   admission.Remove(conn);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace gateway {
namespace http {

class ConnectionAdmission {
 public:
  struct Caps {
    size_t max_connections = 4096;
    size_t max_unauthenticated = 256;  // at least 1
    size_t max_per_credential = 2048;
  };
  struct Admission {
    bool admitted = false;
    const void* evict = nullptr;  // a pre-auth connection to close (already forgotten here)
  };

  explicit ConnectionAdmission(Caps caps) : caps_(caps) {}

  // Whether a pre-auth connection has bytes the server has not read yet.
  using HasUnreadInput = std::function<bool(const void* conn)>;
  // How many of the oldest pre-auth connections an eviction looks at.
  static constexpr size_t kEvictionCandidates = 16;

  // Tells a connection's peer (a non-empty string); runs under the caller's lock.
  using PeerResolver = std::function<std::string()>;

  // A connection from `peer` was accepted.
  Admission Add(const void* conn, const std::string& peer,
                const HasUnreadInput& has_unread_input = nullptr);
  // A connection was accepted whose peer `resolve` tells when an eviction needs it.
  Admission AddUnresolved(const void* conn, PeerResolver resolve,
                          const HasUnreadInput& has_unread_input = nullptr);
  // `conn` passed the checks with `credential`. False when that credential already holds
  // its cap of connections (or `conn` is unknown: it was evicted); the connection then
  // stays as it was. A kept-alive connection that authenticates with another credential
  // moves to it.
  bool Authenticate(const void* conn, const std::string& credential);
  // The connection closed. Unknown connections (evicted ones) are ignored.
  void Remove(const void* conn);

  size_t size() const { return conns_.size(); }
  size_t unauthenticated() const { return pre_auth_count_; }
  size_t held_by(const std::string& credential) const;

 private:
  struct Entry {
    uint64_t order;          // accept order, for evicting the oldest pre-auth connection
    std::string peer;        // "" until resolved
    PeerResolver resolve;    // set while `peer` is ""
    std::string credential;  // "" while pre-auth
  };

  Admission AddEntry(const void* conn, std::string peer, PeerResolver resolve,
                     const HasUnreadInput& has_unread_input);
  // Resolves the peer of every pre-auth connection still unresolved.
  void ResolvePreAuthPeers();
  void ForgetPreAuth(const Entry& entry);

  Caps caps_;
  uint64_t next_order_ = 0;
  std::map<const void*, Entry> conns_;
  // Pre-auth connections by peer, each by accept order (oldest first); those whose peer is
  // not resolved yet under "".
  std::map<std::string, std::map<uint64_t, const void*>> pre_auth_;
  size_t pre_auth_count_ = 0;
  std::map<std::string, size_t> per_credential_;
};

}  // namespace http
}  // namespace gateway
